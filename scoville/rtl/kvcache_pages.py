"""The KV cache's page allocator: the page table, the pages' reference counts and the free list."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .lib.ports import read_port, write_port

__all__ = ["PageAllocator", "count_shape", "page_shape", "table_address", "table_ports"]


def page_shape(pages: int) -> range:
    """The shape of a page number (at least one bit)."""
    return range(max(pages, 2))


def count_shape(max_seqs: int) -> range:
    """The shape of a page's reference count: up to ``max_seqs``, at least 2 bits so that
    "shared" (> 1) is never a constant."""
    return range(max(max_seqs + 1, 4))


def table_ports(max_seqs: int, pages: int) -> dict:
    """The page table's and the reference counts' ports as a unit that uses them drives them:
    ``entry`` (a read port of the table), ``set`` (its write port), ``ref`` and ``ref_set``
    (the counts'); :class:`PageAllocator` takes them flipped."""
    page, count = page_shape(pages), count_shape(max_seqs)
    entries = range(max_seqs * pages)
    return {"entry": Out(read_port(entries, page)), "set": Out(write_port(entries, page)),
            "ref": Out(read_port(range(pages), count)),
            "ref_set": Out(write_port(range(pages), count))}


def table_address(pages: int, seq, index):
    """Page-table address of entry ``index`` of sequence ``seq`` in a table of ``pages``
    entries a sequence: 0 when past the end, so that no read port ever addresses outside its
    memory."""
    return Mux(index < pages, seq * pages + index, 0)


class PageAllocator(wiring.Component):
    """Which page holds each part of each sequence, how many sequences hold each page, and
    which pages are free.

    - The page table: entry ``seq * pages + index`` is the page holding tokens ``index *
      page_tokens ..`` of sequence ``seq`` (an SRAM of ``max_seqs * pages`` entries with two
      read ports, one for the read engine and one for the request engine, and a write port).
    - The reference counts: how many sequences hold each page (an SRAM of ``pages`` counts,
      at least 2 bits so that "shared" (> 1) is never a constant).
    - The free list: a stack of returned pages over a bump pointer of pages never used, so
      nothing needs clearing after reset. ``page`` is the page the next ``take`` gets: the
      top of the stack, else the next never-used page.

    Every read port has one cycle of latency.

    Attributes
    ----------
    walk, entry : In(read_port(...))
        The page table's read ports.
    set : In(write_port(...))
        The page table's write port.
    ref : In(read_port(...)), ref_set : In(write_port(...))
        The reference counts' read and write ports.
    take : In(1)
        Take ``page`` off the free list this cycle.
    page : Out
        The page a take gets.
    release : In(1), released : In
        Put page ``released`` on the free list this cycle (never with ``take``).
    free : Out
        Pages on the free list.
    """

    def __init__(self, max_seqs: int, pages: int):
        self._seqs, self._pages = max_seqs, pages
        page = page_shape(pages)
        self.ref_shape = count_shape(max_seqs)
        super().__init__({
            "walk": In(read_port(range(max_seqs * pages), page)),
            **{name: In(port.signature) for name, port in table_ports(max_seqs, pages).items()},
            "take": In(1),
            "page": Out(page),
            "release": In(1),
            "released": In(page),
            "free": Out(range(pages + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        S, P = self._seqs, self._pages
        page = page_shape(P)
        m.submodules.table = table = Memory(shape=page, depth=S * P, init=[])
        m.submodules.refs = refs = Memory(shape=self.ref_shape, depth=P, init=[])
        m.submodules.stack = stack = Memory(shape=page, depth=P, init=[])
        tab_r, tab_c, tab_w = table.read_port(), table.read_port(), table.write_port()
        ref_r, ref_w = refs.read_port(), refs.write_port()
        stk_r, stk_w = stack.read_port(), stack.write_port()
        for port, mem in ((self.walk, tab_r), (self.entry, tab_c), (self.ref, ref_r)):
            m.d.comb += [mem.addr.eq(port.addr), port.data.eq(mem.data)]
        for port, mem in ((self.set, tab_w), (self.ref_set, ref_w)):
            m.d.comb += [mem.addr.eq(port.addr), mem.data.eq(port.data), mem.en.eq(port.en)]

        fresh = Signal(range(P + 1))
        top = Signal(range(P + 1))
        m.d.comb += [
            self.free.eq(P - fresh + top),
            stk_r.addr.eq(Mux(top != 0, top - 1, 0)),
            self.page.eq(Mux(top != 0, stk_r.data, fresh)),
            stk_w.addr.eq(top),
            stk_w.data.eq(self.released),
            stk_w.en.eq(self.release),
        ]
        with m.If(self.release):
            m.d.sync += top.eq(top + 1)
        with m.If(self.take):
            with m.If(top != 0):
                m.d.sync += top.eq(top - 1)
            with m.Else():
                m.d.sync += fresh.eq(fresh + 1)
        return m
