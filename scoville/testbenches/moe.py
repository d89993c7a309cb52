"""cocotb testbench of :class:`scoville.rtl.moe.Moe` against its golden model
(:func:`scoville.sim.golden.moe.moe`) and its timed model
(:func:`scoville.sim.cycles.moe.timing`), the experts' weights served by the harness's memory
agent from :func:`~scoville.sim.golden.moe.memory_image` on the block's own requests.

Every test draws a layer's weights, loads the router's (``wr``, a run of its own: they live in
the router's memory, which a reset keeps), then runs batches: ``cmd`` and ``x`` in, ``o`` out,
and checks every output value bit for bit, every read request against the golden dispatch's
tiles, and the cycle of every handshake on ``cmd``, ``x``, ``req``, ``rdata`` and ``o`` and
every counter (the array's and the block's own) against the timed model fed the same
schedules and memory.


Tests: directed edges (a batch of one token, a full batch, a refused batch between them) on a
memory that keeps up; router logits near -48 (``test_tiny_scores``: DeepSeek's 1e-20 in its
normalization matters); weight responses with a misplaced ``last`` (``test_bad_weights``); the
workload (``batches`` random batches under gaps and back-pressure on every stream, the
workload's memory).
"""

from __future__ import annotations

import dataclasses

import cocotb
import numpy as np

from scoville.rtl.moe import EXPERT_COUNTERS
from scoville.sim.cycles.memory import MemoryAgent
from scoville.sim.cycles.moe import COUNTERS, Batch, timing
from scoville.sim.cycles.stream import ALWAYS
from scoville.sim.golden.fetch import fetch
from scoville.sim.golden.moe import (
    block_input,
    dispatch,
    float64_reference,
    memory_image,
    moe,
    random_weights,
    routing,
    skewed,
    tile_commands,
)
from scoville.sim.harness import stream_names

from .bench import BlockBench
from .freerun import FreeRun, Memory
from .kit import context, join_words, reset

SOURCES = ("cmd", "x")
SINKS = ("req", "o")


def _bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32).astype(np.int64)


def _image_rows(cfg, words: list[int]) -> np.ndarray:
    """The memory image as rows of bytes, most significant first."""
    size = cfg.weight_port_bits // 8
    return np.array([list(int(w).to_bytes(size, "big")) for w in words], np.uint8)


#: Streams whose beats cannot wait (no stall bin): the weight port is the fetch engine's,
#: which reserves room before it asks; the router's weights are loaded (``load_router``)
#: while the block is idle, and the checked runs leave ``wr`` idle.
NEVER_WAITS = {"rdata": "the fetch engine reserves room for a burst before it asks",
               "wr": "loaded while the block is idle (always ready); the runs leave it idle"}

#: Coverage bins (:mod:`scoville.testbenches.coverage`), hit from each batch.
BINS = {
    "batch:one_token": "a batch of one token",
    "batch:full": "a batch of the most tokens the block takes",
    "batch:refused_empty": "a batch of 0 tokens (refused)",
    "batch:refused_too_many": "a batch of one token too many (refused)",
    "batch:bad_weights": "a batch whose weights end early or run long (status BAD_WEIGHTS)",
    "expert:idle": "an expert that no token of a batch chose",
    "expert:every_token": "an expert that every token of a batch of several chose",
    "expert:shared": "a batch through a shared expert",
}


def _cover(cov, cfg, x, groups, bad: bool) -> None:
    if isinstance(x, int):
        cov.hit("batch:refused_empty" if x == 0 else "batch:refused_too_many")
        return
    cov.hit_if("batch:one_token", len(x) == 1)
    cov.hit_if("batch:full", len(x) == cfg.tokens)
    cov.hit_if("batch:bad_weights", bad)
    chosen = dict(groups)
    cov.hit_if("expert:idle", len(chosen) < cfg.experts)
    cov.hit_if("expert:every_token", len(x) > 1 and len(x) in chosen.values())
    cov.hit_if("expert:shared", cfg.shared)


def router_rows(codec, cfg, weights):
    """The ``wr`` beats of the router's columns and bias (``cfg`` the MoE's config, ``codec``
    the ``wr`` stream's)."""
    cols = _bits(np.concatenate([weights.router_weight.T, weights.router_bias[None]]))
    L, beats = cfg.x_lanes, cfg.hidden // cfg.x_lanes
    if L == 1:
        return codec.pack(addr=np.arange(beats + 1), data=cols)
    zero = np.zeros_like(cols[-1])   # a word of L columns (the bias word's first the bias)
    return codec.pack(addr=np.arange(beats + 1), **{
        f"data[{q}]": [join_words(cols[b * L + q], 32) for b in range(beats)]
        + [join_words(cols[-1] if q == 0 else zero, 32)] for q in range(L)})


async def load_router(dut, ctx, weights) -> None:
    """The router's columns and bias on ``wr``, a beat each, streams keeping up."""
    cfg = ctx.config
    beats = cfg.hidden // cfg.x_lanes
    rows = router_rows(ctx.codecs["wr"], cfg, weights)
    await reset(dut, stream_names(ctx.component))
    # Every stream is named (an idle one with no items), so the harness drives them all.
    bench = FreeRun(dut, ctx.component,
                    sources={"wr": (rows, ALWAYS), "cmd": ([], ALWAYS), "x": ([], ALWAYS)},
                    sinks={"req": (0, ALWAYS), "o": (0, ALWAYS)},
                    memories={"rdata": Memory([0], 0, 1, 1)})
    await bench.run(timeout=10 * beats + 1000, expect=beats + 1)


def x_beats(cfg, x) -> list[int]:
    """A batch's ``x`` (T, H) as the block's beats: ``x_lanes`` elements each (BF16: the top
    halves), the first lowest."""
    bits = _bits(x).ravel()
    bits = (bits >> 16 if cfg.x_fmt == "bf16" else bits).tolist()
    if cfg.x_lanes == 1:
        return bits
    width = 16 if cfg.x_fmt == "bf16" else 32
    L = cfg.x_lanes
    return [join_words(bits[k:k + L], width) for k in range(0, len(bits), L)]


async def run_batches(dut, ctx, test: str, weights, xs, *, gaps: bool,
                      latency: int | None = None, bytes_per_cycle: int | None = None,
                      fault: tuple[int, int] | None = None) -> dict:
    """Run ``xs`` (a (T, H) array per batch, or an int: a refused ``cmd`` of that T) and
    check outputs, requests and every handshake's cycle. ``fault``: ``(batch, word)``, the
    memory flips ``last`` on that word of that batch's weights (the batch then emits
    nothing)."""
    cfg, w, codec = ctx.config, ctx.workload, ctx.codecs
    latency = w.mem_latency if latency is None else latency
    bpc = w.mem_bytes_per_cycle if bytes_per_cycle is None else bytes_per_cycle
    image = memory_image(cfg, weights)
    batches, want_o, beats, cmds, tiles = [], [], [], [], []
    per_expert = [0] * cfg.all_experts
    err = 0.0
    fault_at = None
    for b, x in enumerate(xs):
        if isinstance(x, int):
            _cover(ctx.coverage, cfg, x, (), False)
            cmds.append(x)
            batches.append(Batch(x, None))
            continue
        cmds.append(len(x))
        x = block_input(cfg, x)
        groups = tuple((e, len(rows)) for e, rows, _ in dispatch(*routing(cfg, weights, x)))
        bad = fault is not None and fault[0] == b
        _cover(ctx.coverage, cfg, x, groups, bad)
        batches.append(Batch(len(x), groups, bad))
        if bad:
            fault_at = sum(n for _, n in tiles) + fault[1]
        tiles += tile_commands(cfg, [e for e, _ in groups]
                               + ([cfg.experts] if cfg.shared else []))
        out = moe(cfg, weights, x)
        if not bad:
            want_o += _bits(out).reshape(-1, cfg.array.cols).tolist()
        ref = float64_reference(cfg, weights, x)
        err = max(err, float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30)))
        for e, n in groups + ((cfg.experts, len(x)),) * cfg.shared:
            per_expert[e] += n
        beats += x_beats(cfg, x)
    want_req = fetch(cfg.fetch, image, tiles)
    words = len(want_req.words)
    tb = BlockBench(dut, ctx, test, sources=SOURCES, memories=("rdata",), sinks=SINKS,
                    gaps=gaps, idle=("wr",),
                    detail=f" (mem_latency={latency}, mem_bytes_per_cycle={bpc})")
    tb.source["cmd"].send(codec["cmd"].pack(tokens=cmds))
    tb.source["x"].send(beats)
    tb.memory["rdata"] = Memory(_image_rows(cfg, image), words, latency, bpc,
                                tb.memory_valid["rdata"], fault_at)
    tb.sink["req"].expect(want_req.requests, label="read requests", decode=lambda req: list(
        zip(np.asarray(req["addr"]).tolist(), np.asarray(req["len"]).tolist(), strict=True)))
    tb.sink["o"].expect(want_o, label="outputs", decode=lambda f: f[""].tolist())
    model = tb.predict(timing, cfg, batches, tb.valid, tb.ready,
                   MemoryAgent(latency, bpc, cfg.weight_port_bits, tb.memory_valid["rdata"]))
    # Straight on from the router's load (load_router reset the block), as a chip would.
    seen = await tb.run(model, reset_first=False, slack=5000)
    counters = COUNTERS + (EXPERT_COUNTERS if cfg.expert_counters else ())
    # The weight port's share of what the memory could deliver; the array's useful MACs
    # (3 H I per token and expert) over what it could do while it ran experts.
    word_bytes = cfg.weight_port_bits // 8
    deliverable = seen.cycles * min(bpc, word_bytes)
    macs = 3 * cfg.hidden * cfg.intermediate * sum(per_expert)
    expert_cycles = seen.change["expert_cycles"]
    return tb.check(
        counters, batches=len(xs), requests=len(want_req.requests), weight_words=words,
        weight_bandwidth_utilization=words * word_bytes / max(1, deliverable),
        array_utilization=macs / max(1, cfg.array.rows * cfg.array.cols * expert_cycles),
        tokens_per_expert=per_expert, max_rel_err_vs_f64=err)


def _batch(cfg, rng, tokens: int) -> np.ndarray:
    return rng.standard_normal((tokens, cfg.hidden)).astype(np.float32)


@cocotb.test()
async def test_edges(dut):
    """A batch of one token, a refused batch (0 tokens, then one too many), a full batch, on a
    memory that keeps up and streams that keep up."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(1)
    weights = random_weights(cfg, ctx.rng(2))
    await load_router(dut, ctx, weights)
    await run_batches(dut, ctx, "test_edges", weights,
                      [_batch(cfg, rng, 1), 0, cfg.tokens + 1, _batch(cfg, rng, cfg.tokens)],
                      gaps=False, latency=1, bytes_per_cycle=cfg.weight_port_bits // 8)


@cocotb.test()
async def test_tiny_scores(dut):
    """A full batch whose router logits are all near -48 (positive activations, negative
    router weights): DeepSeek's sigmoid scores are near 1e-21, where ``norm_topk_prob``'s
    + 1e-20 outweighs their sum, and its biased scores are its correction biases, set so that
    a kept expert scores below the masked ones' 0.0 and they tie (the lower index wins);
    GPT-OSS's softmax of large negative logits."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(7)
    x = (np.abs(rng.standard_normal((cfg.tokens, cfg.hidden))) + 0.5).astype(np.float32)
    weights = random_weights(cfg, ctx.rng(8))
    spread = 1 + 0.05 * rng.standard_normal(weights.router_weight.shape)
    router = (-48.0 / (cfg.hidden * float(x.mean())) * spread).astype(np.float32)
    weights = dataclasses.replace(weights, router_weight=router)
    if cfg.router == "deepseek":
        # The scores are about the correction biases: expert 1's group kept (its bias the
        # only positive one), expert 0 below the masked experts' 0.0, which tie.
        bias = -0.01 * (1 + np.arange(cfg.experts, dtype=np.float32))
        bias[1] = 0.05
        weights = dataclasses.replace(weights, router_bias=bias)
    await load_router(dut, ctx, weights)
    await run_batches(dut, ctx, "test_tiny_scores", weights, [x], gaps=False, latency=1,
                      bytes_per_cycle=cfg.weight_port_bits // 8)


@cocotb.test()
async def test_bad_weights(dut):
    """A weight response that ends early (``last`` on a burst's first word) and one that runs
    long (no ``last`` on a tile's final word), each in the middle batch of three: that batch
    emits nothing and counts in ``bad_weights``; the batches around it are exact."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(5)
    weights = random_weights(cfg, ctx.rng(6))
    tile_end = cfg.tile_words(cfg.hidden) - 1
    for word in (0, tile_end):
        await load_router(dut, ctx, weights)
        await run_batches(dut, ctx, f"test_bad_weights[{word}]", weights,
                          [_batch(cfg, rng, 1), _batch(cfg, rng, cfg.tokens),
                           _batch(cfg, rng, 1)],
                          gaps=False, latency=3, bytes_per_cycle=cfg.weight_port_bits // 8,
                          fault=(1, word))


@cocotb.test()
async def test_workload(dut):
    """``batches`` random batches (the first full) under gaps and back-pressure on every
    stream, the workload's memory."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(3)
    weights = skewed(cfg, random_weights(cfg, ctx.rng(4)), ctx.workload.skew)
    sizes = [cfg.tokens] + [int(rng.integers(1, cfg.tokens + 1))
                            for _ in range(ctx.workload.batches - 1)]
    await load_router(dut, ctx, weights)
    await run_batches(dut, ctx, "test_workload", weights, [_batch(cfg, rng, n) for n in sizes],
                      gaps=True)
