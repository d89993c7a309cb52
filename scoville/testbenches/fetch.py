"""cocotb testbench of :class:`scoville.rtl.fetch.Fetch` with the harness's memory agent
serving its read requests, against :func:`scoville.sim.golden.fetch.fetch` and the timed model
:func:`scoville.sim.cycles.fetch.timing`.

Every test draws a memory image, builds commands, and checks: every read request the engine
makes (address and length) and every word it hands on, against the golden model; the cycle of
every handshake on the four streams (``cmd``, ``req``, ``rdata``, ``o``) against the timed
model, fed the same schedules and the same memory latency and bandwidth; and the ``rejected``
counter.

Tests: directed edges (one word, a burst and one more, the longest command, the last address,
every bad command) on a fast and on a slow memory; the memory agent's queue kept full (many
one-word commands, a long latency); a reset in the middle of a run; and the workload (random
commands under gaps and back-pressure on every stream).
"""

from __future__ import annotations

import cocotb
import numpy as np

from scoville.rtl.fetch import COUNTERS
from scoville.sim.cycles.fetch import timing
from scoville.sim.cycles.memory import MemoryAgent
from scoville.sim.golden.fetch import fetch
from scoville.sim.harness import MEM_DEPTH, MEM_QUEUE

from .bench import BlockBench
from .failures import Failure, Kind
from .freerun import Memory
from .kit import context

WATCH = ("counters",)

#: Streams whose beats cannot wait (no stall bin; :mod:`scoville.testbenches.coverage`): the
#: engine reserves buffer room before it asks, so ``rdata.ready`` is always high.
NEVER_WAITS = {"rdata": "the engine reserves room for a burst before it asks: always ready"}


def memory_image(cfg, rng) -> tuple[np.ndarray, list[int]]:
    """Random words for every address the harness's memory holds (the lower of
    ``2**addr_bits`` and :data:`~scoville.sim.harness.MEM_DEPTH`): as rows of bytes, most
    significant first, and as integers."""
    words = min(1 << cfg.addr_bits, MEM_DEPTH)
    size = -(-cfg.data_bits // 8)
    rows = rng.integers(0, 256, (words, size), dtype=np.uint8)
    rows[:, 0] &= (1 << (cfg.data_bits - 8 * (size - 1))) - 1
    if size <= 8:
        padded = np.zeros((words, 8), np.uint8)
        padded[:, 8 - size:] = rows
        values = padded.view(">u8")[:, 0].tolist()
    else:
        values = [int.from_bytes(r.tobytes(), "big") for r in rows]
    return rows, values


async def run_commands(dut, ctx, test: str, commands: list[tuple[int, int]], *, gaps: bool,
                       latency: int | None = None, bytes_per_cycle: int | None = None,
                       interrupt: bool = False):
    """Run ``commands`` (``(addr, len)``) and check requests, words, every handshake's cycle
    and the ``rejected`` counter. The memory's latency and bandwidth are the workload's unless
    given. Returns the timed model's prediction."""
    cfg, w = ctx.config, ctx.workload
    latency = w.mem_latency if latency is None else latency
    bpc = w.mem_bytes_per_cycle if bytes_per_cycle is None else bytes_per_cycle
    codec = ctx.codecs
    rows, values = memory_image(cfg, ctx.rng(7))
    want = fetch(cfg, values, commands)
    cmds = codec["cmd"].pack_bytes(addr=[a for a, _ in commands], len=[n for _, n in commands])
    tb = BlockBench(dut, ctx, test, sources=("cmd",), memories=("rdata",), sinks=("req", "o"),
                    gaps=gaps, watch=WATCH,
                    detail=f" (mem_latency={latency}, mem_bytes_per_cycle={bpc})")
    tb.source["cmd"].send(cmds)
    tb.memory["rdata"] = Memory(rows, len(want.words), latency, bpc, tb.memory_valid["rdata"])
    tb.sink["req"].expect(want.requests, label="requests", decode=lambda req: list(
        zip(req["addr"].tolist(), req["len"].tolist(), strict=True)))
    tb.sink["o"].expect(want.words, label="words")
    agent = MemoryAgent(latency, bpc, cfg.data_bits, tb.memory_valid["rdata"])
    model = tb.predict(timing, cfg, commands, agent, tb.valid["cmd"], tb.ready["req"],
                       tb.ready["o"])
    what = tb.what
    seen = await tb.run(model, interrupt=interrupt, zero=WATCH)
    tb.check([name for name, _ in COUNTERS], commands=len(commands), words=len(want.words),
             requests=len(want.requests), rejected=want.rejected)
    if seen.change["rejected"] != want.rejected:
        raise Failure(Kind.COUNTER, f"{what}: rejected {seen.change['rejected']}, expected "
                                    f"{want.rejected}")
    return model


def _limit(cfg) -> int:
    """The highest address the tests may touch, plus one."""
    return min(1 << cfg.addr_bits, MEM_DEPTH)


def edge_commands(cfg) -> list[tuple[int, int]]:
    """One word; a burst, one more, two bursts; the longest command; the last word of the
    address space; and every kind of bad command between good ones."""
    top = (1 << cfg.len_bits) - 1
    limit = _limit(cfg)
    b = cfg.burst
    lens = [1, b, b + 1, 2 * b, top, 1, 1]
    cmds = [(k * 37 % max(limit - n, 1), n) for k, n in enumerate(lens) if n <= min(top, limit)]
    cmds += [(limit - 1, 1), (max(limit - top, 0), min(top, limit))]
    if limit == 1 << cfg.addr_bits and top >= 2:  # one word past the end
        cmds.append((limit - 1, 2))
        if top <= limit:
            cmds.append((limit - top + 1, top))
    cmds += [(5, 0), (0, 0), (3, min(2, top))]  # nothing to read, then a good one after it
    return cmds


@cocotb.test()
async def test_edges(dut):
    """Directed commands on a memory that keeps up (1-cycle latency, a word per cycle), then on
    a slow one (long latency, a byte per cycle), streams keeping up."""
    ctx = context()
    cmds = edge_commands(ctx.config)
    await run_commands(dut, ctx, "test_edges_fast", cmds, gaps=False, latency=1,
                       bytes_per_cycle=1024)
    await run_commands(dut, ctx, "test_edges_slow", cmds, gaps=False, latency=60,
                       bytes_per_cycle=1)


@cocotb.test()
async def test_queue_full(dut):
    """Many one-word commands on a memory with a latency far longer than the agent's queue
    can cover, under gaps and back-pressure: the queue, then the buffer, limits the requests."""
    ctx = context()
    rng = ctx.rng(3)
    limit = _limit(ctx.config)
    cmds = [(int(a), 1) for a in rng.integers(0, limit, 300)]
    model = await run_commands(dut, ctx, "test_queue_full", cmds, gaps=True, latency=200)
    # One word per request: request i is answered by word i. The test is only a test of the
    # queue if some request found it full.
    req, words = model.handshakes["req"], model.handshakes["rdata"]
    most = max(sum(r <= t for r in req) - k for k, t in enumerate(words))
    if ctx.config.buffer > MEM_QUEUE:
        assert most >= MEM_QUEUE, f"at most {most} requests waited: the queue never filled"


def random_commands(cfg, rng, count: int, max_len: int) -> list[tuple[int, int]]:
    """``count`` random commands of 1 .. ``max_len`` words anywhere in the memory, one in
    twenty bad (no words, or past the last address)."""
    limit = _limit(cfg)
    top = min((1 << cfg.len_bits) - 1, max_len or (1 << cfg.len_bits) - 1, limit)
    out = []
    for _ in range(count):
        n = int(rng.integers(1, top + 1))
        if rng.random() < 0.05:
            if rng.random() < 0.5 or n == 1 or limit < 1 << cfg.addr_bits:
                out.append((int(rng.integers(0, limit)), 0))
            else:  # starts in the memory, ends past it
                out.append((limit - n + 1 + int(rng.integers(0, n - 1)), n))
            continue
        out.append((int(rng.integers(0, limit - n + 1)), n))
    return out


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of random commands (requests outstanding, words in the buffer, a
    word waiting on ``o``): the engine comes back empty, then runs them all correctly."""
    ctx = context()
    cmds = random_commands(ctx.config, ctx.rng(5), 40, ctx.workload.max_len)
    await run_commands(dut, ctx, "test_reset", cmds, gaps=True, interrupt=True)


@cocotb.test()
async def test_workload(dut):
    """``count`` random commands under random valid gaps (commands, the memory's words) and
    ready back-pressure (the memory's request port, the consumer)."""
    ctx = context()
    cmds = random_commands(ctx.config, ctx.rng(1), ctx.workload.count, ctx.workload.max_len)
    await run_commands(dut, ctx, "test_workload", cmds, gaps=True)
