"""Timed model of :class:`scoville.rtl.gemm_quant.GemmQuant`: its parts' models stepped together,
cycle by cycle, since each part's ``ready`` depends on the next part's state.

- the array: :class:`scoville.sim.cycles.gemm.Engine`, offered a command by the front end and
  given the buffer's ``i.ready`` as its ``o.ready``;
- the reblocking buffer: :class:`Buffer` below (the rules of
  :mod:`scoville.rtl.gemm_quant_reblock`);
- the quantizer: :class:`~scoville.sim.cycles.stream.StallPipeline` of ``quant.latency``
  stages, given the ``o`` stream's ready schedule.

The front end takes a command when the array is idle and the buffer's command queue has room;
a good one starts the array in the same cycle and enters the queue. Every cycle the parts'
``ready`` are read from their state at the start of the cycle, then all parts step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from scoville.rtl.gemm_quant_reblock import CMD_DEPTH
from scoville.rtl.lib.formats import MX_BLOCK

from . import gemm as gemm_timed
from .stream import ALWAYS, Producer, Schedule, Source, StallPipeline, Timing

__all__ = ["COUNTERS", "Buffer", "blocks", "inner_timing", "timing"]

#: The counters :func:`timing` predicts: the array's, by their names in the block's
#: ``counters`` port, and ``rejected``.
COUNTERS = tuple(f"array.{name}" for name in gemm_timed.COUNTERS) + ("rejected",)


class Buffer:
    """The reblocking buffer (:class:`scoville.rtl.gemm_quant_reblock.Reblock`) stepped once per
    cycle.

    Attributes
    ----------
    o_valid : bool
        A line is offered on ``o`` (at the start of the cycle about to be stepped).
    taken : list of int
        The cycle of each handshake on ``o``.
    """

    def __init__(self, rows: int, cols: int, groups: int):
        self._rows, self._parts, self._groups = rows, MX_BLOCK // cols, groups
        self._queue: list[tuple[int, int]] = []
        self._r = self._t = self._lg = self._i0 = self._grp = 0
        self._occupied: set[int] = set()
        self._done: deque[int] = deque()
        self._fetched = False
        self.o_valid = False
        self.taken: list[int] = []

    @property
    def cmd_ready(self) -> bool:
        return len(self._queue) < CMD_DEPTH

    @property
    def i_ready(self) -> bool:
        """A command is queued, and the next row's line is free or already being filled."""
        return bool(self._queue) and (
            self._t != 0 or self._grp * self._rows + self._r not in self._occupied)

    def step(self, t: int, cmd: tuple[int, int] | None, write: bool, o_ready: bool) -> None:
        """Cycle ``t``: ``cmd`` is the (M, N) handed to the queue this cycle, or None; ``write``
        says a row is taken on ``i`` (the array's ``o.valid`` and :attr:`i_ready`, read at
        the start of the cycle); ``o_ready`` is the quantizer's ``i.ready``."""
        load = self._fetched and (not self.o_valid or o_ready)
        issue = bool(self._done) and (not self._fetched or load)
        if self.o_valid and o_ready:
            self.taken.append(t)
        if issue:
            self._occupied.discard(self._done.popleft())
        if write:
            self._write()
        if cmd is not None:
            self._queue.append(cmd)
        self._fetched = issue or (self._fetched and not load)
        self.o_valid = load or (self.o_valid and not o_ready)

    def _write(self) -> None:
        R = self._rows
        m, n = self._queue[0]
        slot = self._grp * R + self._r
        if self._t == 0:
            self._occupied.add(slot)
        if self._t == self._parts - 1:
            self._done.append(slot)
        if self._r != R - 1 and self._r + 1 != m - self._i0:
            self._r += 1
            return
        self._r = 0
        if self._t != self._parts - 1:
            self._t += 1
            return
        self._t = 0
        self._grp = (self._grp + 1) % self._groups
        if self._lg != n // MX_BLOCK - 1:
            self._lg += 1
            return
        self._lg = 0
        if self._i0 + R >= m:
            self._i0 = 0
            self._queue.pop(0)
        else:
            self._i0 += R


def blocks(m: int, n: int) -> int:
    """MX blocks one good command emits."""
    return m * (n // MX_BLOCK)


def timing(config, shapes: Iterable[tuple[int, int, int]], sources: dict[str, Source],
           ready: Schedule = ALWAYS) -> Timing:
    """Timed model of a run of commands: the handshake cycles of ``cmd``, ``a``, ``b`` and
    ``o`` and the counters :data:`COUNTERS`, given a :class:`Source` for each of ``cmd``,
    ``a`` and ``b`` and the ready schedule of ``o``."""
    return inner_timing(config, shapes, sources, ready)[0]


def inner_timing(config, shapes: Iterable[tuple[int, int, int]], sources: dict[str, Source],
                 ready: Schedule = ALWAYS) -> tuple[Timing, dict[str, list[int]]]:
    """:func:`timing`, and the handshake cycles of the streams between the parts:
    ``array.o`` (rows of C into the buffer) and ``reblock.o`` (lines into the quantizer)."""
    shapes = [tuple(s) for s in shapes]
    array = config.array
    good = [config.status(*s) == "ok" for s in shapes]
    kept = [s for s, g in zip(shapes, good, strict=True) if g]
    progs = gemm_timed.programs(array, kept)
    beats_a, beats_b, _ = gemm_timed.beat_counts(array, kept)
    total = sum(blocks(m, n) for m, _, n in kept)
    cmd = Producer(sources["cmd"], len(shapes))
    engine = gemm_timed.Engine(array, Producer(sources["a"], beats_a),
                               Producer(sources["b"], beats_b))
    buffer = Buffer(array.rows, array.cols, config.groups)
    quant = StallPipeline(config.quant.latency)
    out = quant.taken
    bits = ready.drawn
    rejected = started = 0
    limit = 64 * (sum(len(p) for p in progs) + total + len(shapes) + 1) + 100_000
    t = 0
    while len(out) < total or cmd.sent < len(shapes):
        if t > limit:
            raise RuntimeError(f"gemm_quant timed model: no progress after {t} cycles")
        if t >= len(bits):
            ready[t]
        o_ready = bits[t] == 1
        q_ready = quant.ready(o_ready)
        i_ready = buffer.i_ready
        cmd_ready = engine.ready and buffer.cmd_ready
        offered = cmd.offers(t)
        to_array: list[int] | bool = False
        to_buffer = None
        if offered and cmd_ready:
            if good[cmd.sent]:
                m, _, n = shapes[cmd.sent]
                to_array, to_buffer = progs[started], (m, n)
                started += 1
            else:
                rejected += 1
            cmd.take(t)
        line_valid = buffer.o_valid
        write = engine.o_valid and i_ready
        engine.step(t, to_array, i_ready)
        buffer.step(t, to_buffer, write, q_ready)
        quant.step(t, line_valid, o_ready)
        t += 1
    counters = {f"array.{name}": value for name, value in engine.counters.items()}
    counters["rejected"] = rejected
    return (Timing({"cmd": cmd.cycles, "a": engine.a.cycles, "b": engine.b.cycles, "o": out},
                   counters),
            {"array.o": engine.rows, "reblock.o": buffer.taken})
