"""The memory mux (:class:`scoville.rtl.lib.memmux.MemoryMux`) in Amaranth's simulator against
its unit model (:class:`scoville.sim.cycles.memory.MemoryMux`), handshake for handshake, and
against what it promises: each client gets exactly its own responses' words, in order."""

import numpy as np
import pytest
from amaranth.lib import data

from scoville.rtl.lib.memmux import MemoryMux
from scoville.rtl.lib.params import ParamError
from scoville.sim.cycles.memory import MemoryMux as MuxModel
from scoville.sim.cycles.stream import Consumer, Producer, Schedule, Source

from .amsim import handshakes, step_alone

REQ = data.StructLayout({"addr": 16, "len": 6})


class _Flat(MemoryMux):
    """The mux with its client ports also named ``creq0``, ``crdata0``, ... (the names the
    simulation helper drives)."""

    def __getattr__(self, name):
        for kind in ("creq", "crdata"):
            if name.startswith(kind) and name[len(kind):].isdigit():
                return getattr(self, kind)[int(name[len(kind):])]
        raise AttributeError(name)


def _case(seed: int, clients: int, gap: float):
    rng = np.random.default_rng(seed)
    reqs = [[(int(rng.integers(0, 1 << 16)), int(rng.integers(1, 9)))
             for _ in range(int(rng.integers(1, 6)))] for _ in range(clients)]
    words = sum(n for r in reqs for _, n in r)
    valid = {f"creq{i}": Schedule([seed, i], gap) for i in range(clients)}
    valid["rdata"] = Schedule([seed, 99], gap)
    ready = {f"crdata{i}": Schedule([seed, 50 + i], gap) for i in range(clients)}
    ready["req"] = Schedule([seed, 98], gap)
    return reqs, words, valid, ready


@pytest.mark.parametrize("depth", [1, 3, 8])
@pytest.mark.parametrize(("clients", "gap"), [(2, 0.0), (2, 0.5), (3, 0.3), (5, 0.7)])
def test_unit_model_is_its_rtl(clients, gap, depth):
    seed = 7 * clients + depth + int(10 * gap)
    reqs, words, valid, ready = _case(seed, clients, gap)
    data_words = [int(w) for w in np.random.default_rng(seed).integers(0, 1 << 30, words)]
    per = [sum(n for _, n in r) for r in reqs]
    got = handshakes(_Flat(clients, REQ, 32, depth), {
        **{f"creq{i}": ([{"addr": a, "len": n} for a, n in r], valid[f"creq{i}"])
           for i, r in enumerate(reqs)},
        "rdata": (data_words, valid["rdata"])},
        {**{f"crdata{i}": (per[i], ready[f"crdata{i}"]) for i in range(clients)},
         "req": (sum(len(r) for r in reqs), ready["req"])})
    creq = [Producer(Source(valid[f"creq{i}"]), len(r), [n for _, n in r])
            for i, r in enumerate(reqs)]
    crdata = [Consumer(ready[f"crdata{i}"]) for i in range(clients)]
    req, rdata = Consumer(ready["req"]), Producer(Source(valid["rdata"]), words)
    unit = MuxModel(depth, creq, crdata, req, rdata)
    step_alone("memmux", unit, lambda: len(req.cycles) == sum(map(len, reqs))
               and all(len(c.cycles) == p for c, p in zip(crdata, per, strict=True)))
    want = {**{f"creq{i}": p.cycles for i, p in enumerate(creq)}, "rdata": rdata.cycles,
            **{f"crdata{i}": c.cycles for i, c in enumerate(crdata)}, "req": req.cycles}
    assert want == got


@pytest.mark.parametrize("depth", [1, 4])
def test_each_client_gets_its_own_words_in_order(depth):
    """In the RTL, a memory answering each request in order (word ``addr + j`` for its j-th
    word, from the cycle after it takes the request) under gaps and back-pressure on every
    stream: each client gets exactly its own requests' words, in its order, ``last`` with
    each request's last."""
    from amaranth.sim import Simulator

    clients = 3
    rng = np.random.default_rng(depth)
    reqs = [[(int(rng.integers(0, 1 << 12)) << 4, int(rng.integers(1, 9)))
             for _ in range(4)] for _ in range(clients)]
    want = [[(a + j, j == n - 1) for a, n in r for j in range(n)] for r in reqs]
    dut = MemoryMux(clients, REQ, 32, depth)
    got = [[] for _ in range(clients)]

    async def bench(ctx):
        sent = [0] * clients          # requests each client has had taken
        answers = []                  # the memory's words still to give, in order
        for _ in range(5000):
            if all(len(g) == len(w) for g, w in zip(got, want, strict=True)):
                return
            offer = [sent[i] < len(reqs[i]) and rng.random() >= 0.4 for i in range(clients)]
            for i in range(clients):
                ctx.set(dut.creq[i].valid, offer[i])
                if offer[i]:
                    addr, n = reqs[i][sent[i]]
                    ctx.set(dut.creq[i].payload, {"addr": addr, "len": n})
                ctx.set(dut.crdata[i].ready, rng.random() >= 0.4)
            ctx.set(dut.req.ready, rng.random() >= 0.3)
            word = bool(answers) and rng.random() >= 0.3
            ctx.set(dut.rdata.valid, word)
            if word:
                ctx.set(dut.rdata.payload, answers[0])
            taken_req = [offer[i] and ctx.get(dut.creq[i].ready) for i in range(clients)]
            to_memory = ctx.get(dut.req.valid) and ctx.get(dut.req.ready)
            memory_req = (int(ctx.get(dut.req.payload.addr)), int(ctx.get(dut.req.payload.len)))
            delivered = [ctx.get(dut.crdata[i].valid) and ctx.get(dut.crdata[i].ready)
                         for i in range(clients)]
            payloads = [(int(ctx.get(dut.crdata[i].payload)), bool(ctx.get(dut.last)))
                        for i in range(clients)]
            word_taken = word and ctx.get(dut.rdata.ready)
            await ctx.tick()
            assert sum(taken_req) == int(to_memory)
            for i in range(clients):
                if taken_req[i]:
                    assert memory_req == reqs[i][sent[i]]
                    sent[i] += 1
                if delivered[i]:
                    got[i].append(payloads[i])
            assert sum(delivered) == int(word_taken)
            if word_taken:
                answers.pop(0)
            if to_memory:
                answers += [memory_req[0] + j for j in range(memory_req[1])]
        raise AssertionError("no progress")

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == want


@pytest.mark.parametrize(("args", "match"), [((1, REQ, 32), "'clients' = 1"),
                                             ((2, REQ, 32, 0), "'depth' = 0")])
def test_bad_parameters_are_one_line(args, match):
    with pytest.raises(ParamError, match=match):
        MemoryMux(*args)
