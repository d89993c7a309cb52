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

__all__ = ["ActStore", "write_layout"]


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
