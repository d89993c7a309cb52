"""The MoE block's combine: each expert's down rows, weighted by the router, added into the
batch's output memory, and the output streamed out (``docs/moe.md``)."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .lib.fp32 import fp32_add, fp32_mul
from .moe_acts import nested_step

__all__ = ["Combine"]


class Combine(wiring.Component):
    """The batch's output, ``tokens x hidden`` FP32 values as ``tokens x down_tiles`` words of
    ``cols``, in a memory. ``config`` is the :class:`~scoville.rtl.moe.MoeConfig`.

    - ``clear``: a batch of ``tokens`` tokens begins; its words are zeroed, one a cycle.
    - ``rows``: an expert's down rows (its list places ``0 .. n - 1`` of a column tile, then
      of the next): each ``(row + bias) * weight`` (the list place's router weight, ``w``;
      GPT-OSS's ``bias``) is added in FP32 into its token's word (``tok``) of the tile, a read
      then the write the cycle after (``busy`` while it is pending). ``restart`` starts an
      expert's rows (place 0 of tile 0).
    - ``first``: the batch's first word is read; with ``out`` high, ``o`` offers the words in
      order, ``o_last`` with the batch's last one taken.

    Timing: ``rows`` is always ready. The zeroing runs from the cycle after ``clear`` and
    takes the write port first (the rows come long after it is done).

    Attributes
    ----------
    rows : In(stream.Signature(ArrayLayout(32, cols)))
    bias : In(ArrayLayout(32, cols))
    tok : In(ArrayLayout(range(tokens), tokens))
    w : In(ArrayLayout(32, tokens))
    n, tokens : In(range(tokens + 1))
    clear, restart, first, out : In(1)
    busy, o_last : Out(1)
    o : Out(stream.Signature(ArrayLayout(32, cols)))
    """

    def __init__(self, config):
        self._config = config
        T, C = config.tokens, config.array.cols
        super().__init__({
            "rows": In(stream.Signature(data.ArrayLayout(32, C))),
            "bias": In(data.ArrayLayout(32, C)),
            "tok": In(data.ArrayLayout(range(max(T, 2)), T)), "w": In(data.ArrayLayout(32, T)),
            "n": In(range(T + 1)), "tokens": In(range(T + 1)),
            "clear": In(1), "restart": In(1), "first": In(1), "out": In(1),
            "busy": Out(1), "o_last": Out(1),
            "o": Out(stream.Signature(data.ArrayLayout(32, C))),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        T, C, DT = cfg.tokens, cfg.array.cols, cfg.down_tiles
        m.submodules.out = out_mem = Memory(shape=data.ArrayLayout(32, C), depth=max(T * DT, 2),
                                            init=[])
        ow = out_mem.write_port()
        orp = out_mem.read_port(transparent_for=(ow,))
        row, bias = self.rows.payload, self.bias
        d_row = Signal(range(T + 1))
        d_tile = Signal(range(DT + 1))
        m.d.comb += self.rows.ready.eq(1)
        y = [fp32_add(m, row[c], bias[c], name=f"yb{c}") if cfg.biases else row[c]
             for c in range(C)]
        wy = [fp32_mul(m, self.w[d_row], y[c], name=f"wy{c}") for c in range(C)]
        acc_addr = Signal(range(T * DT))
        acc_p = Signal(data.ArrayLayout(32, C))
        d_fire = self.rows.valid & self.rows.ready
        clearing = Signal()
        clear_at = Signal(range(T * DT + 1))
        rmw_addr = Signal(range(T * DT))  # the row's word: its token's, its column tile's
        m.d.comb += rmw_addr.eq(self.tok[d_row] * DT + d_tile)
        m.d.sync += self.busy.eq(d_fire)
        with m.If(d_fire):
            m.d.sync += [acc_addr.eq(rmw_addr), acc_p.eq(Cat(*wy))]
            nested_step(m, d_row, self.n, d_tile, DT)
        with m.If(clearing):
            m.d.comb += [ow.en.eq(1), ow.addr.eq(clear_at), ow.data.eq(0)]
            m.d.sync += clear_at.eq(clear_at + 1)
            with m.If(clear_at == self.tokens * DT - 1):
                m.d.sync += clearing.eq(0)
        with m.Elif(self.busy):
            m.d.comb += [ow.en.eq(1), ow.addr.eq(acc_addr),
                         ow.data.eq(Cat(*(fp32_add(m, orp.data[c], acc_p[c], name=f"acc{c}")
                                          for c in range(C))))]
        with m.If(self.clear):
            m.d.sync += [clearing.eq(1), clear_at.eq(0)]
        with m.If(self.restart):
            m.d.sync += [d_row.eq(0), d_tile.eq(0)]

        # The output: the batch's words in order.
        o_at = Signal(range(T * DT + 1))
        o_fire = self.o.valid & self.o.ready
        m.d.comb += self.o_last.eq(o_fire & (o_at == self.tokens * DT - 1))
        with m.If(self.first):
            m.d.comb += orp.addr.eq(0)
            m.d.sync += o_at.eq(0)
        with m.Elif(self.out):
            m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(orp.data),
                         orp.addr.eq(o_at + o_fire)]
            with m.If(o_fire):
                m.d.sync += o_at.eq(o_at + 1)
        with m.Else():
            m.d.comb += orp.addr.eq(rmw_addr)
        return m
