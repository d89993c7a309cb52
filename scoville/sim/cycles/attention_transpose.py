"""Unit models (:mod:`scoville.sim.cycles.unit`) of :mod:`scoville.rtl.attention_transpose`:
cache lines into the array's B beats. Each is written from its RTL unit's docstring (its
contract), not from its registers; a beat's ``payload`` here is its ``last`` bit, the one
field that moves a handshake.
"""

from __future__ import annotations

from collections import deque

from .unit import Wire

__all__ = ["KTranspose", "LinesToBeats", "TokenJoin", "TokenQueue"]


class TokenJoin:
    """:class:`~scoville.rtl.attention_transpose.TokenJoin`: ``lines`` lines a token. A line but
    the token's last is taken at once; the last when the output register is empty or taken
    (:meth:`i_ready` passes the consumer's ``ready`` through), and the token is offered from
    the next cycle with the last line's ``last``."""

    __slots__ = ("_line", "_lines", "i", "o", "o_last", "o_valid")

    def __init__(self, lines: int, i, o):
        self._lines, self.i, self.o = lines, i, o
        self._line = 0
        self.o_valid = self.o_last = False

    def i_ready(self, t: int) -> bool:
        return self._line != self._lines - 1 or not self.o_valid or self.o.accepts(t)

    def step(self, t: int) -> None:
        take = self.i.offers(t) and self.i_ready(t)
        if self.o.accepts(t):
            if self.o_valid:
                self.o.take(t)
            self.o_valid = False
        if take:
            last = self.i.payload
            self.i.take(t)
            self._line += 1
            if self._line == self._lines:
                self._line = 0
                self.o_valid, self.o_last = True, last


class KTranspose:
    """:class:`~scoville.rtl.attention_transpose.KTranspose`: two buffers of ``cols`` tokens. A
    token is taken when the filling buffer is not full; a buffer closes on its ``cols``-th
    token or a token with ``last``. A closed buffer emits ``dim`` beats, one in each cycle the
    output register is empty or taken, from the cycle after it closes; the last beat of a
    buffer closed by ``last`` carries ``last``."""

    __slots__ = ("_beat", "_closes", "_cols", "_dim", "_full", "_rbuf", "_slot", "_wbuf", "i",
                 "o", "o_last", "o_valid")

    def __init__(self, dim: int, cols: int, i, o):
        self._dim, self._cols, self.i, self.o = dim, cols, i, o
        self._full, self._closes = [False, False], [False, False]
        self._wbuf = self._rbuf = self._slot = self._beat = 0
        self.o_valid = self.o_last = False

    @property
    def i_ready(self) -> bool:
        return not self._full[self._wbuf]

    def step(self, t: int) -> None:
        take = self.i_ready and self.i.offers(t)
        o_ready = self.o.accepts(t)
        if self.o_valid and o_ready:
            self.o.take(t)
        if not self.o_valid or o_ready:  # the emptying side, from the state at the start
            issue = self._full[self._rbuf]
            end = self._beat == self._dim - 1
            self.o_valid, self.o_last = issue, issue and end and self._closes[self._rbuf]
            if issue:
                if end:
                    self._beat, self._full[self._rbuf] = 0, False
                    self._rbuf = 1 - self._rbuf
                else:
                    self._beat += 1
        if take:
            last = self.i.payload
            self.i.take(t)
            if self._slot == self._cols - 1 or last:
                self._full[self._wbuf], self._closes[self._wbuf] = True, last
                self._slot, self._wbuf = 0, 1 - self._wbuf
            else:
                self._slot += 1


class TokenQueue:
    """:class:`~scoville.rtl.attention_transpose.TokenQueue`: a token is taken while fewer than
    ``depth`` wait, and offered from the next cycle behind those before it."""

    __slots__ = ("_depth", "_queue", "i", "o")

    def __init__(self, depth: int, i, o):
        self._depth, self.i, self.o = depth, i, o
        self._queue: deque[bool] = deque()

    @property
    def i_ready(self) -> bool:
        return len(self._queue) < self._depth

    @property
    def o_valid(self) -> bool:
        return bool(self._queue)

    @property
    def o_last(self) -> bool:
        return self._queue[0]

    def step(self, t: int) -> None:
        take = self.i_ready and self.i.offers(t)
        if self._queue and self.o.accepts(t):
            self.o.take(t)
            self._queue.popleft()
        if take:
            self._queue.append(self.i.payload)
            self.i.take(t)


class LinesToBeats:
    """:class:`~scoville.rtl.attention_transpose.LinesToBeats`: a K read's lines through a
    :class:`TokenJoin` of ``token_lines`` into the :class:`KTranspose`, then ``v_tiles`` V
    reads' through a :class:`TokenJoin` of ``v_lines`` into the :class:`TokenQueue`; ``i`` and
    ``o`` each switch to the next part of that turn after a beat with ``last`` (the input's
    payload is ``last``), and add no cycle.

    Parameters
    ----------
    dim, cols, token_lines, v_lines, v_tiles, v_queue : int
    i : input port
        Lines, payload ``last``.
    o : output port
        Beats.
    """

    __slots__ = ("_inner", "_rphase", "_r_vt", "_bphase", "_b_vt", "_tiles", "i", "o",
                 "join", "ktr", "vjoin", "vq")

    def __init__(self, *, dim: int, cols: int, token_lines: int, v_lines: int, v_tiles: int,
                 v_queue: int, i, o):
        self.i, self.o, self._tiles = i, o, v_tiles
        w = self._inner = {name: Wire() for name in ("kin", "vin", "kt", "vt", "kout", "vout")}
        self.join = TokenJoin(token_lines, w["kin"], w["kt"])
        self.vjoin = TokenJoin(v_lines, w["vin"], w["vt"])
        self.ktr = KTranspose(dim, cols, w["kt"], w["kout"])
        self.vq = TokenQueue(v_queue, w["vt"], w["vout"])
        self._rphase = self._bphase = False
        self._r_vt = self._b_vt = 0

    @property
    def o_valid(self) -> bool:
        return self.vq.o_valid if self._bphase else self.ktr.o_valid

    def _joined(self) -> None:
        """The wires from the joiners to the transposer and the queue, for the cycle about to
        be stepped (the joiners' ``ready`` passes theirs through)."""
        w = self._inner
        w["kt"].set(self.join.o_valid, self.ktr.i_ready, self.join.o_last)
        w["vt"].set(self.vjoin.o_valid, self.vq.i_ready, self.vjoin.o_last)

    def _wires(self, t: int) -> None:
        """This cycle's wires between the parts, from their state at the cycle's start."""
        w = self._inner
        self._joined()
        o_ready = self.o.accepts(t)
        w["kout"].set(self.ktr.o_valid, o_ready and not self._bphase)
        w["vout"].set(self.vq.o_valid, o_ready and self._bphase)
        offered = self.i.offers(t)
        last = offered and self.i.payload
        w["kin"].set(offered and not self._rphase, self.join.i_ready(t), last)
        w["vin"].set(offered and self._rphase, self.vjoin.i_ready(t), last)

    def i_ready(self, t: int) -> bool:
        """``i.ready`` in cycle ``t`` (the joiner's, which passes its consumer's through)."""
        self._joined()
        return self.vjoin.i_ready(t) if self._rphase else self.join.i_ready(t)

    def step(self, t: int) -> None:
        self._wires(t)
        w = self._inner
        i_last = self.i.offers(t) and self.i.payload
        o_last = self.vq.o_last if self._bphase and self.vq.o_valid else self.ktr.o_last
        for part in (self.join, self.vjoin, self.ktr, self.vq):
            part.step(t)
        if w["kin"].taken or w["vin"].taken:
            self.i.take(t)
            if i_last:
                self._rphase, self._r_vt = _next(self._rphase, self._r_vt, self._tiles)
        if w["kout"].taken or w["vout"].taken:
            self.o.take(t)
            if o_last:
                self._bphase, self._b_vt = _next(self._bphase, self._b_vt, self._tiles)


def _next(phase: bool, tile: int, tiles: int) -> tuple[bool, int]:
    """After a read's end: from K (``phase`` False) to V's first column tile, from one tile
    to the next, from V's last tile back to K."""
    if not phase:
        return True, 0
    return (False, 0) if tile == tiles - 1 else (True, tile + 1)
