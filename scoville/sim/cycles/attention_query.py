"""Unit model (:mod:`scoville.sim.cycles.unit`) of
:class:`scoville.rtl.attention_query.QueryBuffer`, from its docstring."""

from __future__ import annotations

__all__ = ["QueryBuffer"]


class QueryBuffer:
    """The query buffer: a vector is taken in any cycle while some are left to take. The
    composed model sets :attr:`start` for the cycle about to be stepped (the count loaded in
    it; None: no load).

    Parameters
    ----------
    q : input port
    """

    __slots__ = ("_left", "q", "start")

    def __init__(self, q):
        self.q = q
        self._left = 0
        self.start: int | None = None

    @property
    def idle(self) -> bool:
        return self._left == 0

    def step(self, t: int) -> None:
        take = self._left != 0 and self.q.offers(t)
        left = self._left
        if self.start is not None:
            self._left = self.start
        if take:
            self.q.take(t)
            self._left = left - 1
