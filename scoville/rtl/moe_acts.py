"""The MoE block's activation store: MX blocks of a batch's activations (per token, or per
place in an expert's list) in, the array's A beats out for a list of them.

A memory of ``dim / 32`` words, word ``b`` holding block ``b`` of every lane (``lanes`` of
them: the block's 32 codes and its E8M0 scale, as :func:`~scoville.rtl.mx_quant.out_layout`),
each lane written alone (a write granularity of one lane). A write on ``w`` puts one block of
one lane. A command on ``cmd`` (``n``) feeds the array's os schedule for one column tile of an
``n`` x ``dim`` times ``dim`` x ``cols`` GEMM: for each row tile of ``rows`` rows of ``lane``
(an input that names the lane of each of the ``n`` rows, held while the command runs), ``dim``
beats, beat ``k`` carrying each row's element ``k`` and the scale of its block.
"""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .gemm import operand_layouts
from .lib.formats import MX_BLOCK
from .mx_quant import MxQuantConfig, out_layout

__all__ = ["ActStore", "LinePacker", "StoreWriter", "nested_step", "write_layout"]


def write_layout(lanes: int, dim: int, act_fmt: str) -> data.StructLayout:
    """A ``w`` beat: ``block`` (along ``dim``), ``lane``, and the block (``codes``,
    ``scale``)."""
    return data.StructLayout({"block": range(max(dim // MX_BLOCK, 2)),
                              "lane": range(max(lanes, 2)),
                              "mx": out_layout(MxQuantConfig(out_fmt=act_fmt))})


class ActStore(wiring.Component):
    """Activations of ``lanes`` rows of ``dim`` elements in ``act_fmt`` (the module says how);
    ``array`` is the :class:`~scoville.rtl.gemm.GemmConfig` whose A beats it feeds.

    Attributes
    ----------
    w : In(stream.Signature(write_layout(lanes, dim, act_fmt)))
        Blocks in; always ready.
    cmd : In(stream.Signature(range(lanes + 1)))
        ``n``: the rows of a GEMM to feed.
    lane : In(ArrayLayout(range(lanes), lanes))
        The lane of each row of the command's GEMM.
    a : Out(stream.Signature(the array's A beat))
        The A beats.
    """

    def __init__(self, lanes: int, dim: int, act_fmt: str, array):
        self._lanes, self._dim, self._fmt, self._array = lanes, dim, act_fmt, array
        self.a_layout = operand_layouts(array)[0]
        super().__init__({
            "w": In(stream.Signature(write_layout(lanes, dim, act_fmt))),
            "cmd": In(stream.Signature(range(lanes + 1))),
            "lane": In(data.ArrayLayout(range(max(lanes, 2)), lanes)),
            "a": Out(stream.Signature(self.a_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        L, D, R = self._lanes, self._dim, self._array.rows
        B = D // MX_BLOCK
        block = out_layout(MxQuantConfig(out_fmt=self._fmt))
        # (depth at least 2: a one-word memory would have a zero-width address)
        m.submodules.mem = mem = Memory(shape=data.ArrayLayout(block, L), depth=max(B, 2),
                                        init=[])
        wp = mem.write_port(granularity=1)  # one lane
        rp = mem.read_port(transparent_for=(wp,))
        m.d.comb += [self.w.ready.eq(1), wp.addr.eq(self.w.payload.block)]
        m.d.comb += wp.data.as_value().eq(self.w.payload.mx.as_value().replicate(L))
        with m.If(self.w.valid):
            m.d.comb += wp.en.bit_select(self.w.payload.lane, 1).eq(1)

        busy = Signal()
        n = Signal(range(L + 1))
        tile0 = Signal(range(L + R + 1))   # the first row of the current row tile
        k = Signal(range(D))
        m.d.comb += self.cmd.ready.eq(~busy)
        with m.If(self.cmd.valid & ~busy & (self.cmd.payload != 0)):
            m.d.sync += [busy.eq(1), n.eq(self.cmd.payload), tile0.eq(0), k.eq(0)]

        fire = self.a.valid & self.a.ready
        last_k = k == D - 1
        nxt = Signal.like(k)
        m.d.comb += nxt.eq(Mux(fire, Mux(last_k, 0, k + 1), k))
        m.d.comb += [rp.addr.eq(nxt // MX_BLOCK), self.a.valid.eq(busy)]
        lanes = Array(self.lane[i] for i in range(L))
        elem = Signal(range(MX_BLOCK))
        m.d.comb += elem.eq(k % MX_BLOCK)
        for r in range(R):
            lane = Signal(range(max(L, 2)), name=f"lane{r}")
            m.d.comb += lane.eq(lanes[Mux(tile0 + r < L, tile0 + r, 0)])
            blk = data.View(block, rp.data.as_value().word_select(lane, block.size))
            m.d.comb += [self.a.payload.data[r].eq(blk.codes[elem]),
                         self.a.payload.scale[r].eq(blk.scale)]
        with m.If(fire):
            m.d.sync += k.eq(nxt)
            with m.If(last_k):
                m.d.sync += tile0.eq(tile0 + R)
                with m.If(tile0 + R >= n):
                    m.d.sync += busy.eq(0)
        return m


class StoreWriter(wiring.Component):
    """A quantizer's blocks (``i``) into an :class:`ActStore`'s writes (``w``), each at the
    next ``(lane, block)``: lane-major (``by_lane``: every block of lane 0, then lane 1, ...;
    the token order of ``x``) or block-major (block 0 of lanes ``0 .. n - 1``, then block 1,
    ...; the order in which an expert's rows leave the SwiGLU). ``count`` is the blocks
    written since ``clear`` (which also starts the order over).

    Timing: a pass-through (``w`` is ``i``, with the place added), no register.

    Attributes
    ----------
    i : In(stream.Signature(mx_quant out_layout(act_fmt)))
    w : Out(stream.Signature(write_layout(lanes, dim, act_fmt)))
    n : In(range(lanes + 1))
        Block-major: the lanes of a block.
    clear : In(1)
    count : Out(range(lanes * dim / 32 + 1))
    """

    def __init__(self, lanes: int, dim: int, act_fmt: str, *, by_lane: bool):
        self._lanes, self._blocks, self._by_lane = lanes, dim // MX_BLOCK, by_lane
        super().__init__({
            "i": In(stream.Signature(out_layout(MxQuantConfig(out_fmt=act_fmt)))),
            "w": Out(stream.Signature(write_layout(lanes, dim, act_fmt))),
            "n": In(range(lanes + 1)), "clear": In(1),
            "count": Out(range(lanes * self._blocks + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        lane = Signal(range(self._lanes + 1))
        block = Signal(range(self._blocks + 1))
        m.d.comb += [self.w.valid.eq(self.i.valid), self.i.ready.eq(self.w.ready),
                     self.w.payload.block.eq(block), self.w.payload.lane.eq(lane),
                     self.w.payload.mx.eq(self.i.payload)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += self.count.eq(self.count + 1)
            if self._by_lane:
                nested_step(m, block, self._blocks, lane)
            else:
                nested_step(m, lane, self.n, block)
        with m.If(self.clear):
            m.d.sync += [lane.eq(0), block.eq(0), self.count.eq(0)]
        return m


class LinePacker(wiring.Component):
    """The SwiGLU's outputs (``lanes`` activations of a row of a gate-up column tile) packed
    into lines of 32 for the quantizer: an expert's rows ``0 .. n - 1`` of a column tile, then
    of the next, each row's line filled by ``32 / lanes`` tiles in turn; the tile that fills
    it sends the line on ``o``. ``clear`` starts an expert (row 0 of tile 0).

    Timing: a beat that does not fill its line is taken at once; the one that fills it when
    ``o`` is ready, passed through in the same cycle.

    Attributes
    ----------
    i : In(stream.Signature(ArrayLayout(32, lanes)))
    o : Out(stream.Signature(ArrayLayout(32, 32)))
    n : In(range(rows + 1))
    clear : In(1)
    """

    def __init__(self, rows: int, lanes: int, tiles: int):
        self._rows, self._lanes, self._tiles = rows, lanes, tiles
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(32, lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(32, MX_BLOCK))),
            "n": In(range(rows + 1)), "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        T, HB = self._rows, self._lanes
        hl = Array(Signal(data.ArrayLayout(32, MX_BLOCK), name=f"hline{i}") for i in range(T))
        g_row = Signal(range(T + 1))       # list place of the next SwiGLU output
        g_tile = Signal(range(self._tiles + 1))
        seg = Signal(range(MX_BLOCK // HB))
        m.d.comb += seg.eq(g_tile % (MX_BLOCK // HB))
        fills = seg == MX_BLOCK // HB - 1
        merged = Signal(data.ArrayLayout(32, MX_BLOCK))
        cur = hl[g_row]
        for s_ in range(MX_BLOCK // HB):
            for q in range(HB):
                m.d.comb += merged[s_ * HB + q].eq(Mux(seg == s_, self.i.payload[q],
                                                       cur[s_ * HB + q]))
        m.d.comb += [self.i.ready.eq(~fills | self.o.ready),
                     self.o.valid.eq(self.i.valid & fills),
                     self.o.payload.as_value().eq(merged.as_value())]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += hl[g_row].eq(merged)
            nested_step(m, g_row, self.n, g_tile, self._tiles)
        with m.If(self.clear):
            m.d.sync += [g_row.eq(0), g_tile.eq(0)]
        return m


def nested_step(m, inner, inner_end, outer, outer_end=None):
    """Step two nested counters (under the caller's condition): ``inner`` counts to
    ``inner_end - 1`` and wraps to 0, stepping ``outer`` (which wraps after ``outer_end - 1``
    when given)."""
    wraps = inner == inner_end - 1
    m.d.sync += inner.eq(Mux(wraps, 0, inner + 1))
    with m.If(wraps):
        step = outer + 1 if outer_end is None else Mux(outer == outer_end - 1, 0, outer + 1)
        m.d.sync += outer.eq(step)
