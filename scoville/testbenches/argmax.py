"""cocotb testbench of :class:`scoville.rtl.argmax.Argmax` against
:func:`scoville.sim.golden.argmax.argmax` and the reducing pipeline's timed model
(:func:`~scoville.sim.cycles.stream.pipeline_timing`, a token's last beat emitting).

Tests: directed tokens (the largest first, last, in the middle of a beat; ties within a beat
and across beats; -0 beside +0; +Inf; a NaN beside the largest; NaN before -Inf; NaNs only;
subnormals only; all equal), back to back; a reset in the middle of them; and the workload
(random logits a token, some with planted ties) under gaps and back-pressure.
"""

from __future__ import annotations

import cocotb
import numpy as np

from scoville.sim.golden.argmax import argmax

from .bench import check_stream
from .kit import context

BINS = {
    "tie": "a token whose largest value appears twice or more (the lower index wins)",
    "nan": "a token holding a NaN (never chosen)",
    "all_nan": "a token of NaNs only (index 0)",
    "last_index": "a token whose answer is its last logit",
}


async def _check(dut, ctx, test, logits, *, gaps, interrupt=False):
    cfg = ctx.config
    x = np.asarray(logits, np.float32).reshape(-1, cfg.vocab)
    idx, vals = argmax(cfg, x)
    nan = np.isnan(x)
    best = np.where(nan, -np.inf, x).max(axis=1)
    ctx.coverage.hits({"tie": int(((x == best[:, None]).sum(axis=1) > 1).sum()),
                       "nan": int(nan.any(axis=1).sum()),
                       "all_nan": int(nan.all(axis=1).sum()),
                       "last_index": int((idx == cfg.vocab - 1).sum())})
    beats = x.view(np.uint32).reshape(-1, cfg.lanes)
    emits = [(k + 1) % cfg.beats == 0 for k in range(len(beats))]
    want = [(int(i), int(v)) for i, v in zip(idx, vals, strict=True)]
    await check_stream(
        dut, ctx, test, {"": beats}, want,
        decode=lambda out: list(zip(out["index"].tolist(), out["value"].tolist(),
                                    strict=True)),
        latency=ctx.component.latency, gaps=gaps, emits=emits, interrupt=interrupt,
        describe=lambda k: f"token {k}: logits={x[k].tolist()}", tokens=len(x))


def directed(cfg, rng) -> np.ndarray:
    v, lanes = cfg.vocab, cfg.lanes
    rows = []
    for where in (0, v - 1, lanes // 2, v // 2):
        r = rng.standard_normal(v)
        r[where] = 100.0
        rows.append(r)
    tie = rng.standard_normal(v)
    tie[[1 % v, v - 1]] = 50.0  # across beats (the first wins)
    rows.append(tie)
    tie_in_beat = rng.standard_normal(v)
    tie_in_beat[[lanes - 1, max(lanes - 2, 0)]] = 50.0
    rows.append(tie_in_beat)
    zeros = np.full(v, -1.0)
    zeros[v - 1], zeros[v // 2] = 0.0, -0.0  # -0 first equals +0: the lower index
    rows.append(zeros)
    inf = rng.standard_normal(v)
    inf[v // 3] = np.inf
    rows.append(inf)
    nan = rng.standard_normal(v)
    nan[0], nan[1 % v] = 10.0, np.nan
    rows.append(nan)
    nan_inf = np.full(v, -np.inf)
    nan_inf[0] = np.nan
    rows.append(nan_inf)
    rows.append(np.full(v, np.nan))
    rows.append(np.float32(1e-45) * rng.integers(-5, 5, v))
    rows.append(np.full(v, 3.0))
    return np.stack(rows).astype(np.float32)


@cocotb.test()
async def test_edges(dut):
    """The directed tokens, back to back."""
    ctx = context()
    await _check(dut, ctx, "test_edges", directed(ctx.config, ctx.rng(2)), gaps=False)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of the directed tokens under gaps and back-pressure."""
    ctx = context()
    await _check(dut, ctx, "test_reset", directed(ctx.config, ctx.rng(2)), gaps=True,
                 interrupt=True)


@cocotb.test()
async def test_workload(dut):
    """``count`` tokens of random logits; an eighth with the largest planted twice."""
    ctx = context()
    rng = ctx.rng(1)
    n, v = ctx.workload.count, ctx.config.vocab
    x = rng.standard_normal((n, v)).astype(np.float32)
    planted = np.nonzero(rng.random(n) < 0.125)[0]
    for t in planted:
        x[t, rng.choice(v, 2, replace=False)] = np.float32(9.0)
    await _check(dut, ctx, "test_workload", x, gaps=True)
