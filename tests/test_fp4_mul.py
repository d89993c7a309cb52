"""FP4 x FP4 multiplier: golden model against float64, cycle model, and RTL on both simulators."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoville.rtl.fp4_mul import Fp4MulConfig
from scoville.rtl.lib.params import ParamError
from scoville.sim.cycles.stream import Schedule, Source, pipeline_cycles_ideal, pipeline_timing
from scoville.sim.golden import E2M1_VALUES, fp4_mul

from .simcheck import assert_passed, simulate


def test_e2m1_table_is_the_ocp_table():
    magnitudes = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert E2M1_VALUES[:8].tolist() == magnitudes
    assert E2M1_VALUES[8:].tolist() == [-m for m in magnitudes]
    assert np.signbit(E2M1_VALUES[8])


def test_golden_product_is_exact_against_float64():
    a, b = np.meshgrid(np.arange(16), np.arange(16))
    quarters = fp4_mul(a, b)
    exact = E2M1_VALUES[a].astype(np.float64) * E2M1_VALUES[b].astype(np.float64)
    assert np.array_equal(quarters / 4.0, exact)
    assert quarters.min() == -144 and quarters.max() == 144


def test_golden_rejects_codes_outside_e2m1():
    with pytest.raises(ValueError, match="0..15"):
        fp4_mul([16], [1])


@pytest.mark.parametrize("bad", [{"lanes": 0}, {"lanes": -1}, {"lanes": "4"}, {"latency": 9}])
def test_config_rejects_bad_values_naming_the_parameter(bad):
    name = next(iter(bad))
    with pytest.raises(ParamError, match=f"'{name}'.*allowed"):
        Fp4MulConfig(**bad)


@given(items=st.integers(1, 300), latency=st.integers(1, 4))
def test_timed_model_without_gaps_is_the_closed_form(items, latency):
    timed = pipeline_timing(items, latency)
    assert timed.cycles == pipeline_cycles_ideal(items, latency)
    assert timed.handshakes["i"] == list(range(items))
    assert timed.handshakes["o"] == list(range(latency, latency + items))


@settings(max_examples=50)
@given(items=st.integers(1, 200), latency=st.integers(1, 4), seed=st.integers(0, 2**32 - 1),
       gap=st.floats(0, 0.9), bp=st.floats(0, 0.9))
def test_timed_model_with_gaps_is_never_faster_than_ideal(items, latency, seed, gap, bp):
    timed = pipeline_timing(items, latency, Source(Schedule([seed, 0], gap)),
                            Schedule([seed, 1], bp))
    assert timed.cycles >= pipeline_cycles_ideal(items, latency)
    # Every item leaves at least ``latency`` cycles after it entered, in order.
    i, o = timed.handshakes["i"], timed.handshakes["o"]
    assert all(b - a >= latency for a, b in zip(i, o, strict=True))


@pytest.mark.sim
@pytest.mark.parametrize("params", [{}, {"lanes": 4, "latency": 2, "count": 3000}],
                         ids=["lanes1", "lanes4-lat2"])
def test_fp4_mul_rtl(simulator, seed, params):
    assert_passed(simulate("fp4_mul", simulator, seed, **params))
