"""Attention's walks over a step's chunks (``docs/attention.md``): :class:`ChunkWalk`, the
registers each walking unit keeps of its place, and the units that are only a walk and a
request: :class:`ReadIssuer` (the cache's reads) and :class:`CommandIssuer` (the array's
commands)."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .gemm import command_layout
from .kvcache import SEQ_BITS, TOKEN_BITS, request_layout
from .kvcache import Op as CacheOp
from .lib.comb import wire
from .lib.formats import MX_BLOCK

__all__ = ["ChunkWalk", "CommandIssuer", "ReadIssuer", "Walker", "window_start"]


def window_start(window, pos):
    """The first position a query at ``pos`` attends (hardware), ``window`` the step's
    sliding window (a signal; 0: all)."""
    return Mux((window != 0) & (pos >= window), pos - (window - 1), 0)


class ChunkWalk:
    """The chunks of a step, row tile by row tile, head by head, as one unit walks them (each
    unit keeps its own place): row tile ``tile`` holds the step's tokens ``t0 .. t0 + count -
    1`` (positions ``pos0 ..``), which attend ``lo .. hi`` together; chunk ``c0`` (a multiple of
    ``chunk``) covers positions ``a0 .. a0 + n - 1``, ``a0`` the tile's ``lo`` rounded down to
    32 in its first chunk of a head."""

    def __init__(self, m, name, cfg, base, tokens, window):
        self._cfg = cfg
        tq, tiles = cfg.tile_tokens, cfg.step_tiles
        self.tile = Signal(range(max(tiles, 2)), name=f"{name}_tile")
        self.h = Signal(range(max(cfg.kv.kv_heads, 2)), name=f"{name}_h")
        self.c0 = Signal(TOKEN_BITS + 1, name=f"{name}_c0")
        self.first = Signal(name=f"{name}_first")
        self.done = Signal(init=1, name=f"{name}_done")
        self.sub = Signal(name=f"{name}_sub")
        chunk = cfg.chunk
        self.t0 = wire(m, f"{name}_t0", self.tile * tq, unsigned(9))
        left = wire(m, f"{name}_left", tokens - self.t0, unsigned(9))
        self.count = wire(m, f"{name}_count", Mux(left > tq, tq, left), range(tq + 1))
        self.rows = wire(m, f"{name}_rows", self.count * cfg.group, range(tq * cfg.group + 1))
        self.last_tile = wire(m, f"{name}_lastt", left <= tq)
        self.pos0 = wire(m, f"{name}_pos0", base + self.t0, unsigned(TOKEN_BITS))
        self.lo = wire(m, f"{name}_lo", window_start(window, self.pos0), unsigned(TOKEN_BITS))
        self.hi = wire(m, f"{name}_hi", self.pos0 + self.count - 1, unsigned(TOKEN_BITS))
        self._next_lo = wire(m, f"{name}_nlo", window_start(window, self.pos0 + tq),
                             unsigned(TOKEN_BITS + 1))
        self.a0 = wire(m, f"{name}_a0", Mux(self.first, self.lo & ~(MX_BLOCK - 1), self.c0),
                       unsigned(TOKEN_BITS + 1))
        end = self.c0 + chunk
        self.last_chunk = wire(m, f"{name}_lastc", end > self.hi)
        self.n = wire(m, f"{name}_n", Mux(self.last_chunk, self.hi + 1, end) - self.a0,
                      unsigned(TOKEN_BITS + 1))
        self.last_head = self.h == cfg.kv.kv_heads - 1

    def start(self, m, lo):
        """Start at the first chunk of head 0 of tile 0 of a step whose first position is
        ``lo`` (the value being loaded into the step's registers this cycle)."""
        m.d.sync += [self.tile.eq(0), self.h.eq(0),
                     self.c0.eq(lo & ~(self._cfg.chunk - 1)),
                     self.first.eq(1), self.done.eq(0), self.sub.eq(0)]

    def advance(self, m):
        """To the next chunk (``sub`` back to 0)."""
        chunk = self._cfg.chunk
        m.d.sync += self.sub.eq(0)
        with m.If(self.last_chunk):
            m.d.sync += [self.c0.eq(self.lo & ~(chunk - 1)), self.first.eq(1)]
            with m.If(self.last_head):
                m.d.sync += self.h.eq(0)
                with m.If(self.last_tile):
                    m.d.sync += self.done.eq(1)
                with m.Else():
                    m.d.sync += [self.tile.eq(self.tile + 1),
                                 self.c0.eq(self._next_lo & ~(chunk - 1))]
            with m.Else():
                m.d.sync += self.h.eq(self.h + 1)
        with m.Else():
            m.d.sync += [self.c0.eq(self.c0 + chunk), self.first.eq(0)]


class Walker(wiring.Component):
    """A unit that walks the step's chunks: the ports that start its walk (``start``, ``lo``,
    ``base``, ``tokens``, ``window``, as :class:`CommandIssuer` says) beside its own
    ``members``."""

    def __init__(self, config, members: dict):
        self._config = config
        super().__init__({"start": In(1), "lo": In(TOKEN_BITS), "base": In(TOKEN_BITS),
                          "tokens": In(9), "window": In(16), **members})

    def _walk(self, m, name: str) -> ChunkWalk:
        """The unit's walk, started in a cycle with ``start`` high."""
        walk = ChunkWalk(m, name, self._config, self.base, self.tokens, self.window)
        with m.If(self.start):
            walk.start(m, self.lo)
        return walk


class CommandIssuer(Walker):
    """Walks the step's chunks and asks the array for each: ``Q K^T`` (M = the row tile's rows,
    K = ``head_dim``, N = the chunk's positions n), then ``P V`` (M = the rows, K = n, N =
    ``v_dim``). ``config`` is the :class:`~scoville.rtl.attention.AttentionConfig`.

    A cycle with ``start`` high starts the walk at the step's first chunk: ``base`` (the
    step's first position), ``tokens`` (its tokens) and ``window`` (its sliding window, 0: all)
    are held by the controller while the walk runs, ``lo`` is the first row tile's window
    start in the start cycle.

    Timing: from the cycle after ``start``, a command is offered until taken, the next from
    the cycle after, until the walk's last chunk's ``P V`` is taken.

    Attributes
    ----------
    start : In(1)
    lo, base : In(TOKEN_BITS)
    tokens : In(9)
    window : In(16)
    cmd : Out(stream.Signature(command_layout(array)))
    """

    def __init__(self, config):
        super().__init__(config, {"cmd": Out(stream.Signature(command_layout(config.array)))})

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        walk = self._walk(m, "cmw")
        with m.If(~walk.done):
            m.d.comb += [self.cmd.valid.eq(1), self.cmd.payload.m.eq(walk.rows),
                         self.cmd.payload.k.eq(Mux(walk.sub, walk.n, cfg.kv.head_dim)),
                         self.cmd.payload.n.eq(Mux(walk.sub, cfg.v_dim, walk.n))]
            with m.If(self.cmd.ready):
                m.d.sync += walk.sub.eq(1)
                with m.If(walk.sub):
                    walk.advance(m)
        return m


class ReadIssuer(Walker):
    """Walks the step's chunks and asks the cache for each: its K lines (``kv`` 0, the whole
    token), then its V lines, one read per column tile of ``P V`` (``kv`` 1, lines ``tile *
    v_lines`` on, ``v_lines`` of each token; the whole token when there is one tile), of KV
    head ``h``, positions ``a0 .. a0 + n - 1`` of sequence ``seq``. ``config`` is the
    :class:`~scoville.rtl.attention.AttentionConfig`; ``start``, ``lo``, ``base`` and
    ``tokens`` as :class:`CommandIssuer`'s.

    Timing: from the cycle after ``start``, a read is offered until taken, the next from the
    cycle after, until the walk's last chunk's last V read is taken.

    Attributes
    ----------
    start : In(1)
    lo, base : In(TOKEN_BITS)
    tokens : In(9)
    window : In(16)
    seq : In(SEQ_BITS)
    req : Out(stream.Signature(request_layout()))
    """

    def __init__(self, config):
        super().__init__(config, {"seq": In(SEQ_BITS),
                                  "req": Out(stream.Signature(request_layout()))})

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        VT, VL = cfg.v_tiles, cfg.v_lines
        walk = self._walk(m, "rdw")
        vt = Signal(range(max(VT, 2)))  # V's column tile
        req = self.req.payload
        with m.If(~walk.done):
            m.d.comb += [self.req.valid.eq(1), req.op.eq(CacheOp.READ), req.seq.eq(self.seq),
                         req.kv.eq(walk.sub), req.head.eq(walk.h), req.start.eq(walk.a0),
                         req.count.eq(walk.n)]
            # The line window: K whole; V's column tile (the whole token when one tile).
            m.d.comb += [req.line0.eq(Mux(walk.sub, vt * VL, 0)),
                         req.nlines.eq(Mux(walk.sub & (VT > 1), VL, 0))]
            with m.If(self.req.ready):
                m.d.sync += walk.sub.eq(1)
                with m.If(walk.sub):
                    m.d.sync += vt.eq(vt + 1)
                    with m.If(vt == VT - 1):
                        m.d.sync += vt.eq(0)
                        walk.advance(m)
        return m
