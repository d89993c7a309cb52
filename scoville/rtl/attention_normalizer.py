"""Attention's normalizer: the partial outputs O, updated by each ``P V`` row, and a head's
outputs ``O / l`` onto ``o`` (``docs/attention.md``)."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .attention_score import pv_layout, score_rows
from .lib.formal import invariant
from .lib.fp32 import fp32_add, fp32_mul, fp32_recip

__all__ = ["Normalizer"]


class Normalizer(wiring.Component):
    """Keeps each row's partial output O (``v_dim`` binary32 values) and puts a head's outputs
    on ``o``; its ``v_width`` lanes of FP32 multipliers serve both. ``config`` is the
    :class:`~scoville.rtl.attention.AttentionConfig`; ``v_width`` is ``v_dim`` with one column
    tile of ``P V``, else the array's ``cols``.

    - A ``pv`` row updates its row's column tile of O: ``O * alpha + row`` (``O`` taken as 0 in
      the head's first chunk), lane by lane in FP32.
    - After the head's last row (``last``), each row in turn: ``rec = 1 / l`` of the row's
      ``l_sum`` (as it was when ``last`` was taken), then each column tile ``O * rec`` in a
      cycle; a row goes onto ``o`` with its last column tile.

    Timing: ``pv`` is ready while no output is being computed (``idle``). The outputs are a
    two-stage pipeline: stage 1 takes a column tile of a row in any cycle ``o`` is empty or
    taken, stage 2 multiplies and, for the row's last tile, offers the row on ``o`` the next
    cycle.

    Attributes
    ----------
    pv : In(stream.Signature(pv_layout(config)))
    l_sum : In(ArrayLayout(32, rows))
    o : Out(stream.Signature(ArrayLayout(32, v_dim)))
    idle : Out(1)
    """

    def __init__(self, config):
        self._config = config
        rows = score_rows(config)
        self.v_width = config.v_dim if config.v_tiles == 1 else config.array.cols
        super().__init__({
            "pv": In(stream.Signature(pv_layout(config))),
            "l_sum": In(data.ArrayLayout(32, rows)),
            "o": Out(stream.Signature(data.ArrayLayout(32, config.v_dim))),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        VD, VT, VW, RM = cfg.v_dim, cfg.v_tiles, self.v_width, score_rows(cfg)
        o_regs = [Signal(data.ArrayLayout(32, VD), name=f"o{r}") for r in range(RM)]
        n_left = Signal(range(RM + 1))
        n_r = Signal(range(max(RM, 2)))
        n_vt = Signal(range(max(VT, 2)))
        n1 = Signal()
        n1_r = Signal(range(max(RM, 2)))
        n1_vt = Signal(range(max(VT, 2)))
        rec = Signal(32)
        l_fin = [Signal(32, name=f"lfin{r}") for r in range(RM)]
        pv = self.pv.payload
        m.d.comb += [self.idle.eq((n_left == 0) & ~n1), self.pv.ready.eq(self.idle)]
        # The lanes: O * alpha for a pv row, O * rec for an output.
        o_row = Array(o_regs)[Mux(n1, n1_r, pv.row)]
        o_sel = Array(o_row[t * VW:(t + 1) * VW] for t in range(VT))[Mux(n1, n1_vt, pv.tile)]
        products = []
        for e in range(VW):
            opnd = Mux(n1 | ~pv.first, o_sel[e], 0)
            products.append(fp32_mul(m, opnd, Mux(n1, rec, pv.alpha), name=f"omul{e}"))
        updated = Cat(*(fp32_add(m, products[e], pv.data[e], name=f"oadd{e}")
                        for e in range(VW)))
        with m.If(self.pv.valid & self.pv.ready):
            for r in range(RM):
                for t in range(VT):
                    with m.If((pv.row == r) & (pv.tile == t)):
                        m.d.sync += o_regs[r].as_value().word_select(t, 32 * VW).eq(updated)
            with m.If(pv.last):
                m.d.sync += [n_left.eq(pv.row + 1), n_r.eq(0), n_vt.eq(0)]
                m.d.sync += [lf.eq(self.l_sum[r]) for r, lf in enumerate(l_fin)]
        # A row leaves after its VT column tiles: the first VT - 1 wait in o_part.
        en_o = ~self.o.valid | self.o.ready
        o_part = Signal(max(32 * VW * (VT - 1), 1))
        with m.If(en_o):
            m.d.sync += [n1.eq(n_left != 0), n1_vt.eq(n_vt),
                         self.o.valid.eq(n1 & (n1_vt == VT - 1))]
            if VT > 1:
                m.d.sync += self.o.payload.eq(Cat(o_part, *products))
                for t in range(VT - 1):
                    with m.If(n1 & (n1_vt == t)):
                        m.d.sync += o_part.word_select(t, 32 * VW).eq(Cat(*products))
            else:
                m.d.sync += self.o.payload.eq(Cat(*products))
            with m.If(n_left != 0):
                m.d.sync += [n_vt.eq(n_vt + 1), n1_r.eq(n_r),
                             rec.eq(fp32_recip(m, Array(l_fin)[n_r], name="recip"))]
                with m.If(n_vt == VT - 1):
                    m.d.sync += [n_vt.eq(0), n_left.eq(n_left - 1), n_r.eq(n_r + 1)]
        invariant(m, platform, n_vt < VT, "normalizer: column tile past the last")
        invariant(m, platform, ~n1 | (n1_vt < VT), "normalizer: output tile past the last")
        return m
