"""Unit model (:mod:`scoville.sim.cycles.unit`) of :class:`scoville.rtl.moe_combine.Combine`,
from its docstring. Checked against the RTL unit alone
(``tests/test_moe_units.py``)."""

from __future__ import annotations

__all__ = ["Combine"]


class Combine:
    """The combine: ``rows`` always ready, :attr:`busy` the cycle after a row (its write);
    the output's words offered on ``o`` while :attr:`out` is high (set by the composed model
    each cycle, with :attr:`first`, which starts the words over), :meth:`o_last` with the
    batch's last word taken.

    Parameters
    ----------
    down_tiles : int
    rows : input port
    o : output port
    """

    __slots__ = ("_at", "_dt", "busy", "first", "o", "out", "rows", "tokens")

    def __init__(self, down_tiles: int, rows, o):
        self._dt, self.rows, self.o = down_tiles, rows, o
        self._at = 0
        self.busy = self.first = self.out = False
        self.tokens = 0

    def o_last(self, t: int) -> bool:
        return self.out and not self.first and self.o.accepts(t) \
            and self._at == self.tokens * self._dt - 1

    def step(self, t: int) -> None:
        self.busy = self.rows.offers(t)
        if self.busy:
            self.rows.take(t)
        if self.first:
            self._at = 0
        elif self.out and self.o.accepts(t):
            self.o.take(t)
            self._at += 1
