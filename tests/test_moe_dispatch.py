"""The MoE dispatch (:class:`scoville.rtl.moe_dispatch.Dispatch`) in Amaranth's simulator: a
batch's choices out grouped by expert as :func:`scoville.sim.golden.moe.dispatch` groups them,
the group marks right, and the latency :func:`scoville.sim.cycles.moe.dispatch_latency`
predicts, under gaps and back-pressure, batch after batch."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from scoville.rtl.lib.params import build_config
from scoville.rtl.moe import MoeConfig
from scoville.rtl.moe_dispatch import Dispatch
from scoville.sim.cycles.moe import dispatch_latency
from scoville.sim.golden.moe import dispatch

from .amsim import Edges, receive, send


def run_dispatch(cfg, batches, *, seed, gap=0.3, backpressure=0.5, mark_last=True):
    """Feed each batch ``(weights (T, k) float32, indices (T, k))``, ``last`` on its final
    beat if ``mark_last``; returns per batch the ``o`` beats (dicts) and the latency from the
    last beat in to the first beat out."""
    dut = Dispatch(cfg)
    rng = np.random.default_rng(seed)
    got = []

    async def bench(ctx):
        edges = Edges()
        for weights, indices in batches:
            n = len(indices)
            for t in range(n):
                await send(ctx, dut.c, {
                    "index": [int(v) for v in indices[t]],
                    "weight": [int(v) for v in weights[t].view(np.uint32)],
                    "last": int(mark_last and t == n - 1)}, edges, rng=rng, gap=gap)
            ctx.set(dut.c.valid, 0)
            last, beats, first = edges.n, [], None
            while not beats or not beats[-1]["end"]:
                sorting, mask = ctx.get(dut.sorting), ctx.get(dut.experts)
                p, when = await receive(ctx, dut.o, edges, rng=rng, backpressure=backpressure)
                first = when if first is None else first
                assert sorting and mask == sum(1 << int(e) for e in np.unique(indices))
                beats.append({f: int(getattr(p, f)) for f in
                              ("expert", "token", "weight", "count", "first", "last", "end")})
            got.append((beats, first - last))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


def _batch(cfg, rng, n):
    indices = np.array([rng.choice(cfg.experts, cfg.top_k, replace=False) for _ in range(n)])
    weights = rng.standard_normal((n, cfg.top_k)).astype(np.float32)
    return weights, indices


def _want(weights, indices):
    beats = []
    groups = dispatch(weights, indices)
    for g, (e, rows, w) in enumerate(groups):
        for j, (t, wt) in enumerate(zip(rows, w, strict=True)):
            beats.append({"expert": e, "token": int(t), "weight": int(wt.view(np.uint32)),
                          "count": len(rows), "first": int(j == 0),
                          "last": int(j == len(rows) - 1),
                          "end": int(g == len(groups) - 1 and j == len(rows) - 1)})
    return beats, len(groups)


@pytest.mark.parametrize(("params", "seed"), [
    ({"experts": 8, "top_k": 2, "tokens": 6}, 1),
    ({"experts": 16, "top_k": 4, "tokens": 5}, 2),
    ({"experts": 4, "top_k": 1, "tokens": 3}, 3),
    ({"experts": 5, "top_k": 5, "tokens": 2}, 4),
])
def test_dispatch_groups_by_expert_in_token_order(params, seed):
    cfg = build_config(MoeConfig, params)
    rng = np.random.default_rng(seed)
    batches = [_batch(cfg, rng, n) for n in (cfg.tokens, 1, max(1, cfg.tokens - 1), 2)]
    for (weights, indices), (beats, latency) in zip(
            batches, run_dispatch(cfg, batches, seed=seed), strict=True):
        want, active = _want(weights, indices)
        assert beats == want
        assert latency == dispatch_latency(cfg, len(indices), active)


def test_all_tokens_on_one_expert_and_no_gaps():
    """Every token chooses expert 0 (first), one group of T; streams that keep up."""
    cfg = build_config(MoeConfig, {"experts": 4, "top_k": 2, "tokens": 4})
    indices = np.array([[0, 3], [0, 1], [0, 3], [0, 2]])
    weights = np.arange(8, dtype=np.float32).reshape(4, 2)
    (beats, latency), = run_dispatch(cfg, [(weights, indices)], seed=0, gap=0,
                                     backpressure=0)
    want, active = _want(weights, indices)
    assert beats == want and [b["count"] for b in beats][:4] == [4] * 4
    assert latency == dispatch_latency(cfg, 4, active) == 4 + 8 + 1


def test_the_tokens_th_beat_ends_the_batch():
    """Batches of ``tokens`` beats without ``last`` end at their ``tokens``-th beat."""
    cfg = build_config(MoeConfig, {"experts": 4, "top_k": 1, "tokens": 2})
    batches = [(np.ones((2, 1), np.float32), np.array([[3], [1]])),
               (np.ones((2, 1), np.float32), np.array([[2], [2]]))]
    got = run_dispatch(cfg, batches, seed=5, mark_last=False)
    assert [[(b["expert"], b["token"]) for b in beats] for beats, _ in got] == [
        [(1, 1), (3, 0)], [(2, 0), (2, 1)]]
