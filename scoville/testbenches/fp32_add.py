"""cocotb testbench of :class:`scoville.rtl.fp32_add.Fp32Add` against
:func:`scoville.sim.golden.fp32_add.fp32_add`.

Tests: a table of IEEE-754 edge cases, each pair in both orders (no gaps, cycles against the
closed form), and random pairs over the whole exponent range under random valid gaps and ready
back-pressure (cycles against the loop model).
"""

import cocotb
import numpy as np

from scoville.sim.golden.fp32_add import fp32_add

from .bench import check_lanes
from .coverage import FP32_CLASSES, fp32_classes
from .kit import context

__all__ = ["DIRECTED", "directed_pairs", "random_pairs", "workload_pairs"]

#: IEEE-754 edge cases: (a, b, a + b as NumPy float32 gives it, what the pair exercises).
#: NaN sums are written as the canonical 0x7FC00000 the RTL produces.
DIRECTED = [
    # a           b           a + b
    (0x0000_0000, 0x0000_0000, 0x0000_0000, "+0 + +0"),
    (0x0000_0000, 0x8000_0000, 0x0000_0000, "+0 + -0 is +0"),
    (0x8000_0000, 0x8000_0000, 0x8000_0000, "-0 + -0 is -0"),
    (0x0000_0000, 0x3F80_0000, 0x3F80_0000, "+0 + 1"),
    (0x8000_0000, 0xBF80_0000, 0xBF80_0000, "-0 + -1"),
    (0x8000_0000, 0x0000_0001, 0x0000_0001, "-0 + smallest subnormal"),
    (0x0000_0000, 0x8000_0001, 0x8000_0001, "+0 + -smallest subnormal"),
    (0x0000_0001, 0x0000_0001, 0x0000_0002, "smallest subnormal doubled"),
    (0x0000_0001, 0x8000_0001, 0x0000_0000, "subnormal cancels to +0"),
    (0x8000_0001, 0x8000_0001, 0x8000_0002, "negative subnormals"),
    (0x0000_0003, 0x0000_0005, 0x0000_0008, "subnormal + subnormal"),
    (0x8000_0003, 0x0000_0005, 0x0000_0002, "subnormal - subnormal"),
    (0x007F_FFFF, 0x0000_0001, 0x0080_0000, "largest subnormal + tiny is min normal"),
    (0x007F_FFFF, 0x007F_FFFF, 0x00FF_FFFE, "largest subnormal doubled is normal"),
    (0x007F_FFFF, 0x807F_FFFF, 0x0000_0000, "largest subnormal cancels"),
    (0x0040_0000, 0x0040_0000, 0x0080_0000, "subnormals carry into min normal"),
    (0x0060_0000, 0x0030_0000, 0x0090_0000, "subnormals carry into normal"),
    (0x0080_0000, 0x8000_0001, 0x007F_FFFF, "min normal - tiny is largest subnormal"),
    (0x0080_0000, 0x807F_FFFF, 0x0000_0001, "min normal - largest subnormal"),
    (0x0080_0000, 0x8080_0000, 0x0000_0000, "min normal cancels"),
    (0x0080_0001, 0x8080_0000, 0x0000_0001, "normals cancel to a subnormal"),
    (0x00FF_FFFF, 0x8080_0000, 0x007F_FFFF, "normal - normal is subnormal"),
    (0x0100_0000, 0x80FF_FFFF, 0x0000_0001, "exponent difference 1 cancels to subnormal"),
    (0x0180_0000, 0x817F_FFFF, 0x0000_0002, "exponent difference 1 cancels, 2^-148"),
    (0x0080_0000, 0x0080_0000, 0x0100_0000, "min normal doubled"),
    (0x7F7F_FFFF, 0x7F7F_FFFF, 0x7F80_0000, "max finite + max finite is +Inf"),
    (0xFF7F_FFFF, 0xFF7F_FFFF, 0xFF80_0000, "-max finite doubled is -Inf"),
    (0x7F7F_FFFF, 0xFF7F_FFFF, 0x0000_0000, "max finite cancels"),
    (0x7F00_0000, 0x7F00_0000, 0x7F80_0000, "2^127 doubled overflows exactly"),
    (0x7F7F_FFFF, 0x7380_0000, 0x7F80_0000, "max finite + 1 ulp overflows"),
    (0x7F7F_FFFF, 0x7300_0000, 0x7F80_0000, "max finite + half ulp: tie rounds up to Inf"),
    (0x7F7F_FFFF, 0x72FF_FFFF, 0x7F7F_FFFF, "max finite + under half ulp stays"),
    (0x7F7F_FFFF, 0xF380_0000, 0x7F7F_FFFE, "max finite - 1 ulp"),
    (0x7EFF_FFFF, 0x7EFF_FFFF, 0x7F7F_FFFF, "doubling to max finite"),
    (0x7F7F_FFFF, 0x8000_0001, 0x7F7F_FFFF, "max finite - tiny"),
    (0x3F80_0000, 0x3F80_0000, 0x4000_0000, "1 + 1"),
    (0x3DCC_CCCD, 0x3E4C_CCCD, 0x3E99_999A, "0.1 + 0.2"),
    (0x3F80_0000, 0x3380_0000, 0x3F80_0000, "1 + half ulp: tie to even, down"),
    (0x3F80_0001, 0x3380_0000, 0x3F80_0002, "odd + half ulp: tie to even, up"),
    (0x3F80_0000, 0x3380_0001, 0x3F80_0001, "1 + just over half ulp rounds up"),
    (0x3F80_0000, 0x3300_0000, 0x3F80_0000, "1 + quarter ulp rounds down"),
    (0x3F80_0000, 0xB300_0000, 0x3F80_0000, "1 - 2^-25: tie below 1, to even"),
    (0x3F80_0000, 0xB380_0000, 0x3F7F_FFFF, "1 - 2^-24 is exact"),
    (0x3F80_0000, 0xB380_0001, 0x3F7F_FFFF, "1 - just over 2^-24"),
    (0x3F80_0001, 0xB380_0000, 0x3F80_0000, "subtraction tie to even, down"),
    (0x3F80_0003, 0xB380_0000, 0x3F80_0002, "subtraction tie to even, down to even"),
    (0x3F80_0000, 0xBF80_0000, 0x0000_0000, "1 - 1 is +0"),
    (0xBF80_0000, 0x3F80_0000, 0x0000_0000, "-1 + 1 is +0"),
    (0x3F80_0001, 0xBF80_0000, 0x3400_0000, "exponent difference 0, near-total cancellation"),
    (0x4000_0001, 0xC000_0000, 0x3480_0000, "exponent difference 0, cancellation above 2"),
    (0x4000_0000, 0xBFFF_FFFF, 0x3400_0000, "exponent difference 1, cancellation below 2"),
    (0x3F80_0000, 0xBF7F_FFFF, 0x3380_0000, "exponent difference 1, near-total cancellation"),
    (0x4000_0000, 0xBF7F_FFFF, 0x3F80_0000, "exponent difference 1, tie after cancellation"),
    (0x4B80_0000, 0x3F80_0000, 0x4B80_0000, "2^24 + 1: tie to even, down"),
    (0x4B80_0001, 0x3F80_0000, 0x4B80_0002, "2^24 + 2 + 1: tie to even, up"),
    (0x4B80_0000, 0x3F80_0001, 0x4B80_0001, "2^24 + just over 1: sticky breaks the tie"),
    (0x4B7F_FFFF, 0x3F80_0000, 0x4B80_0000, "2^24 - 1 + 1 carries"),
    (0x4B7F_FFFF, 0x3F00_0000, 0x4B80_0000, "rounding carries into the exponent"),
    (0x4B80_0000, 0xBF80_0001, 0x4B7F_FFFF, "2^24 - just over 1"),
    (0x4C00_0000, 0xBF80_0001, 0x4BFF_FFFF, "2^25 - just over 1: sticky below the tie"),
    (0x4C00_0000, 0xBF80_0000, 0x4C00_0000, "2^25 - 1: tie to even"),
    (0x4C00_0000, 0x3F80_0000, 0x4C00_0000, "2^25 + 1 rounds down"),
    (0x4C80_0000, 0xBF80_0000, 0x4C80_0000, "2^26 - 1: exponent difference 26"),
    (0x3F80_0000, 0x3280_0000, 0x3F80_0000, "1 + 2^-26: exponent difference 26"),
    (0x3F80_0000, 0xB280_0000, 0x3F80_0000, "1 - 2^-26 rounds back to 1"),
    (0x3F80_0001, 0xB080_0000, 0x3F80_0001, "1 + ulp - 2^-30"),
    (0x3F80_0000, 0x0000_0001, 0x3F80_0000, "1 + smallest subnormal"),
    (0x3F80_0000, 0x8000_0001, 0x3F80_0000, "1 - smallest subnormal"),
    (0xBF80_0000, 0x0000_0001, 0xBF80_0000, "-1 + smallest subnormal"),
    (0x7F80_0000, 0x7F80_0000, 0x7F80_0000, "+Inf + +Inf"),
    (0xFF80_0000, 0xFF80_0000, 0xFF80_0000, "-Inf + -Inf"),
    (0x7F80_0000, 0xFF80_0000, 0x7FC0_0000, "+Inf - Inf is NaN"),
    (0x7F80_0000, 0x3F80_0000, 0x7F80_0000, "+Inf + 1"),
    (0xFF80_0000, 0x7F7F_FFFF, 0xFF80_0000, "-Inf + max finite"),
    (0x7F80_0000, 0x8000_0000, 0x7F80_0000, "+Inf + -0"),
    (0xFF80_0000, 0x0000_0001, 0xFF80_0000, "-Inf + subnormal"),
    (0x7FC0_0000, 0x3F80_0000, 0x7FC0_0000, "qNaN + 1"),
    (0x7F80_0001, 0x0000_0000, 0x7FC0_0000, "sNaN + 0 is the canonical qNaN"),
    (0xFFC1_2345, 0x7F80_0000, 0x7FC0_0000, "negative NaN with payload + Inf"),
    (0x7FFF_FFFF, 0xFF80_0000, 0x7FC0_0000, "NaN + -Inf"),
    (0x7FA0_0000, 0xFFC0_0001, 0x7FC0_0000, "NaN + NaN"),
    (0xFFFF_FFFF, 0x0000_0001, 0x7FC0_0000, "NaN + subnormal"),
    (0x7FC0_0000, 0x8000_0000, 0x7FC0_0000, "qNaN + -0"),
]


#: Coverage bins (:mod:`scoville.testbenches.coverage`): the classes of the results.
BINS = dict(FP32_CLASSES)

def directed_pairs():
    """The :data:`DIRECTED` operands, each pair in both orders, as two uint32 arrays."""
    a = np.array([row[0] for row in DIRECTED], dtype=np.uint32)
    b = np.array([row[1] for row in DIRECTED], dtype=np.uint32)
    return np.concatenate([a, b]), np.concatenate([b, a])


def _hex(values):
    return [f"{int(v):#010x}" for v in values]


def _encode(sign, exp, man):
    return (sign.astype(np.uint32) << 31) | (exp.astype(np.uint32) << 23) | man.astype(np.uint32)


def random_pairs(rng: np.random.Generator, n: int):
    """``n`` random operand pairs (uint32 encodings) drawn over the whole exponent range.

    Six equal mixes: uniform 32-bit patterns; exponents within 2 of each other (alignment by
    0..2 places); exponent differences of 0..30 (guard, round and sticky bits); near-total
    cancellation (opposite signs; equal exponents with fractions differing in a few low bits,
    or adjacent exponents with the larger operand's fraction near 0 and the smaller's near all
    ones); subnormals and the smallest normals; and specials (zeros, Inf, NaNs with random
    payloads, the extreme finite values) against anything, a quarter of them against another
    special. Each pair is swapped at random.
    """
    kind = rng.integers(0, 6, n)
    bits = rng.integers(0, 1 << 32, (2, n), dtype=np.uint64).astype(np.uint32)
    sign = rng.integers(0, 2, (2, n))
    man = rng.integers(0, 1 << 23, (2, n))
    exp_a = rng.integers(0, 255, n)
    near = np.clip(exp_a + rng.integers(-2, 3, n), 0, 254)
    apart = np.clip(exp_a - rng.integers(0, 31, n), 0, 254)
    low = (1 << rng.integers(0, 24, n)) - 1
    noise = rng.integers(0, 1 << 23, n) & low
    cancel = np.clip(exp_a - rng.integers(0, 2, n), 0, 254)
    # Across an exponent boundary only a value just above the power of two and one just
    # below it nearly cancel.
    across = cancel < exp_a
    man_a = np.where((kind == 3) & across, man[0] & low, man[0])
    flip = np.where(across, 0x7F_FFFF ^ noise, man[0] ^ noise)
    tiny = rng.integers(0, 3, (2, n))
    specials = np.array(
        [0x0000_0000, 0x8000_0000, 0x7F80_0000, 0xFF80_0000, 0x7FC0_0000, 0x7F7F_FFFF,
         0xFF7F_FFFF, 0x0080_0000, 0x0000_0001, 0x807F_FFFF], dtype=np.uint32)
    special = specials[rng.integers(0, len(specials), (2, n))]
    nan = _encode(sign, np.full((2, n), 255), np.maximum(man, 1))
    special = np.where(rng.random((2, n)) < 0.2, nan, special)
    partner = np.where(rng.random(n) < 0.25, special[1], bits[1])

    a = np.select(
        [kind == 0, kind <= 3, kind == 4, kind == 5],
        [bits[0], _encode(sign[0], exp_a, man_a), _encode(sign[0], tiny[0], man[0]),
         special[0]],
    )
    b = np.select(
        [kind == 0, kind == 1, kind == 2, kind == 3, kind == 4, kind == 5],
        [bits[1], _encode(sign[1], near, man[1]), _encode(sign[1], apart, man[1]),
         _encode(1 - sign[0], cancel, flip), _encode(sign[1], tiny[1], man[1]), partner],
    )
    swap = rng.random(n) < 0.5
    return (np.where(swap, b, a).astype(np.uint32), np.where(swap, a, b).astype(np.uint32))


def workload_pairs(ctx):
    """The pairs :func:`test_workload` drives in the run ``ctx``: ``ctx.workload.count`` of
    :func:`random_pairs` from the run's generator 1 (``scripts/fp32_add_bench.py`` counts its
    coverage on the same pairs)."""
    return random_pairs(ctx.rng(1), ctx.workload.count)


async def _check(dut, test, a, b, *, gaps, interrupt=False):
    ctx = context()
    ctx.coverage.hits(fp32_classes(fp32_add(a, b)))
    await check_lanes(dut, ctx, test, {"a": a, "b": b}, fp32_add, show=_hex, gaps=gaps,
                      interrupt=interrupt)


@cocotb.test()
async def test_directed(dut):
    """The IEEE-754 edge cases of :data:`DIRECTED`, both orders, back to back (cycles against
    the closed form)."""
    await _check(dut, "test_directed", *directed_pairs(), gaps=False)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of the directed pairs under gaps and back-pressure (beats in
    the pipeline, an output waiting): the unit must come back empty, then run the same
    stimulus from the start correctly."""
    await _check(dut, "test_reset", *directed_pairs(), gaps=True, interrupt=True)


@cocotb.test()
async def test_workload(dut):
    """``count`` random pairs (:func:`random_pairs`) under random valid gaps and back-pressure."""
    await _check(dut, "test_workload", *workload_pairs(context()), gaps=True)
