"""The KV cache's append: a token's lines into its page, a new page when the token opens one
or its page is shared (copy-on-write) (``docs/kvcache.md``)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .kvcache_pages import page_shape, table_address, table_ports
from .lib.ports import read_port, write_port

__all__ = ["Appender"]


def _index(n: int) -> range:
    """The shape of an index below ``n``, at least one bit wide."""
    return range(max(n, 2))


class Appender(wiring.Component):
    """Appends a token to sequence ``seq`` of ``length`` tokens. ``config`` is the
    :class:`~scoville.rtl.kvcache.KvCacheConfig`.

    A cycle with ``start`` high reads the page-table entry of the token's page (``drop``:
    the sequence is unknown, the token's lines are taken and dropped). Then: the page's
    reference count; the decision (the token opens a page, or its page is shared: a new page
    is needed; with no free page ``full`` for a cycle and the lines are dropped; a shared
    page waits while the read engine is ``engine_busy``, ``read_wait`` high); a new page
    taken (``take``), its count set to 1 and the table pointed at it; a shared page copied
    into it, a line a cycle through the banks' ports (``bank_read`` high; ``copying`` for each
    line copied) after its old count is lowered; then the ``append_beats`` lines from ``wd``
    into the page (``writes`` for each), or dropped. ``done`` is high with the last line
    taken, ``wrote`` with it when the lines were written; ``wd_stall`` while a line is due and
    none comes.

    Timing: one cycle a step from the cycle after ``start``; the decision waits as said; the
    copy takes ``page_lines + 1`` cycles; ``wd`` is ready in every cycle of the lines.

    Attributes
    ----------
    start, drop, engine_busy : In(1)
    seq : In(seq_bits)
    length : In(token_bits)
    free : In(range(pages + 1))
    entry, set, ref, ref_set :
        The page allocator's ports (:func:`~scoville.rtl.kvcache_pages.table_ports`).
    take : Out(1)
    page : In(page)
    bank_r : Out(read_port(..., enable=True))
    bank_w : Out(write_port(...))
    wd : In(stream.Signature(line))
    full, read_wait, bank_read, copying, writes, wd_stall, done, wrote : Out(1)
    """

    def __init__(self, config, *, seq_bits: int, token_bits: int):
        self._config = config
        P = config.pages
        line = data.ArrayLayout(config.word_bits, config.banks)
        super().__init__({
            "start": In(1), "drop": In(1), "engine_busy": In(1),
            "seq": In(seq_bits), "length": In(token_bits), "free": In(range(P + 1)),
            **table_ports(config.max_seqs, P), "take": Out(1), "page": In(page_shape(P)),
            "bank_r": Out(read_port(range(config.bank_words), line, enable=True)),
            "bank_w": Out(write_port(range(config.bank_words), line)),
            "wd": In(stream.Signature(line)),
            "full": Out(1), "read_wait": Out(1), "bank_read": Out(1), "writes": Out(1),
            "wd_stall": Out(1), "copying": Out(1), "done": Out(1), "wrote": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        H, PT, TL, PL, P = (cfg.kv_heads, cfg.page_tokens, cfg.token_lines, cfg.page_lines,
                            cfg.pages)
        B = cfg.append_beats
        log_pt = PT.bit_length() - 1
        slot = Signal(_index(PT))
        pidx = Signal(range(P + 1))
        page_old = Signal.like(self.page)
        page_w = Signal.like(self.page)
        ref_old = Signal.like(self.ref.data)
        cow = Signal()
        copy = Signal(range(PL + 1))
        beat = Signal(range(B))
        kvh = Signal(range(max(cfg.sections * H, 2)))
        j = Signal(_index(TL))
        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.comb += self.entry.addr.eq(
                        table_address(P, self.seq, self.length >> log_pt))
                    m.d.sync += [slot.eq(self.length[:log_pt] if log_pt else 0),
                                 pidx.eq(self.length >> log_pt), beat.eq(0), kvh.eq(0),
                                 j.eq(0)]
                    with m.If(self.drop):
                        m.next = "DRAIN"
                    with m.Else():
                        m.next = "A_REF"
            with m.State("A_REF"):
                m.d.comb += self.ref.addr.eq(self.entry.data)
                m.d.sync += page_old.eq(self.entry.data)
                m.next = "A_DEC"
            with m.State("A_DEC"):
                # A copy-on-write waits for the read engine: the copy needs the banks' read
                # port, and the page table must not point a read at the page before it is
                # copied. The reference count stays addressed while waiting.
                m.d.comb += self.ref.addr.eq(page_old)
                shared = (slot != 0) & (self.ref.data > 1)
                need = (slot == 0) | shared
                m.d.sync += [ref_old.eq(self.ref.data), cow.eq(shared), page_w.eq(page_old),
                             copy.eq(0)]
                with m.If(need & (self.free == 0)):
                    m.d.comb += self.full.eq(1)
                    m.next = "DRAIN"
                with m.Elif(shared & self.engine_busy):
                    m.d.comb += self.read_wait.eq(1)
                with m.Elif(need):
                    m.next = "A_ALLOC"
                with m.Else():
                    m.next = "WRITE"
            with m.State("A_ALLOC"):
                m.d.comb += [self.take.eq(1),
                             self.ref_set.addr.eq(self.page), self.ref_set.data.eq(1),
                             self.ref_set.en.eq(1),
                             self.set.addr.eq(self.seq * P + pidx), self.set.data.eq(self.page),
                             self.set.en.eq(1)]
                m.d.sync += page_w.eq(self.page)
                with m.If(cow):
                    m.next = "COPY"
                with m.Else():
                    m.next = "WRITE"
            with m.State("COPY"):
                with m.If(copy == 0):
                    m.d.comb += [self.ref_set.addr.eq(page_old), self.ref_set.data.eq(ref_old - 1),
                                 self.ref_set.en.eq(1)]
                m.d.comb += [self.bank_read.eq(1), self.copying.eq(copy != 0),
                             self.bank_r.addr.eq(page_old * PL + copy), self.bank_r.en.eq(1),
                             self.bank_w.addr.eq(page_w * PL + copy - 1),
                             self.bank_w.data.eq(self.bank_r.data), self.bank_w.en.eq(copy != 0)]
                m.d.sync += copy.eq(copy + 1)
                with m.If(copy == PL):
                    m.next = "WRITE"
            with m.State("WRITE"):
                m.d.comb += self.wd.ready.eq(1)
                row = page_w * PL + kvh * (PT * TL) + slot * TL + j
                m.d.comb += [self.bank_w.addr.eq(row), self.bank_w.data.eq(self.wd.payload),
                             self.bank_w.en.eq(self.wd.valid)]
                with m.If(self.wd.valid):
                    m.d.sync += [beat.eq(beat + 1), j.eq(Mux(j == TL - 1, 0, j + 1))]
                    with m.If(j == TL - 1):
                        m.d.sync += kvh.eq(kvh + 1)
                    with m.If(beat == B - 1):
                        m.d.comb += [self.done.eq(1), self.wrote.eq(1)]
                        m.next = "IDLE"
            with m.State("DRAIN"):
                m.d.comb += self.wd.ready.eq(1)
                with m.If(self.wd.valid):
                    m.d.sync += beat.eq(beat + 1)
                    with m.If(beat == B - 1):
                        m.d.comb += self.done.eq(1)
                        m.next = "IDLE"
        lines = fsm.ongoing("WRITE") | fsm.ongoing("DRAIN")
        m.d.comb += [self.wd_stall.eq(lines & ~self.wd.valid),
                     self.writes.eq(fsm.ongoing("WRITE") & self.wd.valid)]
        return m
