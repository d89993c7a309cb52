"""Unit model (:mod:`scoville.sim.cycles.unit`) of :class:`scoville.rtl.moe_input.XSplit`,
from its docstring. Checked against the RTL unit alone
(``tests/test_moe_units.py``)."""

from __future__ import annotations

from scoville.rtl.lib.formats import MX_BLOCK

__all__ = ["XSplit"]


class XSplit:
    """The input split: a beat of ``lanes`` elements of the batch is taken in any cycle the
    router is ready and, for the beat that completes a line of 32, the quantizer too; it goes
    to both in that cycle. The composed model sets :attr:`start` for the cycle about to be
    stepped (the batch's tokens; None: no start).

    Parameters
    ----------
    hidden : int
    x : input port
    router, line : output port
    lanes : int
        Elements a beat.
    """

    __slots__ = ("_count", "_hidden", "_per_line", "_pos", "_tokens", "line", "router",
                 "start", "taking", "x")

    def __init__(self, hidden: int, x, router, line, lanes: int = 1):
        self._hidden, self.x, self.router, self.line = hidden // lanes, x, router, line
        self._per_line = MX_BLOCK // lanes
        self.taking = False
        self._pos = self._count = self._tokens = 0
        self.start: int | None = None

    def _completes(self) -> bool:
        return self._pos == self._per_line - 1

    def x_ready(self, t: int) -> bool:
        """``x.ready`` in cycle ``t`` (the router's and, for a line's last beat, the
        quantizer's ``ready`` passed through)."""
        return self.taking and self.router.accepts(t) and (not self._completes()
                                                             or self.line.accepts(t))

    def router_valid(self, t: int) -> bool:
        return self.taking and self.x.offers(t) and (not self._completes()
                                                     or self.line.accepts(t))

    def line_valid(self, t: int) -> bool:
        return self.taking and self.x.offers(t) and self.router.accepts(t) \
            and self._completes()

    def step(self, t: int) -> None:
        if self.router_valid(t) and self.router.accepts(t):
            self.x.take(t)
            self.router.take(t)
            if self._completes():
                self.line.take(t)
            self._pos = (self._pos + 1) % self._per_line
            self._count += 1
            if self._count == self._tokens * self._hidden:
                self.taking = False
        if self.start is not None:
            self.taking, self._pos, self._count, self._tokens = True, 0, 0, self.start
