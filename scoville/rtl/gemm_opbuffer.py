"""An operand buffer: a circular buffer in SRAM (``amaranth.lib.memory``) between a stream and a
fixed-schedule consumer that may be frozen.

The producer side is a stream; the consumer side is a schedule step: when it ``take``\\ s the
oldest beat in a cycle where ``en`` is high, that beat appears on ``data`` in the next cycle and
stays there through cycles where ``en`` is low (the read port's data register is enabled by
``en``), as an SRAM macro with an output-enabled read port behaves.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .lib.formal import invariant

__all__ = ["OperandBuffer"]


class OperandBuffer(wiring.Component):
    """A ``depth``-beat circular buffer of ``layout`` beats.

    Attributes
    ----------
    i : In(stream.Signature(layout))
        Beats in; ``ready`` while the buffer has a free entry.
    avail : Out(1)
        The buffer holds at least one beat (written in an earlier cycle).
    take : In(1)
        Consume the oldest beat; only when ``avail`` and ``en``.
    en : In(1)
        The consumer's schedule advances this cycle.
    data : Out(layout)
        The beat taken on the latest cycle where ``en`` was high (undefined if none was taken).
    """

    def __init__(self, layout, depth: int):
        if depth < 2:
            raise ValueError(f"parameter 'depth' must be >= 2; got {depth}")
        self._layout = layout
        self._depth = depth
        super().__init__({
            "i": In(stream.Signature(layout)),
            "avail": Out(1),
            "take": In(1),
            "en": In(1),
            "data": Out(layout),
        })

    def elaborate(self, platform):
        m = Module()
        depth = self._depth
        m.submodules.mem = mem = Memory(shape=self._layout, depth=depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port()
        wr = Signal(range(depth))
        rd = Signal(range(depth))
        level = Signal(range(depth + 1))
        push = Signal()
        pop = Signal()
        m.d.comb += [
            self.i.ready.eq(level != depth),
            push.eq(self.i.valid & self.i.ready),
            pop.eq(self.take & self.en),
            self.avail.eq(level != 0),
            wp.addr.eq(wr),
            wp.data.eq(self.i.payload),
            wp.en.eq(push),
            rp.addr.eq(rd),
            rp.en.eq(self.en),
            self.data.eq(rp.data),
        ]
        with m.If(push):
            m.d.sync += wr.eq(Mux(wr == depth - 1, 0, wr + 1))
        with m.If(pop):
            m.d.sync += rd.eq(Mux(rd == depth - 1, 0, rd + 1))
        m.d.sync += level.eq(level + push - pop)
        invariant(m, platform, level <= depth, "operand buffer: level past its depth")
        invariant(m, platform, ~pop | (level != 0), "operand buffer: took from empty")
        apart = Mux(wr >= rd, wr - rd, wr + depth - rd)
        invariant(m, platform, (apart == level) | ((apart == 0) & (level == depth)),
                  "operand buffer: pointers apart by other than its level")
        return m
