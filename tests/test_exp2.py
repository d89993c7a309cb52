"""exp2 unit: the golden model against float64 over its whole fixed-point grid, the directed
table, stimulus coverage, the combinational function in Amaranth's simulator, config errors,
and the RTL on both simulators."""

import numpy as np
import pytest

from scoville.rtl.exp2 import Exp2Config
from scoville.rtl.lib.formats import FP32_QNAN
from scoville.rtl.lib.fp32 import EXP2_FRAC_BITS, exp2_table, fp32_exp2
from scoville.rtl.lib.params import ParamError
from scoville.sim.golden.exp2 import TABLE, exp2, exp2_of_fixed
from scoville.testbenches.exp2 import DIRECTED, directed_operands, random_operands

from .combsim import evaluate
from .simcheck import assert_passed, simulate

#: The documented bound on the relative error against 2**x, over normal results: the chord,
#: (ln 2 / 64)**2 / 8 = 1.47e-5, plus the truncation of x to 2**-16, 2**-16 * ln 2 = 1.06e-5,
#: plus the roundings (3e-7).
BOUND = 2.6e-5


def _f64(bits):
    with np.errstate(invalid="ignore"):
        return np.asarray(bits, np.uint32).view(np.float32).astype(np.float64)


def test_golden_on_every_fixed_point_input_of_two_octaves():
    """Every t in [-2**16, 2**16) (every table entry, every interpolation step): within the
    chord's bound of 2**(t / 2**16), never below it by more than the roundings (the chord lies
    above the convex function), and monotonic."""
    t = np.arange(-(1 << EXP2_FRAC_BITS), 1 << EXP2_FRAC_BITS)
    got = _f64(exp2_of_fixed(t))
    exact = np.exp2(t / 2.0**EXP2_FRAC_BITS)
    rel = (got - exact) / exact
    assert rel.max() <= (np.log(2) / 64) ** 2 / 8 + 2.0**-23
    assert rel.min() >= -(2.0**-22)
    assert np.all(np.diff(got) >= 0)
    # Every power of two is exact.
    assert np.array_equal(got[:: 1 << EXP2_FRAC_BITS], [0.5, 1.0])


def test_golden_relative_error_over_the_normal_range(seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-126, 128, 300_000), -rng.exponential(4, 300_000),
                        rng.uniform(-1e-3, 1e-3, 100_000)]).astype(np.float32)
    got = _f64(exp2(x.view(np.uint32)))
    exact = np.exp2(x.astype(np.float64))
    normal = (exact >= 2.0**-126) & (exact < 2.0**128)
    rel = np.abs(got[normal] - exact[normal]) / exact[normal]
    assert rel.max() <= BOUND
    assert rel.max() > 1e-6  # the approximation is visible: the oracle is not the unit itself


def test_golden_range_edges_and_specials():
    x = np.array([127.99999, 128.0, 1e30, np.inf, -126.0, -126.00001, -1e30, -np.inf, np.nan],
                 dtype=np.float32).view(np.uint32)
    got = exp2(x)
    assert np.isfinite(_f64(got[0])) and got[0] < 0x7F80_0000
    assert list(got[1:4]) == [0x7F80_0000] * 3
    assert got[4] == 0x0080_0000
    assert list(got[5:8]) == [0, 0, 0]
    assert got[8] == FP32_QNAN


def test_golden_meets_the_directed_table():
    for x, want, what in DIRECTED:
        assert int(exp2(np.uint32(x))) == want, what


def test_golden_table_matches_the_rtl_table():
    assert list(TABLE) == exp2_table()
    assert TABLE[0] == 1 << 23 and TABLE[-1] == 1 << 24


@pytest.mark.parametrize("bad", [[-1], [1 << 32], [1.0]])
def test_golden_rejects_what_is_not_an_encoding(bad):
    with pytest.raises(ValueError, match="x_bits"):
        exp2(bad)


def test_random_operands_cover_every_region():
    x = random_operands(np.random.default_rng(0), 100_000)
    v = _f64(x)
    finite = np.isfinite(v)
    assert np.mean(finite & (v >= -126) & (v < 128)) > 0.6
    assert np.mean(finite & (np.abs(v) < 2.0**-16) & (v != 0)) > 0.02  # the floor's region
    assert np.mean(finite & (v < 0) & (np.abs(v) < 1)) > 0.1
    assert np.sum(np.isnan(v)) > 30
    assert np.sum(finite & (v >= 128)) > 1000 and np.sum(finite & (v < -126)) > 1000
    out = exp2(x)
    assert np.sum(out == 0) > 1000 and np.sum(out == 0x7F80_0000) > 1000
    for edge in (-126.0, 128.0):
        assert np.sum(np.abs(v - edge) < 1e-4) > 100


def test_combinational_unit_in_amaranth_simulator(seed):
    x = np.concatenate([directed_operands(), random_operands(np.random.default_rng(seed), 3000)])
    want = exp2(x)
    got = evaluate(lambda m, v: fp32_exp2(m, v), [32], x)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (
        f"seed {seed}: {bad.size} mismatches; first at index {bad[0]}: exp2({x[bad[0]]:#010x}): "
        f"expected {want[bad[0]]:#010x}, got {got[bad[0]]:#010x}"
    )


@pytest.mark.parametrize(
    "bad", [{"lanes": 0}, {"lanes": 17}, {"lanes": "4"}, {"latency": 0}, {"latency": 6}]
)
def test_config_rejects_bad_values_naming_the_parameter(bad):
    name = next(iter(bad))
    with pytest.raises(ParamError, match=f"'{name}'.*allowed"):
        Exp2Config(**bad)


@pytest.mark.sim
@pytest.mark.parametrize(
    "params",
    [{"lanes": 1, "latency": 1, "count": 2000}, {"lanes": 8, "latency": 3, "count": 40_000},
     {"lanes": 2, "latency": 5, "count": 2000}, {"lanes": 1, "latency": 4, "count": 1000},
     {"lanes": 3, "latency": 2, "count": 1000}],
    ids=["lanes1-lat1", "lanes8-lat3-40k", "lanes2-lat5", "lanes1-lat4", "lanes3-lat2"],
)
def test_exp2_rtl(simulator, seed, params):
    result = simulate("exp2", simulator, seed, **params)
    assert_passed(result)
    assert result.metrics["test_workload"]["operands"] >= params["count"]
