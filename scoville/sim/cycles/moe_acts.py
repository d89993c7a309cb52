"""Unit models (:mod:`scoville.sim.cycles.unit`) of :mod:`scoville.rtl.moe_acts`' writers, from
their docstrings. Checked against the RTL alone (``tests/test_moe_units.py``);
the block's model (:func:`scoville.sim.cycles.moe.timing`) still steps these registers in its
own loop until it is composed of unit models (issue #33)."""

from __future__ import annotations

from scoville.rtl.lib.formats import MX_BLOCK

__all__ = ["LinePacker", "StoreWriter"]


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
