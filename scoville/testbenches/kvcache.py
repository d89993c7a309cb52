"""cocotb testbench of :class:`scoville.rtl.kvcache.KvCache` against the reference model
:class:`scoville.sim.golden.kvcache.KvCacheModel` and the timed model
:mod:`scoville.sim.cycles.kvcache`.

Every test builds a request sequence, runs it through the reference model for the expected
answers and read lines, drives ``req`` and ``wd`` and takes ``rd`` and ``resp`` through the
free-running harness, and checks: every answer (status, sequence, length, free pages) and every
read line bit for bit; the cycle of every handshake on the four streams against the timed model
:func:`~scoville.sim.cycles.kvcache.timing` (fed the same schedules), and every counter against
the model's count of its kind; the lines read, written and copied against the reference model;
the cycle count against the closed-form time line when the streams keep up; and, once every
sequence is freed, every page free.

Tests: directed edges (page boundaries, copy-on-write on both sides of a fork, a full cache,
every bad request); random requests with streams that keep up; a read of a whole full
sequence (the bandwidth); and the workload (``count`` random requests under gaps and
back-pressure).
"""

from __future__ import annotations

import cocotb

from scoville.rtl.kvcache import OPS, STATUS, Op, Status
from scoville.sim.cycles.kvcache import (
    COUNTERS,
    engine_cycles,
    request_cycles,
    run_cycles,
    timing,
)
from scoville.sim.golden.kvcache import KvCacheModel, Outcome, Request, encode_heads

from .bench import BlockBench
from .coverage import command_bins
from .failures import Failure, Kind
from .kit import context, read_int

WATCH = ("counters", "free_pages")
_NAMES = {v: k for k, v in STATUS.items()}
_OPS = {v: k for k, v in OPS.items()}

#: Coverage bins (:mod:`scoville.testbenches.coverage`), hit from each request and its answer.
BINS = {
    **command_bins("request", OPS, STATUS),
    "append:new_page": "an append that crosses into a new page (takes one from the free list)",
    "append:copy_on_write": "an append to a page shared by a fork (copied first)",
    "walk:several_pages": "a free or fork that walks more than one page",
    "pool:empty": "an answer with no page left free",
    "read:several_pages": "a read of more lines than a page holds",
}


def _cover(cov, cfg, reqs, outs) -> None:
    for r, o in zip(reqs, outs, strict=True):
        cov.hit(f"op:{_OPS.get(r.op, 'undefined')}")
        cov.hit(f"status:{_NAMES[o.status]}")
        cov.hit_if("append:new_page", o.new_page)
        cov.hit_if("append:copy_on_write", o.copied)
        cov.hit_if("walk:several_pages", o.walked > 1)
        cov.hit_if("pool:empty", o.free == 0)
        cov.hit_if("read:several_pages", len(o.data) > cfg.page_lines)


class LinePool:
    """Appends' lines, drawn ``batch`` appends at a time (the encoding is vectorized): K and V
    of every head from random reals through the storage format, or (one append in five) raw
    random bits, padding included (the cache stores bits)."""

    def __init__(self, cfg, rng, batch: int = 256):
        self.cfg, self.rng, self.batch = cfg, rng, batch
        self._ready: list[tuple[int, ...]] = []

    def take(self) -> tuple[int, ...]:
        """One append's lines."""
        if not self._ready:
            self._draw()
        return self._ready.pop()

    def _draw(self) -> None:
        cfg, rng, n = self.cfg, self.rng, self.batch
        beats = cfg.append_beats
        raw = rng.random(n) < 0.2
        size = -(-cfg.line_bits // 8)
        bits = rng.bytes(n * beats * size)
        mask = (1 << cfg.line_bits) - 1
        scale = 2.0 ** rng.integers(-8, 9, (n, 2, cfg.kv_heads, 1))
        values = rng.standard_normal((n, 2, cfg.kv_heads, cfg.head_dim)) * scale
        coded = encode_heads(cfg, values.reshape(-1, cfg.head_dim))
        out = []
        for k in range(n):
            if raw[k]:
                at = k * beats * size
                out.append(tuple(int.from_bytes(bits[at + j * size: at + (j + 1) * size],
                                                "little") & mask for j in range(beats)))
            else:
                out.append(tuple(coded[k * beats:(k + 1) * beats]))
        self._ready = out[::-1]


def random_lines(cfg, rng) -> tuple[int, ...]:
    """One append's random lines (a :class:`LinePool` of one)."""
    return LinePool(cfg, rng, batch=1).take()


class Script:
    """A request sequence and the reference model's outcome of each."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.model = KvCacheModel(cfg)
        self.requests: list[Request] = []
        self.outcomes: list[Outcome] = []
        self._lines: LinePool | None = None

    def __call__(self, op: str | int, **fields) -> Outcome:
        req = Request(OPS[op] if isinstance(op, str) else op, **fields)
        self.requests.append(req)
        self.outcomes.append(self.model.apply(req))
        return self.outcomes[-1]

    def lines(self, rng) -> tuple[int, ...]:
        """One append's random lines (:class:`LinePool`, drawing from ``rng``)."""
        if self._lines is None:
            self._lines = LinePool(self.cfg, rng)
        return self._lines.take()

    def append(self, seq: int, rng) -> Outcome:
        return self("append", seq=seq, lines=self.lines(rng))

    def free_all(self) -> None:
        for seq in sorted(self.model.seqs):
            self("free", seq=seq)


def random_script(cfg, rng, count: int, max_read: int = 0) -> Script:
    """``count`` random requests, steered by the reference model so that most are valid and
    the cache fills up now and then; then every sequence freed."""
    sc = Script(cfg)
    pt = cfg.page_tokens
    for _ in range(count):
        alive = sorted(sc.model.seqs)
        u = rng.random()
        if u >= 0.84 and u < 0.90 and rng.random() < sc.model.free / cfg.pages:
            u = 0.2
        seq = alive[int(rng.integers(len(alive)))] if alive else 0
        n = len(sc.model.seqs[seq].tokens) if alive else 0
        if not alive or u < 0.05:
            sc("alloc")
        elif u < 0.50:
            sc.append(seq, rng)
        elif u < 0.76 and n:
            start = int(rng.integers(0, n))
            longest = min(n - start, max_read or n)
            sc("read", seq=seq, kv=int(rng.integers(2)), head=int(rng.integers(cfg.kv_heads)),
               start=start, count=int(rng.integers(1, longest + 1)), **line_window(cfg, rng))
        elif u < 0.84:
            cut = int(rng.integers(0, n + 1))
            if n > pt and rng.random() < 0.5:
                cut = int(rng.integers(1, n // pt + 1)) * pt - int(rng.integers(0, 2))
            sc("fork", seq=seq, count=cut)
        elif u < 0.90:
            sc("free", seq=seq)
        else:
            bad_request(sc, cfg, rng, seq, n)
    # End on a request that waits for the read engine, so the last answer follows every line.
    sc.free_all()
    sc("alloc")
    sc.free_all()
    return sc


def line_window(cfg, rng) -> dict[str, int]:
    """A read's window of each token's lines: half the reads take whole tokens (``nlines`` =
    0), the rest a random window."""
    tl = cfg.token_lines
    if rng.random() < 0.5:
        return {"line0": int(rng.integers(tl)) if rng.random() < 0.3 else 0, "nlines": 0}
    line0 = int(rng.integers(tl))
    return {"line0": line0, "nlines": int(rng.integers(1, tl - line0 + 1))}


def bad_request(sc: Script, cfg, rng, seq: int, n: int) -> None:
    """One request that must fail, of a random kind."""
    dead = [s for s in range(cfg.max_seqs) if s not in sc.model.seqs]
    unknown = int(rng.choice(dead)) if dead and rng.random() < 0.6 else int(
        rng.integers(cfg.max_seqs, 256))
    kind = int(rng.integers(8))
    tl = cfg.token_lines
    if kind == 7 and n:  # a line window past the token's end
        line0 = int(rng.integers(tl, tl + 3)) if rng.random() < 0.5 else int(rng.integers(tl))
        sc("read", seq=seq, count=1, line0=line0,
           nlines=tl - line0 + 1 + int(rng.integers(3)) if line0 < tl else 0)
    elif kind == 0:
        sc(["free", "read", "fork"][int(rng.integers(3))], seq=unknown, count=1)
    elif kind == 1:
        sc("append", seq=unknown, lines=sc.lines(rng))
    elif kind == 2:
        sc("read", seq=seq, head=int(rng.integers(cfg.kv_heads, 256)), count=1)
    elif kind == 3:
        sc("read", seq=seq, start=int(rng.integers(0, n + 2)), count=n + 1)
    elif kind == 4:
        sc("read", seq=seq, start=int(rng.integers(0, n + 1)), count=0)
    elif kind == 5:
        sc("fork", seq=seq, count=n + 1 + int(rng.integers(0, 3)))
    elif kind == 6:
        sc(int(rng.integers(5, 8)), seq=seq)
    else:
        sc(["free", "read", "fork"][int(rng.integers(3))], seq=unknown, count=1)


async def run_script(dut, ctx, test: str, sc: Script, *, gaps: bool,
                     interrupt: bool = False) -> dict:
    """Run ``sc`` through the RTL and check answers, read lines, handshake cycles and
    counters. ``interrupt``: first run the same script halfway and reset the cache in the
    middle of it."""
    cfg = ctx.config
    reqs, outs = sc.requests, sc.outcomes
    lines = [line for r in reqs if r.op == Op.APPEND for line in r.lines]
    want_resp = [o.word() for o in outs]
    lines_rd, last_rd, where = [], [], []
    for k, o in enumerate(outs):
        for i, line in enumerate(o.data):
            lines_rd.append(line)
            last_rd.append(int(i == len(o.data) - 1))
            where.append((k, i))
    want_rd = ctx.codecs["rd"].pack(data=lines_rd, last=last_rd) if lines_rd else []
    assert reqs[-1].op != Op.APPEND, "a script must not end on an append"
    model = sum(request_cycles(cfg, o) for o in outs)
    engine = sum(engine_cycles(o) for o in outs)

    tb = BlockBench(dut, ctx, test, sources=("req", "wd"), sinks=("rd", "resp"), gaps=gaps,
                    watch=WATCH)
    tb.source["req"].send([r.word() for r in reqs])
    tb.source["wd"].send(lines)

    def where_resp(k):
        return (f"request {k}: {_OPS.get(reqs[k].op, reqs[k].op)} {reqs[k]}; expected "
                f"{_NAMES[outs[k].status]}")

    def where_rd(j):
        k, i = where[j]
        return f"request {k}: {reqs[k]}, line {i}"

    tb.sink["rd"].expect(want_rd, where=where_rd, label="read lines")
    tb.sink["resp"].expect(want_resp, where=where_resp, label="answers", kind=Kind.STATUS)
    timed = tb.predict(timing, cfg, outs, tb.valid, tb.ready)
    what = tb.what

    def all_free():
        free = read_int(dut.free_pages, "free_pages")
        if free != cfg.pages:
            raise Failure(Kind.COUNTER, f"{what}: free_pages {free} != {cfg.pages} after a "
                                        "reset")

    seen = await tb.run(timed, interrupt=interrupt, after_reset=all_free)
    _cover(ctx.coverage, cfg, reqs, outs)
    counters = seen.change
    reads = sum(1 for o in outs if o.op == Op.READ and o.data)
    metrics = tb.check(
        COUNTERS, closed_form_cycles=run_cycles(cfg, outs),
        request_model_cycles=model, engine_model_cycles=engine, requests=len(reqs), reads=reads,
        read_lines=len(want_rd), read_bandwidth_utilization=(
            counters["reads"] / counters["read_cycles"] if counters["read_cycles"] else 0.0),
        statuses={name: sum(o.status == code for o in outs) for name, code in STATUS.items()},
        copies=sum(o.copied for o in outs),
    )
    # The lines moved, against the reference model.
    line_count = sum(len(r.lines) for r, o in zip(reqs, outs, strict=True)
                     if o.op == Op.APPEND and o.status == Status.OK)
    expect = {"reads": len(want_rd), "writes": line_count,
              "copies": sum(o.copied for o in outs) * cfg.page_lines}
    for name, value in expect.items():
        if counters[name] != value:
            raise Failure(Kind.COUNTER, f"{what}: counter {name} {counters[name]} != {value}")
    if not gaps and seen.cycles != run_cycles(cfg, outs):
        raise Failure(Kind.TIMING, f"{what}: cycles {seen.cycles} != closed form "
                                   f"{run_cycles(cfg, outs)}")
    free = read_int(dut.free_pages, "free_pages")
    if free != sc.model.free:
        raise Failure(Kind.COUNTER, f"{what}: free_pages {free} != model {sc.model.free}")
    return metrics


@cocotb.test()
async def test_edges(dut):
    """Directed: sequences up to the limit and one too many; appends across page boundaries;
    reads that start and end inside pages and cross them; forks inside a page and at a page
    boundary, with appends on both sides (copy-on-write); appends while a read streams (into
    the sequence being read, and a copy-on-write that waits for the read); the cache filled
    until an append answers full, then read back intact; every bad request; everything
    freed."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(1)
    sc = Script(cfg)
    pt = cfg.page_tokens
    seqs = [sc("alloc").seq for _ in range(cfg.max_seqs)]
    sc("alloc")
    a = seqs[0]
    for _ in range(2 * pt + 1):
        sc.append(a, rng)
    n = 2 * pt + 1
    sc("read", seq=a, kv=0, head=0, start=0, count=n)
    sc("read", seq=a, kv=1, head=cfg.kv_heads - 1, start=max(pt - 1, 0), count=min(pt + 2, n))
    sc("read", seq=a, kv=1, head=0, start=n - 1, count=1)
    tl = cfg.token_lines  # windows: the last line of each token, then all but the first
    sc("read", seq=a, kv=0, head=0, start=pt - 1 if pt > 1 else 0, count=min(pt + 2, n),
       line0=tl - 1, nlines=1)
    sc("read", seq=a, kv=1, head=cfg.kv_heads - 1, start=0, count=n, line0=min(1, tl - 1))
    for s in seqs[1:]:
        sc("free", seq=s)
    inside = sc("fork", seq=a, count=pt + (pt > 1))
    edge = sc("fork", seq=a, count=pt)
    for s in (inside.seq, a, edge.seq, inside.seq, a):
        sc.append(s, rng)
    for s in (a, inside.seq, edge.seq):
        length = len(sc.model.seqs[s].tokens)
        sc("read", seq=s, kv=0, head=0, start=0, count=length)
        sc("read", seq=s, kv=1, head=cfg.kv_heads - 1, start=0, count=length)
    # Appends while a read streams: a copy-on-write (it waits for the read), then an append
    # into the sequence being read.
    late = sc("fork", seq=a, count=pt + 1)
    sc("read", seq=a, kv=1, head=0, start=0, count=len(sc.model.seqs[a].tokens))
    sc.append(late.seq, rng)
    sc("read", seq=a, kv=0, head=cfg.kv_heads - 1, start=1, count=pt + 1)
    sc.append(a, rng)
    sc("read", seq=late.seq, kv=0, head=0, start=0, count=len(sc.model.seqs[late.seq].tokens))
    if late.seq != a:
        sc("free", seq=late.seq)
    while sc.model.free:
        sc.append(edge.seq, rng)
    for _ in range(pt + 1):
        sc.append(edge.seq, rng)
    sc.append(inside.seq, rng)
    for s in sorted(sc.model.seqs):
        sc("read", seq=s, kv=1, head=0, start=0, count=len(sc.model.seqs[s].tokens))
    sc("free", seq=cfg.max_seqs)
    sc("free", seq=255)
    dead = next((s for s in range(cfg.max_seqs) if s not in sc.model.seqs), 255)
    sc("read", seq=dead, count=1)
    sc("append", seq=dead, lines=sc.lines(rng))
    sc("read", seq=a, head=cfg.kv_heads, count=1)
    sc("read", seq=a, head=255, count=1)
    length = len(sc.model.seqs[a].tokens)
    sc("read", seq=a, start=0, count=length + 1)
    sc("read", seq=a, start=length, count=1)
    sc("read", seq=a, start=0, count=0)
    sc("read", seq=a, start=65535, count=65535)
    sc("fork", seq=a, count=length + 1)
    for op in (5, 6, 7):
        sc(op, seq=a)
    sc.free_all()
    sc("alloc")
    sc.free_all()
    assert sc.model.free == cfg.pages
    await run_script(dut, ctx, "test_edges", sc, gaps=True)


@cocotb.test()
async def test_keep_up(dut):
    """Random requests with streams that keep up: no stall or idle cycle, so the cycle count
    is the closed-form time line of both engines exactly, and appends overlap reads (fewer
    cycles than the two engines' costs one after the other)."""
    ctx = context()
    sc = random_script(ctx.config, ctx.rng(3), 300)
    m = await run_script(dut, ctx, "test_keep_up", sc, gaps=False)
    serial = m["request_model_cycles"] + m["engine_model_cycles"]
    if m["cycles"] >= serial:
        raise Failure(Kind.TIMING, f"{ctx.describe()}: no append overlapped a read ({m})")


@cocotb.test()
async def test_long_read(dut):
    """A sequence filled to the whole cache, read end to end, head by head, with streams that
    keep up: the read bandwidth of long reads."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(4)
    sc = Script(cfg)
    s = sc("alloc").seq
    for _ in range(cfg.max_tokens):
        sc.append(s, rng)
    for kv in (0, 1):
        for head in range(cfg.kv_heads):
            sc("read", seq=s, kv=kv, head=head, start=0, count=cfg.max_tokens)
    sc.free_all()
    await run_script(dut, ctx, "test_long_read", sc, gaps=False)


@cocotb.test()
async def test_workload(dut):
    """The workload: ``count`` random requests (every kind, interleaved sequences, reads
    between appends, a cache that fills, bad requests) under the workload's gaps and
    back-pressure, then every sequence freed."""
    ctx = context()
    w = ctx.workload
    sc = random_script(ctx.config, ctx.rng(2), w.count, w.max_read)
    await run_script(dut, ctx, "test_workload", sc, gaps=True)



@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of random requests under gaps and back-pressure (a read
    streaming, appends taking lines, pages shared): the cache must come back empty (every
    page free, no sequence, counters 0, no beat offered), then run the same requests from
    the start correctly."""
    ctx = context()
    sc = random_script(ctx.config, ctx.rng(6), 200)
    await run_script(dut, ctx, "test_reset", sc, gaps=True, interrupt=True)
