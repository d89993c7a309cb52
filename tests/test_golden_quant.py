"""Golden-model quantizers (MXFP4, NVFP4, INT4/INT8) against plain float64 and exact references.

Every choice checked here is stated in docs/numerics.md, section "Quantizers (golden model)".
Random tests use fixed seeds (printed in their failure messages) or hypothesis.
"""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from scoville.sim.golden import (
    dequantize_int,
    dequantize_mxfp4,
    dequantize_mxfp8,
    dequantize_nvfp4,
    encode_e2m1,
    encode_e4m3,
    pack_fp4,
    quantize_bf16,
    quantize_int,
    quantize_mxfp4,
    quantize_mxfp8,
    quantize_nvfp4,
    unpack_fp4,
)

SEED = 20261130
E2M1_MAGNITUDES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
E2M1 = np.array(E2M1_MAGNITUDES + [-m for m in E2M1_MAGNITUDES])
E4M3 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
F32_TINY = 2.0**-149


def wide_range(rng, shape, lo=-30, hi=30):
    """Random signed values whose magnitudes spread evenly over 10^lo..10^hi, with some zeros."""
    x = rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(lo, hi, shape)
    x[rng.random(shape) < 0.05] = 0.0
    return x


def first_mismatch(what, expected, got, **params):
    bad = np.flatnonzero(np.asarray(expected).ravel() != np.asarray(got).ravel())
    i = int(bad[0]) if bad.size else None
    return (f"{what} {params}: first mismatch at flat index {i}: expected "
            f"{np.asarray(expected).ravel()[i]!r}, got {np.asarray(got).ravel()[i]!r}")


def half_step(y):
    """Half the E2M1 spacing at magnitude |y| <= 6: 0.25 below 2, 0.5 below 4, 1 up to 6."""
    return np.where(np.abs(y) < 2, 0.25, np.where(np.abs(y) < 4, 0.5, 1.0))


# ---------------------------------------------------------------------------------------------
# MXFP4: an independent reference, one element at a time, in exact rational arithmetic.


def reference_mxfp4_block(block):
    """(codes, scale) of one 32-element block, following docs/numerics.md literally."""
    if any(math.isnan(v) or math.isinf(v) for v in block):
        return [0] * 32, 0xFF
    amax = max(abs(v) for v in block)
    if amax == 0:
        e = -127
    else:
        k = 0
        while Fraction(2) ** k > Fraction(amax):
            k -= 1
        while Fraction(2) ** (k + 1) <= Fraction(amax):
            k += 1
        e = min(max(k - 2, -127), 127)
    codes = []
    for v in block:
        a = abs(Fraction(v)) / Fraction(2) ** e
        best = None
        for code, m in enumerate(E2M1_MAGNITUDES):
            d = abs(a - Fraction(m))
            if best is None or d < best[0] or (d == best[0] and code % 2 == 0):
                best = (d, code)
        code = 7 if a > 6 else best[1]
        codes.append(code | (8 if math.copysign(1.0, v) < 0 else 0))
    return codes, e + 127


def reference_mxfp4(x):
    blocks = np.asarray(x, dtype=np.float64).reshape(-1, 32)
    out = [reference_mxfp4_block(b.tolist()) for b in blocks]
    codes = np.array([c for c, _ in out], dtype=np.uint8).reshape(np.shape(x))
    scales = np.array([s for _, s in out], dtype=np.uint8).reshape(np.shape(x)[:-1] + (-1,))
    return codes, scales


def mxfp4_data(rng, blocks):
    """Blocks spread over the whole float32 range, with ties, zeros, specials and -0."""
    x = wide_range(rng, (blocks, 32), -45, 38)
    rows = len(x[::5])
    x[::5] = rng.integers(-16, 17, (rows, 32)) / 4.0 * 2.0 ** rng.integers(-130, 120, (rows, 1))
    x[1, 3], x[2, :], x[3, 7], x[4, 9], x[6, 4] = np.nan, 0.0, np.inf, -np.inf, -0.0
    return x.astype(np.float32)


def test_mxfp4_matches_the_reference_loop_bit_for_bit():
    rng = np.random.default_rng(SEED)
    x = mxfp4_data(rng, 64)
    codes, scales = quantize_mxfp4(x)
    ref_codes, ref_scales = reference_mxfp4(x)
    assert np.array_equal(scales, ref_scales), first_mismatch("scales", ref_scales, scales,
                                                              seed=SEED)
    assert np.array_equal(codes, ref_codes), first_mismatch("codes", ref_codes, codes, seed=SEED)


@settings(max_examples=30, deadline=None)
@given(x=hnp.arrays(np.float64, (2, 32), elements=st.floats(allow_subnormal=True)))
def test_mxfp4_matches_the_reference_loop_on_any_float64(x):
    codes, scales = quantize_mxfp4(x)
    ref_codes, ref_scales = reference_mxfp4(x)
    assert np.array_equal(scales, ref_scales) and np.array_equal(codes, ref_codes)


def check_mxfp4_bound(x, codes, scales):
    """Per element: |x - deq| <= half an E2M1 step of x / 2^e, times 2^e; above 6 * 2^e the
    element is +-6 * 2^e (saturation, error < 2 * 2^e unless the exponent was clamped)."""
    e = np.repeat(scales.astype(np.int32) - 127, 32, axis=-1)
    deq = np.ldexp(E2M1[codes], e)
    y = np.ldexp(x, -e)
    inside = np.abs(y) <= 6
    err = np.abs(deq - x)
    assert np.all(err[inside] <= np.ldexp(half_step(y), e)[inside])
    assert np.all(np.abs(deq[~inside]) == np.ldexp(6.0, e)[~inside])
    assert np.all(np.sign(deq[~inside]) == np.sign(x[~inside]))
    assert np.all(np.signbit(deq) == np.signbit(x))


def test_mxfp4_error_is_within_half_a_step():
    rng = np.random.default_rng(SEED + 1)
    x = wide_range(rng, (256, 32))
    codes, scales = quantize_mxfp4(x)
    check_mxfp4_bound(x, codes, scales)
    e = np.repeat(scales.astype(np.int32) - 127, 32, axis=-1)
    assert np.all(np.abs(np.ldexp(E2M1[codes], e) - x) < np.ldexp(2.0, e)), f"seed {SEED + 1}"
    deq = dequantize_mxfp4(codes, scales)
    assert deq.dtype == np.float32
    assert np.array_equal(deq, np.ldexp(E2M1[codes], e).astype(np.float32))


@settings(max_examples=50, deadline=None)
@given(x=hnp.arrays(np.float32, 32, elements=st.floats(width=32, allow_nan=False,
                                                       allow_infinity=False)))
def test_mxfp4_error_is_within_half_a_step_on_any_float32(x):
    codes, scales = quantize_mxfp4(x)
    check_mxfp4_bound(x.astype(np.float64), codes, scales)


def test_mxfp4_representable_values_round_trip_exactly():
    rng = np.random.default_rng(SEED + 2)
    codes = rng.integers(0, 16, (200, 32)).astype(np.uint8)
    codes[:, 5] = rng.choice([6, 7, 14, 15], 200)
    scales = rng.integers(0, 253, (200, 1)).astype(np.uint8)
    again_codes, again_scales = quantize_mxfp4(dequantize_mxfp4(codes, scales))
    assert np.array_equal(again_scales, scales), first_mismatch("scales", scales, again_scales)
    assert np.array_equal(again_codes, codes), first_mismatch("codes", codes, again_codes)


# x / 2^e for a block whose amax 4 makes e = 0; expected E2M1 code after rounding.
TIES = [
    # y       code   value  (tie between)
    (0.25,    0),  # 0     (0, 0.5)
    (0.75,    2),  # 1     (0.5, 1)
    (1.25,    2),  # 1     (1, 1.5)
    (1.75,    4),  # 2     (1.5, 2)
    (2.5,     4),  # 2     (2, 3)
    (3.5,     6),  # 4     (3, 4)
    (5.0,     6),  # 4     (4, 6)
    (-2.5,   12),  # -2
    (-0.25,   8),  # -0
    (2.5 + 2**-40, 5),  # 3: just above a tie (ml_dtypes' float64 cast gives 2 here)
]


@pytest.mark.parametrize("y, code", TIES)
def test_mxfp4_ties_go_to_even(y, code):
    x = np.zeros(32)
    x[0], x[1] = 4.0, y
    codes, scales = quantize_mxfp4(x)
    assert scales.tolist() == [127] and codes[1] == code


def test_e2m1_encoder_agrees_with_ml_dtypes_float32_cast():
    y = np.concatenate([np.arange(-8, 8, 1 / 64), [7.0, 100.0, -1e30, 3.4e38]]).astype(np.float32)
    ours = encode_e2m1(y.astype(np.float64))
    theirs = y.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    assert np.array_equal(ours, theirs), first_mismatch("E2M1 codes", theirs, ours)
    with pytest.raises(ValueError, match="no NaN"):
        encode_e2m1([1.0, np.nan])


# Block amax 7.9 gives e = 0, so the block holds values above 6 that saturate.
SATURATION = [
    # x      code
    (7.9,    7),
    (6.5,    7),
    (-7.0,  15),
    (6.0,    7),
]


@pytest.mark.parametrize("x, code", SATURATION)
def test_mxfp4_saturates_above_six_times_the_scale(x, code):
    block = np.zeros(32)
    block[0], block[1] = 7.9, x
    codes, scales = quantize_mxfp4(block)
    assert scales.tolist() == [127] and codes[1] == code


def test_mxfp4_all_zero_block_has_scale_code_zero():
    x = np.zeros((2, 32))
    x[1, ::2] = -0.0
    codes, scales = quantize_mxfp4(x)
    assert scales.tolist() == [[0], [0]]
    assert codes[0].tolist() == [0] * 32 and codes[1].tolist() == [8, 0] * 16
    assert np.all(dequantize_mxfp4(codes, scales) == 0)


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_mxfp4_nan_or_inf_makes_the_block_nan(special):
    x = np.ones((3, 32))
    x[1, 17] = special
    codes, scales = quantize_mxfp4(x)
    assert scales.ravel().tolist() == [125, 0xFF, 125]
    assert codes[1].tolist() == [0] * 32 and codes[0].tolist() == [6] * 32  # 1 = 4 * 2^-2
    deq = dequantize_mxfp4(codes, scales)
    assert np.all(np.isnan(deq[1])) and np.all(deq[[0, 2]] == 1.0)


# Blocks whose exponent leaves the E8M0 range: (amax, scale code, code of the amax element,
# its float32 dequantized value).
EXTREMES = [
    (1e-40,          0,   0, 0.0),  # float32 subnormal: e = -135 clamps to -127; 0.02 rounds to 0
    (3 * 2.0**-128,  0,   3, 3 * 2.0**-128),  # floor(log2) = -127, e = -129 clamps: 1.5 exact
    (2.0**-125,      0,   6, 2.0**-125),  # the smallest amax whose e = -127 is not clamped
    (1e38,         251,   6, 4 * 2.0**124),  # 1e38 / 2^124 = 4.7 rounds to 4
    (3.4028235e38, 252,   7, 6 * 2.0**125),  # float32 max / 2^125 = 7.99 saturates to 6
    (1e300,        254,   7, np.inf),  # float64 only: e clamps to 127; 6 * 2^127 > float32 max
]


@pytest.mark.parametrize("amax, scale, code, value", EXTREMES)
def test_mxfp4_exponent_clamps_to_the_e8m0_range(amax, scale, code, value):
    x = np.zeros(32)
    x[0] = amax
    codes, scales = quantize_mxfp4(x)
    assert scales.tolist() == [scale] and codes[0] == code
    assert dequantize_mxfp4(codes, scales)[0] == np.float32(value)


def test_mxfp4_accepts_float32_float64_and_bfloat16_alike():
    rng = np.random.default_rng(SEED + 3)
    x = wide_range(rng, (4, 64)).astype(ml_dtypes.bfloat16)
    want = quantize_mxfp4(x.astype(np.float64))
    for dtype in (ml_dtypes.bfloat16, np.float32):
        got = quantize_mxfp4(x.astype(dtype))
        assert all(np.array_equal(w, g) for w, g in zip(want, got, strict=True)), dtype


def test_mxfp4_blocks_along_any_axis():
    x = wide_range(np.random.default_rng(SEED + 4), (64, 3, 5))
    codes, scales = quantize_mxfp4(x, axis=0)
    assert codes.shape == (64, 3, 5) and scales.shape == (2, 3, 5)
    codes_t, scales_t = quantize_mxfp4(np.moveaxis(x, 0, -1))
    assert np.array_equal(np.moveaxis(codes_t, -1, 0), codes)
    assert np.array_equal(np.moveaxis(scales_t, -1, 0), scales)
    assert np.array_equal(dequantize_mxfp4(codes, scales, axis=0),
                          np.moveaxis(dequantize_mxfp4(codes_t, scales_t), -1, 0))


@pytest.mark.parametrize("shape, axis", [((40,), -1), ((3, 31), 1), ((33, 32), 0)])
def test_mxfp4_rejects_lengths_not_multiple_of_32(shape, axis):
    with pytest.raises(ValueError, match=f"length {shape[axis]} along axis {axis}.*multiples"):
        quantize_mxfp4(np.ones(shape), axis=axis)


def test_mxfp4_rejects_bad_axis_and_bad_codes():
    with pytest.raises(ValueError, match="axis 2"):
        quantize_mxfp4(np.ones((2, 32)), axis=2)
    with pytest.raises(ValueError, match="0..15"):
        dequantize_mxfp4(np.full(32, 16), [127])
    with pytest.raises(ValueError, match="expected"):
        dequantize_mxfp4(np.zeros(64, np.uint8), [127])


# ---------------------------------------------------------------------------------------------
# FP4 packing (gpt-oss layout).


def test_pack_puts_the_even_element_in_the_low_nibble():
    assert pack_fp4([0x1, 0x2, 0xF, 0x0]).tolist() == [0x21, 0x0F]
    assert unpack_fp4([0x21, 0x0F]).tolist() == [0x1, 0x2, 0xF, 0x0]


@given(codes=hnp.arrays(np.uint8, st.tuples(st.integers(0, 3), st.integers(0, 8).map(lambda n:
                                                                                     2 * n)),
                        elements=st.integers(0, 15)))
def test_pack_unpack_round_trip(codes):
    packed = pack_fp4(codes)
    assert packed.dtype == np.uint8 and packed.shape == codes.shape[:-1] + (codes.shape[-1] // 2,)
    assert np.array_equal(unpack_fp4(packed), codes)


def test_pack_rejects_odd_lengths_and_bad_codes():
    with pytest.raises(ValueError, match="even length"):
        pack_fp4([1, 2, 3])
    with pytest.raises(ValueError, match="0..15"):
        pack_fp4([1, 16])


def test_packed_mxfp4_dequantizes_like_gpt_oss():
    """gpt-oss: blocks [..., G, 16] bytes, scales [..., G]; value = ldexp(lut[nibble], s - 127)."""
    x = wide_range(np.random.default_rng(SEED + 5), (3, 128), -3, 3)
    codes, scales = quantize_mxfp4(x)
    blocks = pack_fp4(codes).reshape(3, 4, 16)
    nibbles = np.stack([blocks & 0xF, blocks >> 4], axis=-1).reshape(3, 4, 32)
    theirs = np.ldexp(E2M1[nibbles], scales[..., None].astype(np.int32) - 127).reshape(3, 128)
    assert np.array_equal(dequantize_mxfp4(codes, scales), theirs.astype(np.float32))


# ---------------------------------------------------------------------------------------------
# NVFP4.


def reference_e4m3(v):
    """Nearest finite E4M3 value to v in [2^-6, 448], ties to the even bit pattern."""
    finite = [(abs(E4M3[c] - v), c % 2, c) for c in range(127)]
    return E4M3[min(finite)[2]]


def nvfp4_total(block_scales, tensor_scale):
    return E4M3[block_scales].astype(np.float64) * np.float64(tensor_scale)


def check_nvfp4(x, codes, block_scales, tensor_scale):
    """Tensor scale, block scales and every element against their definitions."""
    blocks = x.reshape(-1, 16)
    amax = np.abs(blocks).max()
    assert tensor_scale == np.float32(amax / 2688) or amax == 0
    wanted = np.abs(blocks).max(axis=1) / (6 * np.float64(tensor_scale))
    want = [reference_e4m3(min(max(w, 2.0**-6), 448.0)) for w in wanted]
    assert np.array_equal(E4M3[block_scales.ravel()], want)
    total = np.repeat(nvfp4_total(block_scales.ravel(), tensor_scale), 16)
    y, deq = x.ravel() / total, E2M1[codes.ravel()] * total
    inside = np.abs(y) <= 6
    assert np.all(np.abs(deq - x.ravel())[inside] <= (half_step(y) * total)[inside])
    assert np.all(np.abs(deq[~inside]) == 6 * total[~inside])
    assert np.all(np.abs(y) <= 6 / (1 - 2.0**-4))  # E4M3 rounds a scale by at most 2^-4


def test_nvfp4_follows_the_recipe_and_error_bound():
    rng = np.random.default_rng(SEED + 6)
    x = wide_range(rng, (32, 64), -4, 4).astype(np.float32).astype(np.float64)
    codes, block_scales, tensor_scale = quantize_nvfp4(x)
    assert codes.shape == x.shape and block_scales.shape == (32, 4)
    assert isinstance(tensor_scale, np.float32)
    check_nvfp4(x, codes, block_scales, tensor_scale)
    deq = dequantize_nvfp4(codes, block_scales, tensor_scale)
    total = np.repeat(nvfp4_total(block_scales, tensor_scale), 16, axis=-1)
    assert np.array_equal(deq, (E2M1[codes] * total).astype(np.float32)), f"seed {SEED + 6}"


@settings(max_examples=50, deadline=None)
@given(x=hnp.arrays(np.float32, 48, elements=st.floats(width=32, allow_nan=False,
                                                       allow_infinity=False)))
def test_nvfp4_follows_the_recipe_on_any_float32(x):
    x = x.astype(np.float64)
    if np.abs(x).max() / 2688 < 2.0**-126:
        x = x * 2.0**140  # keep the tensor scale a normal float32 (subnormals: own test)
    check_nvfp4(x, *quantize_nvfp4(x))


def test_nvfp4_block_scale_clamps_to_448_instead_of_nan():
    x = np.zeros(32)
    x[0], x[16] = 6 * 500.0, 6 * 1.0
    codes, block_scales, tensor_scale = quantize_nvfp4(x, tensor_scale=1.0)
    assert np.float32(6 * 500.0).astype(ml_dtypes.float8_e4m3fn).view(np.uint8) == 0x7F
    assert block_scales.tolist() == [0x7E, 0x38] and tensor_scale == 1.0  # 448 and 1
    assert codes[0] == 7 and codes[16] == 7  # 3000 / 448 = 6.7 saturates to 6


def test_nvfp4_block_scale_clamps_up_to_the_smallest_normal():
    x = np.zeros(32)
    x[0], x[16] = 2688.0, 1e-3
    codes, block_scales, tensor_scale = quantize_nvfp4(x)
    assert tensor_scale == 1.0 and block_scales.tolist() == [0x7E, 0x08]  # 448 and 2^-6
    assert codes[16] == 0  # 1e-3 / 2^-6 = 0.064 rounds to 0


def test_nvfp4_all_zero_tensor_and_blocks_never_divide_by_zero():
    with np.errstate(all="raise"):
        codes, block_scales, tensor_scale = quantize_nvfp4(np.zeros((2, 32)))
    assert tensor_scale == 1.0 and np.all(block_scales == 0x08) and np.all(codes == 0)
    assert np.all(dequantize_nvfp4(codes, block_scales, tensor_scale) == 0)


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_nvfp4_nan_or_inf_makes_the_block_nan(special):
    x = np.ones(48)
    x[20] = special
    codes, block_scales, tensor_scale = quantize_nvfp4(x)
    assert tensor_scale == np.float32(1 / 2688)
    assert block_scales.tolist() == [0x7E, 0x7F, 0x7E] and np.all(codes[16:32] == 0)
    deq = dequantize_nvfp4(codes, block_scales, tensor_scale)
    assert np.all(np.isnan(deq[16:32])) and np.allclose(deq[:16], 1, rtol=2**-20)


# Tensors whose scale leaves the normal float32 range: (amax, tensor scale, block scale byte).
NVFP4_EXTREMES = [
    (1e-45 * 2688 * 0.3,  F32_TINY, 0x6C),  # amax / 2688 rounds to 0: floor 2^-149; wants 96
    (1.49 * 2688 * F32_TINY, F32_TINY, 0x7E),  # rounds to 2^-149: wants 667, clamps to 448
    (1e300, float(np.finfo(np.float32).max), 0x7E),  # float64 only: capped at float32 max
]


@pytest.mark.parametrize("amax, tensor_scale, byte", NVFP4_EXTREMES)
def test_nvfp4_tensor_scale_stays_in_float32(amax, tensor_scale, byte):
    x = np.zeros(16)
    x[0] = amax
    with np.errstate(divide="raise", invalid="raise"):
        codes, block_scales, ts = quantize_nvfp4(x)
    assert ts == np.float32(tensor_scale) and block_scales.tolist() == [byte]
    assert 0 < codes[0] <= 7


def test_nvfp4_rejects_bad_lengths_and_tensor_scales():
    with pytest.raises(ValueError, match="length 24 along axis -1.*multiples of 16"):
        quantize_nvfp4(np.ones(24))
    with pytest.raises(ValueError, match="tensor_scale"):
        quantize_nvfp4(np.ones(16), tensor_scale=0.0)


def test_nvfp4_blocks_along_any_axis():
    x = wide_range(np.random.default_rng(SEED + 7), (3, 32), -2, 2)
    codes, block_scales, ts = quantize_nvfp4(x.T, axis=0)
    codes_t, block_scales_t, ts_t = quantize_nvfp4(x)
    assert ts == ts_t and np.array_equal(codes, codes_t.T)
    assert np.array_equal(block_scales, block_scales_t.T)
    assert np.array_equal(dequantize_nvfp4(codes, block_scales, ts, axis=0),
                          dequantize_nvfp4(codes_t, block_scales_t, ts).T)


# ---------------------------------------------------------------------------------------------
# INT4 / INT8.


@pytest.mark.parametrize("bits, block", [(4, 32), (8, 32), (4, 16), (8, 64)])
def test_int_error_is_within_half_a_scale(bits, block):
    rng = np.random.default_rng(SEED + bits + block)
    x = wide_range(rng, (64, 128)).astype(np.float32).astype(np.float64)
    q, scales = quantize_int(x, bits, block)
    qmax = 2 ** (bits - 1) - 1
    assert q.dtype == np.int8 and scales.dtype == np.float32
    assert q.min() >= -qmax and q.max() <= qmax  # symmetric: never -8 / -128
    s = np.repeat(scales.astype(np.float64), block, axis=-1)
    assert np.all(np.abs(q * s - x) <= s / 2), f"bits {bits} block {block} seed {SEED + bits}"
    assert np.all(np.abs(q).reshape(64, -1, block).max(axis=-1) == qmax)
    assert np.array_equal(dequantize_int(q, scales, block), (q * s).astype(np.float32))


@settings(max_examples=50, deadline=None)
@given(x=hnp.arrays(np.float32, 32, elements=st.floats(width=32, allow_nan=False,
                                                       allow_infinity=False)),
       bits=st.sampled_from([4, 8]))
def test_int_error_is_within_half_a_scale_on_any_float32(x, bits):
    q, scales = quantize_int(x, bits)
    s = np.float64(scales[0])
    if s >= 2.0**-126:  # a normal float32 scale; subnormal scales: own test
        assert np.all(np.abs(q * s - x.astype(np.float64)) <= s / 2)


# One INT4 block of 32 with amax 7, so scale 1 and q = rint(x): ties go to even.
INT_TIES = [
    # x     q
    (2.5,   2),
    (3.5,   4),
    (-2.5, -2),
    (0.5,   0),
    (-6.5, -6),
]


@pytest.mark.parametrize("x, q", INT_TIES)
def test_int_ties_go_to_even(x, q):
    block = np.zeros(32)
    block[0], block[1] = 7.0, x
    got, scales = quantize_int(block, 4)
    assert scales.tolist() == [1.0] and got[1] == q


def test_int_minimum_code_dequantizes_and_is_never_wrapped():
    assert dequantize_int(np.array([-8] + [7] * 31), [0.5]).tolist()[:2] == [-4.0, 3.5]
    assert dequantize_int(np.array([-128] * 32, np.int8), [2.0]).tolist() == [-256.0] * 32
    q, _ = quantize_int(np.array([-8.0] + [7.0] * 31), 4)
    assert q[0] == -7  # 8 / (8/7) = 7: the symmetric scale leaves -8 unused, no wrap to +7


def test_int_all_zero_block_has_scale_one():
    q, scales = quantize_int(np.zeros(64), 8)
    assert scales.tolist() == [1.0, 1.0] and np.all(q == 0)


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_int_nan_or_inf_makes_the_block_nan(special):
    x = np.ones(64)
    x[40] = special
    q, scales = quantize_int(x, 4)
    assert scales[0] == np.float32(1 / 7) and np.isnan(scales[1]) and np.all(q[32:] == 0)
    deq = dequantize_int(q, scales)
    assert np.all(np.isnan(deq[32:])) and np.all(np.isfinite(deq[:32]))


# Blocks whose scale amax / qmax leaves the float32 range: (amax, scale, q of the amax element).
INT_EXTREMES = [
    (3 * F32_TINY, F32_TINY, 3),  # 3/7 * 2^-149 rounds to 0: floor 2^-149, then exact
    (1e-300, F32_TINY, 0),        # float64 only
    (1e300, float(np.finfo(np.float32).max), 7),  # float64 only: capped, saturates
]


@pytest.mark.parametrize("amax, scale, q", INT_EXTREMES)
def test_int_scale_stays_in_float32(amax, scale, q):
    x = np.zeros(32)
    x[0] = amax
    with np.errstate(divide="raise", invalid="raise"):
        got, scales = quantize_int(x, 4)
    assert scales.tolist() == [np.float32(scale)] and got[0] == q


@pytest.mark.parametrize("kwargs, match", [
    ({"bits": 2}, "bits 2"),
    ({"bits": 4, "block": 0}, "block 0"),
    ({"bits": 4, "block": 24}, "length 32 along axis -1.*multiples of 24"),
])
def test_int_rejects_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        quantize_int(np.ones(32), **kwargs)


def test_int_blocks_along_any_axis():
    x = wide_range(np.random.default_rng(SEED + 8), (64, 3), -2, 2)
    q, scales = quantize_int(x, 8, axis=0)
    q_t, scales_t = quantize_int(x.T, 8)
    assert np.array_equal(q, q_t.T) and np.array_equal(scales, scales_t.T)
    assert np.array_equal(dequantize_int(q, scales, axis=0), dequantize_int(q_t, scales_t).T)


# ---------------------------------------------------------------------------------------------
# MXFP8 (E4M3 elements) and the bfloat16 cast.

E4M3_POSITIVE = [(code, float(E4M3[code])) for code in range(0x7F)]  # 0 .. 448, no NaN


def reference_mxfp8_block(block):
    """(codes, scale) of one block, literally: e = floor(log2(amax)) - 8 clamped to the E8M0
    range, each element the nearest E4M3 magnitude of x / 2^e (ties to the even code),
    saturating at 448, with x's sign; NaN or Inf anywhere: scale 0xFF, codes 0."""
    if any(math.isnan(v) or math.isinf(v) for v in block):
        return [0] * 32, 0xFF
    amax = max(abs(v) for v in block)
    e = -127
    if amax:
        e = min(max(math.frexp(amax)[1] - 1 - 8, -127), 127)
    codes = []
    for v in block:
        a = abs(Fraction(v)) / Fraction(2) ** e
        best = None
        for code, mag in E4M3_POSITIVE:
            d = abs(a - Fraction(mag))
            if best is None or d < best[0] or (d == best[0] and code % 2 == 0):
                best = (d, code)
        code = 0x7E if a > 448 else best[1]
        codes.append(code | (0x80 if math.copysign(1.0, v) < 0 else 0))
    return codes, e + 127


def test_mxfp8_matches_the_reference_loop_bit_for_bit():
    """quantize_mxfp8 against a per-element search of the E4M3 grid in exact arithmetic, on
    blocks over the whole float32 range with ties, zeros, -0, NaN and Inf."""
    rng = np.random.default_rng(SEED)
    x = mxfp4_data(rng, 60)
    # Every E4M3 midpoint at shared exponent 0 (amax 256), subnormal ones included.
    grid = np.array([mag for _, mag in E4M3_POSITIVE])
    mids = (grid[1:] + grid[:-1]) / 2
    ties = np.zeros((-(-len(mids) // 31), 32))
    ties[:, 0] = 256.0
    ties[:, 1:].flat[: len(mids)] = mids * np.where(np.arange(len(mids)) % 2, -1, 1)
    x = np.concatenate([x, ties.astype(np.float32)])
    codes, scales = quantize_mxfp8(x)
    for k, block in enumerate(x):
        want_codes, want_scale = reference_mxfp8_block(block.tolist())
        assert scales[k, 0] == want_scale, first_mismatch("scale", want_scale, scales[k, 0], k=k)
        assert codes[k].tolist() == want_codes, first_mismatch("codes", want_codes, codes[k], k=k)


def test_mxfp8_error_is_within_half_a_step_and_round_trips():
    """Dequantized MXFP8 is within half an E4M3 step of each element (relative 2^-4 for
    normals, 2^-10 * 2^e absolute for subnormals) or saturated at 448 * 2^e above it, and
    exact E4M3 blocks come back unchanged."""
    rng = np.random.default_rng(SEED + 1)
    x = wide_range(rng, (200, 32), -30, 30).astype(np.float32).astype(np.float64)
    codes, scales = quantize_mxfp8(x)
    back = dequantize_mxfp8(codes, scales).astype(np.float64)
    e = np.repeat(scales.astype(np.float64) - 127, 32, axis=1)
    step = np.maximum(np.abs(x) * 2.0**-4, 2.0 ** (e - 10))
    # The top of a block, (448, 512) * 2^e, saturates to 448 * 2^e (the spec's scale rule).
    top = np.abs(x) > 448 * 2.0**e
    assert np.all(np.where(top, np.abs(back) == 448 * 2.0**e, np.abs(back - x) <= step))
    again = quantize_mxfp8(back)
    assert np.array_equal(again[0], codes) and np.array_equal(again[1], scales)


@pytest.mark.parametrize(("y", "code"), [(448.0, 0x7E), (463.9, 0x7E), (464.0, 0x7E),
                                         (1e9, 0x7E), (-500.0, 0xFE), (2.0**-10, 0x00),
                                         (3 * 2.0**-10, 0x02), (-(2.0**-11), 0x80),
                                         (2.0**-6 * 1.0625, 0x08), (2.0**-6 * 1.1875, 0x0A)])
def test_e4m3_encoder_saturates_rounds_ties_to_even_and_keeps_signed_zero(y, code):
    assert int(encode_e4m3(np.array([y]))[0]) == code


def test_mxfp8_special_and_zero_blocks():
    x = np.zeros((3, 32))
    x[1, 4] = np.nan
    x[2, 0] = -np.inf
    codes, scales = quantize_mxfp8(x)
    assert scales[:, 0].tolist() == [0, 0xFF, 0xFF]
    assert not codes.any()
    assert np.isnan(dequantize_mxfp8(codes, scales)[1:]).all()


def test_bf16_rounds_once_to_nearest_even():
    """From float32, bit for bit ml_dtypes' cast (one rounding there too); from float64, one
    rounding where ml_dtypes' cast through float32 rounds twice."""
    rng = np.random.default_rng(SEED + 2)
    bits = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
        got = quantize_bf16(x)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan])
    assert (got[nan] == 0x7FC0).all()
    # 1 + 2^-8 + 2^-30: above the tie by less than float32 can hold, so it rounds up to
    # 1 + 2^-7 (0x3F81); through float32 it lands on the tie and goes to even (0x3F80).
    assert quantize_bf16(np.array([1 + 2.0**-8 + 2.0**-30]))[0] == 0x3F81
    assert quantize_bf16(np.array([3.4e38, -1e39, 2.0**-134 * 1.5]))[:3].tolist() == [
        0x7F80, 0xFF80, 0x0001]
