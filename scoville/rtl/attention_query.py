"""Attention's query buffer: a step's Q vectors, rounded to BF16, kept for the A sequencer
(``docs/attention.md``)."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .lib.fp32 import fp32_to_bf16

__all__ = ["QueryBuffer"]


class QueryBuffer(wiring.Component):
    """A step's ``tokens x kv_heads x group`` Q vectors in, row by row to the A sequencer.

    The vectors come token by token, KV head by KV head, the head's group of query heads in
    order; each is rounded to BF16 into the buffer of its row of a row tile (row ``token in
    the tile * group + query head in the group``, ``tile_tokens`` tokens a tile), at entry
    ``tile * kv_heads + KV head``. A cycle with ``start`` high loads the count of vectors to
    take; ``idle`` is high when none is left. With ``drop`` high they are taken and not
    stored (a step refused for its length).

    Timing: a vector is taken in any cycle while some are left to take. A read (``rd_addr``,
    ``rd_en``) gives every row's entry in the next cycle, and holds it while ``rd_en`` is low.

    Attributes
    ----------
    q : In(stream.Signature(ArrayLayout(32, dim)))
    start : In(1)
    count : In(range(max_vectors + 1))
    drop : In(1)
    idle : Out(1)
    rd_addr : In(range(entries)), rd_en : In(1)
    rd_data : Out(ArrayLayout(ArrayLayout(16, dim), rows))
    """

    def __init__(self, *, dim: int, kv_heads: int, group: int, tile_tokens: int, tiles: int,
                 max_vectors: int):
        self._d, self._h, self._g, self._tq, self._tiles = dim, kv_heads, group, tile_tokens, tiles
        self.entries = max(tiles * kv_heads, 2)  # a memory of one has a zero-width address
        super().__init__({
            "q": In(stream.Signature(data.ArrayLayout(32, dim))),
            "start": In(1), "count": In(range(max_vectors + 1)), "drop": In(1),
            "idle": Out(1),
            "rd_addr": In(range(self.entries)), "rd_en": In(1),
            "rd_data": Out(data.ArrayLayout(data.ArrayLayout(16, dim),
                                            tile_tokens * group)),
        })

    def elaborate(self, platform):
        m = Module()
        D, H, G, TQ = self._d, self._h, self._g, self._tq
        left = Signal.like(self.count)
        with m.If(self.start):
            m.d.sync += left.eq(self.count)
        m.d.comb += [self.idle.eq(left == 0), self.q.ready.eq(left != 0)]
        q_bf16 = Cat(*(fp32_to_bf16(m, self.q.payload[e], name=f"q_bf16_{e}")
                       for e in range(D)))
        q_tt = Signal(range(max(TQ, 2)))
        q_tile = Signal(range(max(self._tiles, 2)))
        q_h = Signal(range(max(H, 2)))
        q_g = Signal(range(max(G, 2)))
        take = self.q.valid & self.q.ready
        for r in range(TQ * G):
            mem = Memory(shape=data.ArrayLayout(16, D), depth=self.entries, init=[])
            m.submodules[f"qbuf{r}"] = mem
            wp, rp = mem.write_port(), mem.read_port()
            m.d.comb += [wp.addr.eq(q_tile * H + q_h), wp.data.eq(q_bf16),
                         wp.en.eq(take & ~self.drop & (q_tt * G + q_g == r)),
                         rp.addr.eq(self.rd_addr), rp.en.eq(self.rd_en),
                         self.rd_data[r].eq(rp.data)]
        with m.If(take):
            m.d.sync += [left.eq(left - 1), q_g.eq(q_g + 1)]
            with m.If(q_g == G - 1):
                m.d.sync += [q_g.eq(0), q_h.eq(q_h + 1)]
                with m.If(q_h == H - 1):
                    m.d.sync += [q_h.eq(0), q_tt.eq(q_tt + 1)]
                    with m.If(q_tt == TQ - 1):
                        m.d.sync += [q_tt.eq(0), q_tile.eq(q_tile + 1)]
            with m.If(left == 1):
                m.d.sync += [q_g.eq(0), q_h.eq(0), q_tt.eq(0), q_tile.eq(0)]
        return m
