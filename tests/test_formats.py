"""scoville/rtl/lib/formats.py: each layout puts its fields where the format's own encoding has them
(checked against ml_dtypes and NumPy's float32), and the widths and block sizes are the formats'."""

import ml_dtypes
import numpy as np
import pytest
from amaranth.hdl import Shape

from scoville.rtl.lib import formats

FLOATS = [
    (formats.E2M1, ml_dtypes.float4_e2m1fn, 2, 1, "mxfp4"),
    (formats.E4M3, ml_dtypes.float8_e4m3fn, 4, 3, "fp8_e4m3"),
    (formats.BF16, ml_dtypes.bfloat16, 8, 7, "bf16"),
    (formats.FP32, np.float32, 8, 23, "fp32"),
]


@pytest.mark.parametrize(("layout", "dtype", "exp", "man", "name"), FLOATS,
                         ids=[f[4] for f in FLOATS])
def test_layout_fields_decode_as_the_format_does(layout, dtype, exp, man, name):
    assert layout.size == formats.ELEMENT_BITS[name] == 1 + exp + man
    bias = (1 << (exp - 1)) - 1
    rng = np.random.default_rng(0)
    for code in rng.integers(0, 1 << layout.size, 200):
        fields = {"sign": int(code) >> (exp + man), "exp": int(code) >> man & ((1 << exp) - 1),
                  "man": int(code) & ((1 << man) - 1)}
        assert layout.const(fields).as_bits() == int(code)
        if fields["exp"] == (1 << exp) - 1 and name != "mxfp4":
            continue  # Inf and NaN: not a finite value to compare
        e = max(fields["exp"], 1) - bias
        frac = fields["man"] / (1 << man) + (fields["exp"] > 0)
        value = (-1) ** fields["sign"] * frac * 2.0**e
        raw = np.array([code], dtype=f"u{-(-layout.size // 8)}")
        if name == "mxfp4":
            raw = raw.astype(np.uint8)
        got = raw.view(dtype).astype(np.float64)[0]
        assert got == value, (name, hex(int(code)))


def test_block_sizes_and_scales():
    assert formats.MX_BLOCK == 32 and formats.NVFP4_BLOCK == 16
    assert Shape.cast(formats.E8M0).width == 8
    e8m0 = np.arange(255, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    assert np.array_equal(e8m0, 2.0 ** (np.arange(255) - formats.E8M0_BIAS))
    nan = np.array([formats.E8M0_NAN], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    assert np.isnan(nan.astype(np.float64))[0]
    assert np.isnan(np.array([formats.FP32_QNAN], np.uint32).view(np.float32))[0]
