"""The ``argmax`` block: its golden model against a plain loop of the rule, config errors, and
the RTL on both simulators."""

import math

import numpy as np
import pytest

from scoville.rtl.argmax import ArgmaxConfig, cut_sites
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


def test_cut_sites_spread_over_the_keys_and_the_tree():
    """The cuts split the keys and the tree's levels into runs as even as they go, each site
    once, the last level never (the stage's own register follows it), up to the most the
    latency allows."""
    assert cut_sites(8, 1) == (1,) and cut_sites(8, 2) == (0, 2) and cut_sites(8, 3) == (0, 1, 2)
    assert cut_sites(32, 2) == (1, 3) and cut_sites(32, 4) == (0, 1, 3, 4)
    for lanes in (1, 2, 4, 8, 16, 32):
        levels = lanes.bit_length() - 1
        for n in range(levels + 1):
            sites = cut_sites(lanes, n)
            assert len(set(sites)) == n and all(0 <= s < levels for s in sites)
        with pytest.raises(ValueError):
            cut_sites(lanes, levels + 1)
        assert ArgmaxConfig(vocab=32, lanes=lanes, latency=2 + levels).latency == 2 + levels


def test_golden_edges():
    assert greedy(np.float32([[np.nan, -np.inf]])).tolist() == [1]
    assert greedy(np.float32([[-0.0, 0.0]])).tolist() == [0]
    assert greedy(np.float32([[np.nan, np.nan]])).tolist() == [0]
    assert greedy(np.float32([[1, 3, 3]])).tolist() == [1]


@pytest.mark.parametrize(("params", "match"), [
    ({"lanes": 3}, "'lanes' = 3"), ({"vocab": 100, "lanes": 8}, "'vocab' = 100"),
    ({"vocab": 4}, "'vocab' = 4 is out of range"),
    ({"lanes": 8, "latency": 6}, r"'latency' = 6 is out of range at lanes=8; allowed: 2\.\.5"),
    ({"lanes": 1, "vocab": 8, "latency": 1}, r"'latency' = 1 is out of range at lanes=1; "
     r"allowed: 2\.\.2"),
    ({"latency": "3"}, r"'latency' must be an integer; allowed: 2\.\.5 at lanes=8; got '3'"),
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
    {"vocab": 64, "lanes": 8, "latency": 5, "count": 200},   # every cut
    {"vocab": 96, "lanes": 32, "latency": 5, "count": 100},  # cuts (1, 2, 4)
    {"vocab": 48, "lanes": 16, "latency": 4, "count": 150},  # cuts (1, 2)
], ids=["default", "one-lane", "one-beat", "vocab-96", "every-cut", "lanes-32-cuts-3",
        "lanes-16-cuts-2"])
def test_argmax_rtl(simulator, seed, params):
    assert_passed(simulate("argmax", simulator, seed, **params))
