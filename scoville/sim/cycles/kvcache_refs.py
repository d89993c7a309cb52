"""Unit model (:mod:`scoville.sim.cycles.unit`) of :class:`scoville.rtl.kvcache_refs.RefWalk`,
from its docstring."""

from __future__ import annotations

__all__ = ["RefWalk"]


class RefWalk:
    """The reference walk (a free or a fork): a cycle with :attr:`start` set (the pages to
    walk; None: none this cycle) starts it; from the next cycle three cycles a page, and
    :attr:`done` is high for a cycle after the last (in the next cycle for none).

    The composed model sets :attr:`start` for the cycle about to be stepped; :attr:`done` is
    the output of the cycle just stepped.
    """

    __slots__ = ("_left", "done", "start")

    def __init__(self):
        self._left: int | None = None  # cycles to done; None: idle
        self.start: int | None = None
        self.done = False

    @property
    def idle(self) -> bool:
        return self._left is None

    def step(self, t: int) -> None:
        self.done = False
        if self._left is None:
            if self.start is not None:
                self._left = 3 * self.start
        elif self._left == 0:
            self.done, self._left = True, None
        else:
            self._left -= 1
