"""The attention block's small binary32 and storage-format pieces, against NumPy and the golden
models: rounding to BF16, the running max's order key, the reciprocal of the softmax's sum,
the decoding of stored K and V to BF16 (every FP8 E4M3 code, every MXFP4 code and scale) and
the encoding of K and V as the cache stores them."""

import ml_dtypes
import numpy as np
import pytest
from amaranth.hdl import Cat, Const

from scoville.rtl.attention_feeder import encode_vector
from scoville.rtl.attention_transpose import decode_token
from scoville.rtl.lib.fp32 import fp32_key, fp32_recip, fp32_to_bf16
from scoville.sim.golden.kvcache import stored_values
from scoville.sim.golden.mx import dequantize_mxfp4, quantize_bf16, quantize_mxfp4

from .combsim import evaluate


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32)


def _special_and_random(rng, n):
    special = np.array([0, 0x8000_0000, 1, 0x8000_0001, 0x007F_FFFF, 0x0080_0000, 0x7F7F_FFFF,
                        0xFF7F_FFFF, 0x7F80_0000, 0xFF80_0000, 0x7FC0_0000, 0x7F80_0001,
                        0x3F80_7FFF, 0x3F80_8000, 0x3F81_8000, 0x3F80_8001, 0x7F7F_8000],
                       np.uint32)
    return np.concatenate([special, rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)])


def test_bf16_rounding_is_quantize_bf16():
    x = _special_and_random(np.random.default_rng(1), 1500)
    got = evaluate(lambda m, a: fp32_to_bf16(m, a, name="r"), [32], x)
    with np.errstate(invalid="ignore"):
        want = quantize_bf16(_f32(x).astype(np.float64))
    assert np.array_equal(got, want.astype(np.uint32))


def test_order_key_orders_every_non_nan_pair():
    rng = np.random.default_rng(2)
    x = _special_and_random(rng, 400)
    x = x[~np.isnan(_f32(x))]
    keys = evaluate(lambda m, a: fp32_key(m, a, name="k"), [32], x)
    v = _f32(x).astype(np.float64)
    # Ties only for +0 and -0, which the key puts -0 first.
    order = np.argsort(keys, kind="stable")
    assert np.all(np.diff(v[order]) >= 0)


def test_reciprocal_is_correctly_rounded_over_the_softmax_sums():
    """1/l for l from 1 up to 2**17 (every sum the softmax makes): random significands, every
    power of two, and the neighbours of each."""
    rng = np.random.default_rng(3)
    exps = rng.integers(127, 127 + 18, 1500)
    x = (exps << 23 | rng.integers(0, 2**23, 1500)).astype(np.uint32)
    powers = (np.arange(127, 145) << 23).astype(np.uint32)
    x = np.concatenate([x, powers, powers + 1, powers - 1, powers + 0x7F_FFFF])
    got = evaluate(lambda m, a: fp32_recip(m, a, name="q"), [32], x)
    want = (np.float32(1) / _f32(x)).astype(np.float32).view(np.uint32)
    assert np.array_equal(got, want)


def test_every_fp8_code_decodes_to_its_bf16_value():
    codes = np.arange(256)
    got = evaluate(lambda m, c: decode_token(m, c, "fp8_e4m3", 1, name="d")[0], [8], codes)
    values = codes.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    assert np.array_equal(got, quantize_bf16(values).astype(np.uint32))


def test_every_mxfp4_code_and_scale_decodes_to_its_bf16_value():
    """All 16 codes with all 256 scales: subnormal BF16 for the smallest scales, Inf past
    BF16's range, NaN for scale 0xFF, as BF16 rounding of the golden model's values."""
    code, scale = np.meshgrid(np.arange(16), np.arange(256), indexing="ij")
    code, scale = code.ravel(), scale.ravel()
    # A token of 32 elements: element 0 the code, the other 31 zero, then the scale.

    def build(m, c, s):
        return decode_token(m, Cat(c, Const(0, 4 * 31), s), "mxfp4", 32, name="d")[0]

    got = evaluate(build, [4, 8], code, scale)
    codes = np.zeros((len(code), 32), np.uint8)
    codes[:, 0] = code
    with np.errstate(over="ignore", invalid="ignore"):
        values = dequantize_mxfp4(codes, scale[:, None], axis=-1)[:, 0].astype(np.float64)
    assert np.array_equal(got, quantize_bf16(values).astype(np.uint32))


@pytest.mark.parametrize("kv_fmt", ["bf16", "fp8_e4m3", "mxfp4"])
def test_encoding_stores_what_the_cache_model_stores(kv_fmt):
    """The feeder's K and V encoding against the golden storage (``stored_values``, through
    ``ml_dtypes`` and ``quantize_mxfp4``): random vectors of every magnitude, FP8's edge of
    448 and 464, and values past it."""
    rng = np.random.default_rng(4)
    d = 32
    rows = (rng.standard_normal((60, d)) * 2.0 ** rng.integers(-12, 12, (60, 1)))
    rows[0, :6] = [448, 460, 464, 465, -470, 600]
    rows[1, :4] = [2.0**-10, 2.0**-10 * 1.5, 2.0**-9 * 0.5, 1e-45]
    rows = rows.astype(np.float32)
    width = 32 * d

    def build(m, v):
        return encode_vector(m, v, kv_fmt, d)

    words = [sum(int(b) << (32 * e) for e, b in enumerate(r.view(np.uint32))) for r in rows]
    got = evaluate(build, [width], words)
    want = stored_values(kv_fmt, rows.astype(np.float64))
    for k, bits in enumerate(got):
        decoded = _decode_bits(kv_fmt, bits, d)
        assert np.array_equal(decoded, want[k], equal_nan=True), (kv_fmt, k)


def _decode_bits(kv_fmt, bits, d):
    if kv_fmt == "bf16":
        codes = np.array([(bits >> (16 * e)) & 0xFFFF for e in range(d)], np.uint32) << 16
        return codes.view(np.float32).astype(np.float64)
    if kv_fmt == "fp8_e4m3":
        codes = np.array([(bits >> (8 * e)) & 0xFF for e in range(d)], np.uint8)
        return codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    codes = np.array([(bits >> (4 * e)) & 0xF for e in range(d)], np.uint8)
    scale = np.array([(bits >> (4 * d)) & 0xFF], np.uint8)
    return dequantize_mxfp4(codes, scale, axis=-1).astype(np.float64)


def test_quantize_mxfp4_is_the_block_the_feeder_makes():
    """A check of the check: the golden storage of MXFP4 is quantize_mxfp4's block."""
    x = np.linspace(-3, 3, 32)
    codes, scales = quantize_mxfp4(x, axis=-1)
    assert np.array_equal(stored_values("mxfp4", x), dequantize_mxfp4(codes, scales, axis=-1))
