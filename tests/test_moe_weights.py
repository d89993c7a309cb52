"""The MoE weight tiles (:class:`scoville.rtl.moe_weights.WeightTiles`) in Amaranth's
simulator: column tiles laid out as :func:`scoville.sim.golden.moe.tile_words` lays them out
come out as the array's B beats, replayed per row tile, with their biases, under gaps on the
words and back-pressure on the beats, for word widths narrower and wider than a field."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from scoville.rtl.lib.params import build_config
from scoville.rtl.moe import MoeConfig
from scoville.rtl.moe_weights import WeightTiles
from scoville.sim.golden.moe import tile_words

from .amsim import Edges, receive, send


def _matrix(rng, k, n):
    codes = rng.integers(0, 16, (k, n))
    scales = rng.integers(100, 150, (k // 32, n))
    bias = rng.standard_normal(n).astype(np.float32)
    return codes, scales, bias


def run_tiles(cfg, tiles, m_tiles, *, seed, gap=0.3, backpressure=0.3):
    """``tiles``: per tile ``(k, bias or None, words)``; ``m_tiles``: the feeder's command
    per tile. Returns per tile the B beats ``(data lanes, scale lanes)`` and the bias bits."""
    dut = WeightTiles(cfg.tile_format)
    rng = np.random.default_rng(seed)
    got = []

    async def words(ctx):
        edges = Edges()
        for k, bias, ws in tiles:
            await send(ctx, dut.tile, {"k": k, "bias": int(bias is not None)}, edges)
            ctx.set(dut.tile.valid, 0)
            for w in ws:
                await send(ctx, dut.words, w, edges, rng=rng, gap=gap)
            ctx.set(dut.words.valid, 0)

    async def beats(ctx):
        edges = Edges()
        for (k, _, _), mt in zip(tiles, m_tiles, strict=True):
            await send(ctx, dut.cmd, {"m_tiles": mt}, edges)
            ctx.set(dut.cmd.valid, 0)
            out = []
            for _ in range(k * mt):
                p, _ = await receive(ctx, dut.b, edges, rng=rng, backpressure=backpressure)
                out.append(([int(v) for v in p.data], [int(v) for v in p.scale]))
            got.append((out, [int(v) for v in ctx.get(dut.bias)]))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(words)
    sim.add_testbench(beats)
    sim.run()
    return got


@pytest.mark.parametrize(("params", "seed"), [
    ({"router": "gpt_oss", "hidden": 64, "intermediate": 32, "array.cols": 8,
      "weight_port_bits": 64}, 1),
    ({"router": "deepseek", "hidden": 96, "intermediate": 64, "array.cols": 4,
      "weight_port_bits": 256}, 2),
    ({"router": "gpt_oss", "hidden": 32, "intermediate": 32, "array.cols": 16,
      "weight_port_bits": 128}, 3),
])
def test_tiles_come_out_as_b_beats_replayed_per_row_tile(params, seed):
    cfg = build_config(MoeConfig, params)
    rng = np.random.default_rng(seed)
    c = cfg.array.cols
    # Two matrices as the block runs them: K = hidden then K = intermediate, column tile by
    # column tile; a row-tile count per tile (0: a tile no token needs is skipped).
    mats = [(cfg.hidden, 2 * c), (cfg.intermediate, c)]
    tiles, want, m_tiles = [], [], []
    for k, n in mats:
        codes, scales, bias = _matrix(rng, k, n)
        bias = bias if cfg.biases else None
        ws = tile_words(cfg, codes, scales, bias)
        per = len(ws) // (n // c)
        assert per == cfg.tile_words(k)
        for j in range(n // c):
            mt = int(rng.integers(0, 3))
            cols = slice(j * c, (j + 1) * c)
            beats = [(codes[r, cols].tolist(), scales[r // 32, cols].tolist())
                     for r in range(k)] * mt
            b = [0] * c if bias is None else bias[cols].view(np.uint32).tolist()
            tiles.append((k, bias, ws[j * per:(j + 1) * per]))
            want.append((beats, b))
            m_tiles.append(mt)
    got = run_tiles(cfg, tiles, m_tiles, seed=seed)
    for i, ((beats, b), (gb, gbias)) in enumerate(zip(want, got, strict=True)):
        assert gb == beats, i
        if m_tiles[i]:
            assert gbias == b, i
