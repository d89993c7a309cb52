"""Unit model (:mod:`scoville.sim.cycles.unit`) of
:class:`scoville.rtl.attention_sequencer.ASequencer`, from its docstring."""

from __future__ import annotations

from .attention_walk import ChunkWalk

__all__ = ["ASequencer"]


class ASequencer:
    """The A sequencer: walks the step's chunks (:meth:`start` in a cycle: from the next)
    through a two-stage pipeline. Stage 1 takes the walk's next beat in any cycle stage 2 is
    empty or its beat is taken, while the step attends: ``head_dim`` beats of Q per tile of
    ``cols`` positions; then, with the chunk's max ready, one beat of P per position, once per
    column tile of V (``max_done`` with the chunk's last). Stage 2 offers the beat the next
    cycle.

    The composed model sets :attr:`attending` and :attr:`max_ready` for the cycle about to be
    stepped.

    Parameters
    ----------
    head_dim, cols, v_tiles : int
    a : output port
    """

    __slots__ = ("_d", "_j", "_k", "_next", "_s1", "_tb", "_vt", "a", "a_valid", "attending",
                 "cols", "max_ready", "v_tiles", "walk")

    def __init__(self, head_dim: int, cols: int, v_tiles: int, a):
        self._d, self.cols, self.v_tiles, self.a = head_dim, cols, v_tiles, a
        self.walk = ChunkWalk([])
        self._next = None
        self._k = self._tb = self._j = self._vt = 0
        self._s1 = self.a_valid = False
        self.attending = self.max_ready = False

    def start(self, chunks) -> None:
        """In the cycle about to be stepped: walk ``chunks`` from the next cycle."""
        self._next = chunks

    def _walking(self) -> bool:
        return self.attending and not self.walk.done

    def _moves(self, t: int) -> bool:
        """Stage 1 moves: stage 2 is empty or its beat is taken."""
        return not self.a_valid or self.a.accepts(t)

    @property
    def waiting(self) -> bool:
        """``P V``'s beats wait for the chunk's max."""
        return self._walking() and self.walk.sub and not self.max_ready

    def max_done(self, t: int) -> bool:
        """The chunk's last beat of P is issued in this cycle."""
        w = self.walk
        return (self._walking() and w.sub and self.max_ready and self._moves(t)
                and self._j == w.n - 1 and self._vt == self.v_tiles - 1)

    def step(self, t: int) -> None:
        if not self._moves(t):
            self._begin()
            return
        if self.a_valid:
            self.a.take(t)
        w = self.walk
        issue_q = self._walking() and not w.sub
        issue_p = self._walking() and w.sub and self.max_ready
        self.a_valid, self._s1 = self._s1, issue_q or issue_p
        if issue_q:
            if self._k != self._d - 1:
                self._k += 1
            else:
                self._k = 0
                if self._tb + self.cols >= w.n:
                    self._tb, w.sub, self._j = 0, 1, 0
                else:
                    self._tb += self.cols
        elif issue_p:
            if self._j != w.n - 1:
                self._j += 1
            elif self._vt != self.v_tiles - 1:  # P again, for V's next column tile
                self._j, self._vt = 0, self._vt + 1
            else:
                self._j = self._vt = 0
                w.advance()
        self._begin()

    def _begin(self) -> None:
        if self._next is not None:
            self.walk, self._next = ChunkWalk(self._next), None
