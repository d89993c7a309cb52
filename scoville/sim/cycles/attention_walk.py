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
    def last_of_head(self) -> bool:
        nxt = self.i + 1
        return nxt == len(self.chunks) or self.chunks[nxt][0] != self.chunks[self.i][0]

    def advance(self) -> None:
        self.i += 1
        self.sub = 0


class _Walker:
    """A unit that walks the step's chunks, one beat per half (or tile) of a chunk on its
    output port: :meth:`start` in a cycle begins the walk from the next; :attr:`valid` while
    the walk is not done; :meth:`step` hands the beat over when the port accepts it and
    moves on (:meth:`_moved`)."""

    __slots__ = ("_next", "port", "walk")

    def __init__(self, port):
        self.port = port
        self.walk = ChunkWalk([])
        self._next = None

    def start(self, chunks, *more) -> None:
        """In the cycle about to be stepped: walk ``chunks`` (``(row tile and head, a0, n,
        rows)`` each) from the next cycle (``more``: what the unit's :meth:`_begin` takes)."""
        self._next = (chunks, *more)

    def _begin(self, chunks) -> None:
        self.walk = ChunkWalk(chunks)

    @property
    def valid(self) -> bool:
        return not self.walk.done

    def _moved(self, walk: ChunkWalk) -> None:
        """After a beat: to the chunk's second half, else to the next chunk."""
        if walk.sub:
            walk.advance()
        else:
            walk.sub = 1

    def step(self, t: int) -> None:
        if not self.walk.done and self.port.accepts(t):
            self.port.take(t)
            self._moved(self.walk)
        if self._next is not None:
            self._begin(*self._next)
            self._next = None


class CommandIssuer(_Walker):
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

    __slots__ = ("_d", "_program", "_vd")

    def __init__(self, program, head_dim: int, v_dim: int, cmd):
        super().__init__(cmd)
        self._program, self._d, self._vd = program, head_dim, v_dim

    @property
    def payload(self):
        """The program of the command offered (None when none is)."""
        w = self.walk
        if w.done:
            return None
        return self._program(w.rows, w.n, self._vd) if w.sub else \
            self._program(w.rows, self._d, w.n)


class ReadIssuer(_Walker):
    """The read issuer: from the cycle after :meth:`start` ``(chunks, reads)``, each chunk's K
    read, then its ``v_tiles`` V reads, each offered until taken, the next from the cycle
    after.

    Parameters
    ----------
    v_tiles : int
    req : output port
        The reads; a beat's payload is the cache's outcome of it (what the cache's unit model
        takes); ``reads`` lists them, per chunk K's then each V tile's.
    """

    __slots__ = ("_reads", "_tiles", "_vt")

    def __init__(self, v_tiles: int, req):
        super().__init__(req)
        self._tiles = v_tiles
        self._reads: list = []
        self._vt = 0

    def _begin(self, chunks, reads) -> None:
        super()._begin(chunks)
        self._reads = reads

    @property
    def payload(self):
        """The read offered (None when none is)."""
        w = self.walk
        return None if w.done else self._reads[(1 + self._tiles) * w.i + w.sub + self._vt]

    def _moved(self, walk: ChunkWalk) -> None:
        """After K's read the first V tile's; after V's last tile the next chunk."""
        if not walk.sub:
            walk.sub = 1
        elif self._vt == self._tiles - 1:
            self._vt = 0
            walk.advance()
        else:
            self._vt += 1
