"""The fetch engine and the harness's memory agent: golden and timed models against hand-worked
cases, config errors, the RTL on both simulators, and the agent's checks firing."""

import dataclasses
import re

import pytest
from amaranth.hdl import Module

from scoville.blocks import get_block
from scoville.rtl.fetch import Fetch, FetchConfig
from scoville.rtl.lib.params import ParamError
from scoville.sim.cycles.fetch import timing
from scoville.sim.cycles.memory import MemoryAgent
from scoville.sim.cycles.stream import Schedule, Source
from scoville.sim.golden.fetch import fetch
from scoville.sim.harness import MEM_QUEUE, harness_verilog

from .simcheck import assert_passed, explain, simulate


def test_golden_splits_into_bursts_and_rejects_bad_commands():
    mem = list(range(100, 116))
    cfg = FetchConfig(addr_bits=4, burst=2)
    got = fetch(cfg, mem, [(2, 5), (0, 0), (15, 2), (14, 2), (0, 1)])
    assert got.requests == [(2, 2), (4, 2), (6, 1), (14, 2), (0, 1)]
    assert got.words == [102, 103, 104, 105, 106, 114, 115, 100]
    assert got.rejected == 2
    assert got.accepted == [True, False, False, True, True]
    with pytest.raises(ValueError, match="addr_bits"):
        fetch(cfg, mem, [(16, 1)])


@pytest.mark.parametrize(("n", "latency"), [(1, 1), (7, 1), (40, 5), (64, 30)])
def test_one_command_on_a_fast_memory_takes_latency_plus_words(n, latency):
    """Command in cycle 0, first request in cycle 1, its first word in cycle 1 + latency, a
    word per cycle, each on ``o`` two cycles after it arrives (a buffer big enough)."""
    cfg = FetchConfig(burst=8, buffer=64)
    model = timing(cfg, [(0, n)], MemoryAgent(latency, 8, 64))
    assert model.handshakes["cmd"] == [0]
    assert model.handshakes["req"][0] == 1
    assert model.handshakes["rdata"] == [1 + latency + k for k in range(n)]
    assert model.handshakes["o"] == [3 + latency + k for k in range(n)]


@pytest.mark.parametrize(("bpc", "period"), [(1, 8), (2, 4), (4, 2), (8, 1), (64, 1)])
def test_bandwidth_sets_the_word_rate(bpc, period):
    """64-bit words at ``bpc`` bytes per cycle: a word every ``8 / bpc`` cycles, none faster
    than one per cycle."""
    model = timing(FetchConfig(buffer=64), [(0, 64)], MemoryAgent(3, bpc, 64))
    got = model.handshakes["rdata"]
    assert [b - a for a, b in zip(got, got[1:], strict=False)] == [period] * 63


def test_fractional_bandwidth_averages_out():
    """3 bytes per cycle of 8-byte words: 3 words every 8 cycles, no byte of budget lost."""
    got = timing(FetchConfig(buffer=64), [(0, 240)], MemoryAgent(1, 3, 64)).handshakes["rdata"]
    assert got[-1] - got[0] == pytest.approx(239 * 8 / 3, abs=2)


def test_the_buffer_bounds_the_words_in_flight():
    """With a long latency, requests wait for room: never more than ``buffer`` words requested
    and not yet taken, so a run of N words takes about N / buffer round trips."""
    cfg = FetchConfig(burst=4, buffer=8)
    model = timing(cfg, [(0, 64)], MemoryAgent(50, 64, 64))
    req, out = model.handshakes["req"], model.handshakes["o"]
    for t in req:
        issued = 4 * sum(r <= t for r in req)
        taken = sum(o < t for o in out)
        assert issued - taken <= 8
    assert len(req) == 16
    # Each group of 8 words waits a round trip: request, 50 cycles, 2 through the buffer.
    assert model.cycles > 8 * 50


def test_the_agent_queue_bounds_requests_outstanding():
    cfg = FetchConfig(burst=1, buffer=64, len_bits=8)
    model = timing(cfg, [(k, 1) for k in range(40)], MemoryAgent(500, 64, 64))
    req = model.handshakes["req"]
    first_word = model.handshakes["rdata"][0]
    assert sum(t < first_word for t in req) == MEM_QUEUE


def test_back_pressure_and_gaps_are_followed():
    """A consumer that is never ready in even cycles takes words only in odd ones; the model
    then agrees with itself fed the same schedules twice (replayable)."""
    cfg = FetchConfig()
    cmds = [(3 * k, 5) for k in range(20)]

    def run():
        return timing(cfg, cmds, MemoryAgent(4, 8, 64, Schedule([1, 2], 0.4)),
                      Source(Schedule([1, 3], 0.3)), Schedule([1, 4], 0.3), Schedule([1, 5], 0.5))

    assert run().handshakes == run().handshakes
    ready = Schedule([1, 5], 0.5)
    assert all(ready[t] for t in run().handshakes["o"])


@pytest.mark.parametrize("bad", [{"data_bits": 4}, {"addr_bits": 33}, {"len_bits": 0},
                                 {"buffer": 2}, {"burst": 0}, {"burst": 17, "buffer": 16}])
def test_config_rejects_bad_values(bad):
    name = "burst" if "burst" in bad else next(iter(bad))
    with pytest.raises(ParamError, match=f"'{name}'.*allowed"):
        FetchConfig(**bad)


@pytest.mark.parametrize(("latency", "bpc", "name"), [(0, 8, "mem_latency"),
                                                      (5, 0, "mem_bytes_per_cycle")])
def test_agent_rejects_bad_latency_and_bandwidth(latency, bpc, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        MemoryAgent(latency, bpc, 64)


def test_harness_rejects_memory_ports_that_are_not_request_and_data_streams():
    class Wrong(Fetch):
        memory_ports = {"o": "rdata"}

    wrong = Wrong(FetchConfig())
    wrong._MustUse__silence = True  # built for its signature, never elaborated
    with pytest.raises(ValueError, match="'o' is not an output stream|payload of request"):
        harness_verilog(wrong, "dut", "top")


@pytest.mark.sim
@pytest.mark.parametrize("params", [
    {"count": 150},
    {"data_bits": 20, "addr_bits": 6, "len_bits": 4, "burst": 3, "buffer": 4, "count": 200,
     "mem_latency": 7, "mem_bytes_per_cycle": 1},
    {"data_bits": 256, "burst": 1, "buffer": 3, "count": 60, "max_len": 9,
     "mem_latency": 3, "mem_bytes_per_cycle": 48, "gap": 0.5, "backpressure": 0.6},
    {"data_bits": 8, "addr_bits": 4, "len_bits": 1, "burst": 1, "buffer": 3, "count": 60},
], ids=["default", "narrow-slow", "wide-tiny-buffer", "one-word-commands"])
def test_fetch_rtl(simulator, seed, params):
    assert_passed(simulate("fetch", simulator, seed, **params))


class OverreachingFetch(Fetch):
    """Fetch whose requests that end at the top of the address space ask for one word more:
    a word past the agent's memory."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.good = good = Fetch(self.config)
        top = good.req.payload.addr + good.req.payload.len == 1 << self.config.addr_bits
        for name in ("cmd", "rdata"):
            m.d.comb += [getattr(good, name).valid.eq(getattr(self, name).valid),
                         getattr(self, name).ready.eq(getattr(good, name).ready),
                         getattr(good, name).payload.eq(getattr(self, name).payload)]
        m.d.comb += [self.req.valid.eq(good.req.valid), good.req.ready.eq(self.req.ready),
                     self.req.payload.addr.eq(good.req.payload.addr),
                     self.req.payload.len.eq(good.req.payload.len + top),
                     self.o.valid.eq(good.o.valid), good.o.ready.eq(self.o.ready),
                     self.o.payload.eq(good.o.payload), self.counters.eq(good.counters)]
        return m


@pytest.mark.sim
def test_a_request_past_the_memory_fails_naming_the_stream_and_cycle(simulator, seed):
    block = dataclasses.replace(get_block("fetch"), component=OverreachingFetch)
    result = simulate("fetch", simulator, seed, block=block, count=20)
    failed = {t.name: t.message for t in result.tests if not t.passed}
    assert "test_edges" in failed, explain(result)
    assert re.search(r"bad read request on stream req in cycle \d+", failed["test_edges"]), (
        failed["test_edges"])
