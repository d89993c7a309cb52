"""cocotb testbench of :class:`scoville.rtl.fp4_mul.Fp4Mul` against
:func:`scoville.sim.golden.fp4_mul.fp4_mul`.

Tests: every one of the 256 FP4 x FP4 pairs (no gaps, cycles against the closed form), and a
random workload under random valid gaps and ready back-pressure (cycles against the loop model).
"""

import cocotb
import numpy as np

from scoville.sim.golden import fp4_mul

from .bench import check_lanes
from .kit import context


async def _check(dut, test, a, b, *, gaps, interrupt=False):
    await check_lanes(dut, context(), test, {"a": a, "b": b}, fp4_mul, gaps=gaps,
                      count_as="products", interrupt=interrupt)


@cocotb.test()
async def test_exhaustive(dut):
    """All 256 pairs of E2M1 codes, back to back (cycles against the closed form)."""
    await _check(dut, "test_exhaustive", *_all_pairs(), gaps=False)


def _all_pairs():
    a, b = np.meshgrid(np.arange(16, dtype=np.uint8), np.arange(16, dtype=np.uint8))
    return a.ravel(), b.ravel()


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of all 256 pairs under gaps and back-pressure (beats in the
    pipeline, an output waiting): the unit must come back empty, then run the same stimulus
    from the start correctly."""
    await _check(dut, "test_reset", *_all_pairs(), gaps=True, interrupt=True)


@cocotb.test()
async def test_workload(dut):
    """Random codes under random valid gaps and ready back-pressure."""
    ctx = context()
    rng = ctx.rng(1)
    a = rng.integers(0, 16, ctx.workload.count, dtype=np.uint8)
    b = rng.integers(0, 16, ctx.workload.count, dtype=np.uint8)
    await _check(dut, "test_workload", a, b, gaps=True)
