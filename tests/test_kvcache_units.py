"""The KV cache's units alone, in Amaranth's simulator, against what their docstrings state:
the read engine (:class:`~scoville.rtl.kvcache_linereader.LineReader`: the lines of its
reads by the cache's layout, ``last`` on each read's final one, every ``rd`` handshake,
``busy`` and ``stall`` as its unit model :class:`scoville.sim.cycles.kvcache_linereader.LineReader`
says, under back-pressure); the reference walk (:class:`~scoville.rtl.kvcache_refs.RefWalk`, its
``done`` where its unit model :class:`scoville.sim.cycles.kvcache_refs.RefWalk` puts it) and the
append (:class:`~scoville.rtl.kvcache_append.Appender`, handshake for handshake against its
unit model :class:`scoville.sim.cycles.kvcache_append.Appender`), behind them real memories
for the page table, the reference counts and the banks, as the page allocator's and the
banks'; and the sequence table (:class:`~scoville.rtl.kvcache_seqs.SequenceTable`); on
seeded random cases."""

import zlib

import numpy as np
import pytest
from amaranth.hdl import Module, Value
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from scoville.rtl.kvcache import KvCacheConfig, request_layout
from scoville.rtl.kvcache_append import Appender
from scoville.rtl.kvcache_linereader import LineReader
from scoville.rtl.kvcache_pages import count_shape, page_shape
from scoville.rtl.kvcache_refs import RefWalk
from scoville.rtl.kvcache_seqs import SequenceTable
from scoville.rtl.lib.params import build_config
from scoville.sim.cycles.kvcache_append import Append
from scoville.sim.cycles.kvcache_append import Appender as AppendModel
from scoville.sim.cycles.kvcache_linereader import LineReader as LineReaderModel
from scoville.sim.cycles.kvcache_refs import RefWalk as RefWalkModel
from scoville.sim.cycles.stream import Consumer, Schedule

PAGES, SEQS, SEQ_BITS, TOKEN_BITS = 5, 3, 8, 16


class _Walked(wiring.Component):
    """A RefWalk with the page table and the counts behind its ports (synchronous reads, as
    the page allocator's memories)."""

    def __init__(self, table, refs):
        self.walk = RefWalk(pages=PAGES, seqs=SEQS, seq_bits=SEQ_BITS)
        self._table, self._refs = table, refs
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.walk = walk = self.walk
        m.submodules.table = table = Memory(shape=page_shape(PAGES), depth=SEQS * PAGES,
                                            init=self._table)
        m.submodules.refs = refs = Memory(shape=count_shape(SEQS), depth=PAGES,
                                          init=self._refs)
        for port, mem in ((walk.entry, table), (walk.ref, refs)):
            r = mem.read_port()
            m.d.comb += [r.addr.eq(port.addr), port.data.eq(r.data)]
        for port, mem in ((walk.set, table), (walk.ref_set, refs)):
            w = mem.write_port()
            m.d.comb += [w.addr.eq(port.addr), w.data.eq(port.data), w.en.eq(port.en)]
        self.table, self.refs = table, refs
        return m


def _case(seed: int):
    """A page table where each sequence holds distinct pages (sequences share some), the
    counts that go with it, and a walk as the engine asks for one: a free of some of the
    source's first pages, or a fork of them into a sequence that holds none."""
    rng = np.random.default_rng(seed)
    seq, dst = (int(x) for x in rng.choice(SEQS, 2, replace=False))
    fork = bool(rng.integers(2))
    table = [int(p) for p in rng.integers(0, PAGES, SEQS * PAGES)]  # past the end: any page
    refs = [0] * PAGES
    held = {}
    for s in range(SEQS):
        n = 0 if fork and s == dst else int(rng.integers(1 if s == seq else 0, PAGES + 1))
        held[s] = [int(p) for p in rng.permutation(PAGES)[:n]]
        for i, page in enumerate(held[s]):
            table[s * PAGES + i] = page
            refs[page] += 1
    npages = int(rng.integers(0, len(held[seq]) + 1))
    return table, refs, seq, dst, npages, fork


@pytest.mark.parametrize("seed", range(16))
def test_the_reference_walk_frees_or_forks_three_cycles_a_page(seed):
    table, refs, seq, dst, npages, fork = _case(zlib.crc32(f"refwalk{seed}".encode()))
    pages = [table[seq * PAGES + i] for i in range(npages)]
    dut = _Walked(table, refs)
    walk = dut.walk
    seen = {}

    async def bench(ctx):
        ctx.set(walk.seq, seq)
        ctx.set(walk.dst, dst)
        ctx.set(walk.fork, fork)
        ctx.set(walk.npages, npages)
        ctx.set(walk.start, 1)
        await ctx.tick()
        ctx.set(walk.start, 0)
        ctx.set(walk.npages, 0)  # latched at start: changing it now must not matter
        released, t = [], 1
        while not ctx.get(walk.done):
            assert t < 10 * PAGES + 10, "the walk never ends"
            if ctx.get(walk.release):
                released.append(ctx.get(walk.released))
            await ctx.tick()
            t += 1
        seen.update(done=t, released=released,
                    table=[ctx.get(dut.table.data[a]) for a in range(SEQS * PAGES)],
                    refs=[ctx.get(dut.refs.data[p]) for p in range(PAGES)])

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # done where the unit model puts it (one cycle after three a page, from the cycle after
    # start).
    model = RefWalkModel()
    t = 0
    while True:
        model.start = npages if t == 0 else None
        model.step(t)
        if model.done:
            break
        t += 1
    assert seen["done"] == t
    want_refs, want_table = list(refs), list(table)
    for i, page in enumerate(pages):
        want_refs[page] += 1 if fork else -1
        if fork:
            want_table[dst * PAGES + i] = page
    assert seen["refs"] == want_refs
    assert seen["table"] == want_table
    assert seen["released"] == ([] if fork else [p for p in pages if refs[p] == 1])


def test_the_sequence_table_answers_at_once_and_shows_a_free_slot_two_cycles_after():
    rng = np.random.default_rng(zlib.crc32(b"seqtable"))
    S = SEQS
    dut = SequenceTable(S, SEQ_BITS, TOKEN_BITS)
    cycles = 400
    ops = [(int(rng.integers(0, S + 2)), bool(rng.random() < 0.4), bool(rng.integers(2)),
            bool(rng.random() < 0.4), int(rng.integers(0, 1 << TOKEN_BITS)),
            int(rng.integers(0, S + 3))) for _ in range(cycles)]
    errors = []

    async def bench(ctx):
        active, length = [False] * S, [0] * S
        history = []  # the active bits at the start of each cycle
        for t, (wseq, set_active, wactive, set_length, wlength, seq) in enumerate(ops):
            wseq = min(wseq, S - 1)  # the engine writes only slots it checked
            history.append(list(active))
            ctx.set(dut.seq, seq)
            ctx.set(dut.wseq, wseq)
            ctx.set(dut.set_active, set_active)
            ctx.set(dut.wactive, wactive)
            ctx.set(dut.set_length, set_length)
            ctx.set(dut.wlength, wlength)
            ok = seq < S and active[seq]
            if ctx.get(dut.ok) != ok:
                errors.append(f"cycle {t}: ok {ctx.get(dut.ok)} for seq {seq}, expected {ok}")
            if seq < S and ctx.get(dut.length) != length[seq]:
                errors.append(f"cycle {t}: length of {seq} {ctx.get(dut.length)}, "
                              f"expected {length[seq]}")
            if t >= 1:  # registered from the active bits of the cycle before
                free = [s for s in range(S) if not history[t - 1][s]]
                if ctx.get(dut.slot_free) != bool(free) or (
                        free and ctx.get(dut.new_id) != free[0]):
                    errors.append(f"cycle {t}: slot_free {ctx.get(dut.slot_free)} new_id "
                                  f"{ctx.get(dut.new_id)}, expected the lowest of {free}")
            await ctx.tick()
            if set_active:
                active[wseq] = wactive
            if set_length:
                length[wseq] = wlength

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert not errors, errors[:3]


APPEND = {"page_tokens": 2, "kv_heads": 1, "head_dim": 16, "banks": 2, "word_bits": 32,
          "bank_words": 64, "max_seqs": 3}


class _Appending(wiring.Component):
    """An Appender with the page table, the counts and the banks behind its ports (the banks
    as one memory of lines), the allocator's next free page held on ``page``."""

    def __init__(self, cfg, table, refs, lines):
        self.app = Appender(cfg, seq_bits=SEQ_BITS, token_bits=TOKEN_BITS)
        self._cfg, self._init = cfg, (table, refs, lines)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        cfg, (table, refs, lines) = self._cfg, self._init
        m.submodules.app = app = self.app
        line = data.ArrayLayout(cfg.word_bits, cfg.banks)
        mems = {"table": Memory(shape=page_shape(cfg.pages), depth=cfg.max_seqs * cfg.pages,
                                init=table),
                "refs": Memory(shape=count_shape(cfg.max_seqs), depth=cfg.pages, init=refs),
                "banks": Memory(shape=line.size, depth=cfg.bank_words, init=lines)}
        for name, mem in mems.items():
            m.submodules[name] = mem
            setattr(self, name, mem)
        for port, mem in ((app.entry, mems["table"]), (app.ref, mems["refs"]),
                          (app.bank_r, mems["banks"])):
            r = mem.read_port()
            m.d.comb += [r.addr.eq(port.addr), Value.cast(port.data).eq(r.data)]
            if hasattr(port, "en"):
                m.d.comb += r.en.eq(port.en)
        for port, mem in ((app.set, mems["table"]), (app.ref_set, mems["refs"]),
                          (app.bank_w, mems["banks"])):
            w = mem.write_port()
            m.d.comb += [w.addr.eq(port.addr), w.data.eq(Value.cast(port.data)),
                         w.en.eq(port.en)]
        return m


def _append_case(cfg, seed: int):
    """Sequence 0 of ``length`` tokens on its pages (page ``k`` of it held by one or, shared,
    two sequences), random lines everywhere, the allocator's next free page, ``free`` pages
    left, maybe a drop; the read engine busy in random cycles and ``wd`` with gaps."""
    rng = np.random.default_rng(seed)
    P, PT = cfg.pages, cfg.page_tokens
    length = int(rng.integers(0, cfg.max_tokens))
    held = -(-length // PT)  # pages holding tokens
    table = [0] * (cfg.max_seqs * P)
    refs = [0] * P
    order = [int(p) for p in rng.permutation(P)]
    for i in range(held):
        table[i] = order[i]
        refs[order[i]] = 2 if rng.random() < 0.5 else 1
    spare = order[held] if held < P else 0  # every page held: none is free
    size = -(-cfg.line_bits // 8)

    def line_words(n):  # every bit of a line random
        return [int.from_bytes(rng.bytes(size), "little") & ((1 << cfg.line_bits) - 1)
                for _ in range(n)]

    return dict(length=length, table=table, refs=refs, lines=line_words(cfg.bank_words),
                page=spare, free=int(rng.choice([0, 1, 2])) if held < P else 0,
                drop=bool(rng.random() < 0.15), busy=[bool(b) for b in rng.random(60) < 0.5],
                wd=line_words(cfg.append_beats), gaps=[bool(g) for g in rng.random(400) < 0.3])


def _append_effect(cfg, c):
    """From Appender's docstring: what the append does (an :class:`Append`) and the memories
    after it (the table, the counts, the lines)."""
    PT, PL, TL = cfg.page_tokens, cfg.page_lines, cfg.token_lines
    pidx, slot = divmod(c["length"], PT)
    table, refs, lines = list(c["table"]), list(c["refs"]), list(c["lines"])
    if c["drop"]:
        return Append.DROP, table, refs, lines
    old = table[pidx]
    shared = slot != 0 and refs[old] > 1
    if (slot == 0 or shared) and c["free"] == 0:
        return Append.FULL, table, refs, lines
    page, kind = old, Append.WRITE
    if slot == 0 or shared:
        page, kind = c["page"], Append.NEW_PAGE
        table[pidx] = page
        refs[page] = 1
        if shared:
            kind = Append.COPY
            refs[old] -= 1
            for k in range(PL):
                lines[page * PL + k] = lines[old * PL + k]
    for b, word in enumerate(c["wd"]):
        kvh, j = divmod(b, TL)
        lines[page * PL + kvh * (PT * TL) + slot * TL + j] = word
    return kind, table, refs, lines


class _Lines:
    """The test's ``wd``: beat ``k`` offered in each cycle ``gaps`` leaves open, until taken."""

    def __init__(self, beats: int, gaps):
        self.beats, self.gaps, self.cycles = beats, gaps, []

    def offers(self, t: int) -> bool:
        return len(self.cycles) < self.beats and not self.gaps[t]

    def take(self, t: int) -> None:
        self.cycles.append(t)


def _append_model(cfg, c, kind) -> dict:
    """The unit model (:class:`~scoville.sim.cycles.kvcache_append.Appender`) on the test's
    schedules: what the RTL test records, as the model predicts it."""
    wd = _Lines(cfg.append_beats, c["gaps"])
    unit = AppendModel(page_lines=cfg.page_lines, beats=cfg.append_beats, wd=wd)
    seen = {"full": [], "wait": 0, "take": 0, "stalls": 0, "writes": 0, "copying": 0}
    t = 0
    while True:
        unit.start = kind if t == 0 else None
        unit.engine_busy = c["busy"][t] if t < len(c["busy"]) else False
        unit.step(t)
        seen["full"] += [t] * unit.full
        seen["wait"] += unit.read_wait
        seen["take"] += unit.take
        seen["stalls"] += unit.wd_stall
        seen["writes"] += unit.writes
        seen["copying"] += unit.copying
        if unit.done:
            seen.update(done=t, wrote=unit.wrote, taken=wd.cycles)
            return seen
        t += 1


@pytest.mark.parametrize("seed", range(24))
def test_the_append_writes_its_lines_copying_a_shared_page_first(seed):
    cfg = build_config(KvCacheConfig, APPEND)
    c = _append_case(cfg, zlib.crc32(f"append{seed}".encode()))
    kind, table, refs, lines = _append_effect(cfg, c)
    dut = _Appending(cfg, c["table"], c["refs"], c["lines"])
    app = dut.app
    seen = {"taken": [], "full": [], "wait": 0, "take": 0, "stalls": 0, "writes": 0,
            "copying": 0}

    async def bench(ctx):
        ctx.set(app.seq, 0)
        ctx.set(app.length, c["length"])
        ctx.set(app.drop, c["drop"])
        ctx.set(app.free, c["free"])
        ctx.set(app.page, c["page"])
        ctx.set(app.start, 1)
        beat, t = 0, 0
        while True:
            assert t < 300, "the append never ends"
            ctx.set(app.engine_busy, c["busy"][t] if t < len(c["busy"]) else 0)
            offer = beat < len(c["wd"]) and not c["gaps"][t]
            ctx.set(app.wd.valid, offer)
            if offer:
                ctx.set(app.wd.payload.as_value(), c["wd"][beat])
            if ctx.get(app.full):
                seen["full"].append(t)
            seen["wait"] += ctx.get(app.read_wait)
            seen["take"] += ctx.get(app.take)
            seen["stalls"] += ctx.get(app.wd_stall)
            seen["writes"] += ctx.get(app.writes)
            seen["copying"] += ctx.get(app.copying)
            taken = offer and ctx.get(app.wd.ready)
            done, wrote = ctx.get(app.done), ctx.get(app.wrote)
            await ctx.tick()
            ctx.set(app.start, 0)
            if taken:
                seen["taken"].append(t)
                beat += 1
            if done:
                seen.update(done=t, wrote=wrote)
                break
            t += 1
        seen.update(table=[ctx.get(dut.table.data[a]) for a in range(len(table))],
                    refs=[ctx.get(dut.refs.data[a]) for a in range(len(refs))],
                    lines=[ctx.get(dut.banks.data[a]) for a in range(len(lines))])

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # Every line's cycle, done, full, the read waits, the page taken and the stalls as the
    # unit model predicts them; the memories as the docstring says.
    memories = {key: seen.pop(key) for key in ("table", "refs", "lines")}
    assert seen == _append_model(cfg, c, kind)
    assert (memories["table"], memories["refs"], memories["lines"]) == (table, refs, lines)


READS = {"page_tokens": 2, "kv_heads": 2, "head_dim": 16, "banks": 2, "word_bits": 32,
         "bank_words": 128, "max_seqs": 3}


class _Reading(wiring.Component):
    """A LineReader with the page table and the banks behind its ports; each line of the
    banks holds its own address, so a line read names where it was read from."""

    def __init__(self, cfg, table):
        self.reader = LineReader(cfg, request_layout(), range(cfg.max_seqs * cfg.pages),
                                 page_shape(cfg.pages))
        self._cfg, self._table = cfg, table
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        m.submodules.reader = reader = self.reader
        line = data.ArrayLayout(cfg.word_bits, cfg.banks)
        m.submodules.table = table = Memory(shape=page_shape(cfg.pages),
                                           depth=cfg.max_seqs * cfg.pages, init=self._table)
        m.submodules.banks = banks = Memory(shape=line.size, depth=cfg.bank_words,
                                            init=range(cfg.bank_words))
        t, b = table.read_port(), banks.read_port()
        m.d.comb += [t.addr.eq(reader.walk.addr), reader.walk.data.eq(t.data),
                     b.addr.eq(reader.banks.addr), b.en.eq(reader.banks.en),
                     Value.cast(reader.banks.data).eq(b.data)]
        return m


def _read_lines(cfg, table, seq, kv, head, start, count, line0, nlines) -> list[int]:
    """The lines a read returns, by the cache's layout (``docs/kvcache.md``): each token's
    window of its head's lines, through the page table."""
    PT, TL, PL = cfg.page_tokens, cfg.token_lines, cfg.page_lines
    width = nlines or TL - line0
    out = []
    for token in range(start, start + count):
        page = table[seq * cfg.pages + token // PT]
        for j in range(line0, line0 + width):
            out.append(page * PL + ((kv * cfg.kv_heads + head) * PT + token % PT) * TL + j)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_read_engine_streams_a_line_a_cycle_as_its_unit_model_says(seed):
    cfg = build_config(KvCacheConfig, READS)
    rng = np.random.default_rng(zlib.crc32(f"linereader{seed}".encode()))
    P, TL = cfg.pages, cfg.token_lines
    table = [int(p) for p in rng.integers(0, P, cfg.max_seqs * P)]
    reads = []
    for _ in range(3):
        start = int(rng.integers(0, cfg.max_tokens))
        line0 = int(rng.integers(0, TL))
        reads.append(dict(seq=int(rng.integers(cfg.max_seqs)), kv=int(rng.integers(2)),
                          head=int(rng.integers(cfg.kv_heads)), start=start,
                          count=int(rng.integers(1, cfg.max_tokens - start + 1)), line0=line0,
                          nlines=int(rng.integers(0, TL - line0 + 1))))
    # Each read starts the first cycle, past a random delay, the engine is not busy.
    delays = [int(d) for d in rng.integers(0, 4, len(reads))]
    ready = Schedule([seed, 1], 0.4)
    want = [x for r in reads for x in _read_lines(cfg, table, **r)]
    dut = _Reading(cfg, table)
    reader = dut.reader
    seen = {"rd": [], "data": [], "last": [], "starts": [], "stalls": 0, "busy": []}

    async def bench(ctx):
        t, k, wait = 0, 0, delays[0]
        while len(seen["rd"]) < len(want):
            assert t < 2000, "the reads never end"
            go = k < len(reads) and not ctx.get(reader.busy) and wait == 0
            if k < len(reads) and not ctx.get(reader.busy) and wait:
                wait -= 1
            ctx.set(reader.start, go)
            if go:
                for name, value in reads[k].items():
                    ctx.set(getattr(reader.req, name), value)
                seen["starts"].append(t)
            ctx.set(reader.rd.ready, ready[t])
            seen["busy"].append(ctx.get(reader.busy))
            seen["stalls"] += ctx.get(reader.stall)
            fire = ctx.get(reader.rd.valid) and ready[t]
            if fire:
                seen["rd"].append(t)
                seen["data"].append(ctx.get(reader.rd.payload.data.as_value()))
                seen["last"].append(ctx.get(reader.rd.payload.last))
            await ctx.tick()
            if go:
                k += 1
                wait = delays[k] if k < len(reads) else 0
            t += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen["data"] == want
    ends = np.cumsum([len(_read_lines(cfg, table, **r)) for r in reads]) - 1
    assert [i for i, last in enumerate(seen["last"]) if last] == ends.tolist()
    # The unit model, started in the same cycles with the same ready schedule.
    rd = Consumer(ready)
    model = LineReaderModel(rd)
    starts = dict(zip(seen["starts"], (len(_read_lines(cfg, table, **r)) for r in reads),
                      strict=True))
    busy, stalls, t = [], 0, 0
    while len(rd.cycles) < len(want):
        busy.append(model.busy)
        model.start = starts.get(t)
        model.step(t)
        stalls += model.stall
        t += 1
    assert rd.cycles == seen["rd"]
    assert busy == seen["busy"][:len(busy)] and stalls == seen["stalls"]
