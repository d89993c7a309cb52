"""Unit model (:mod:`scoville.sim.cycles.unit`) of
:class:`scoville.rtl.attention_feeder.AppendFeeder`, from its docstring."""

from __future__ import annotations

__all__ = ["AppendFeeder"]


class AppendFeeder:
    """The append feeder: ``sections * kv_heads`` vectors a token (K of every head, then V of
    every head; MLA: one section, K alone), each into ``token_lines`` lines. A vector is taken
    when one is left to take and the line register is empty, or its last line is taken in
    that cycle (at once while dropping); its lines are offered from the next cycle, one a
    cycle.

    The composed model sets two inputs for the cycle about to be stepped: :attr:`start` (the
    tokens after the current one, loaded in this cycle; None: no load) and :attr:`drop`. Both
    change only while no line is offered (as the block's controller does; the RTL unit's
    docstring says so).

    Parameters
    ----------
    kv_heads, sections, token_lines : int
    k, v : input port
        Vectors (``v`` unused with one section).
    wd : output port
        Lines.
    """

    __slots__ = ("_left", "_line", "_per_token", "_tl", "_tokens", "_valid", "_v_from", "drop",
                 "k", "start", "v", "wd")

    def __init__(self, *, kv_heads: int, sections: int, token_lines: int, k, v, wd):
        self._per_token, self._tl = sections * kv_heads, token_lines
        self._v_from = kv_heads * (sections - 1)  # vectors left when V's begin
        self.k, self.v, self.wd = k, v, wd
        self._left = self._tokens = self._line = 0
        self._valid = False
        self.start: int | None = None
        self.drop = False

    @property
    def idle(self) -> bool:
        """No vector is left to take."""
        return self._left == 0 and self._tokens == 0

    @property
    def wd_valid(self) -> bool:
        return self._valid

    def in_ready(self, wd_ready: bool) -> bool:
        """A vector (K or V, whichever is next) is taken if offered, ``wd`` ready or not as
        ``wd_ready`` says."""
        return self._left != 0 and (self.drop or not self._valid
                                    or (wd_ready and self._line == self._tl - 1))

    def step(self, t: int) -> None:
        wd_take = self._valid and self.wd.accepts(t)
        src = self.k if self._left > self._v_from else self.v
        take = self.in_ready(self.wd.accepts(t)) and src.offers(t)
        left, tokens = self._left, self._tokens
        if wd_take:
            self.wd.take(t)
            self._line += 1
            if self._line == self._tl:
                self._line, self._valid = 0, False
        if self.start is not None:
            self._left, self._tokens = self._per_token, self.start
        if take:  # from the state at the cycle's start; over a start in the same cycle
            src.take(t)
            self._line = 0
            if not self.drop:
                self._valid = True
            self._left = left - 1
            if left == 1 and tokens:
                self._left, self._tokens = self._per_token, tokens - 1
