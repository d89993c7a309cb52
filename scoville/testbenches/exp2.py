"""cocotb testbench of :class:`scoville.rtl.exp2.Exp2` against
:func:`scoville.sim.golden.exp2.exp2`.

Tests: a table of edge cases (no gaps, cycles against the closed form), a reset in the middle
of them, and random operands over every region of the function under random valid gaps and
ready back-pressure (cycles against the loop model).
"""

import cocotb
import numpy as np

from scoville.sim.golden.exp2 import exp2

from .bench import check_lanes
from .coverage import FP32_CLASSES, fp32_classes
from .kit import context

__all__ = ["DIRECTED", "random_operands", "workload_operands"]

#: Edge cases: (x, exp2(x) as the unit gives it, what it exercises).
DIRECTED = [
    (0x0000_0000, 0x3F80_0000, "+0 is 1"),
    (0x8000_0000, 0x3F80_0000, "-0 is 1"),
    (0x3F80_0000, 0x4000_0000, "1 is 2"),
    (0xBF80_0000, 0x3F00_0000, "-1 is 1/2"),
    (0x3F00_0000, 0x3FB5_04F3, "1/2 is sqrt 2 (table entry 32)"),
    (0x0000_0001, 0x3F80_0000, "smallest subnormal: floor gives 0"),
    (0x8000_0001, 0x3F7F_FF4F, "minus smallest subnormal: floor gives -2^-16"),
    (0xB780_0000, 0x3F7F_FF4F, "-2^-16"),
    (0xB700_0000, 0x3F7F_FF4F, "-2^-17 floors to -2^-16"),
    (0x3780_0000, 0x3F80_0059, "2^-16: the chord's first step, 2^23 + floor(91346 / 1024)"),
    (0x42FE_0000, 0x7F00_0000, "127 is 2^127"),
    (0x42FF_FFFF, 0x7F7F_FF4F, "largest below 128"),
    (0x4300_0000, 0x7F80_0000, "128 overflows to +Inf"),
    (0x4380_0000, 0x7F80_0000, "256 overflows"),
    (0x7F7F_FFFF, 0x7F80_0000, "largest finite overflows"),
    (0x7F80_0000, 0x7F80_0000, "+Inf is +Inf"),
    (0xC2FC_0000, 0x0080_0000, "-126 is the smallest normal"),
    (0xC2FC_0001, 0x0000_0000, "just below -126 flushes to +0"),
    (0xC2FD_0000, 0x0000_0000, "-126.5 flushes"),
    (0xC380_0000, 0x0000_0000, "-256 flushes"),
    (0xFF7F_FFFF, 0x0000_0000, "most negative finite flushes"),
    (0xFF80_0000, 0x0000_0000, "-Inf is +0"),
    (0x7FC0_0000, 0x7FC0_0000, "qNaN"),
    (0x7F80_0001, 0x7FC0_0000, "sNaN is the canonical qNaN"),
    (0xFFC1_2345, 0x7FC0_0000, "negative NaN with payload"),
    (0x3F7F_FFFF, 0x3FFF_FF4F, "just below 1: the top of the table"),
    (0xC2FB_FFFF, 0x0080_0000, "-126 + 2^-17 floors to -126"),
]


#: Coverage bins (:mod:`scoville.testbenches.coverage`): the classes of the results (no
#: subnormal: the unit flushes results below 2^-126 to +0, its contract).
BINS = {name: text for name, text in FP32_CLASSES.items() if name != "result:subnormal"}

def directed_operands() -> np.ndarray:
    """The :data:`DIRECTED` operands as uint32."""
    return np.array([row[0] for row in DIRECTED], dtype=np.uint32)


def random_operands(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` random binary32 operands (uint32), in five equal mixes: uniform over the
    function's normal range [-126, 128); softmax's region, ``-x`` exponential with mean 4;
    small magnitudes (2**-30 .. 1) of either sign, where the floor of ``x * 2**16`` matters;
    the boundaries (within 2 ulps of -126, 128, -127, 0, and each integer in between); and
    uniform 32-bit patterns (NaN, Inf, huge and subnormal values)."""
    kind = rng.integers(0, 5, n)
    uniform = rng.uniform(-126, 128, n).astype(np.float32).view(np.uint32)
    softmax = (-rng.exponential(4, n)).astype(np.float32).view(np.uint32)
    small = (np.where(rng.random(n) < 0.5, -1, 1) * 2.0 ** rng.uniform(-30, 0, n))
    small = small.astype(np.float32).view(np.uint32)
    edges = np.array([-126, 128, -127, 0], dtype=np.float32)
    point = np.where(rng.random(n) < 0.5, edges[rng.integers(0, 4, n)],
                     rng.integers(-127, 129, n).astype(np.float32))
    near = (point.view(np.uint32).astype(np.int64) + rng.integers(-2, 3, n)).clip(0, 0xFFFF_FFFF)
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    choices = [uniform, softmax, small, near.astype(np.uint32), bits.astype(np.uint32)]
    return np.choose(kind, choices).astype(np.uint32)


def workload_operands(ctx) -> np.ndarray:
    """The operands :func:`test_workload` drives: ``ctx.workload.count`` of
    :func:`random_operands` from the run's generator 1."""
    return random_operands(ctx.rng(1), ctx.workload.count)


def _hex(values):
    return [f"{int(v):#010x}" for v in values]


async def _check(dut, test, x, *, gaps, interrupt=False):
    ctx = context()
    ctx.coverage.hits(fp32_classes(exp2(x)))
    await check_lanes(dut, ctx, test, {"x": x}, exp2, show=_hex, gaps=gaps,
                      count_as="operands", interrupt=interrupt)


@cocotb.test()
async def test_directed(dut):
    """The edge cases of :data:`DIRECTED`, back to back (cycles against the closed form)."""
    await _check(dut, "test_directed", directed_operands(), gaps=False)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of the directed operands under gaps and back-pressure: the unit
    must come back empty, then run the same stimulus from the start correctly."""
    await _check(dut, "test_reset", directed_operands(), gaps=True, interrupt=True)


@cocotb.test()
async def test_workload(dut):
    """``count`` random operands (:func:`random_operands`) under random valid gaps and
    back-pressure."""
    await _check(dut, "test_workload", workload_operands(context()), gaps=True)
