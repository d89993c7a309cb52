"""The MoE golden model (:mod:`scoville.sim.golden.moe`) against float64, against independent
re-derivations of Hugging Face's routers, and against its own steps recomputed from the public
matmul, bit for bit; the config's one-line errors."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from scoville.rtl.lib.params import ParamError, build_config
from scoville.rtl.moe import MoeConfig
from scoville.sim.golden.gemm import matmul
from scoville.sim.golden.moe import (
    MoeWeights,
    block_input,
    deepseek_moe,
    deepseek_route,
    exp_unit,
    gpt_oss_moe,
    gpt_oss_route,
    random_weights,
    reference,
    reference_routing,
    router_logits,
    routing,
    sigmoid_unit,
    skewed,
)

from .simcheck import assert_passed, simulate

T, H, IM, E = 8, 64, 32, 8
#: Largest error over the largest output against float64 on the same quantized values: FP32
#: roundings and the exp2 unit (about 1e-7), unless an FP32 intermediate and its float64
#: counterpart round to different MX codes (one quantum of one element: seen up to 2e-3 with
#: MXFP8 activations).
BOUNDS = {"mxfp8": 1e-2, "mxfp4": 5e-2, None: 1e-5}


def _gpt_oss(seed, t=T):
    rng = np.random.default_rng(seed)

    def r(*shape, s=1 / 8):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    return dict(x=r(t, H, s=1), router_weight=r(E, H), router_bias=r(E),
                gate_up_proj=r(E, H, 2 * IM), gate_up_proj_bias=r(E, 2 * IM),
                down_proj=r(E, IM, H, s=1 / 6), down_proj_bias=r(E, H))


def _deepseek(seed, t=T):
    rng = np.random.default_rng(seed)

    def r(*shape, s=1 / 8):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    return dict(x=r(t, H, s=1), router_weight=r(E, H), e_score_correction_bias=r(E, s=0.1),
                gate_up_proj=r(E, 2 * IM, H), down_proj=r(E, H, IM, s=1 / 6),
                shared_gate=r(IM, H), shared_up=r(IM, H), shared_down=r(H, IM))


def _hf_gpt_oss_route(x, w, b, k):
    """Hugging Face ``GptOssTopKRouter`` in float64: top-k of the logits (sorted), softmax
    over the k chosen."""
    logits = np.asarray(x, np.float64) @ np.asarray(w, np.float64).T + b
    idx = np.argsort(-logits, axis=-1, kind="stable")[:, :k]
    top = np.take_along_axis(logits, idx, -1)
    e = np.exp(top - top.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True), idx


def _hf_deepseek_route(x, w, bias, k, n_group, topk_group, norm, scale):
    """Hugging Face ``DeepseekV3TopkRouter`` in float64 (the 0.0 mask, the 1e-20)."""
    s = 1 / (1 + np.exp(-(np.asarray(x, np.float64) @ np.asarray(w, np.float64).T)))
    c = s + bias
    t, e = c.shape
    groups = np.sort(c.reshape(t, n_group, -1), axis=-1)[..., ::-1]
    gscore = groups[..., :2].sum(-1)
    keep = np.argsort(-gscore, axis=-1, kind="stable")[:, :topk_group]
    mask = np.zeros((t, n_group), bool)
    np.put_along_axis(mask, keep, True, -1)
    c = np.where(np.repeat(mask, e // n_group, -1), c, 0.0)
    idx = np.argsort(-c, axis=-1, kind="stable")[:, :k]
    wts = np.take_along_axis(s, idx, -1)
    if norm:
        wts = wts / (wts.sum(-1, keepdims=True) + 1e-20)
    return wts * scale, idx


@pytest.mark.parametrize("seed", range(4))
def test_router_logits_are_fp32_sums_in_hidden_order(seed):
    p = _gpt_oss(seed)
    got = router_logits(p["x"], p["router_weight"], p["router_bias"])
    x, w, b = p["x"], p["router_weight"], p["router_bias"]
    for t, e in [(0, 0), (3, 5), (7, 7)]:
        acc = np.float32(0)
        for h in range(H):
            acc = np.float32(acc + np.float32(x[t, h] * w[e, h]))
        assert got[t, e] == np.float32(acc + b[e])
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + b
    assert np.abs(got - ref).max() < 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("lanes", [2, 8, 32])
def test_router_logits_in_beats_are_trees_then_sums_in_order(lanes):
    """``x_lanes``: each beat's products added as a binary tree, the beat sums in order."""
    p = _gpt_oss(1)
    x, w, b = p["x"], p["router_weight"], p["router_bias"]
    got = router_logits(x, w, b, lanes)
    for t, e in [(0, 0), (3, 5), (7, 7)]:
        acc = np.float32(0)
        for h0 in range(0, H, lanes):
            level = [np.float32(x[t, h] * w[e, h]) for h in range(h0, h0 + lanes)]
            while len(level) > 1:
                level = [np.float32(level[q] + level[q + 1]) for q in range(0, len(level), 2)]
            acc = np.float32(acc + level[0])
        assert got[t, e] == np.float32(acc + b[e])
    # Another order: some sums differ in their last bits from the plain sum in order.
    assert not np.array_equal(got, router_logits(x, w, b))


@pytest.mark.parametrize("seed", range(6))
def test_gpt_oss_route_is_hugging_faces_within_the_exp2_units_error(seed):
    p = _gpt_oss(seed)
    w, idx = gpt_oss_route(p["x"], p["router_weight"], p["router_bias"], top_k=3)
    ref_w, ref_idx = _hf_gpt_oss_route(p["x"], p["router_weight"], p["router_bias"], 3)
    assert (idx == ref_idx).all() and w.dtype == np.float32 and idx.dtype == np.int64
    assert np.abs(w - ref_w).max() < 1e-4
    assert np.allclose(w.sum(-1), 1, atol=1e-6)


@pytest.mark.parametrize(("n_group", "topk_group", "norm", "scale"),
                         [(4, 2, True, 2.5), (1, 1, True, 2.827), (2, 1, False, 1.0)])
@pytest.mark.parametrize("seed", range(4))
def test_deepseek_route_is_hugging_faces(seed, n_group, topk_group, norm, scale):
    p = _deepseek(seed)
    args = (p["x"], p["router_weight"], p["e_score_correction_bias"])
    w, idx = deepseek_route(*args, top_k=2, n_group=n_group, topk_group=topk_group,
                            norm_topk_prob=norm, routed_scaling_factor=scale)
    ref_w, ref_idx = _hf_deepseek_route(*args, 2, n_group, topk_group, norm, scale)
    assert (idx == ref_idx).all()
    assert np.abs(w - ref_w).max() < 1e-4 * scale


def test_deepseek_masked_experts_score_zero_as_hugging_faces_masked_fill():
    """With negative correction biases a kept group's experts can score below 0, so an
    expert of a masked group (0.0) is chosen: Hugging Face's behaviour, kept on purpose."""
    x = np.ones((1, 32), np.float32)
    weight = np.zeros((4, 32), np.float32)
    weight[0] = 0.1  # expert 0 (group 0) scores highest
    bias = np.array([-0.2, -0.9, -0.95, -0.97], np.float32)  # c: 0.76, -0.4, -0.45, -0.47
    _, idx = deepseek_route(x, weight, bias, top_k=2, n_group=2, topk_group=1)
    assert idx.tolist() == [[0, 2]]  # expert 1 (kept, c < 0) loses to expert 2 (masked: 0.0)


def test_ties_go_to_the_lower_index():
    x = np.zeros((1, 32), np.float32)
    w, idx = gpt_oss_route(x, np.zeros((6, 32), np.float32), np.zeros(6, np.float32), top_k=3)
    assert idx.tolist() == [[0, 1, 2]] and np.allclose(w, 1 / 3, atol=1e-6)
    _, idx = deepseek_route(x, np.zeros((6, 32), np.float32), np.zeros(6, np.float32),
                            top_k=2, n_group=3, topk_group=2)
    assert idx.tolist() == [[0, 1]]


GPT_OSS = SimpleNamespace(router="gpt_oss", top_k=2)
DEEPSEEK = SimpleNamespace(router="deepseek", top_k=2, n_group=4, topk_group=2,
                           norm_topk_prob=1, routed_scaling_factor=2.5)


def _route64(p, config):
    """Float64 routing of the test's layer, ties within FP32's rounding to the golden's."""
    bias = p.get("router_bias", p.get("e_score_correction_bias"))
    weights = MoeWeights(p["router_weight"], bias, p["gate_up_proj"], p["down_proj"])
    if config.router == "gpt_oss":
        _, near = gpt_oss_route(p["x"], p["router_weight"], bias, top_k=config.top_k)
    else:
        _, near = deepseek_route(p["x"], p["router_weight"], bias, top_k=config.top_k,
                                 n_group=config.n_group, topk_group=config.topk_group,
                                 routed_scaling_factor=config.routed_scaling_factor)
    w, idx, _ = reference_routing(config, weights, p["x"], near=near)
    return w, idx


@pytest.mark.parametrize(("n_group", "topk_group", "norm", "scale"),
                         [(1, 1, True, 1.0), (4, 2, True, 2.5), (2, 1, False, 1.0)])
@pytest.mark.parametrize("seed", range(3))
def test_reference_routing_is_hugging_faces_in_float64(seed, n_group, topk_group, norm, scale):
    p = _gpt_oss(seed)
    weights = MoeWeights(p["router_weight"], p["router_bias"], p["gate_up_proj"],
                         p["down_proj"])
    w, idx, _ = reference_routing(GPT_OSS, weights, p["x"])
    ref_w, ref_idx = _hf_gpt_oss_route(p["x"], p["router_weight"], p["router_bias"], 2)
    assert (idx == ref_idx).all() and np.allclose(w, ref_w, rtol=1e-12, atol=0)
    p = _deepseek(seed)
    config = SimpleNamespace(router="deepseek", top_k=2, n_group=n_group, topk_group=topk_group,
                             norm_topk_prob=norm, routed_scaling_factor=scale)
    weights = MoeWeights(p["router_weight"], p["e_score_correction_bias"], p["gate_up_proj"],
                         p["down_proj"])
    w, idx, _ = reference_routing(config, weights, p["x"])
    ref_w, ref_idx = _hf_deepseek_route(p["x"], p["router_weight"], p["e_score_correction_bias"],
                                        2, n_group, topk_group, norm, scale)
    assert (idx == ref_idx).all() and np.allclose(w, ref_w, rtol=1e-12, atol=0)


@pytest.mark.parametrize("router", ["gpt_oss", "deepseek"])
def test_fp32_routing_chooses_as_float64_but_on_ties_within_its_rounding(seed, router):
    """The block's FP32 router (golden) against float64 routing over many tokens: the same
    experts for every token whose float64 scores are not within FP32's rounding at a cut.
    The block's input is BF16 (its default), which makes exact ties in the logits likely."""
    config = MoeConfig(experts=16, top_k=4, hidden=64, router=router,
                       **({"n_group": 4, "topk_group": 2} if router == "deepseek" else {}))
    rng = np.random.default_rng(seed)
    weights = random_weights(config, rng)
    x = block_input(config, rng.standard_normal((2000, 64)).astype(np.float32))
    _, idx = routing(config, weights, x)
    w64, idx64, margin = reference_routing(config, weights, x)
    differ = np.any(np.sort(idx, axis=1) != np.sort(idx64, axis=1), axis=1)
    assert margin[differ].max(initial=0) < 1e-5, margin[differ]
    _, tied, _ = reference_routing(config, weights, x, near=idx)
    assert (np.sort(tied, axis=1) == np.sort(idx, axis=1)).all()


def test_reference_routing_keeps_its_choice_where_another_is_not_a_tie():
    """``near`` replaces a token's choice only on a tie within FP32's rounding: a router that
    picks the wrong expert by a clear margin still differs (and its output will too)."""
    x = np.ones((1, 32), np.float32)
    weight = np.zeros((4, 32), np.float32)
    weight[:, 0] = [0.5, 0.2, 0.2 + 2.0 ** -22, 0.1]  # expert 2 beats 1 by one FP32 ulp
    weights = MoeWeights(weight, np.zeros(4, np.float32), None, None)
    config = SimpleNamespace(router="gpt_oss", top_k=2)
    _, idx, margin = reference_routing(config, weights, x)
    assert idx.tolist() == [[0, 2]] and margin[0] == pytest.approx(2.0 ** -22)
    _, idx, _ = reference_routing(config, weights, x, near=np.array([[0, 1]]))
    assert idx.tolist() == [[0, 1]]  # a tie: the other router's choice is as right
    _, idx, _ = reference_routing(config, weights, x, near=np.array([[0, 3]]))
    assert idx.tolist() == [[0, 2]]  # expert 3 is 0.1 below: not a tie
    _, idx, _ = reference_routing(config, weights, x, near=np.array([[1, 2]]))
    assert idx.tolist() == [[0, 2]]  # both at the cut, but expert 0, 0.3 clear, dropped


def test_reference_routing_takes_a_deepseek_group_tie_either_way():
    """Two groups scoring alike within FP32's rounding (c = 0.9 + 0.1 against 2 x
    0.50000025): float64 keeps the second; a router that keeps the first, and chooses within
    it, is as right. One that chooses across both groups is not."""
    x = np.ones((1, 32), np.float32)
    bias = np.array([0.4, -0.4, 2.5e-7, 2.5e-7])
    weights = MoeWeights(np.zeros((4, 32), np.float32), bias, None, None)
    config = SimpleNamespace(router="deepseek", top_k=2, n_group=2, topk_group=1,
                             norm_topk_prob=1, routed_scaling_factor=1.0)
    _, idx, margin = reference_routing(config, weights, x)
    assert idx.tolist() == [[2, 3]] and margin[0] == pytest.approx(5e-7, rel=1e-3)
    _, idx, _ = reference_routing(config, weights, x, near=np.array([[0, 1]]))
    assert idx.tolist() == [[0, 1]]
    _, idx, _ = reference_routing(config, weights, x, near=np.array([[0, 2]]))
    assert idx.tolist() == [[2, 3]]


@pytest.mark.parametrize("act_fmt", ["mxfp8", "mxfp4", None])
@pytest.mark.parametrize("seed", range(5))
def test_gpt_oss_moe_meets_its_bound_against_float64(seed, act_fmt):
    """Against float64 routed in float64 (Hugging Face's router) and computed in float64 on
    the same quantized values."""
    p = _gpt_oss(seed)
    out = gpt_oss_moe(**p, top_k=2, act_fmt=act_fmt)
    w, idx = _route64(p, GPT_OSS)
    experts = [(p["gate_up_proj"][e], p["gate_up_proj_bias"][e], p["down_proj"][e],
                p["down_proj_bias"][e]) for e in range(E)]
    ref = reference(p["x"], w, idx, experts, act_fmt=act_fmt)
    assert out.dtype == np.float32 and out.shape == (T, H)
    assert np.abs(out - ref).max() <= BOUNDS[act_fmt] * np.abs(ref).max()


@pytest.mark.parametrize("act_fmt", ["mxfp8", "mxfp4", None])
@pytest.mark.parametrize("seed", range(5))
def test_deepseek_moe_meets_its_bound_against_float64(seed, act_fmt):
    p = _deepseek(seed)
    kw = dict(top_k=2, n_group=4, topk_group=2, routed_scaling_factor=2.5)
    out = deepseek_moe(**p, **kw, act_fmt=act_fmt)
    w, idx = _route64(p, DEEPSEEK)
    experts = [(p["gate_up_proj"][e].T, None, p["down_proj"][e].T, None) for e in range(E)]
    shared = (np.concatenate([p["shared_gate"], p["shared_up"]]).T, None, p["shared_down"].T,
              None)
    ref = reference(p["x"], w, idx, experts, shared, router="deepseek", act_fmt=act_fmt)
    assert np.abs(out - ref).max() <= BOUNDS[act_fmt] * np.abs(ref).max()


def _sigmoid(z):
    """The block's sigmoid from its definition, scalar by scalar."""
    from scoville.sim.golden.exp2 import exp2

    t = np.float32(np.float32(z) * np.float32(-math.log2(math.e)))
    e = exp2(np.array([t], np.float32).view(np.uint32)).view(np.float32)[0]
    return np.float32(1 / np.float64(np.float32(1 + e)))


@pytest.mark.parametrize("act_fmt", ["mxfp8", "mxfp4"])
def test_a_gpt_oss_token_recomputed_from_the_public_matmul_bit_for_bit(act_fmt):
    """One token through its experts by the module's steps, written out with
    :func:`~scoville.sim.golden.gemm.matmul` and scalar FP32 arithmetic."""
    p = _gpt_oss(11, t=1)
    out = gpt_oss_moe(**p, top_k=2, act_fmt=act_fmt)
    w, idx = gpt_oss_route(p["x"], p["router_weight"], p["router_bias"], top_k=2)
    b_fmt = "mxfp4" if act_fmt == "mxfp8" else None
    acc = np.zeros(H, np.float32)
    for e in sorted(idx[0].tolist()):
        h = matmul(p["x"], p["gate_up_proj"][e], act_fmt, b_fmt)[0]
        h = (h + p["gate_up_proj_bias"][e]).astype(np.float32)
        a = np.zeros(IM, np.float32)
        for j in range(IM):
            g = min(h[2 * j], np.float32(7))
            u = min(max(h[2 * j + 1], np.float32(-7)), np.float32(7))
            glu = np.float32(g * _sigmoid(np.float32(g * np.float32(1.702))))
            a[j] = np.float32(np.float32(u + 1) * glu)
        y = (matmul(a[None], p["down_proj"][e], act_fmt, b_fmt)[0]
             + p["down_proj_bias"][e]).astype(np.float32)
        we = w[0, list(idx[0]).index(e)]
        acc = (acc + (we * y).astype(np.float32)).astype(np.float32)
    assert np.array_equal(out[0].view(np.uint32), acc.view(np.uint32))


def test_exp_and_sigmoid_are_within_1e_4_relative():
    z = np.linspace(-80, 80, 200_001).astype(np.float32)
    exp_err = np.abs(exp_unit(z) / np.exp(z.astype(np.float64)) - 1)
    sig = 1 / (1 + np.exp(-z.astype(np.float64)))
    sig_err = np.abs(sigmoid_unit(z) / sig - 1)
    assert exp_err.max() <= 1e-4 and sig_err.max() <= 1e-4
    assert sigmoid_unit(np.float32(-200)) == 0 and sigmoid_unit(np.float32(200)) == 1


def test_float_reference_mode_is_fp32_close_to_the_quantized_weights():
    p = _gpt_oss(3)
    a = gpt_oss_moe(**p, top_k=2, act_fmt=None)
    b = gpt_oss_moe(**p, top_k=2, act_fmt="mxfp8")
    assert not np.array_equal(a, b)  # the activations' quantization shows
    with pytest.raises(ValueError, match="parameter 'act_fmt' = 'bf16' is not allowed"):
        gpt_oss_moe(**p, top_k=2, act_fmt="bf16")


@pytest.mark.parametrize(("params", "text"), [
    ({"top_k": 17}, "parameter 'top_k' = 17 is not allowed with experts = 16; allowed: 1..16"),
    ({"router": "deepseek", "n_group": 3},
     "parameter 'n_group' = 3 is not allowed with experts = 16; allowed: a divisor of 16"),
    ({"router": "deepseek", "n_group": 4, "topk_group": 5}, "parameter 'topk_group' = 5"),
    ({"shared": 1}, "parameter 'shared' = 1 is not allowed with router = gpt_oss; allowed: 0"),
    ({"hidden": 40}, "parameter 'hidden' = 40 is not allowed; allowed: a multiple of 32"),
    ({"router": "mixtral"}, "parameter 'router' = 'mixtral' is not allowed"),
    ({"routed_scaling_factor": 0.0}, "parameter 'routed_scaling_factor' = 0.0"),
    ({"act_fmt": "mxfp8", "array.fmt": "mxfp4", "array.b_fmt": "same"},
     "parameter 'array.fmt' = 'mxfp4' is not allowed with act_fmt = mxfp8"),
])
def test_bad_config_is_one_line_naming_the_parameter(params, text):
    with pytest.raises(ParamError) as err:
        build_config(MoeConfig, params)
    assert text in str(err.value) and "allowed" in str(err.value)
    assert "\n" not in str(err.value)


def test_the_array_formats_follow_act_fmt():
    assert (MoeConfig().array.fmt, MoeConfig().array.b_fmt) == ("mxfp8", "mxfp4")
    cfg = build_config(MoeConfig, {"act_fmt": "mxfp4"})
    assert (cfg.array.fmt, cfg.array.b_fmt) == ("mxfp4", "same")


# ---- The RTL block in its cocotb testbench, on the simulators.

#: Small blocks for the simulators: 4 experts of 32 x 32, top-2, batches of up to 2, a 2 x 8
#: array, a 64-bit weight port; GPT-OSS with MXFP8 activations (FP32 x, and BF16 x), DeepSeek
#: (grouped routing, MXFP4 activations, a shared expert, BF16 x).
MOE_SIM = {"experts": 4, "top_k": 2, "hidden": 32, "intermediate": 32, "tokens": 2,
           "array.rows": 2, "array.cols": 8, "weight_port_bits": 64}
MOE_SIM_CONFIGS = {
    "gpt-oss-mxfp8": MOE_SIM,
    "deepseek-mxfp4-shared-bf16-x": {**MOE_SIM, "router": "deepseek", "n_group": 2,
                                     "topk_group": 1, "shared": 1,
                                     "routed_scaling_factor": 2.5, "act_fmt": "mxfp4",
                                     "x_fmt": "bf16", "skew": 0.5},
    # BF16 x quantized to MXFP8: E4M3 ties are common (8 significant bits into 4), so the
    # quantizer's rounding of ties is seen (FP32 x rarely ties: moe-requant-e4m3-ties-away
    # survived the other two).
    "gpt-oss-mxfp8-bf16-x": {**MOE_SIM, "x_fmt": "bf16", "backpressure": 0.8},
    # The router a beat of x a cycle (x_lanes: the beat's products as a tree).
    "deepseek-x-lanes-4-bf16": {**MOE_SIM, "router": "deepseek", "n_group": 2, "topk_group": 1,
                                "x_lanes": 4, "x_fmt": "bf16"},
    # Column-tile descriptors queued ahead of the loader: the requests run two tiles ahead
    # (the fetch buffer's room permitting), under the workload's back-pressure.
    "deepseek-tile-queue-2": {**MOE_SIM, "router": "deepseek", "n_group": 2, "topk_group": 1,
                              "shared": 1, "tile_queue": 2, "fetch_buffer": 64,
                              "backpressure": 0.6},
}
#: A line of x a cycle (32 lanes: 128 FP32 multipliers and their trees for 4 experts), and
#: 8 lanes with one column-tile descriptor queued (a queue of two entries, one used), on
#: Verilator (Icarus takes over ten minutes to compile the first, over two the second) unless
#: --both-sims; one of the two a run, the seed's (builds of minutes).
MOE_SIM_WIDE = {"gpt-oss-x-lanes-32": {**MOE_SIM, "hidden": 64, "x_lanes": 32},
                "gpt-oss-x-lanes-8-tile-queue-1": {**MOE_SIM, "hidden": 64, "x_lanes": 8,
                                                   "tile_queue": 1}}


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize("params", [
    *MOE_SIM_CONFIGS.values(),
    *(pytest.param(p, marks=[pytest.mark.verilator_unless_both,
                             pytest.mark.one_case_per_seed("moe-wide")])
      for p in MOE_SIM_WIDE.values())],
    ids=[*MOE_SIM_CONFIGS, *MOE_SIM_WIDE])
def test_moe_rtl(simulator, seed, params):
    """Every output bit for bit against the golden layer, every read request and every
    handshake on cmd, x, req, rdata and o where the timed model puts them: directed edges (one
    token, refused batches, a full batch) on a memory that keeps up, weight responses that end
    early or run long (the batch emits nothing, ``bad_weights`` counts it), and two random
    batches under gaps and back-pressure on a slow memory."""
    result = simulate("moe", simulator, seed, batches=2, mem_latency=9,
                      mem_bytes_per_cycle=4, **params)
    assert_passed(result)
    assert {t.name for t in result.tests} == {"test_edges", "test_tiny_scores", "test_bad_weights",
                                              "test_workload"}
    m = result.metrics["test_workload"]
    assert m["max_rel_err_vs_f64"] <= BOUNDS[params.get("act_fmt", "mxfp8")]
    assert sum(m["tokens_per_expert"]) == m["counter_rows"]
    assert len(m["tokens_per_expert"]) == params["experts"] + params.get("shared", 0)
    assert 0 < m["weight_bandwidth_utilization"] <= 1
    assert 0 < m["array_utilization"] <= 1


@pytest.mark.parametrize("router", ["gpt_oss", "deepseek"])
def test_skew_sends_the_choices_to_the_first_experts(router):
    """``skew`` 0: the random router's choices spread (no expert above twice its share); 1:
    the first quarter of the experts takes most of them."""
    params = {"router": router, "experts": 16, "top_k": 4, "hidden": 64, "intermediate": 32}
    if router == "deepseek":
        params.update(n_group=4, topk_group=4)
    cfg = build_config(MoeConfig, params)
    weights = random_weights(cfg, np.random.default_rng(0))
    x = np.random.default_rng(1).standard_normal((256, cfg.hidden)).astype(np.float32)
    share = {}
    for skew in (0.0, 1.0):
        _, idx = routing(cfg, skewed(cfg, weights, skew), x)
        share[skew] = np.bincount(idx.ravel(), minlength=16) / idx.size
    assert share[0.0].max() < 2 / 16
    assert share[1.0][:4].sum() > 0.6


def test_bf16_x_is_rounded_to_nearest_even_once():
    """``x_fmt=bf16``: the block takes x as BF16 (the stream's 16 bits widened exactly), so the
    golden layer rounds float32 x to BF16 first, ties to even, as ``ml_dtypes`` does."""
    import ml_dtypes

    cfg = build_config(MoeConfig, {"x_fmt": "bf16"})
    x = np.array([1.0, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -2.5e-39, 3.0e38, 0.1],
                 np.float32)
    want = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(block_input(cfg, x).view(np.uint32), want.view(np.uint32))
    assert np.array_equal(block_input(build_config(MoeConfig, {}), x), x)
