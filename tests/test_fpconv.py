"""Scaled integer to binary32 conversion, and the leading one it finds: the RTL expressions
against NumPy and Python integers, in Amaranth's simulator (the cocotb tests of the MX and
NVFP4 dot units cover them again in Verilog)."""

import numpy as np
import pytest
from amaranth.hdl import signed, unsigned

from scoville.rtl.lib.comb import leading_one
from scoville.rtl.lib.fp32 import scaled_int_to_fp32

from .combsim import evaluate


def _numpy_reference(values, exps):
    with np.errstate(over="ignore"):
        out = np.ldexp(values.astype(np.float64), exps).astype(np.float32)
    return out.view(np.uint32)


def _simulate(width, values, exps):
    return evaluate(scaled_int_to_fp32, [signed(width), signed(11)], values, exps)


@pytest.mark.parametrize("width", [22, 42])
def test_scaled_int_to_fp32_matches_numpy(width):
    """Random values at every magnitude and exponents across the subnormal, normal and
    overflow ranges, and their edges (42 bits: the MXFP8 block sum's width)."""
    rng = np.random.default_rng(width)
    n = 3000
    top = 2 ** (width - 1)
    values = rng.integers(-top + 1, top, n) >> rng.integers(0, width, n)
    values[:200] = rng.integers(-8, 9, 200)
    exps = rng.integers(-300, 200, n)
    exps[200:600] = rng.integers(-175, -120, 400)  # subnormal range and its rounding edges
    exps[600:800] = rng.integers(100, 150 - width, 200)  # overflow edge
    exps[800:1200] = rng.integers(-149 - width, -126 - width, 400) + rng.integers(0, 30, 400)
    edges = [(1, -149), (1, -150), (3, -151), (1, -126), (-1, -127), (top - 1, -170),
             (top - 1, 129 - width), (top - 1, 128 - width), (0, 5), (-top + 1, 0), (5, -151),
             (1 << 23, -149), (1 << 23, -150), ((1 << 24) - 1, -150), (top - 1, -126 - width),
             (top - 1, -127 - width), (1, -1024), (top - 1, -1024), (1, 1023)]
    edges = [(v, e) for v, e in edges if abs(v) < top]  # the widest sums fit
    values = np.concatenate([values, [v for v, _ in edges]])
    exps = np.concatenate([exps, [e for _, e in edges]])
    got = _simulate(width, values, exps)
    want = _numpy_reference(values, exps)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, (
        f"{bad.size} mismatches; first: value {values[bad[0]]} exp {exps[bad[0]]}: "
        f"expected {want[bad[0]]:#010x}, got {got[bad[0]]:#010x}"
    )


@pytest.mark.parametrize("chain", [False, True])
def test_leading_one_is_the_position_of_the_highest_set_bit(chain):
    """Every value at widths 1 to 9 (odd widths pad the tree), and 2,000 values at 42 bits
    spread over every position: the tree and the chain agree with ``bit_length() - 1`` (0
    for 0)."""
    rng = np.random.default_rng(7)
    cases = {w: np.arange(1 << w) for w in range(1, 10)}
    cases[42] = np.array([0, 1, (1 << 42) - 1]
                         + [int(v) >> int(s) for v, s in zip(
                             rng.integers(0, 1 << 62, 2000), rng.integers(20, 62, 2000),
                             strict=True)], dtype=object)
    for width, values in cases.items():
        got = evaluate(lambda m, v: leading_one(m, "lead", v, chain=chain), [unsigned(width)],
                       values)
        want = [max(int(v).bit_length() - 1, 0) for v in values]
        assert list(map(int, got)) == want, width
