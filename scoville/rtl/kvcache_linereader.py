"""The KV cache's read engine: a read of one head of one sequence streamed as lines."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .kvcache_pages import table_address
from .lib.ports import read_port

__all__ = ["LineReader"]


class LineReader(wiring.Component):
    """Streams a read's lines on ``rd``, one line per cycle while ``rd`` keeps up.

    A read of ``count`` tokens of head ``head`` of K or V (``kv``; K with ``k_only``) of
    sequence ``seq`` from token ``start`` walks the head's region of each page
    (``docs/kvcache.md``): its tokens' lines in order, each token's window of lines ``line0 ..
    line0 + nlines - 1`` (``nlines`` = 0: to the token's end), through the page table to the
    pages. The table's
    port always addresses the entry of the page the next cycle reads from (read a cycle
    ahead), so a page boundary costs nothing. The banks' read port loads only when the output
    register moves on, so a line held by back-pressure stays put.

    Attributes
    ----------
    start : In(1)
        Take the read in ``req`` this cycle (only while not ``busy``).
    req : In(layout)
        The read: fields ``seq``, ``kv``, ``head``, ``start``, ``count``, ``line0``,
        ``nlines`` (at least the request engine's request register).
    walk : Out(read_port(...))
        To the page table's read port for this engine.
    banks : Out(read_port(..., enable=True))
        To the banks' read port.
    rd : Out(stream.Signature(StructLayout(data, last)))
        The lines; ``last`` on a read's final one.
    busy : Out(1)
        Lines to issue or to hand over.
    stall : Out(1)
        A line waits for ``rd.ready``.
    """

    def __init__(self, config, req_layout, table_entries, page):
        self._config = config
        line = data.ArrayLayout(unsigned(config.word_bits), config.banks)
        super().__init__({
            "start": In(1),
            "req": In(req_layout),
            "walk": Out(read_port(table_entries, page)),
            "banks": Out(read_port(range(config.bank_words), line, enable=True)),
            "rd": Out(stream.Signature(data.StructLayout({"data": line, "last": 1}))),
            "busy": Out(1),
            "stall": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        H, PT, TL, PL, P = cfg.kv_heads, cfg.page_tokens, cfg.token_lines, cfg.page_lines, \
            cfg.pages
        log_pt = PT.bit_length() - 1
        head_lines = PT * TL
        r = self.req

        rseq = Signal.like(r.seq)
        tleft = Signal(range(cfg.max_tokens + 1))  # tokens still to issue
        width = Signal(range(TL + 1))  # lines per token
        skip = Signal(range(TL + 1))  # lines between one token's window and the next's
        first = Signal(range(max(TL, 2)))  # line0
        j = Signal(range(max(TL, 2)))  # line in the token's window
        slot = Signal(range(max(PT, 2)))  # token in the page
        region = Signal(range(PL))
        off = Signal(range(PL))
        pi = Signal(range(P + 1))
        out_valid = Signal()
        out_last = Signal()
        issue = Signal()
        advance = Signal()

        token_end = j == width - 1
        last = (tleft == 1) & token_end
        m.d.comb += [
            advance.eq(~out_valid | self.rd.ready),
            self.rd.valid.eq(out_valid),
            self.rd.payload.last.eq(out_last),
            self.rd.payload.data.eq(self.banks.data),
            # The banks are read only for a line that is issued (an SRAM read costs energy).
            self.banks.en.eq(advance & issue),
            self.stall.eq(out_valid & ~self.rd.ready),
        ]
        with m.If(advance):
            m.d.sync += [out_valid.eq(issue), out_last.eq(last)]

        page_end = token_end & (slot == PT - 1)
        step = issue & advance
        m.d.comb += [
            issue.eq(tleft != 0),
            self.busy.eq(issue | out_valid),
            self.walk.addr.eq(Mux(self.start, table_address(P, r.seq, r.start >> log_pt),
                                  table_address(P, rseq, pi + (step & page_end)))),
            self.banks.addr.eq(self.walk.data * PL + off),
        ]
        with m.If(step):
            m.d.sync += j.eq(j + 1)
            with m.If(token_end):
                m.d.sync += [j.eq(0), tleft.eq(tleft - 1), slot.eq(slot + 1),
                             off.eq(off + skip + 1)]
                with m.If(page_end):
                    m.d.sync += [slot.eq(0), off.eq(region + first), pi.eq(pi + 1)]
            with m.Else():
                m.d.sync += off.eq(off + 1)
        with m.If(self.start):
            start_slot = r.start[:log_pt] if log_pt else 0
            kv = 0 if cfg.k_only else r.kv
            base = (kv * H + r.head) * head_lines
            lines = Mux(r.nlines == 0, TL - r.line0, r.nlines)
            m.d.sync += [rseq.eq(r.seq), pi.eq(r.start >> log_pt), slot.eq(start_slot), j.eq(0),
                         region.eq(base), first.eq(r.line0), width.eq(lines),
                         skip.eq(TL - lines), off.eq(base + start_slot * TL + r.line0),
                         tleft.eq(r.count)]
        return m
