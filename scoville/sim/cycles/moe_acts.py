"""Unit models (:mod:`scoville.sim.cycles.unit`) of :mod:`scoville.rtl.moe_acts`: the stores'
writers and A feeders and the line packer, from their docstrings, each checked against its RTL
unit alone (``tests/test_moe_units.py``)."""

from __future__ import annotations

from scoville.rtl.lib.formats import MX_BLOCK

__all__ = ["LinePacker", "StoreFeeder", "StoreWriter"]


class StoreWriter:
    """A store's writer: a pass-through, a block taken when the store takes it; :attr:`count`
    the blocks written since :meth:`clear`.

    Parameters
    ----------
    i : input port
    w : output port
    """

    __slots__ = ("_clear", "count", "i", "w")

    def __init__(self, i, w):
        self.i, self.w, self.count = i, w, 0
        self._clear = False

    def clear(self) -> None:
        """In the cycle about to be stepped (over a write in it, as in the RTL)."""
        self._clear = True

    def step(self, t: int) -> None:
        if self.i.offers(t) and self.w.accepts(t):
            self.i.take(t)
            self.w.take(t)
            self.count += 1
        if self._clear:
            self.count, self._clear = 0, False


class LinePacker:
    """The line packer: an expert's rows ``0 .. n - 1`` of a column tile, then of the next, each
    row's line of 32 filled by ``32 / lanes`` tiles in turn. A beat that does not fill its
    line is taken at once; one that fills it when ``o`` is ready (passed through). The
    composed model sets :attr:`n` and calls :meth:`clear` at an expert's start.

    Parameters
    ----------
    lanes, tiles : int
    i : input port
    o : output port
    """

    __slots__ = ("_clear", "_per_line", "_row", "_tile", "_tiles", "i", "n", "o")

    def __init__(self, lanes: int, tiles: int, i, o):
        self._per_line, self._tiles, self.i, self.o = MX_BLOCK // lanes, tiles, i, o
        self._row = self._tile = 0
        self.n = 0
        self._clear = False

    def clear(self) -> None:
        """In the cycle about to be stepped (over a beat taken in it, as in the RTL)."""
        self._clear = True

    def _fills(self) -> bool:
        return self._tile % self._per_line == self._per_line - 1

    def i_ready(self, t: int) -> bool:
        return not self._fills() or self.o.accepts(t)

    def o_valid(self, t: int) -> bool:
        return self.i.offers(t) and self._fills()

    def step(self, t: int) -> None:
        if self.i.offers(t) and self.i_ready(t):
            self.i.take(t)
            if self._fills():
                self.o.take(t)
            if self._row == self.n - 1:
                self._row = 0
                self._tile = 0 if self._tile == self._tiles - 1 else self._tile + 1
            else:
                self._row += 1
        if self._clear:
            self._row = self._tile = 0
            self._clear = False


class StoreFeeder:
    """An activation store's A side (:class:`~scoville.rtl.moe_acts.ActStore`): a command of
    ``n`` rows (the port's payload) is taken while idle; then ``dim`` beats per row tile of
    ``rows``, one as the array takes each, offered from the next cycle.

    Parameters
    ----------
    dim, rows : int
    cmd : input port
    a : output port
    """

    __slots__ = ("_beats", "_dim", "_rows", "a", "cmd")

    def __init__(self, dim: int, rows: int, cmd, a):
        self._dim, self._rows, self.cmd, self.a = dim, rows, cmd, a
        self._beats = 0

    @property
    def busy(self) -> bool:
        return self._beats != 0

    def step(self, t: int) -> None:
        idle = not self.busy
        if self.busy and self.a.accepts(t):
            self.a.take(t)
            self._beats -= 1
        if idle and self.cmd.offers(t):
            n = self.cmd.payload
            self.cmd.take(t)
            self._beats = -(-n // self._rows) * self._dim
