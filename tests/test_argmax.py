"""The ``argmax`` block: its golden model against a plain loop of the rule, config errors, and
the RTL on both simulators."""

import math

import numpy as np
import pytest

from scoville.rtl.argmax import ArgmaxConfig
from scoville.rtl.lib.params import ParamError
from scoville.sim.golden.argmax import argmax, greedy

from .simcheck import assert_passed, simulate


def _by_loop(row) -> int:
    """The rule, one value at a time: a later value replaces the best only when larger; NaN
    never does; a token of NaNs gives 0."""
    best = None
    for i, v in enumerate(row.tolist()):
        if math.isnan(v):
            continue
        if best is None or v > row[best]:
            best = i
    return 0 if best is None else best


def test_golden_against_a_loop():
    rng = np.random.default_rng(3)
    x = rng.choice(np.float32([-np.inf, -1, -0.0, 0.0, 1, 2, np.inf, np.nan]), (2000, 6))
    assert greedy(x).tolist() == [_by_loop(r) for r in x]
    idx, vals = argmax(ArgmaxConfig(vocab=6, lanes=2), x)
    assert np.array_equal(vals[~np.isnan(x).all(axis=1)],
                          x[np.arange(len(x)), idx].view(np.uint32)[~np.isnan(x).all(axis=1)])
    assert (vals[np.isnan(x).all(axis=1)] == 0x7FC0_0000).all()


def test_golden_edges():
    assert greedy(np.float32([[np.nan, -np.inf]])).tolist() == [1]
    assert greedy(np.float32([[-0.0, 0.0]])).tolist() == [0]
    assert greedy(np.float32([[np.nan, np.nan]])).tolist() == [0]
    assert greedy(np.float32([[1, 3, 3]])).tolist() == [1]


@pytest.mark.parametrize(("params", "match"), [
    ({"lanes": 3}, "'lanes' = 3"), ({"vocab": 100, "lanes": 8}, "'vocab' = 100"),
    ({"vocab": 4}, "'vocab' = 4 is out of range"),
])
def test_config_errors_are_one_line(params, match):
    with pytest.raises(ParamError, match=match):
        ArgmaxConfig(**params)


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize("params", [
    {"count": 100},
    {"vocab": 16, "lanes": 1, "count": 300},
    {"vocab": 32, "lanes": 32, "count": 300},  # a token a beat
    {"vocab": 96, "lanes": 4, "count": 200},
], ids=["default", "one-lane", "one-beat", "vocab-96"])
def test_argmax_rtl(simulator, seed, params):
    assert_passed(simulate("argmax", simulator, seed, **params))
