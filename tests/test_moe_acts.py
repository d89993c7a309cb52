"""The MoE activation store (:class:`scoville.rtl.moe_acts.ActStore`) in Amaranth's
simulator: blocks written lane by lane come out as the array's os A beats for any list of
lanes, row tile by row tile, under back-pressure; rows past the list are not checked (the
array ignores them)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from scoville.rtl.gemm import GemmConfig
from scoville.rtl.moe_acts import ActStore

from .amsim import Edges, receive, send


@pytest.mark.parametrize(("lanes", "dim", "act_fmt", "rows", "seed"), [
    (5, 64, "mxfp8", 2, 1), (3, 32, "mxfp4", 4, 2), (8, 96, "mxfp8", 3, 3)])
def test_lists_of_lanes_come_out_as_os_a_beats(lanes, dim, act_fmt, rows, seed):
    fmt, b_fmt = ("mxfp8", "mxfp4") if act_fmt == "mxfp8" else ("mxfp4", "same")
    array = GemmConfig(rows=rows, cols=4, fmt=fmt, b_fmt=b_fmt)
    dut = ActStore(lanes, dim, act_fmt, array)
    rng = np.random.default_rng(seed)
    top = 256 if act_fmt == "mxfp8" else 16
    codes = rng.integers(0, top, (lanes, dim))
    scales = rng.integers(0, 256, (lanes, dim // 32))
    lists = [rng.permutation(lanes)[:int(rng.integers(1, lanes + 1))] for _ in range(3)]
    got = []

    async def bench(ctx):
        edges = Edges()
        order = [(lane, b) for lane in range(lanes) for b in range(dim // 32)]
        for i in rng.permutation(len(order)):
            lane, b = order[i]
            await send(ctx, dut.w, {"block": b, "lane": lane, "mx": {
                "codes": codes[lane, b * 32:(b + 1) * 32].tolist(),
                "scale": int(scales[lane, b])}}, edges, rng=rng, gap=0.2)
        ctx.set(dut.w.valid, 0)
        for lst in lists:
            ctx.set(dut.lane, [int(v) for v in lst] + [0] * (lanes - len(lst)))
            await send(ctx, dut.cmd, len(lst), edges)
            ctx.set(dut.cmd.valid, 0)
            beats = []
            for _ in range(-(-len(lst) // rows) * dim):
                p, _ = await receive(ctx, dut.a, edges, rng=rng, backpressure=0.3)
                beats.append(([int(v) for v in p.data], [int(v) for v in p.scale]))
            got.append(beats)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    for lst, beats in zip(lists, got, strict=True):
        i = 0
        for t0 in range(0, len(lst), rows):
            for k in range(dim):
                data, scale = beats[i]
                i += 1
                for r in range(min(rows, len(lst) - t0)):
                    lane = lst[t0 + r]
                    assert data[r] == codes[lane, k], (t0, k, r)
                    assert scale[r] == scales[lane, k // 32], (t0, k, r)
