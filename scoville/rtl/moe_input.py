"""The MoE block's input: a batch's ``x`` to the router and, a block of 32 elements at a time,
to the quantizer (``docs/moe.md``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.formats import MX_BLOCK

__all__ = ["XSplit"]


class XSplit(wiring.Component):
    """Takes a batch's ``tokens x hidden`` elements of ``x`` (FP32, or BF16 with ``x_fmt``),
    each as FP32 to the router's ``router`` stream, and every 32 of them as a line to the
    quantizer's ``line`` stream. ``config`` is the :class:`~scoville.rtl.moe.MoeConfig`.

    A cycle with ``start`` high begins a batch of ``tokens`` tokens (``tokens`` held by the
    sequencer while it runs).

    Timing: an element is taken in any cycle of the batch the router is ready and, for the
    32nd of a line, the quantizer is ready too; it goes to both in that cycle (no register).

    Attributes
    ----------
    x : In(stream.Signature(32 or 16))
    router : Out(stream.Signature(32))
    line : Out(stream.Signature(ArrayLayout(32, 32)))
    start : In(1)
    tokens : In(range(config.tokens + 1))
    """

    def __init__(self, config):
        self._config = config
        super().__init__({
            "x": In(stream.Signature(16 if config.x_fmt == "bf16" else 32)),
            "router": Out(stream.Signature(32)),
            "line": Out(stream.Signature(data.ArrayLayout(32, MX_BLOCK))),
            "start": In(1), "tokens": In(range(config.tokens + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        T, H = cfg.tokens, cfg.hidden
        x32 = Signal(32)  # x as FP32 (a BF16 is the top half of its FP32)
        m.d.comb += x32.eq(Cat(Const(0, 16), self.x.payload) if cfg.x_fmt == "bf16"
                           else self.x.payload)
        pos = Signal(range(MX_BLOCK))
        line = Signal(data.ArrayLayout(32, MX_BLOCK - 1))
        taking = Signal()                  # the batch's x is due
        completes = pos == MX_BLOCK - 1
        go = Signal()
        m.d.comb += [
            go.eq(taking & self.x.valid & self.router.ready & (~completes | self.line.ready)),
            self.x.ready.eq(taking & self.router.ready & (~completes | self.line.ready)),
            self.router.valid.eq(taking & self.x.valid & (~completes | self.line.ready)),
            self.router.payload.eq(x32),
            self.line.valid.eq(taking & self.x.valid & self.router.ready & completes),
            self.line.payload.as_value().eq(Cat(line.as_value(), x32)),
        ]
        x_count = Signal(range(T * H + 1))
        with m.If(go):
            m.d.sync += [line.as_value().eq(Cat(line.as_value()[32:], x32)),
                         pos.eq(Mux(completes, 0, pos + 1)), x_count.eq(x_count + 1)]
            with m.If(x_count == self.tokens * H - 1):
                m.d.sync += taking.eq(0)  # the batch's last element
        with m.If(self.start):
            m.d.sync += [taking.eq(1), pos.eq(0), x_count.eq(0)]
        return m
