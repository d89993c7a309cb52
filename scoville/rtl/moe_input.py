"""The MoE block's input: a batch's ``x`` to the router and, a block of 32 elements at a time,
to the quantizer (``docs/moe.md``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.formats import MX_BLOCK

__all__ = ["XSplit", "x_layout"]


def x_layout(config):
    """A beat of the block's ``x``: ``x_lanes`` elements (FP32, or BF16 with ``x_fmt``),
    element 0 lowest; one element is its bare shape."""
    bits = 16 if config.x_fmt == "bf16" else 32
    return bits if config.x_lanes == 1 else data.ArrayLayout(bits, config.x_lanes)


class XSplit(wiring.Component):
    """Takes a batch's ``tokens x hidden`` elements of ``x`` (FP32, or BF16 with ``x_fmt``) in
    beats of ``x_lanes``, each beat as FP32 to the router's ``router`` stream, and every 32
    elements as a line to the quantizer's ``line`` stream. ``config`` is the
    :class:`~scoville.rtl.moe.MoeConfig`.

    A cycle with ``start`` high begins a batch of ``tokens`` tokens (``tokens`` held by the
    sequencer while it runs).

    Timing: a beat is taken in any cycle of the batch the router is ready and, for the beat
    that completes a line, the quantizer is ready too; it goes to both in that cycle (no
    register).

    Attributes
    ----------
    x : In(stream.Signature(x_layout(config)))
    router : Out(stream.Signature(32 or ArrayLayout(32, x_lanes)))
    line : Out(stream.Signature(ArrayLayout(32, 32)))
    start : In(1)
    tokens : In(range(config.tokens + 1))
    """

    def __init__(self, config):
        self._config = config
        lanes = config.x_lanes
        super().__init__({
            "x": In(stream.Signature(x_layout(config))),
            "router": Out(stream.Signature(32 if lanes == 1 else data.ArrayLayout(32, lanes))),
            "line": Out(stream.Signature(data.ArrayLayout(32, MX_BLOCK))),
            "start": In(1), "tokens": In(range(config.tokens + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        T, H, L = cfg.tokens, cfg.hidden, cfg.x_lanes
        per_line = MX_BLOCK // L
        raw = self.x.payload if L == 1 else self.x.payload.as_value()
        bits = 16 if cfg.x_fmt == "bf16" else 32
        # x as FP32 (a BF16 is the top half of its FP32), element 0 lowest.
        x32 = Signal(32 * L)
        m.d.comb += x32.eq(Cat(*(Cat(Const(0, 16), raw[bits * k:bits * (k + 1)])
                                 if cfg.x_fmt == "bf16" else raw[bits * k:bits * (k + 1)]
                                 for k in range(L))))
        pos = Signal(range(max(per_line, 2)))
        line = Signal(32 * (MX_BLOCK - L)) if per_line > 1 else None
        taking = Signal()                  # the batch's x is due
        completes = pos == per_line - 1
        go = Signal()
        router_payload = self.router.payload if L == 1 else self.router.payload.as_value()
        m.d.comb += [
            go.eq(taking & self.x.valid & self.router.ready & (~completes | self.line.ready)),
            self.x.ready.eq(taking & self.router.ready & (~completes | self.line.ready)),
            self.router.valid.eq(taking & self.x.valid & (~completes | self.line.ready)),
            router_payload.eq(x32),
            self.line.valid.eq(taking & self.x.valid & self.router.ready & completes),
            self.line.payload.as_value().eq(x32 if line is None else Cat(line, x32)),
        ]
        beats = Signal(range(T * H // L + 1))
        with m.If(go):
            m.d.sync += [pos.eq(Mux(completes, 0, pos + 1)), beats.eq(beats + 1)]
            if line is not None:
                m.d.sync += line.eq(Cat(line[32 * L:], x32))
            with m.If(beats == self.tokens * (H // L) - 1):
                m.d.sync += taking.eq(0)  # the batch's last beat
        with m.If(self.start):
            m.d.sync += [taking.eq(1), pos.eq(0), beats.eq(0)]
        return m
