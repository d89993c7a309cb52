"""The KV cache's reference walk: a free or a fork, page by page over a sequence's page
table (``docs/kvcache.md``)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .kvcache_pages import page_shape, table_address, table_ports

__all__ = ["RefWalk"]


class RefWalk(wiring.Component):
    """Walks ``npages`` entries of sequence ``seq``'s page table; for each: the entry (the
    page), then the page's reference count, then the count written back, one less (a free; a
    page that drops to 0 is released) or one more (a fork, which also writes the page into
    sequence ``dst``'s table at the same index). ``pages`` is the table's entries a sequence,
    ``seqs`` its sequences.

    Timing: a cycle with ``start`` high latches ``npages`` (``seq`` and ``dst`` are held while
    the walk runs); from the next cycle,
    three cycles a page; ``done`` is high for a cycle after the last (at once for none).

    Attributes
    ----------
    start, fork : In(1)
    seq, dst : In(seq_bits)
    npages : In(range(pages + 1))
    entry, set, ref, ref_set :
        The page allocator's ports (:func:`~scoville.rtl.kvcache_pages.table_ports`).
    release : Out(1), released : Out(page)
    done : Out(1)
    """

    def __init__(self, *, pages: int, seqs: int, seq_bits: int):
        self._pages = pages
        super().__init__({
            "start": In(1), "fork": In(1), "seq": In(seq_bits), "dst": In(seq_bits),
            "npages": In(range(pages + 1)), **table_ports(seqs, pages),
            "release": Out(1), "released": Out(page_shape(pages)), "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        P = self._pages
        pg = Signal(range(P + 1))
        npages = Signal.like(self.npages)
        page_old = Signal.like(self.released)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [pg.eq(0), npages.eq(self.npages)]
                    m.next = "TAB"
            with m.State("TAB"):
                m.d.comb += self.entry.addr.eq(table_address(P, self.seq, pg))
                with m.If(pg == npages):
                    m.d.comb += self.done.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.next = "REF"
            with m.State("REF"):
                m.d.comb += self.ref.addr.eq(self.entry.data)
                m.d.sync += page_old.eq(self.entry.data)
                with m.If(self.fork):
                    m.d.comb += [self.set.addr.eq(self.dst * P + pg),
                                 self.set.data.eq(self.entry.data), self.set.en.eq(1)]
                m.next = "UPD"
            with m.State("UPD"):
                m.d.comb += [self.ref_set.addr.eq(page_old), self.ref_set.en.eq(1),
                             self.ref_set.data.eq(Mux(self.fork, self.ref.data + 1,
                                                      self.ref.data - 1))]
                with m.If(~self.fork & (self.ref.data == 1)):
                    m.d.comb += [self.release.eq(1), self.released.eq(page_old)]
                m.d.sync += pg.eq(pg + 1)
                m.next = "TAB"
        return m
