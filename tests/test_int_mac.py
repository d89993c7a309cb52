"""INT4/INT8 MAC: golden model against Python integers, config errors, RTL on both simulators."""

import numpy as np
import pytest

from scoville.rtl.int_mac import IntMacConfig
from scoville.rtl.lib.params import ParamError
from scoville.sim.golden.int_mac import int_mac, wrap_int32

from .simcheck import assert_passed, simulate


def test_golden_is_python_integer_arithmetic_mod_2_32():
    rng = np.random.default_rng(0)
    for bits in (4, 8):
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        a = rng.integers(lo, hi + 1, (200, 64))
        b = rng.integers(lo, hi + 1, (200, 64))
        acc = rng.integers(-(2**31), 2**31, 200)
        got = int_mac(a, b, acc, bits)
        for k in range(200):
            exact = int(acc[k]) + sum(int(x) * int(y) for x, y in zip(a[k], b[k], strict=True))
            assert got[k] == (exact + 2**31) % 2**32 - 2**31


def test_accumulation_wraps_instead_of_saturating():
    assert int_mac([[1]], [[1]], [2**31 - 1], 8)[0] == -(2**31)
    assert int_mac([[-128]], [[127]], [-(2**31)], 8)[0] == 2**31 - 128 * 127
    assert wrap_int32(2**32 + 5) == 5


def test_golden_rejects_out_of_range_elements():
    with pytest.raises(ValueError, match="-8..7"):
        int_mac([[8]], [[1]], [0], 4)


@pytest.mark.parametrize("bad", [{"fmt": "int2"}, {"lanes": 0}, {"lanes": 65}, {"latency": 1},
                                 {"latency": 5}])
def test_config_rejects_bad_values(bad):
    with pytest.raises(ParamError, match=f"'{next(iter(bad))}'.*allowed"):
        IntMacConfig(**bad)


@pytest.mark.sim
@pytest.mark.parametrize("params", [{"fmt": "int4", "lanes": 4}, {"fmt": "int8", "lanes": 8},
                                    {"fmt": "int8", "lanes": 1, "latency": 2},
                                    {"fmt": "int4", "lanes": 3, "latency": 3}],
                         ids=["int4x4", "int8x8", "int8x1-latency2", "int4x3-latency3"])
def test_int_mac_rtl(simulator, seed, params):
    """At the default latency (the products, then their sum, then the INT32 sum in halves),
    at 3 (the products and their sum in one stage) and at 2 (the INT32 sum in one)."""
    assert_passed(simulate("int_mac", simulator, seed, count=400, **params))
