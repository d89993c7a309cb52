"""The MoE experts' gated activation (:class:`scoville.rtl.moe_swiglu.Swiglu`) and the
sigmoid it shares with the router, lane logic in Amaranth's simulator against the golden
model bit for bit (NaN as the canonical quiet NaN), on a grid of edge values and random
ones."""

import itertools

import numpy as np
import pytest
from amaranth.hdl import Fragment

from scoville.rtl.lib.fp32 import fp32_sigmoid
from scoville.rtl.lib.params import ParamError
from scoville.rtl.moe_swiglu import Swiglu, SwigluConfig, swiglu
from scoville.sim.golden.moe import gpt_oss_glu, sigmoid_unit, silu_glu

from .combsim import evaluate

_QNAN = 0x7FC0_0000

#: Around the clamp (7 and its neighbours), the sigmoid's flush (z near -87.3 and 88.7),
#: zeros, subnormals, infinities, NaN.
EDGES = np.array([0.0, -0.0, 1.0, -1.0, 7.0, -7.0, np.nextafter(7, 8), np.nextafter(7, 6),
                  np.nextafter(-7, -8), np.nextafter(-7, -6), 1e-40, -1e-40, 51.3, -51.3,
                  87.3, -87.3, 88.8, -88.8, 1e30, -1e30, np.inf, -np.inf, np.nan],
                 np.float32)


def _bits(a) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


def _canonical(a) -> np.ndarray:
    a = np.asarray(a, np.float32)
    return np.where(np.isnan(a), np.uint32(_QNAN), a.view(np.uint32))


def _inputs(seed, n=150):
    """Each edge value against each of a few partners, both ways, and random pairs."""
    rng = np.random.default_rng(seed)
    partners = np.array([0.0, 1.5, -3.0, np.inf, np.nan], np.float32)
    pairs = np.array(list(itertools.product(EDGES, partners))
                     + list(itertools.product(partners, EDGES)), np.float32)
    rand = (rng.standard_normal((n, 2)) * rng.choice([1, 4, 30], (n, 1))).astype(np.float32)
    return np.concatenate([pairs, rand])


def test_sigmoid_is_the_golden_sigmoid_unit():
    z = np.concatenate([EDGES, np.random.default_rng(1).standard_normal(300).astype(
        np.float32) * 40])
    got = evaluate(lambda m, x: fp32_sigmoid(m, x, name="s"), [32], _bits(z))
    assert np.array_equal(got, _canonical(sigmoid_unit(z)))


def test_deepseek_lane_is_silu_gate_times_up():
    gu = _inputs(2)
    got = evaluate(lambda m, g, u: swiglu(m, "deepseek", g, u, name="glu"),
                   [32, 32], _bits(gu[:, 0]), _bits(gu[:, 1]))
    assert np.array_equal(got, _canonical(silu_glu(gu)[:, 0]))


def test_gpt_oss_lane_adds_the_biases_then_clamps():
    gu = _inputs(3)
    rng = np.random.default_rng(4)
    bias = np.where(rng.random(gu.shape) < 0.5, 0, rng.standard_normal(gu.shape)).astype(
        np.float32)
    got = evaluate(lambda m, g, u, gb, ub: swiglu(m, "gpt_oss", g, u, gb, ub, name="glu"),
                   [32] * 4,
                   *(_bits(c) for c in (gu[:, 0], gu[:, 1], bias[:, 0], bias[:, 1])))
    with np.errstate(over="ignore", invalid="ignore"):
        h = (gu + bias).astype(np.float32)  # interleaved: gate, up
    assert np.array_equal(got, _canonical(gpt_oss_glu(h)[:, 0]))


@pytest.mark.parametrize(("params", "text"), [
    ({"kind": "silu"}, "parameter 'kind' = 'silu'"),
    ({"lanes": 0}, "parameter 'lanes' = 0"),
])
def test_bad_config_is_one_line(params, text):
    with pytest.raises(ParamError) as err:
        SwigluConfig(**params)
    assert text in str(err.value) and "allowed" in str(err.value)


def test_ports_follow_the_kind():
    """GPT-OSS's unit takes the biases, DeepSeek's not; one output per lane."""
    for kind, operands in (("gpt_oss", {"gate", "up", "gate_bias", "up_bias"}),
                           ("deepseek", {"gate", "up"})):
        unit = Swiglu(SwigluConfig(kind=kind, lanes=2))
        assert set(unit.in_layout.members) == operands
        assert unit.out_layout.length == 2
        Fragment.get(unit, None)  # elaborates
