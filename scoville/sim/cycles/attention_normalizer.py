"""Unit model (:mod:`scoville.sim.cycles.unit`) of
:class:`scoville.rtl.attention_normalizer.Normalizer`, from its docstring."""

from __future__ import annotations

__all__ = ["Normalizer"]


class Normalizer:
    """The normalizer: ``pv`` is ready while no output is being computed (:attr:`idle`); a
    ``pv`` beat whose payload is nonzero (the row tile's rows, on the head's last row) starts
    the head's outputs: each row's ``v_tiles`` column tiles, one a cycle into a two-stage
    pipeline (stage 1 moves in any cycle ``o`` is empty or taken), the row offered on ``o``
    the cycle after its last tile.

    Parameters
    ----------
    v_tiles : int
    pv : input port
    o : output port
    """

    __slots__ = ("_left", "_s1", "_s1_vt", "_vt", "o", "o_valid", "pv", "v_tiles")

    def __init__(self, v_tiles: int, pv, o):
        self.v_tiles, self.pv, self.o = v_tiles, pv, o
        self._left = self._vt = self._s1_vt = 0  # rows left; their column tile; stage 1's
        self._s1 = self.o_valid = False

    @property
    def idle(self) -> bool:
        return self._left == 0 and not self._s1

    def step(self, t: int) -> None:
        take = self.idle and self.pv.offers(t)
        if not self.o_valid or self.o.accepts(t):
            if self.o_valid:
                self.o.take(t)
            last = self.v_tiles - 1
            self.o_valid = self._s1 and self._s1_vt == last
            self._s1, self._s1_vt = self._left != 0, self._vt
            if self._left:
                if self._vt == last:
                    self._vt, self._left = 0, self._left - 1
                else:
                    self._vt += 1
        if take:
            rows = self.pv.payload
            self.pv.take(t)
            if rows:
                self._left, self._vt = rows, 0
