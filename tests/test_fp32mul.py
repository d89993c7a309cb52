"""Binary32 multiplication: the RTL expression against NumPy float32, in Amaranth's simulator."""

import numpy as np

from scoville.rtl.lib.formats import FP32_QNAN
from scoville.rtl.lib.fp32 import fp32_mul

from .combsim import evaluate

#: Directed operand pairs (binary32 encodings) and why each is here; NumPy gives the answer.
EDGES = [
    # a           b
    (0x0000_0000, 0x3F80_0000),  # +0 * 1 = +0
    (0x8000_0000, 0x40A0_0000),  # -0 * 5 = -0
    (0x8000_0000, 0x8000_0000),  # -0 * -0 = +0
    (0x0000_0000, 0x7F7F_FFFF),  # +0 * max finite
    (0x8000_0000, 0x0000_0001),  # -0 * smallest subnormal
    (0x0000_0001, 0x3F80_0000),  # smallest subnormal * 1
    (0x0000_0001, 0xBF80_0000),  # smallest subnormal * -1
    (0x007F_FFFF, 0x3F80_0000),  # largest subnormal * 1
    (0x0080_0000, 0x3F80_0000),  # smallest normal * 1
    (0x7F7F_FFFF, 0x3F80_0000),  # max finite * 1
    (0x0000_0001, 0x3F00_0000),  # 2^-150: tie between 0 and 2^-149, to even: +0
    (0x8000_0001, 0x3F00_0000),  # the same, negative: -0
    (0x0000_0001, 0x3F00_0001),  # just above the tie: smallest subnormal
    (0x0000_0001, 0x3EFF_FFFF),  # just below the tie: +0
    (0x0000_0001, 0x3FC0_0000),  # 1.5 units: tie, to even: 2 units
    (0x0000_0003, 0x3F00_0000),  # 1.5 units: tie, to even: 2 units
    (0x0000_0005, 0x3F00_0000),  # 2.5 units: tie, to even: 2 units
    (0x0000_0001, 0x0000_0001),  # subnormal * subnormal: +0
    (0x8000_0001, 0x0000_0001),  # the same, negative: -0
    (0x0080_0000, 0x0080_0000),  # normal * normal far below the subnormals: +0
    (0x0080_0000, 0x3F00_0000),  # smallest normal / 2: subnormal, exact
    (0x0080_0001, 0x3F00_0000),  # odd fraction / 2: tie, rounds down to even
    (0x0080_0003, 0x3F00_0000),  # odd fraction / 2: tie, rounds up
    (0x0080_0000, 0x3F7F_FFFF),  # 2^-126 (1 - 2^-24): tie, to even: smallest normal
    (0x0080_0000, 0x3F7F_FFFE),  # 2^-126 (1 - 2^-23): largest subnormal, exact
    (0x007F_FFFF, 0x3F80_0001),  # largest subnormal rounds up into the smallest normal
    (0x007F_FFFF, 0x3F80_0000 + 0x0100),  # largest subnormal * (1 + 2^-15): normal
    (0x0080_0001, 0x3F7F_FFFF),  # just above the smallest normal: rounds down to it
    (0x0000_0001, 0x7F00_0000),  # subnormal * large normal = 2^-22, normal
    (0x0040_0000, 0x7F7F_FFFF),  # 2^-127 * max finite: normal
    (0x0000_0003, 0x4B00_0000),  # 3 units * 2^23: normal
    (0x0000_0007, 0x5F80_0000),  # deep subnormal * 2^64
    (0x807F_FFFF, 0x7F7F_FFFF),  # largest subnormal * max finite, negative
    (0x0012_3456, 0x4C80_0000),  # subnormal with leading zeros * 2^26
    (0x3F80_0001, 0x3FC0_0000),  # (1 + 2^-23) * 1.5: tie, odd LSB rounds up
    (0x3F80_1000, 0x3F80_1000),  # (1 + 2^-11)^2 = 1 + 2^-10 + 2^-22, exact
    (0x3F80_0800, 0x3F80_0800),  # (1 + 2^-12)^2: tie at 2^-24, even LSB rounds down
    (0x3F80_0800, 0x3F80_0801),  # just above that tie
    (0x3FFF_FFFF, 0x3FFF_FFFF),  # (2 - 2^-23)^2: carry to the next binade
    (0x7F00_0000, 0x4000_0000),  # 2^127 * 2: overflow to +Inf
    (0x7F00_0000, 0x3FFF_FFFF),  # 2^127 (2 - 2^-23) = max finite, exact
    (0x7F7F_FFFF, 0x3F80_0001),  # max finite * (1 + 2^-23): rounds to +Inf
    (0xFF7F_FFFF, 0x3F80_0001),  # the same, negative: -Inf
    (0x7F7F_FFFF, 0x7F7F_FFFF),  # far beyond the range: +Inf
    (0x7F40_0000, 0x3FAA_AAAB),  # 1.5 * 2^127 * 4/3 (rounded up): just over, +Inf
    (0x7F40_0000, 0x3FAA_AAAA),  # 1.5 * 2^127 * 4/3 (rounded down): just under
    (0x4B11_8E00, 0x73E1_2000),  # (2^24 - 1/2) 2^104 exactly: tie, to even: +Inf
    (0x4B11_8E00, 0x73E1_1FFF),  # just below that tie: finite
    (0x7F7F_FFFF, 0x3F00_0000),  # max finite / 2
    (0x7F80_0000, 0x3F80_0000),  # +Inf * 1
    (0x7F80_0000, 0x8000_0001),  # +Inf * -smallest subnormal = -Inf
    (0xFF80_0000, 0xFF80_0000),  # -Inf * -Inf = +Inf
    (0x7F80_0000, 0x0000_0000),  # Inf * 0 = NaN
    (0x8000_0000, 0xFF80_0000),  # -0 * -Inf = NaN
    (0x7FC0_0000, 0x3F80_0000),  # quiet NaN * 1
    (0x7F80_0001, 0x3F80_0000),  # signalling NaN * 1
    (0xFFC1_2345, 0x0000_0000),  # negative NaN with payload * 0
    (0x3F80_0000, 0xFFFF_FFFF),  # 1 * negative NaN
    (0x7FFF_FFFF, 0x7F80_0000),  # NaN * Inf
]


def _numpy_reference(a, b):
    """NumPy's float32 product; every NaN is compared as 'both NaN' by the caller."""
    with np.errstate(all="ignore"):
        return (a.view(np.float32) * b.view(np.float32)).view(np.uint32)


def _simulate(a, b):
    return evaluate(fp32_mul, [32, 32], a, b)


def _random_pairs(rng, n, exp_sum_lo, exp_sum_hi, frac_bits=23):
    """``n`` pairs of random signs and fractions whose biased exponent fields sum into
    ``[exp_sum_lo, exp_sum_hi]`` (each field 0..254, so subnormals are among them).

    Only the top ``frac_bits`` fraction bits are random: with few of them, the product has few
    bits below the rounding point and exact ties are common.
    """
    total = rng.integers(exp_sum_lo, exp_sum_hi + 1, n)
    exp_a = rng.integers(np.maximum(total - 254, 0), np.minimum(total, 254) + 1)
    exp_b = total - exp_a

    def encode(exp):
        frac = rng.integers(0, 1 << frac_bits, n) << (23 - frac_bits)
        return ((rng.integers(0, 2, n) << 31) | (exp << 23) | frac).astype(np.uint32)

    return encode(exp_a), encode(exp_b)


def _subnormal_pairs(rng, n):
    """``n`` pairs of a random subnormal (or zero) and a random binary32 of any exponent."""
    a = (rng.integers(0, 2, n) << 31) | rng.integers(0, 1 << 23, n)
    b = rng.integers(0, 1 << 32, n)
    return a.astype(np.uint32), b.astype(np.uint32)


def _check(a, b, stimulus):
    got = _simulate(a, b)
    want = _numpy_reference(a, b)
    want_nan = np.isnan(want.view(np.float32))
    bad = np.nonzero(np.where(want_nan, got != FP32_QNAN, got != want))[0]
    assert bad.size == 0, (
        f"fp32_mul, {stimulus}: {bad.size} mismatches of {a.size}; first at index {bad[0]}: "
        f"{a[bad[0]]:#010x} * {b[bad[0]]:#010x}: expected "
        f"{FP32_QNAN if want_nan[bad[0]] else want[bad[0]]:#010x}, got {got[bad[0]]:#010x}"
    )


def test_fp32_mul_edge_cases():
    a = np.array([x for x, _ in EDGES], dtype=np.uint32)
    b = np.array([y for _, y in EDGES], dtype=np.uint32)
    _check(np.concatenate([a, b]), np.concatenate([b, a]), "directed table")


def test_fp32_mul_random(seed):
    print(f"fp32_mul random stimulus seed: {seed}")
    rng = np.random.default_rng(seed)
    parts = [
        # Any 32-bit patterns: all classes, mostly far from the range limits.
        tuple(rng.integers(0, 1 << 32, (2, 1500), dtype=np.uint64).astype(np.uint32)),
        # Exponent fields summing to 98..134: subnormal and zero results, the normal edge.
        _random_pairs(rng, 1000, 98, 134),
        # A subnormal (or zero) operand times an operand of any exponent.
        _subnormal_pairs(rng, 400),
        # Exponent fields summing to 380 +- 6: the overflow threshold.
        _random_pairs(rng, 700, 374, 386),
        # Short significands: rounding ties, in the normal and the subnormal range.
        _random_pairs(rng, 400, 100, 380, frac_bits=12),
        _random_pairs(rng, 400, 98, 130, frac_bits=12),
    ]
    a = np.concatenate([p[0] for p in parts])
    b = np.concatenate([p[1] for p in parts])
    _check(a, b, f"random stimulus, seed {seed}")


def test_bf16_mul_is_the_float32_product_of_the_widened_operands(seed):
    """``man_bits=7``: bfloat16 operands (an 8 x 8-bit significand multiplier) give NumPy's
    float32 product of the operands widened exactly to float32, on every class of operand:
    random patterns, exponent sums at the subnormal and overflow edges, subnormals, and the
    directed table's operands cut to bfloat16."""
    rng = np.random.default_rng(seed)
    edge_a, edge_b = (np.array([e[i] for e in EDGES], np.uint32) >> 16 for i in (0, 1))
    low_a, low_b = _random_pairs(rng, 1000, 98, 134, frac_bits=7)
    high_a, high_b = _random_pairs(rng, 500, 370, 400, frac_bits=7)
    a = np.concatenate([rng.integers(0, 1 << 16, 2000), edge_a, low_a >> 16, high_a >> 16,
                        rng.integers(0, 1 << 7, 300)]).astype(np.uint32)
    b = np.concatenate([rng.integers(0, 1 << 16, 2000), edge_b, low_b >> 16, high_b >> 16,
                        rng.integers(0, 1 << 16, 300)]).astype(np.uint32)
    got = evaluate(lambda m, x, y: fp32_mul(m, x, y, man_bits=7), [16, 16], a, b)
    want = _numpy_reference(a << 16, b << 16)
    want_nan = np.isnan(want.view(np.float32))
    bad = np.nonzero(np.where(want_nan, got != FP32_QNAN, got != want))[0]
    assert bad.size == 0, (f"bf16 product {a[bad[0]]:#06x} * {b[bad[0]]:#06x}: expected "
                           f"{want[bad[0]]:#010x}, got {got[bad[0]]:#010x}")
