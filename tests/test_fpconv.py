"""Scaled integer to binary32 conversion: the RTL expression against NumPy, in Amaranth's
simulator (the cocotb tests of the MX and NVFP4 dot units cover it again in Verilog)."""

import numpy as np
from amaranth.hdl import signed

from scoville.rtl.lib.fp32 import scaled_int_to_fp32

from .combsim import evaluate


def _numpy_reference(values, exps):
    with np.errstate(over="ignore"):
        out = np.ldexp(values.astype(np.float64), exps).astype(np.float32)
    return out.view(np.uint32)


def _simulate(width, values, exps):
    return evaluate(scaled_int_to_fp32, [signed(width), signed(11)], values, exps)


def test_scaled_int_to_fp32_matches_numpy():
    rng = np.random.default_rng(1)
    width = 22
    n = 3000
    values = rng.integers(-(2 ** (width - 1)) + 1, 2 ** (width - 1), n)
    values[:200] = rng.integers(-8, 9, 200)
    exps = rng.integers(-300, 200, n)
    exps[200:600] = rng.integers(-175, -120, 400)  # subnormal range and its rounding edges
    exps[600:800] = rng.integers(100, 140, 200)  # overflow edge
    edges = [(1, -149), (1, -150), (3, -151), (1, -126), (-1, -127), (2**21 - 1, -170),
             (2**21 - 1, 107), (2**21 - 1, 106), (0, 5), (-(2**21) + 1, 0), (5, -151)]
    values = np.concatenate([values, [v for v, _ in edges]])
    exps = np.concatenate([exps, [e for _, e in edges]])
    got = _simulate(width, values, exps)
    want = _numpy_reference(values, exps)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, (
        f"{bad.size} mismatches; first: value {values[bad[0]]} exp {exps[bad[0]]}: "
        f"expected {want[bad[0]]:#010x}, got {got[bad[0]]:#010x}"
    )
