"""Unit model (:mod:`scoville.sim.cycles.unit`) of
:class:`scoville.rtl.attention_score.ScoreUnit`, from its docstring."""

from __future__ import annotations

from .attention_walk import ChunkWalk

__all__ = ["ScoreUnit"]


class ScoreUnit:
    """The score unit: walks the step's chunks (:meth:`start` in a cycle: from the next) as the
    array's rows come. ``Q K^T``'s rows (ready always) are taken, ``rows`` rows per tile of
    ``cols`` positions; the cycle after a chunk's last one computes ``alpha``, and from the
    next :attr:`max_ready` holds until the A sequencer's ``max_done``. ``P V``'s rows pass on
    to ``pv`` (ready when ``pv`` is), ``v_tiles`` column tiles of ``rows`` rows a chunk; a
    beat's payload is the row tile's rows on the head's last row (the normalizer's cue), else
    0.

    The composed model sets :attr:`attending` and :attr:`max_done` for the cycle about to be
    stepped.

    Parameters
    ----------
    cols, v_tiles : int
    rows : input port
        The array's rows.
    pv : output port
    """

    __slots__ = ("_next", "_pending", "_r", "_tb", "_vt", "attending", "cols", "max_done",
                 "max_ready", "pv", "rows", "v_tiles", "walk")

    def __init__(self, cols: int, v_tiles: int, rows, pv):
        self.cols, self.v_tiles, self.rows, self.pv = cols, v_tiles, rows, pv
        self.walk = ChunkWalk([])
        self._next = None
        self._r = self._tb = self._vt = 0
        self._pending = self.max_ready = False
        self.attending = self.max_done = False

    def start(self, chunks) -> None:
        """In the cycle about to be stepped: walk ``chunks`` from the next cycle."""
        self._next = chunks

    @property
    def done(self) -> bool:
        return self.walk.done

    def rows_ready(self, t: int) -> bool:
        return not self.walk.sub or self.pv.accepts(t)

    def pv_valid(self, t: int) -> bool:
        return self.walk.sub and self.attending and self.rows.offers(t)

    @property
    def pv_payload(self) -> int:
        w = self.walk
        if w.done or not w.sub:
            return 0
        last = self._r == w.rows - 1 and self._vt == self.v_tiles - 1 and w.last_of_head
        return w.rows if last else 0

    def step(self, t: int) -> None:
        w = self.walk
        take = self.attending and self.rows.offers(t) and self.rows_ready(t)
        if self.max_done:
            self.max_ready = False
        if self._pending:
            self._pending, self.max_ready = False, True
        if take:
            self.rows.take(t)
            if w.sub:
                self.pv.take(t)
                self._pv_row()
            elif self._r == w.rows - 1:  # a tile of Q K^T's rows
                self._r = 0
                if self._tb + self.cols >= w.n:
                    self._tb, w.sub, self._pending = 0, 1, True
                else:
                    self._tb += self.cols
            else:
                self._r += 1
        if self._next is not None:
            self.walk, self._next = ChunkWalk(self._next), None

    def _pv_row(self) -> None:
        """After a row of ``P V``: the next row, column tile, or chunk."""
        if self._r != self.walk.rows - 1:
            self._r += 1
        elif self._vt != self.v_tiles - 1:
            self._r, self._vt = 0, self._vt + 1
        else:
            self._r = self._vt = 0
            self.walk.advance()
