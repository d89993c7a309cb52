"""Unit models (:mod:`scoville.sim.cycles.unit`) of the MoE block's router
(:class:`scoville.rtl.moe_router.Router`) and dispatch
(:class:`scoville.rtl.moe_dispatch.Dispatch`), from their docstrings."""

from __future__ import annotations

from collections import deque

__all__ = ["Dispatch", "Router"]


class Router:
    """The router: takes a token's ``hidden`` beats (elements, or beats of ``x_lanes``: the
    caller gives the beats a token), one a cycle as they come; works alone
    for ``latency`` cycles after the edge that takes the last (:func:`~scoville.sim.cycles.moe
    .route_latency`); offers its answer until taken, then takes the next token's.

    Parameters
    ----------
    hidden, latency : int
    x : input port
    o : output port
    """

    __slots__ = ("_at", "_h", "_hidden", "_latency", "o", "taking", "x")

    def __init__(self, hidden: int, latency: int, x, o):
        self._hidden, self._latency, self.x, self.o = hidden, latency, x, o
        self.taking = True
        self._h = self._at = 0

    def o_valid(self, t: int) -> bool:
        return not self.taking and t >= self._at

    def step(self, t: int) -> None:
        if self.taking and self.x.offers(t):
            self.x.take(t)
            self._h += 1
            if self._h == self._hidden:
                self._h, self.taking, self._at = 0, False, t + 1 + self._latency
        elif self.o_valid(t) and self.o.accepts(t):
            self.o.take(t)
            self.taking = True


class Dispatch:
    """The dispatch: takes a batch's beats, one a token, as they come; the beat with ``last``
    (its payload: the batch's groups ``(expert, tokens)``, ascending; None on the others)
    ends the batch, and ``latency(tokens, experts)`` cycles after the edge that takes it
    (:func:`~scoville.sim.cycles.moe.dispatch_latency`) the sorted choices are offered one a
    cycle as taken (an entry's payload: ``(expert, count, last of its group, end of the
    batch)``); after the batch's last the next batch's first beat is taken from the next
    cycle. :attr:`sorting` is high from the cycle after the last beat in to the last out.

    Parameters
    ----------
    latency : callable
    c : input port
    o : output port
    """

    __slots__ = ("_at", "_entries", "_latency", "_tokens", "c", "o", "sorting")

    def __init__(self, latency, c, o):
        self._latency, self.c, self.o = latency, c, o
        self.sorting = False
        self._tokens = self._at = 0
        self._entries: deque = deque()

    def o_valid(self, t: int) -> bool:
        return self.sorting and t >= self._at and bool(self._entries)

    @property
    def o_payload(self):
        return self._entries[0] if self._entries else None

    def step(self, t: int) -> None:
        if not self.sorting and self.c.offers(t):
            groups = self.c.payload
            self.c.take(t)
            self._tokens += 1
            if groups is not None:
                self.sorting, self._at = True, t + 1 + self._latency(self._tokens, len(groups))
                self._tokens = 0
                for g, (e, cnt) in enumerate(groups):
                    for j in range(cnt):
                        self._entries.append((e, cnt, j == cnt - 1,
                                              g == len(groups) - 1 and j == cnt - 1))
        elif self.o_valid(t) and self.o.accepts(t):
            self.o.take(t)
            if self._entries.popleft()[3]:
                self.sorting = False
