"""A first-word-fall-through queue between two streams (its unit model:
:class:`scoville.sim.cycles.stream.Queue`)."""

from amaranth.hdl import Module, Shape
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

__all__ = ["Queue"]


class Queue(wiring.Component):
    """``depth`` beats of ``shape`` between ``i`` and ``o`` (``amaranth.lib.fifo.SyncFIFO``,
    its memory at least two entries: one would have no address bits): ``i`` is ready while
    the queue holds fewer than ``depth``, ``o`` offers its oldest beat while it holds any; a
    beat taken in cycle ``t`` is offered from ``t + 1``.

    Attributes
    ----------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))
    """

    def __init__(self, shape, depth: int):
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"parameter 'depth' = {depth!r} is not allowed; allowed: 1 or "
                             "more")
        self._shape, self._depth = shape, depth
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        D = self._depth
        m.submodules.fifo = q = SyncFIFO(width=Shape.cast(self._shape).width,
                                         depth=max(2, D))
        room = q.level < D
        m.d.comb += [q.w_data.eq(self.i.payload), q.w_en.eq(self.i.valid & room),
                     self.i.ready.eq(q.w_rdy & room), self.o.valid.eq(q.r_rdy),
                     self.o.payload.eq(q.r_data), q.r_en.eq(self.o.ready)]
        return m
