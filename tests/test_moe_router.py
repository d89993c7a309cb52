"""The MoE router component (:class:`scoville.rtl.moe_router.Router`) in Amaranth's simulator
against the golden routers, bit for bit: both kinds, grouped and not, normalized and not,
with ties."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from scoville.rtl.lib.params import build_config
from scoville.rtl.moe import MoeConfig
from scoville.rtl.moe_router import Router
from scoville.sim.cycles.moe import route_latency
from scoville.sim.golden.moe import deepseek_route, gpt_oss_route, router_logits

from .amsim import Edges, receive, send


def _bits(a) -> list[int]:
    return np.asarray(a, np.float32).view(np.uint32).astype(np.int64).tolist()


def run_router(cfg, weight, bias, x, *, gap_seed=None):
    """Load ``weight`` (E, H) and ``bias`` (E,), then route every token of ``x`` (T, H);
    returns ``(weights (T, k) float32, indices (T, k))`` from the component's ``o`` beats,
    having checked each answer's latency against :func:`route_latency`. ``gap_seed``: random
    gaps on ``x`` and back-pressure on ``o``."""
    dut = Router(cfg)
    rng = np.random.default_rng(gap_seed)
    got, latency = [], []

    L = cfg.x_lanes
    beats = cfg.hidden // L

    def word(cols):  # a memory word: L columns (one column its bare layout)
        return _bits(cols[0]) if L == 1 else [_bits(c) for c in cols]

    async def bench(ctx):
        edges = Edges()
        for b in range(beats + 1):
            cols = [weight[:, b * L + q] for q in range(L)] if b < beats else \
                [bias] + [np.zeros_like(bias)] * (L - 1)
            await send(ctx, dut.wr, {"addr": b, "data": word(cols)}, edges)
        ctx.set(dut.wr.valid, 0)
        gap, bp = (0.3, 0.5) if gap_seed is not None else (0.0, 0.0)
        for t in range(len(x)):
            for b in range(beats):
                xs = _bits(x[t, b * L:(b + 1) * L])
                await send(ctx, dut.x, xs[0] if L == 1 else xs, edges, rng=rng, gap=gap)
            ctx.set(dut.x.valid, 0)
            last = edges.n
            beat, first = await receive(ctx, dut.o, edges, rng=rng, backpressure=bp)
            got.append(([int(v) for v in beat.weight], [int(v) for v in beat.index]))
            latency.append(first - last)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    w = np.array([g[0] for g in got], np.uint32).view(np.float32)
    assert latency == [route_latency(cfg)] * len(x), latency
    return w, np.array([g[1] for g in got], np.int64)


def _inputs(cfg, seed, tokens=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, cfg.hidden)).astype(np.float32)
    weight = (rng.standard_normal((cfg.experts, cfg.hidden)) / 4).astype(np.float32)
    bias = (rng.standard_normal(cfg.experts) / 10).astype(np.float32)
    return x, weight, bias


def _check(cfg, x, weight, bias, **kw):
    w, idx = run_router(cfg, weight, bias, x, **kw)
    if cfg.router == "gpt_oss":
        want_w, want_i = gpt_oss_route(x, weight, bias, top_k=cfg.top_k, config=cfg)
    else:
        want_w, want_i = deepseek_route(
            x, weight, bias, top_k=cfg.top_k, n_group=cfg.n_group, topk_group=cfg.topk_group,
            norm_topk_prob=bool(cfg.norm_topk_prob),
            routed_scaling_factor=cfg.routed_scaling_factor, config=cfg)
    assert (idx == want_i).all(), (idx, want_i)
    assert np.array_equal(w.view(np.uint32), want_w.view(np.uint32)), (w, want_w)


@pytest.mark.parametrize("seed", [1])
def test_gpt_oss_router_is_the_golden_router_bit_for_bit(seed):
    cfg = build_config(MoeConfig, {"experts": 8, "top_k": 3, "hidden": 32})
    _check(cfg, *_inputs(cfg, seed), gap_seed=seed)


@pytest.mark.parametrize(("params", "seed"), [
    ({"n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5}, 3),
    ({"n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.827, "top_k": 3}, 4),
    ({"n_group": 8, "topk_group": 3, "norm_topk_prob": 0}, 5),
])
def test_deepseek_router_is_the_golden_router_bit_for_bit(params, seed):
    cfg = build_config(MoeConfig, {"router": "deepseek", "experts": 8, "top_k": 2,
                                   "hidden": 32, **params})
    _check(cfg, *_inputs(cfg, seed), gap_seed=seed)


@pytest.mark.parametrize(("params", "seed"), [
    ({"x_lanes": 8}, 6),
    # (16 and 32 lanes are too deep for Amaranth's simulator to compile: the block's RTL
    # tests run them, tests/test_moe.py)
    ({"x_lanes": 2, "hidden": 64}, 7),
    ({"router": "deepseek", "n_group": 4, "topk_group": 2, "x_lanes": 4}, 8),
])
def test_router_a_beat_of_lanes_a_cycle_is_the_golden_router_bit_for_bit(params, seed):
    """``x_lanes``: a beat's products as a tree, the beats in order; one beat a cycle (the
    answer's latency from the last beat is :func:`route_latency`, checked in run_router)."""
    cfg = build_config(MoeConfig, {"experts": 8, "top_k": 2, "hidden": 32, **params})
    x, weight, bias = _inputs(cfg, seed, tokens=8)
    # Magnitudes spread over 2^0..2^12 and the weights scaled down by 2^-11: the order of the
    # sums matters to the logits' bits, and the routed weights are not saturated at 0 or 1.
    # (A sum in another order moves a logit by an ulp or so, which the exp2 and sigmoid units
    # mostly absorb: scripts/mutants.py's moe-router-lanes-left-fold is a known gap.)
    x = (x * np.float32(2.0) ** (np.arange(cfg.hidden) % 5 * 3)[None]).astype(np.float32)
    weight = (weight * np.float32(2.0 ** -11)).astype(np.float32)
    logits = router_logits(x, weight, bias, cfg.x_lanes)
    assert not np.array_equal(logits, router_logits(x, weight, bias))
    if cfg.router == "gpt_oss":
        w, _ = gpt_oss_route(x, weight, bias, top_k=cfg.top_k, config=cfg)
    else:
        w, _ = deepseek_route(x, weight, bias, top_k=cfg.top_k, n_group=cfg.n_group,
                              topk_group=cfg.topk_group, config=cfg)
    assert ((w > 1e-3) & (w < 1 - 1e-3)).all(), w
    _check(cfg, x, weight, bias, gap_seed=seed)


def test_ties_and_the_zero_mask_match_the_golden_router():
    """Equal logits (ties to the lower index), and DeepSeek's masked experts at 0.0 beating
    kept experts whose biased score is negative."""
    cfg = build_config(MoeConfig, {"experts": 8, "top_k": 3, "hidden": 32})
    x = np.ones((2, 32), np.float32)
    weight = np.zeros((8, 32), np.float32)
    weight[5] = weight[2] = 0.25
    _check(cfg, x, weight, np.zeros(8, np.float32))
    cfg = build_config(MoeConfig, {"router": "deepseek", "experts": 8, "top_k": 2,
                                   "hidden": 32, "n_group": 2, "topk_group": 1})
    weight = np.zeros((8, 32), np.float32)
    weight[0] = 0.1
    bias = np.array([-0.2, -0.9, -0.95, -0.97, -0.6, -0.99, -0.7, -0.98], np.float32)
    _check(cfg, x, weight, bias)
