"""Unit model (:mod:`scoville.sim.cycles.unit`) of
:class:`scoville.rtl.kvcache_linereader.LineReader`, from its docstring and the cache's read
engine's timing (:mod:`scoville.sim.cycles.kvcache`)."""

from __future__ import annotations

__all__ = ["LineReader"]


class LineReader:
    """The read engine: a cycle with :attr:`start` set (a read's lines; None: none this
    cycle), taken only while not :attr:`busy`, queues that many lines; a line moves into the
    output register (``rd``) each cycle it is empty or taken, from the cycle after the start,
    and is offered from the next cycle until taken. ``last`` marks a read's final line (no
    line left to move in: a read starts only once the previous one's lines are all out).

    The composed model sets :attr:`start` for the cycle about to be stepped; :attr:`stall`
    (a line waits for ``rd``) is the output of the cycle just stepped.

    Parameters
    ----------
    rd : output port
    """

    __slots__ = ("_left", "_valid", "rd", "stall", "start")

    def __init__(self, rd):
        self.rd = rd
        self._left = 0  # lines to move into the output register
        self._valid = False
        self.start: int | None = None
        self.stall = False

    @property
    def busy(self) -> bool:
        """Lines to issue or to hand over."""
        return self._left > 0 or self._valid

    @property
    def rd_valid(self) -> bool:
        return self._valid

    @property
    def rd_last(self) -> bool:
        return self._valid and self._left == 0

    def step(self, t: int) -> None:
        ready = self.rd.accepts(t)
        self.stall = self._valid and not ready
        if self._valid and ready:
            self.rd.take(t)
        if not self._valid or ready:
            self._valid = self._left > 0
            self._left -= self._valid
        if self.start is not None:
            self._left += self.start
