"""The ``rope`` block: its golden model (YaRN's frequencies and factors as Hugging Face computes
them, the table against the float64 formula, the rotation against float64, the layouts), config
errors, and the RTL on both simulators."""

import math

import numpy as np
import pytest

from scoville.rtl.lib.params import ParamError
from scoville.rtl.rope import RopeConfig
from scoville.sim.golden import decoder, rope

from .simcheck import assert_passed, simulate

GPT_OSS_ROPE = decoder.TINY["tiny-gpt-oss"]["rope_parameters"]
DEEPSEEK_ROPE = decoder.TINY["tiny-deepseek"]["rope_parameters"]


def test_yarn_factors_of_the_two_models():
    # GPT-OSS: no mscale given, so 0.1 ln(32) + 1 scales cos and sin.
    _, a = rope.frequencies(GPT_OSS_ROPE, 64)
    assert a == pytest.approx(0.1 * math.log(32) + 1, rel=1e-15)
    # DeepSeek-V3: mscale = mscale_all_dim, so cos and sin unscaled; the softmax scale takes
    # (0.1 ln 40 + 1)^2 over sqrt(192).
    _, a = rope.frequencies(DEEPSEEK_ROPE, 64)
    assert a == 1.0
    assert rope.softmax_scale(DEEPSEEK_ROPE, 192) == pytest.approx(
        (0.1 * math.log(40) + 1) ** 2 / math.sqrt(192), rel=1e-15)
    assert rope.softmax_scale(GPT_OSS_ROPE, 64) == 0.125


def test_yarn_frequencies_blend_from_extrapolation_to_interpolation():
    for params, dim in ((GPT_OSS_ROPE, 64), (DEEPSEEK_ROPE, 64)):
        inv, _ = rope.frequencies(params, dim)
        base = 1 / params["rope_theta"] ** (np.arange(0, dim, 2) / dim)
        # The fast dimensions keep their frequency, the slow ones are divided by factor.
        assert inv[0] == base[0]
        assert inv[-1] == pytest.approx(base[-1] / params["factor"], rel=1e-15)
        assert np.all(np.diff(inv) < 0)
    # truncate (DeepSeek's default) rounds the ramp's ends to whole dimensions: a dimension
    # just outside the ramp keeps its pure value, unlike GPT-OSS's untruncated ramp.
    inv_t, _ = rope.frequencies({**GPT_OSS_ROPE, "truncate": True}, 64)
    inv_f, _ = rope.frequencies(GPT_OSS_ROPE, 64)
    assert not np.array_equal(inv_t, inv_f)


#: Hugging Face transformers 5.25's ``_compute_yarn_parameters`` for GPT-OSS-120B's and
#: DeepSeek-V3's rope_parameters (float32 inverse frequencies 0, 5, 10, ..., 31 of a rotary
#: width of 64, and the attention factor), written down from a run of it.
HF_YARN = {
    "gpt-oss": (1.3465735902799727, [1.0, 0.15532298386096954, 0.019334999844431877,
                                     0.00105260219424963, 1.818833698052913e-05,
                                     2.8250667583051836e-06, 3.023511396804679e-07]),
    "deepseek": (1.0, [1.0, 0.23713736236095428, 0.05623412877321243, 0.0083345090970397,
                       0.0007905694073997438, 1.8747354260995053e-05,
                       3.3338035336782923e-06]),
}


@pytest.mark.parametrize("name", HF_YARN)
def test_yarn_matches_hugging_face(name):
    params = GPT_OSS_ROPE if name == "gpt-oss" else DEEPSEEK_ROPE
    inv, a = rope.frequencies(params, 64)
    want_a, want = HF_YARN[name]
    assert a == pytest.approx(want_a, rel=1e-15)
    # Hugging Face computes them in float32: agreement to its rounding.
    assert inv[[0, 5, 10, 15, 20, 25, 31]] == pytest.approx(want, rel=2e-7)


def test_table_is_the_formula_rounded_once_and_rotation_matches_float64():
    positions = np.array([0, 1, 7, 1000, 131071])
    cos, sin = rope.table(GPT_OSS_ROPE, 16, positions)
    inv, a = rope.frequencies(GPT_OSS_ROPE, 16)
    angles = positions[:, None] * inv
    assert np.array_equal(cos, (np.cos(angles) * a).astype(np.float32))
    assert np.max(np.abs(sin - np.sin(angles) * a)) <= 2.0 ** -24 * a
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 3, 16)).astype(np.float32)
    for inter in (False, True):
        got = rope.rotate(x, cos, sin, interleaved=inter)
        want = rope.reference(x, positions, GPT_OSS_ROPE, interleaved=inter)
        assert np.max(np.abs(got - want)) < 1e-5 * np.max(np.abs(want))
    # Interleaved pairs (x0, x1) come out in halves: element 0 and element 8.
    one = np.zeros((1, 1, 16), np.float32)
    one[0, 0, 1] = 1  # x2 of the first pair
    c, s = rope.table(GPT_OSS_ROPE, 16, [3])
    out = rope.rotate(one, c, s, interleaved=True)[0, 0]
    assert out[0] == -s[0, 0] and out[8] == c[0, 0]


def test_rope_rejects_unknown_kinds_and_missing_fields():
    with pytest.raises(ValueError, match="rope_type' = 'dynamic'"):
        rope.frequencies({"rope_type": "dynamic", "rope_theta": 1e4}, 16)
    with pytest.raises(ValueError, match="'rope_parameters.original_max_position_embeddings'"):
        rope.frequencies({k: v for k, v in GPT_OSS_ROPE.items()
                          if k != "original_max_position_embeddings"}, 16)
    with pytest.raises(ValueError, match="'rope_parameters.factor'"):
        rope.softmax_scale({**DEEPSEEK_ROPE, "factor": None}, 64)
    with pytest.raises(ValueError, match="'rope_parameters.partial_rotary_factor' = 0.5"):
        rope.frequencies({**GPT_OSS_ROPE, "partial_rotary_factor": 0.5}, 16)
    with pytest.raises(ValueError, match="'dim' = 15"):
        rope.frequencies(GPT_OSS_ROPE, 15)




def test_block_golden_takes_its_config():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    cos, sin = rope.table(GPT_OSS_ROPE, 16, [0, 5, 9, 100])
    for inter in (0, 1):
        assert np.array_equal(rope.rope(RopeConfig(interleaved=inter), x, cos, sin),
                              rope.rotate(x, cos, sin, interleaved=bool(inter)))
    # Position 0: cos is the attention factor, sin 0: x scaled, in halves.
    out = rope.rope(RopeConfig(interleaved=1), x[:1], cos[:1], sin[:1])[0]
    a = np.float32(cos[0, 0])
    assert np.array_equal(out[:8], (x[0, 0::2] * a).astype(np.float32))


@pytest.mark.parametrize(("params", "match"), [
    ({"dim": 15}, "'dim' = 15"), ({"dim": 130}, "'dim' = 130"),
    ({"interleaved": 2}, "'interleaved' = 2"), ({"latency": 0}, "'latency' = 0"),
    ({"latency": 12}, r"'latency' = 12 is out of range; allowed: 1\.\.11"),
])
def test_config_errors_are_one_line(params, match):
    with pytest.raises(ParamError, match=match):
        RopeConfig(**params)


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize("params", [
    {"count": 300},
    {"interleaved": 1, "latency": 1, "count": 300},
    # DeepSeek-V3's and GPT-OSS's width, interleaved: 32 pairs a beat (builds of minutes:
    # one of the two a run, the seed's; both with --both-sims).
    pytest.param({"dim": 64, "interleaved": 1, "count": 100},
                 marks=pytest.mark.one_case_per_seed("rope-64")),
    pytest.param({"dim": 64, "latency": 3, "count": 100},
                 marks=pytest.mark.one_case_per_seed("rope-64")),
    {"dim": 8, "latency": 11, "count": 200},   # every cut, the products' split shift too
    {"dim": 8, "latency": 6, "count": 200},    # the products cut twice, the sums three times
], ids=["halves", "interleaved", "deepseek-64", "gpt-oss-64", "every-cut", "six"])
def test_rope_rtl(simulator, seed, params):
    assert_passed(simulate("rope", simulator, seed, **params))
