"""Timed model of :class:`scoville.rtl.gemm_quant.GemmQuant`: its parts' models stepped together,
cycle by cycle, since each part's ``ready`` depends on the next part's state.

- the array: :class:`scoville.sim.cycles.gemm.Engine`, offered a command by the front end and
  given the buffer's ``i.ready`` as its ``o.ready``;
- the reblocking buffer: :class:`Buffer` below (the rules of
  :mod:`scoville.rtl.gemm_quant_reblock`);
- the quantizer: :class:`~scoville.sim.cycles.stream.StallPipeline` of ``quant.latency``
  stages, given the ``o`` stream's ready schedule.

The front end takes a command when the array is idle and the buffer's command queue has room;
a good one starts the array in the same cycle and enters the queue. The parts are unit models
(:mod:`scoville.sim.cycles.unit`) joined by wires: every cycle the wires are set from the
parts' state at the start of the cycle, then all parts step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from scoville.rtl.gemm_quant import Status
from scoville.rtl.gemm_quant_reblock import CMD_DEPTH
from scoville.rtl.lib.formats import MX_BLOCK

from . import gemm as gemm_timed
from .stream import ALWAYS, Consumer, Producer, Schedule, Source, StallPipeline, Timing
from .unit import Wire, run

__all__ = ["COUNTERS", "Buffer", "blocks", "inner_timing", "timing"]

#: The counters :func:`timing` predicts: the array's, by their names in the block's
#: ``counters`` port, and ``rejected``.
COUNTERS = tuple(f"array.{name}" for name in gemm_timed.COUNTERS) + ("rejected",)


class Buffer:
    """The reblocking buffer (:class:`scoville.rtl.gemm_quant_reblock.Reblock`) as a unit model
    (:mod:`scoville.sim.cycles.unit`).

    Parameters
    ----------
    rows, cols, groups : int
        The array's rows and columns, and the line groups of the buffer.
    cmd : input port
        ``(M, N)`` of each good command.
    i : input port
        The array's rows of C.
    o : output port
        Lines to the quantizer.

    Attributes
    ----------
    o_valid : bool
        A line is offered on ``o`` (at the start of the cycle about to be stepped).
    """

    def __init__(self, rows: int, cols: int, groups: int, cmd, i, o):
        self.cmd, self.i, self.o = cmd, i, o
        self._rows, self._parts, self._groups = rows, MX_BLOCK // cols, groups
        self._queue: list[tuple[int, int]] = []
        self._r = self._t = self._lg = self._i0 = self._grp = 0
        self._occupied: set[int] = set()
        self._done: deque[int] = deque()
        self._fetched = False
        self.o_valid = False

    @property
    def cmd_ready(self) -> bool:
        return len(self._queue) < CMD_DEPTH

    @property
    def i_ready(self) -> bool:
        """A command is queued, and the next row's line is free or already being filled."""
        return bool(self._queue) and (
            self._t != 0 or self._grp * self._rows + self._r not in self._occupied)

    def step(self, t: int) -> None:
        """Cycle ``t``: a row is written when ``i`` offers one and :attr:`i_ready`; a line is
        read out of a full group when the output register is empty or taken; a command enters
        the queue when it has room."""
        o_ready = self.o.accepts(t)
        write = self.i_ready and self.i.offers(t)
        cmd = self.cmd.payload if self.cmd_ready and self.cmd.offers(t) else None
        load = self._fetched and (not self.o_valid or o_ready)
        issue = bool(self._done) and (not self._fetched or load)
        if self.o_valid and o_ready:
            self.o.take(t)
        if issue:
            self._occupied.discard(self._done.popleft())
        if write:
            self.i.take(t)
            self._write()
        if cmd is not None:
            self.cmd.take(t)
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
    good = [config.status(*s) == Status.OK for s in shapes]
    kept = [s for s, g in zip(shapes, good, strict=True) if g]
    progs = gemm_timed.programs(array, kept)
    beats_a, beats_b, _ = gemm_timed.beat_counts(array, kept)
    total = sum(blocks(m, n) for m, _, n in kept)
    cmd = Producer(sources["cmd"], len(shapes))
    to_array, to_buffer, rows, lines = Wire(), Wire(), Wire(), Wire()
    out = Consumer(ready)
    engine = gemm_timed.Engine(array, to_array, Producer(sources["a"], beats_a),
                               Producer(sources["b"], beats_b), rows)
    buffer = Buffer(array.rows, array.cols, config.groups, to_buffer, rows, lines)
    quant = StallPipeline(config.quant.latency, lines, out)
    started = rejected = 0

    def cycle(t: int) -> int:
        nonlocal started, rejected
        # The front end: a command is taken when the array is idle and the buffer's queue has
        # room; a good one goes to both in that cycle.
        offered = cmd.offers(t)
        go = offered and good[cmd.sent]
        m, _, n = shapes[cmd.sent] if offered else (0, 0, 0)
        to_array.set(go and buffer.cmd_ready, engine.ready, progs[started] if go else None)
        to_buffer.set(go and engine.ready, buffer.cmd_ready, (m, n))
        rows.set(engine.o_valid, buffer.i_ready)
        lines.set(buffer.o_valid, quant.i_ready(t))
        if offered and engine.ready and buffer.cmd_ready:
            started += go
            rejected += not go
            cmd.take(t)
        engine.step(t)
        buffer.step(t)
        quant.step(t)
        return t + 1

    run("gemm_quant", cycle, lambda: len(out.cycles) == total and cmd.sent == len(shapes),
        64 * (sum(len(p) for p in progs) + total + len(shapes) + 1) + 100_000,
        lambda: {"array": engine, "buffer": buffer, "quant": quant, "array.cmd": to_array,
                 "buffer.cmd": to_buffer, "rows": rows, "lines": lines})
    counters = {f"array.{name}": value for name, value in engine.counters.items()}
    counters["rejected"] = rejected
    return (Timing({"cmd": cmd.cycles, "a": engine.a.cycles, "b": engine.b.cycles,
                    "o": out.cycles}, counters),
            {"array.o": rows.cycles, "reblock.o": lines.cycles})
