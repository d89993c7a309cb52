"""cocotb testbench of :class:`scoville.rtl.rmsnorm.RmsNorm` against
:func:`scoville.sim.golden.rmsnorm.rmsnorm` and the timed model
:func:`scoville.sim.cycles.rmsnorm.timing`.

Every test checks each output value bit for bit and the cycle of every handshake on ``i`` and
``o``. Tests: directed tokens (all zeros: ``v = eps``; one nonzero value; values whose squares
overflow to Inf, so ``r = 0``; an Inf, a NaN; subnormals, whose squares underflow; -0; values
spanning the FP32 range; weights of both signs, zero and Inf), back to back; a reset in the
middle of a run; the workload (random tokens and weights, a new weight row a token, under
gaps and back-pressure); and, for a ``runtime`` block, batches of tokens of other widths
(``test_widths``; the other tests give it full-width tokens).
"""

from __future__ import annotations

import cocotb
import numpy as np

from scoville.sim.cycles.rmsnorm import timing
from scoville.sim.cycles.stream import Schedule
from scoville.sim.golden.rmsnorm import pairwise_sum, rmsnorm

from .bench import BlockBench
from .coverage import FP32_CLASSES, fp32_classes
from .kit import context

BINS = {
    **FP32_CLASSES,
    "token:zero": "a token of zeros (its mean square 0: r = rsqrt(eps))",
    "token:subnormal": "a token of subnormals (their squares 0)",
    "token:overflow": "a finite token whose sum of squares overflows (r = 0)",
    "token:nonfinite": "a token holding an Inf or a NaN",
    "width:one": "a token of one beat at a runtime width (H = lanes)",
    "width:between": "a token of a runtime width between one beat and hidden / lanes",
    "width:full": "a token of hidden / lanes beats at a runtime width",
}


def _bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


async def run_tokens(dut, ctx, test: str, x, w, *, gaps: bool, interrupt: bool = False,
                     batch: int = 0):
    """``x`` and ``w`` (T, H) float32 through the block (``H`` is ``hidden``, or a multiple of
    ``lanes`` for a ``runtime`` block, its ``width`` set to ``H / lanes``); check outputs and
    handshakes. ``batch`` > 0: a later batch of the test, straight on from the one before
    (no reset: the block is empty), under gaps and back-pressure of its own."""
    cfg = ctx.config
    lanes = cfg.lanes
    x, w = np.asarray(x, np.float32), np.asarray(w, np.float32)
    n = x.shape[1] // lanes
    if cfg.runtime:
        dut.width.value = n
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        y = rmsnorm(cfg, x, w)
    want = [tuple(b) for b in _bits(y).reshape(-1, lanes).tolist()]
    items = ctx.codecs["i"].pack_bytes(x=_bits(x).reshape(-1, lanes),
                                       w=_bits(w).reshape(-1, lanes))
    ctx.coverage.hits({**fp32_classes(_bits(y)), **_token_classes(cfg, x)})
    tb = BlockBench(dut, ctx, test, sources=("i",), sinks=("o",), gaps=gaps, watch=(),
                    detail=f" (batch {batch}, width {n})" if cfg.runtime else "")
    if batch and gaps:
        tb.source["i"].valid = Schedule([ctx.seed, 2, 0, batch], ctx.workload.gap)
        tb.sink["o"].ready = Schedule([ctx.seed, 3, 0, batch], ctx.workload.backpressure)
    tb.source["i"].send(items)

    def where(k):
        t, b = divmod(k, n)
        return f"token {t} beat {b}: x={x[t, b * lanes:(b + 1) * lanes].tolist()}"

    tb.sink["o"].expect(want, decode=lambda out: [tuple(r) for r in out[""].tolist()],
                        where=where, label="outputs")
    tb.predict(timing, cfg, len(x), tb.valid["i"], tb.ready["o"],
               width=n if cfg.runtime else None)
    await tb.run(reset_first=not batch, interrupt=interrupt, zero=(), slack=500)
    tb.check(tokens=len(x), items=len(items))


def _token_classes(cfg, x) -> dict[str, int]:
    finite = np.isfinite(x).all(axis=1)
    tiny = np.finfo(np.float32).tiny
    with np.errstate(over="ignore", invalid="ignore"):
        ss = pairwise_sum((x * x).astype(np.float32), cfg.lanes)
    counts = {"token:zero": int((x == 0).all(axis=1).sum()),
              "token:subnormal": int(((np.abs(x) < tiny).all(axis=1)
                                      & (x != 0).any(axis=1)).sum()),
              "token:overflow": int((finite & np.isinf(ss)).sum()),
              "token:nonfinite": int((~finite).sum())}
    if cfg.runtime:
        n = x.shape[1] // cfg.lanes
        kind = "one" if n == 1 else "full" if n == cfg.beats else "between"
        counts[f"width:{kind}"] = len(x)
    return counts


def directed(cfg, rng) -> tuple[np.ndarray, np.ndarray]:
    """The edge tokens of the module's docstring, and their weights."""
    h = cfg.hidden
    big = np.float32(3e38)
    rows = [np.zeros(h), np.eye(h)[h // 3] * 2.5, np.full(h, big),
            np.where(np.arange(h) % 2, -big, 1.0), np.full(h, np.float32(1e-45)),
            np.float32(1e-40) * np.where(np.arange(h) % 3, 1, -1),
            -np.zeros(h), rng.standard_normal(h) * np.float32(2.0) ** rng.integers(-100, 60, h),
            np.full(h, 2.0)]
    inf_row = rng.standard_normal(h)
    inf_row[h // 2] = np.inf
    nan_row = rng.standard_normal(h)
    nan_row[0] = np.nan
    rows += [inf_row, nan_row]
    x = np.stack(rows).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(x.shape)).astype(np.float32)
    w[1] = -w[1]
    w[7, : h // 4] = 0
    w[8, -1] = np.inf
    return x, w


@cocotb.test()
async def test_edges(dut):
    """The directed tokens, back to back."""
    ctx = context()
    x, w = directed(ctx.config, ctx.rng(3))
    await run_tokens(dut, ctx, "test_edges", x, w, gaps=False)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of the directed tokens under gaps and back-pressure (tokens in
    several slots full, an rsqrt running): the block must come back empty, then run them again."""
    ctx = context()
    x, w = directed(ctx.config, ctx.rng(3))
    await run_tokens(dut, ctx, "test_reset", x, w, gaps=True, interrupt=True)


@cocotb.test()
async def test_workload(dut):
    """``count`` random tokens (a scale a token from 2**-40 to 2**40) and weights, under gaps
    and back-pressure."""
    ctx = context()
    rng = ctx.rng(1)
    t, h = ctx.workload.count, ctx.config.hidden
    scale = np.float32(2.0) ** rng.integers(-40, 40, (t, 1))
    x = (rng.standard_normal((t, h)) * scale).astype(np.float32)
    w = (rng.standard_normal((t, h))).astype(np.float32)
    await run_tokens(dut, ctx, "test_workload", x, w, gaps=True)


@cocotb.test()
async def test_widths(dut):
    """A ``runtime`` block's widths (a block without one skips it): batches of random tokens
    and weights, a width a batch (one beat, ``hidden / lanes`` beats, four random widths of 1
    to ``hidden / lanes``, then back), each batch of 1 to ``3 slots`` tokens under gaps and
    back-pressure of its own; ``width`` changes only between batches, when the block is
    empty, with no reset."""
    ctx = context()
    cfg = ctx.config
    if not cfg.runtime:
        return
    rng = ctx.rng(4)
    n, lanes = cfg.beats, cfg.lanes
    widths = [1, n, *rng.integers(1, n + 1, 4).tolist(), n, 1]
    for batch, width in enumerate(widths):
        t, h = int(rng.integers(1, 3 * cfg.slots + 1)), width * lanes
        scale = np.float32(2.0) ** rng.integers(-40, 40, (t, 1))
        x = (rng.standard_normal((t, h)) * scale).astype(np.float32)
        w = rng.standard_normal((t, h)).astype(np.float32)
        await run_tokens(dut, ctx, "test_widths", x, w, gaps=True, batch=batch)
