"""cocotb testbench of :class:`scoville.rtl.rope.Rope` against
:func:`scoville.sim.golden.rope.rope` and the stalling pipeline's timed model.

Tests: directed vectors (position 0: cos the attention factor, sin 0; zeros of both signs,
Inf and NaN elements, products that overflow and underflow, a difference of equal products,
subnormal elements), back to back; a reset in the middle of them; and the workload: random
vectors at random positions of GPT-OSS's YaRN table and, for a quarter, random cosines and
sines over the FP32 range, under gaps and back-pressure.
"""

from __future__ import annotations

import cocotb
import numpy as np

from scoville.sim.golden.rope import rope, table

from .bench import check_stream
from .coverage import FP32_CLASSES, fp32_classes
from .kit import context

BINS = dict(FP32_CLASSES)

#: GPT-OSS-120B's rope_parameters: the table the workload draws rows from.
GPT_OSS_ROPE = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                "truncate": False, "original_max_position_embeddings": 4096,
                "rope_theta": 150000.0}


def _bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


async def _check(dut, ctx, test, x, cos, sin, *, gaps, interrupt=False):
    x, cos, sin = (np.asarray(a, np.float32) for a in (x, cos, sin))
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        y = rope(ctx.config, x, cos, sin)
    ctx.coverage.hits(fp32_classes(_bits(y)))
    want = [tuple(r) for r in _bits(y).tolist()]
    await check_stream(
        dut, ctx, test, {"x": _bits(x), "cos": _bits(cos), "sin": _bits(sin)}, want,
        decode=lambda out: [tuple(r) for r in out[""].tolist()],
        latency=ctx.component.latency, gaps=gaps, interrupt=interrupt,
        describe=lambda k: f"x={x[k].tolist()} cos={cos[k].tolist()} sin={sin[k].tolist()}")


def directed(dim: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    half = dim // 2
    cos, sin = table(GPT_OSS_ROPE, dim, np.arange(8) * 997)
    x = rng.standard_normal((8, dim)).astype(np.float32)
    x[1] = 0
    x[2] = -0.0
    x[3, 0], x[3, -1] = np.inf, np.nan
    x[4] = 3e38  # products past the range: Inf, and Inf - Inf
    x[5] = 1e-40  # subnormal elements: products underflow
    cos[6], sin[6] = 0.5, 0.5  # x1 c - x2 s of equal pairs: an exact zero
    x[6, half:] = x[6, :half]
    cos[7], sin[7] = -2.0, 1e-30
    return x, cos, sin


@cocotb.test()
async def test_edges(dut):
    """The directed vectors, back to back."""
    ctx = context()
    await _check(dut, ctx, "test_edges", *directed(ctx.config.dim, ctx.rng(2)), gaps=False)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of the directed vectors under gaps and back-pressure."""
    ctx = context()
    await _check(dut, ctx, "test_reset", *directed(ctx.config.dim, ctx.rng(2)), gaps=True,
                 interrupt=True)


@cocotb.test()
async def test_workload(dut):
    """``count`` random vectors at random positions up to 131,071 (GPT-OSS's table); a
    quarter with random cosines and sines over the FP32 range."""
    ctx = context()
    rng = ctx.rng(1)
    n, dim = ctx.workload.count, ctx.config.dim
    x = (rng.standard_normal((n, dim)) * np.float32(2.0) ** rng.integers(-30, 30, (n, 1)))
    cos, sin = table(GPT_OSS_ROPE, dim, rng.integers(0, 131072, n))
    wild = rng.random(n) < 0.25
    for arr in (cos, sin):
        arr[wild] = rng.standard_normal((wild.sum(), dim // 2)) * np.float32(2.0) ** \
            rng.integers(-120, 120, (wild.sum(), dim // 2))
    with np.errstate(over="ignore"):
        await _check(dut, ctx, "test_workload", x.astype(np.float32), cos, sin, gaps=True)
