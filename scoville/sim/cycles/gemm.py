"""Timed model of :class:`scoville.rtl.gemm.Gemm`, its closed forms, and the usual analytical
references.

The engine runs a fixed schedule per command: a list of steps, each of which may take an A
beat and a B beat from the operand buffers and may emit a row of C (:func:`command_steps`).
It holds (stalls) a whole cycle when a step needs a beat its buffer does not hold yet, or must
emit a row while the previous row still waits on ``o.ready``. :func:`timing` runs that rule
cycle by cycle against the streams' schedules (the operand buffers of ``buffer_depth`` beats,
the command handshake, the output register) and predicts the cycle of every handshake on
``cmd``, ``a``, ``b`` and ``o``, and every counter. Cycle 0 is the first cycle a command may
be offered.

With streams that keep up no step stalls, and the closed forms below give the count (the fast
path, valid at any size; a test checks that both agree). Per command (``R`` x ``C`` array; M, K, N):

``os``: ``T = ceil(M/R) * ceil(N/C)`` output tiles, ``S = max(K, R, C + add_latency)`` steps
apart (:meth:`~scoville.rtl.gemm.GemmConfig.tile_steps`)::

    1 + (T - 1) * S + K + C + D + m_last

(the accept cycle; the tiles; C cycles for the last tile's final step to cross the array; the
PEs' product registers', the block units', ``bf16``'s partial sums' and NVFP4's tensor
scale's ``D = result_delay`` stages, 0 in ``int8`` and ``int4`` unless ``pe_latency`` is 1
(:attr:`~scoville.rtl.gemm.GemmConfig.result_delay`); one row of C per cycle for its
``m_last = M - (ceil(M/R) - 1) * R`` rows).

``ws``: ``ceil(N/C) * ceil(M/acc_rows) * ceil(K/R)`` weight tiles; a tile whose chunk of A has
``mc`` rows takes ``max(mc, R)`` steps (one A row, and one weight row, per step)::

    1 + 1 + sum(max(mc, R) over all tiles but the last) + mc_last + R + C + D

(the accept cycle; the prologue step that writes the first weight row; the tiles; the last
tile's rows crossing R rows and C columns, and NVFP4's tensor scale's ``D = result_delay``
stages; its last row leaving).

A run of commands takes the sum of its commands plus 1 (the last row's handshake, which a
rejected command after it overlaps). A rejected command (a zero dimension) takes 1 cycle.

Steps, counted from the cycle after the command's accept (``S`` as above):

- ``os``: tile ``t``'s K steps (each takes one A and one B beat) are steps ``t * S .. t * S +
  K - 1``; its row ``r`` leaves the array at step ``t * S + K + C + D + r`` (one step through
  the operand register, ``r`` through the row's skew, ``C`` across the row of PEs, ``D``
  through the PEs' product registers, the block units, the partial sums and the tensor
  scale).
- ``ws``: step 0 (the prologue) takes row 0 of the first weight tile; a tile's step ``s``
  takes A row ``s`` when ``s < mc``, takes weight row ``s + 1`` when that row exists (below
  ``R`` and below K), and at its last step row 0 of the next tile; an A row of the last K tile
  leaves as a row of C ``R + C + D`` steps after it was taken.

The command ends with its last row's step; the next may be accepted in the cycle after.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from scoville.rtl.gemm import COUNTERS as COUNTER_LAYOUT

from .stream import ALWAYS, Consumer, Producer, Schedule, Source, Timing
from .unit import run

__all__ = [
    "COUNTERS",
    "Engine",
    "beat_counts",
    "command_cycles",
    "command_steps",
    "ideal_cycles",
    "programs",
    "run_cycles",
    "scalesim_cycles",
    "timing",
    "useful_macs",
    "utilization",
]


#: The engine's counters (the fields of its ``counters`` port), as :func:`timing` predicts them.
COUNTERS = tuple(name for name, _ in COUNTER_LAYOUT)


def command_steps(config, m: int, k: int, n: int) -> np.ndarray:
    """The schedule of one good command: an array of shape (steps, 3) of booleans, each step's
    (takes an A beat, takes a B beat, emits a row of C), from the step after the accept to the
    step that emits the last row."""
    R, C = config.rows, config.cols
    if config.dataflow == "os":
        span, late = config.tile_steps(k), config.result_delay
        rows = [min(R, m - i0) for i0 in range(0, m, R) for _ in range(0, n, C)]
        steps = np.zeros((len(rows) * span + k + C + late + R, 3), dtype=bool)
        for t, tile_rows in enumerate(rows):
            steps[t * span: t * span + k, :2] = True
            at = t * span + k + C + late
            steps[at: at + tile_rows, 2] = True
    else:
        chunks = [min(config.acc_rows, m - c0) for c0 in range(0, m, config.acc_rows)]
        tiles = [(mc, min(R, k - k0), k0 + R >= k)
                 for _ in range(0, n, C) for mc in chunks for k0 in range(0, k, R)]
        late = config.result_delay
        total = 1 + sum(max(mc, R) for mc, _, _ in tiles) + R + C + late
        steps = np.zeros((total, 3), dtype=bool)
        steps[0, 1] = True
        g = 1
        for index, (mc, kr, last_k) in enumerate(tiles):
            span = max(mc, R)
            steps[g: g + mc, 0] = True
            steps[g: g + min(kr, R) - 1, 1] = True
            if index < len(tiles) - 1:
                steps[g + span - 1, 1] = True
            if last_k:
                steps[g + R + C + late: g + R + C + late + mc, 2] = True
            g += span
    last = int(np.flatnonzero(steps[:, 2])[-1])
    return steps[: last + 1]


def programs(config, shapes: Iterable[tuple[int, int, int]]) -> list[list[int] | None]:
    """Each command's schedule (:func:`command_steps`) as a list of small integers, one per
    step (bit 0: takes an A beat, bit 1: takes a B beat, bit 2: emits a row of C); None for a
    command with a zero dimension (rejected). A flat list is quicker to read than rows."""
    out = []
    for shape in shapes:
        if min(shape) == 0:
            out.append(None)
            continue
        p = command_steps(config, *shape)
        out.append((p[:, 0] | p[:, 1] << 1 | p[:, 2] << 2).tolist())
    return out


class Engine:
    """The engine's control as a unit model (:mod:`scoville.sim.cycles.unit`): the operand
    buffers' levels, the running command's schedule, the output register and the counters.
    :func:`timing` steps it between the block's streams; a composed block steps it beside its
    other parts, with :class:`~scoville.sim.cycles.unit.Wire` ports where a part drives it.

    Each component of the RTL has its part here: the operand buffers
    (:class:`~scoville.rtl.gemm_opbuffer.OperandBuffer`) are their levels; the dataflow's sequencer
    (``OsSequencer``, ``WsSequencer``) is the program of :func:`command_steps`, which also
    places each row of C the array (and ``ws``'s accumulator) emits; the shell
    (:class:`~scoville.rtl.gemm.Gemm`) is the accept, the stall rule, the output register
    and the counters.

    Parameters
    ----------
    config : GemmConfig
    cmd : input port
        Commands; a beat's ``payload`` is its program (:func:`programs`; None: rejected).
    a, b : input port
        The operand beats (every beat of the run).
    o : output port
        The rows of C.

    Attributes
    ----------
    o_valid : bool
        A row of C is offered on ``o`` (at the start of the cycle about to be stepped).
    counters : dict of str to int
        ``busy``, ``stall_a``, ``stall_b``, ``stall_out``, ``idle``, ``rejected`` so far.
    """

    __slots__ = ("_depth", "_level_a", "_level_b", "_pos", "_program", "a", "b", "cmd",
                 "counters", "o", "o_valid")

    def __init__(self, config, cmd, a, b, o):
        self.cmd, self.a, self.b, self.o = cmd, a, b, o
        self._depth = config.buffer_depth
        self._level_a = self._level_b = 0
        self._program: list[int] | None = None
        self._pos = 0
        self.o_valid = False
        self.counters = dict.fromkeys(COUNTERS, 0)

    @property
    def ready(self) -> bool:
        """``cmd.ready``: no command is running."""
        return self._program is None

    @property
    def a_ready(self) -> bool:
        """``a.ready``: the A buffer has room (its level at the start of the cycle)."""
        return self._level_a < self._depth

    @property
    def b_ready(self) -> bool:
        """``b.ready``: the B buffer has room."""
        return self._level_b < self._depth

    def step(self, t: int) -> None:
        """Cycle ``t``, as the engine's rule: a command is taken when no command is active; a
        good one starts its steps in the next cycle. A step runs when the beats it needs are in
        their buffers (written in an earlier cycle) and, if it emits, the output register is
        empty or taken this cycle; otherwise it stalls, counted as ``stall_out``, else
        ``stall_a``, else ``stall_b``. A buffer takes a beat while it holds fewer than
        ``buffer_depth``. Cycles with no active command count ``busy`` when a command is
        offered, ``stall_out`` while a row waits for ``ready``, else ``idle``.
        """
        count = self.counters
        o_valid = self.o_valid
        o_ready = self.o.accepts(t)
        pop_a = pop_b = emit = 0
        program = self._program
        if program is None:
            cmd = self.cmd
            if cmd.offers(t):
                count["busy"] += 1
                program = cmd.payload
                if program is None:
                    count["rejected"] += 1
                else:
                    self._program, self._pos = program, 0
                cmd.take(t)
            elif o_valid and not o_ready:
                count["stall_out"] += 1
            else:
                count["idle"] += 1
        else:
            code = program[self._pos]
            take_a, take_b, collect = code & 1, code >> 1 & 1, code >> 2
            if collect and o_valid and not o_ready:
                count["stall_out"] += 1
            elif take_a and not self._level_a:
                count["stall_a"] += 1
            elif take_b and not self._level_b:
                count["stall_b"] += 1
            else:
                count["busy"] += 1
                pop_a, pop_b, emit = take_a, take_b, collect
                self._pos += 1
                if self._pos == len(program):
                    self._program = None
        if o_valid and o_ready:
            self.o.take(t)
        self.o_valid = (o_valid and not o_ready) or bool(emit)
        depth = self._depth
        a, b = self.a, self.b
        push_a = self._level_a < depth and a.offers(t)
        if push_a:
            a.take(t)
        push_b = self._level_b < depth and b.offers(t)
        if push_b:
            b.take(t)
        self._level_a += push_a - pop_a
        self._level_b += push_b - pop_b


def beat_counts(config, shapes: Iterable[tuple[int, int, int]]) -> tuple[int, int, int]:
    """The A beats, B beats and rows of C of a run of commands."""
    totals = [0, 0, 0]
    for shape in shapes:
        if min(shape):
            steps = command_steps(config, *shape)
            for k in range(3):
                totals[k] += int(steps[:, k].sum())
    return totals[0], totals[1], totals[2]


def timing(config, shapes: Iterable[tuple[int, int, int]], sources: dict[str, Source],
           ready: Schedule = ALWAYS) -> Timing:
    """Timed model of a run of commands: the handshake cycles of ``cmd``, ``a``, ``b`` and
    ``o`` and the counters ``busy``, ``stall_a``, ``stall_b``, ``stall_out``, ``idle`` and
    ``rejected``, given a :class:`Source` for each of ``cmd``, ``a`` and ``b`` and the ready
    schedule of ``o``: the :class:`Engine` stepped against them."""
    shapes = [tuple(s) for s in shapes]
    progs = programs(config, shapes)
    beats_a, beats_b, rows = beat_counts(config, shapes)
    cmd = Producer(sources["cmd"], len(shapes), progs)
    o = Consumer(ready)
    engine = Engine(config, cmd, Producer(sources["a"], beats_a),
                    Producer(sources["b"], beats_b), o)

    def cycle(t: int) -> int:
        engine.step(t)
        return t + 1

    run("gemm", cycle, lambda: len(o.cycles) == rows and cmd.sent == len(shapes),
        64 * (sum(len(p) for p in progs if p) + len(shapes) + 1) + 100_000,
        lambda: {"engine": engine})
    return Timing({"cmd": cmd.cycles, "a": engine.a.cycles, "b": engine.b.cycles,
                   "o": o.cycles}, engine.counters)


def command_cycles(config, m: int, k: int, n: int) -> int:
    """Cycles of one command, from its accept to its last row leaving the engine."""
    if min(m, k, n) == 0:
        return 1
    R, C = config.rows, config.cols
    if config.dataflow == "os":
        tiles = math.ceil(m / R) * math.ceil(n / C)
        m_last = m - (math.ceil(m / R) - 1) * R
        return 1 + (tiles - 1) * config.tile_steps(k) + k + C + config.result_delay + m_last
    chunks = [min(config.acc_rows, m - c0) for c0 in range(0, m, config.acc_rows)]
    passes = math.ceil(n / C) * math.ceil(k / R)
    steps = passes * sum(max(mc, R) for mc in chunks) - max(chunks[-1], R)
    return 2 + steps + chunks[-1] + R + C + config.result_delay


def run_cycles(config, shapes: Iterable[tuple[int, int, int]]) -> int:
    """Cycles of a run of commands with streams that keep up (0 for no command)."""
    shapes = list(shapes)
    if not shapes:
        return 0
    # The last row's handshake; a rejected command after it is taken in the same cycle.
    return sum(command_cycles(config, *shape) for shape in shapes) + (min(shapes[-1]) > 0)


def useful_macs(m: int, k: int, n: int) -> int:
    return m * k * n


def ideal_cycles(config, m: int, k: int, n: int) -> int:
    """The schedule without fill, drain or padding waste: ``ceil(M/R) * ceil(N/C) * K`` for
    ``os`` (every tile's K steps back to back); ``ceil(K/R) * ceil(N/C) * M`` for ``ws`` (every
    weight tile's M rows back to back)."""
    R, C = config.rows, config.cols
    if config.dataflow == "os":
        return math.ceil(m / R) * math.ceil(n / C) * k
    return math.ceil(k / R) * math.ceil(n / C) * m


def scalesim_cycles(config, m: int, k: int, n: int) -> int:
    """SCALE-Sim's analytical estimate (no overlap between tiles): ``os``
    ``ceil(M/R) * ceil(N/C) * (R + C + K - 2) - 1``; ``ws``
    ``ceil(K/R) * ceil(N/C) * (2R + C + M - 2) - 1``."""
    R, C = config.rows, config.cols
    if config.dataflow == "os":
        return math.ceil(m / R) * math.ceil(n / C) * (R + C + k - 2) - 1
    return math.ceil(k / R) * math.ceil(n / C) * (2 * R + C + m - 2) - 1


def utilization(config, macs: int, cycles: int) -> float:
    """Useful MACs over what the array could do in ``cycles``."""
    return macs / (config.rows * config.cols * cycles) if cycles else 0.0
