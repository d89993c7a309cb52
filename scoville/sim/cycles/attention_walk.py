"""Unit models (:mod:`scoville.sim.cycles.unit`) of :mod:`scoville.rtl.attention_walk`: a walking
unit's place in a step's chunks, and the read and command issuers, from their docstrings."""

from __future__ import annotations

__all__ = ["ChunkWalk", "CommandIssuer", "ReadIssuer"]


class ChunkWalk:
    """A unit's place in a step's chunks: ``i`` (the chunk), ``sub`` (its first or second
    half of work)."""

    __slots__ = ("chunks", "i", "sub")

    def __init__(self, chunks):
        self.chunks, self.i, self.sub = chunks, 0, 0

    @property
    def done(self) -> bool:
        return self.i >= len(self.chunks)

    @property
    def n(self) -> int:
        return self.chunks[self.i][2]

    @property
    def rows(self) -> int:
        return self.chunks[self.i][3]

    @property
    def first(self) -> bool:
        return self.i == 0 or self.chunks[self.i - 1][0] != self.chunks[self.i][0]

    @property
    def last_of_head(self) -> bool:
        nxt = self.i + 1
        return nxt == len(self.chunks) or self.chunks[nxt][0] != self.chunks[self.i][0]

    def advance(self) -> None:
        self.i += 1
        self.sub = 0


class CommandIssuer:
    """The command issuer: from the cycle after :meth:`start`, each chunk's ``Q K^T`` (M = its
    rows, K = ``head_dim``, N = n), then its ``P V`` (M = its rows, K = n, N = ``v_dim``), each
    offered until taken, the next from the cycle after.

    Parameters
    ----------
    program : callable
        ``program(m, k, n)``: the array's program of a command (what ``cmd`` carries).
    head_dim, v_dim : int
    cmd : output port
    """

    __slots__ = ("_d", "_next", "_program", "_vd", "cmd", "walk")

    def __init__(self, program, head_dim: int, v_dim: int, cmd):
        self._program, self._d, self._vd, self.cmd = program, head_dim, v_dim, cmd
        self.walk = ChunkWalk([])
        self._next = None

    def start(self, chunks) -> None:
        """In the cycle about to be stepped: walk ``chunks`` (``(row tile and head, a0, n,
        rows)`` each) from the next cycle."""
        self._next = chunks

    @property
    def cmd_valid(self) -> bool:
        return not self.walk.done

    @property
    def payload(self):
        """The program of the command offered (None when none is)."""
        w = self.walk
        if w.done:
            return None
        return self._program(w.rows, w.n, self._vd) if w.sub else \
            self._program(w.rows, self._d, w.n)

    def step(self, t: int) -> None:
        w = self.walk
        if not w.done and self.cmd.accepts(t):
            self.cmd.take(t)
            if w.sub:
                w.advance()
            else:
                w.sub = 1
        if self._next is not None:
            self.walk, self._next = ChunkWalk(self._next), None


class ReadIssuer:
    """The read issuer: from the cycle after :meth:`start`, each chunk's K read, then its
    ``v_tiles`` V reads, each offered until taken, the next from the cycle after.

    Parameters
    ----------
    v_tiles : int
    req : output port
        The reads; a beat's payload is the cache's outcome of it (what the cache's unit model
        takes).
    """

    __slots__ = ("_next", "_reads", "_tiles", "_vt", "req", "walk")

    def __init__(self, v_tiles: int, req):
        self._tiles, self.req = v_tiles, req
        self.walk = ChunkWalk([])
        self._reads: list = []
        self._vt = 0
        self._next = None

    def start(self, chunks, reads) -> None:
        """In the cycle about to be stepped: walk ``chunks`` from the next cycle, whose reads
        are ``reads`` (per chunk, K's then each V tile's)."""
        self._next = (chunks, reads)

    @property
    def req_valid(self) -> bool:
        return not self.walk.done

    @property
    def payload(self):
        """The read offered (None when none is)."""
        w = self.walk
        return None if w.done else self._reads[(1 + self._tiles) * w.i + w.sub + self._vt]

    def step(self, t: int) -> None:
        w = self.walk
        if not w.done and self.req.accepts(t):
            self.req.take(t)
            if not w.sub:
                w.sub = 1
            elif self._vt == self._tiles - 1:
                self._vt = 0
                w.advance()
            else:
                self._vt += 1
        if self._next is not None:
            chunks, self._reads = self._next
            self.walk, self._next = ChunkWalk(chunks), None
