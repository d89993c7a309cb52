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
from scoville.sim.golden.moe import deepseek_route, gpt_oss_route

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

    async def bench(ctx):
        edges = Edges()
        for hh in range(cfg.hidden + 1):
            col = weight[:, hh] if hh < cfg.hidden else bias
            await send(ctx, dut.wr, {"addr": hh, "data": _bits(col)}, edges)
        ctx.set(dut.wr.valid, 0)
        gap, bp = (0.3, 0.5) if gap_seed is not None else (0.0, 0.0)
        for t in range(len(x)):
            for hh in range(cfg.hidden):
                await send(ctx, dut.x, _bits(x[t, hh:hh + 1])[0], edges, rng=rng, gap=gap)
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
        want_w, want_i = gpt_oss_route(x, weight, bias, top_k=cfg.top_k)
    else:
        want_w, want_i = deepseek_route(
            x, weight, bias, top_k=cfg.top_k, n_group=cfg.n_group, topk_group=cfg.topk_group,
            norm_topk_prob=bool(cfg.norm_topk_prob),
            routed_scaling_factor=cfg.routed_scaling_factor)
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
