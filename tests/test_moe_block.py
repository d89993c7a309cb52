"""The MoE block (:class:`scoville.rtl.moe.Moe`) in Amaranth's simulator, end to end: the
router's weights loaded, a batch of tokens in, the experts' weights served from a memory
image on the block's own requests (with a latency and gaps), the output equal to
:func:`scoville.sim.golden.moe.gpt_oss_moe` / :func:`~scoville.sim.golden.moe.deepseek_moe`
bit for bit. (The cocotb testbench on both simulators, with every handshake predicted, is
the next step.)"""

from collections import deque

import numpy as np
from amaranth.sim import Simulator

from scoville.rtl.moe import STATUS, Moe, MoeConfig
from scoville.rtl.params import build_config
from scoville.sim.cycles import moe as timed
from scoville.sim.cycles.memory import MemoryAgent
from scoville.sim.cycles.stream import ALWAYS, Schedule, Source, first_difference
from scoville.sim.golden.moe import (
    deepseek_moe,
    deepseek_route,
    deepseek_weight_image,
    dispatch,
    gpt_oss_moe,
    gpt_oss_route,
    gpt_oss_weight_image,
)

from .amsim import Edges, receive_scheduled, send, send_scheduled

#: Small blocks: 4 experts of 32 x 32, top-2, batches of 2, a 2 x 8 array, a 64-bit weight
#: port.
SMALL = {"experts": 4, "top_k": 2, "hidden": 32, "intermediate": 32, "tokens": 2,
         "array.rows": 2, "array.cols": 8, "weight_port_bits": 64}


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32).astype(np.int64).tolist()


def run_block(cfg, router_weight, router_bias, image, x, routing, *, seed, latency=5,
              bytes_per_cycle=4, gap=0.2, mem_gap=None, backpressure=0.3):
    """Load the router, run one batch of ``x`` with random gaps on ``x`` and the memory's
    words and back-pressure on ``o`` (replayable schedules), the weights served by the
    harness's memory agent model from ``image``; check every handshake on ``cmd``, ``x``,
    ``req``, ``rdata`` and ``o`` (cycle 0: the first cycle ``cmd`` is offered) against the
    timed model given the golden ``routing`` (weights, indices). Returns the output (T, H)
    float32 and the status."""
    dut = Moe(cfg)
    T, H, P = len(x), cfg.hidden, cfg.weight_port_bits
    sched = {name: Schedule((seed, k), g) for k, (name, g) in enumerate(
        (("x", gap), ("rdata", gap if mem_gap is None else mem_gap),
                        ("o", backpressure)))}
    agent = MemoryAgent(latency, bytes_per_cycle, P, valid=sched["rdata"])
    hs = {name: [] for name in ("cmd", "x", "req", "rdata", "o")}
    out, status, start = [], [], []

    async def load(ctx):
        edges = Edges()
        for h in range(H + 1):
            col = router_weight[:, h] if h < H else router_bias
            await send(ctx, dut.wr, {"addr": h, "data": _bits(col)}, edges)
        ctx.set(dut.wr.valid, 0)
        start.append(True)

    async def memory(ctx):
        while not start:
            await ctx.tick()
        edges, words = Edges(), deque()
        while True:
            t = edges.n
            ctx.set(dut.req.ready, agent.room())
            offered = agent.offers(t)
            ctx.set(dut.rdata.valid, offered)
            if offered:
                ctx.set(dut.rdata.payload, image[words[0]])
            taken = offered and ctx.get(dut.rdata.ready)
            request = None
            if agent.room() and ctx.get(dut.req.valid):
                r = ctx.get(dut.req.payload)
                request = int(r.len)
                words.extend(range(int(r.addr), int(r.addr) + request))
                hs["req"].append(t)
            await edges.tick(ctx)
            agent.step(t, offered, taken, request)
            if taken:
                words.popleft()

    async def inputs(ctx):
        while not start:
            await ctx.tick()
        edges = Edges()
        hs["cmd"].append(await send_scheduled(ctx, dut.cmd, {"tokens": T}, edges, ALWAYS))
        for t in range(T):
            for h in range(H):
                hs["x"].append(await send_scheduled(ctx, dut.x, _bits(x[t, h:h + 1])[0],
                                                    edges, sched["x"]))

    async def outputs(ctx):
        while not start:
            await ctx.tick()
        edges = Edges()
        for _ in range(T * H // cfg.array.cols):
            p, when = await receive_scheduled(ctx, dut.o, edges, sched["o"])
            out.append([int(v) for v in p])
            hs["o"].append(when)
        status.append(ctx.get(dut.status))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(load)
    sim.add_testbench(memory, background=True)
    sim.add_testbench(inputs)
    sim.add_testbench(outputs)
    sim.run()
    hs["rdata"] = agent.cycles
    got = np.array(out, np.uint32).view(np.float32).reshape(T, H)
    groups = tuple((e, len(rows)) for e, rows, _ in dispatch(*routing))
    model = timed.timing(cfg, [timed.Batch(T, groups)], ready={"o": sched["o"]},
                         sources={"x": Source(sched["x"])},
                         memory=MemoryAgent(latency, bytes_per_cycle, P,
                                            valid=sched["rdata"]))
    assert first_difference(model.handshakes, hs) == ""
    assert {k: len(v) for k, v in hs.items()} == {k: len(v) for k, v in model.handshakes.items()}
    return got, status[0]


def _gpt_oss(cfg, rng, t):
    E, H, I_ = cfg.experts, cfg.hidden, cfg.intermediate
    return dict(
        x=rng.standard_normal((t, H)).astype(np.float32),
        router_weight=(rng.standard_normal((E, H)) / 4).astype(np.float32),
        router_bias=(rng.standard_normal(E) / 10).astype(np.float32),
        gate_up_proj=(rng.standard_normal((E, H, 2 * I_)) / 4).astype(np.float32),
        gate_up_proj_bias=(rng.standard_normal((E, 2 * I_)) / 4).astype(np.float32),
        down_proj=(rng.standard_normal((E, I_, H)) / 4).astype(np.float32),
        down_proj_bias=(rng.standard_normal((E, H)) / 4).astype(np.float32))


def test_gpt_oss_block_is_the_golden_layer():
    """GPT-OSS: biases, the clamped SwiGLU, MXFP8 activations."""
    seed = 1
    cfg = build_config(MoeConfig, SMALL)
    rng = np.random.default_rng(seed)
    w = _gpt_oss(cfg, rng, cfg.tokens)
    want = gpt_oss_moe(**w, top_k=cfg.top_k, act_fmt=cfg.act_fmt, config=cfg)
    image = gpt_oss_weight_image(cfg, w["gate_up_proj"], w["gate_up_proj_bias"],
                                 w["down_proj"], w["down_proj_bias"])
    routing = gpt_oss_route(w["x"], w["router_weight"], w["router_bias"], top_k=cfg.top_k)
    # A memory that keeps up (a word a cycle, no gaps): the array is the bound, so every
    # cycle of the sequencer shows on the streams.
    got, status = run_block(cfg, w["router_weight"], w["router_bias"], image, w["x"], routing,
                            seed=seed, latency=2, bytes_per_cycle=8, mem_gap=0.0)
    assert status == STATUS["ok"]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_deepseek_block_with_a_shared_expert_is_the_golden_layer():
    """DeepSeek: grouped routing, no biases, SiLU, MXFP4 activations, a shared expert."""
    cfg = build_config(MoeConfig, {**SMALL, "router": "deepseek", "n_group": 2,
                                   "topk_group": 1, "shared": 1,
                                   "routed_scaling_factor": 2.5, "act_fmt": "mxfp4"})
    rng = np.random.default_rng(3)
    E, H, I_, T = cfg.experts, cfg.hidden, cfg.intermediate, cfg.tokens
    x = rng.standard_normal((T, H)).astype(np.float32)
    rw = (rng.standard_normal((E, H)) / 4).astype(np.float32)
    cb = (rng.standard_normal(E) / 10).astype(np.float32)
    gu = (rng.standard_normal((E, 2 * I_, H)) / 4).astype(np.float32)
    dn = (rng.standard_normal((E, H, I_)) / 4).astype(np.float32)
    sg, su = ((rng.standard_normal((I_, H)) / 4).astype(np.float32) for _ in range(2))
    sd = (rng.standard_normal((H, I_)) / 4).astype(np.float32)
    want = deepseek_moe(x, rw, cb, gu, dn, sg, su, sd, top_k=cfg.top_k, n_group=2,
                        topk_group=1, routed_scaling_factor=2.5, act_fmt=cfg.act_fmt,
                        config=cfg)
    image = deepseek_weight_image(cfg, gu, dn, sg, su, sd)
    routing = deepseek_route(x, rw, cb, top_k=cfg.top_k, n_group=2, topk_group=1,
                             routed_scaling_factor=2.5)
    got, status = run_block(cfg, rw, cb, image, x, routing, seed=3)
    assert status == STATUS["ok"]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_batch_of_no_tokens_or_too_many_is_refused_and_nothing_is_taken():
    """``tokens`` 0 or above the config's: status ``bad_tokens``, no ``x`` taken, no weight
    requested, and the block takes the next command."""
    cfg = build_config(MoeConfig, SMALL)
    dut = Moe(cfg)
    seen = []

    async def bench(ctx):
        edges = Edges()
        ctx.set(dut.x.valid, 1)
        ctx.set(dut.req.ready, 1)
        for tokens in (0, cfg.tokens + 1):
            await send(ctx, dut.cmd, {"tokens": tokens}, edges)
            ctx.set(dut.cmd.valid, 0)
            for _ in range(20):
                seen.append((ctx.get(dut.x.ready), ctx.get(dut.req.valid)))
                await edges.tick(ctx)
            seen.append(ctx.get(dut.status))
        seen.append(ctx.get(dut.cmd.ready))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen[20] == seen[41] == STATUS["bad_tokens"]
    assert not any(x or r for x, r in seen[:20] + seen[21:41])
    assert seen[-1] == 1
