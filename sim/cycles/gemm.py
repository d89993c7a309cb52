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

``os``: ``T = ceil(M/R) * ceil(N/C)`` output tiles, ``max(K, R, C)`` steps apart::

    1 + (T - 1) * max(K, R, C) + K + C + m_last

(the accept cycle; the tiles; C cycles for the last tile's final step to cross the array; one
row of C per cycle for its ``m_last = M - (ceil(M/R) - 1) * R`` rows).

``ws``: ``ceil(N/C) * ceil(M/acc_rows) * ceil(K/R)`` weight tiles; a tile whose chunk of A has
``mc`` rows takes ``max(mc, R)`` steps (one A row, and one weight row, per step)::

    1 + 1 + sum(max(mc, R) over all tiles but the last) + mc_last + R + C

(the accept cycle; the prologue step that writes the first weight row; the tiles; the last
tile's rows crossing R rows and C columns and its last row leaving).

A run of commands takes the sum of its commands plus 1 (the last row's handshake, which a
rejected command after it overlaps). A rejected command (a zero dimension) takes 1 cycle.

Steps, counted from the cycle after the command's accept (``S`` = ``max(K, R, C)``):

- ``os``: tile ``t``'s K steps (each takes one A and one B beat) are steps ``t * S .. t * S +
  K - 1``; its row ``r`` leaves the array at step ``t * S + K + C + r`` (one step through the
  operand register, ``r`` through the row's skew, ``C`` across the row of PEs).
- ``ws``: step 0 (the prologue) takes row 0 of the first weight tile; a tile's step ``s``
  takes A row ``s`` when ``s < mc``, takes weight row ``s + 1`` when that row exists (below
  ``R`` and below K), and at its last step row 0 of the next tile; an A row of the last K tile
  leaves as a row of C ``R + C`` steps after it was taken.

The command ends with its last row's step; the next may be accepted in the cycle after.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from scoville.rtl.gemm import COUNTERS as COUNTER_LAYOUT

from .stream import ALWAYS, Consumer, Producer, Schedule, Source, Timing

__all__ = [
    "COUNTERS",
    "command_cycles",
    "command_steps",
    "ideal_cycles",
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
        span = max(k, R, C)
        rows = [min(R, m - i0) for i0 in range(0, m, R) for _ in range(0, n, C)]
        steps = np.zeros((len(rows) * span + k + C + R, 3), dtype=bool)
        for t, tile_rows in enumerate(rows):
            steps[t * span: t * span + k, :2] = True
            at = t * span + k + C
            steps[at: at + tile_rows, 2] = True
    else:
        chunks = [min(config.acc_rows, m - c0) for c0 in range(0, m, config.acc_rows)]
        tiles = [(mc, min(R, k - k0), k0 + R >= k)
                 for _ in range(0, n, C) for mc in chunks for k0 in range(0, k, R)]
        total = 1 + sum(max(mc, R) for mc, _, _ in tiles) + R + C
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
                steps[g + R + C: g + R + C + mc, 2] = True
            g += span
    last = int(np.flatnonzero(steps[:, 2])[-1])
    return steps[: last + 1]


def timing(config, shapes: Iterable[tuple[int, int, int]], sources: dict[str, Source],
           ready: Schedule = ALWAYS) -> Timing:
    """Timed model of a run of commands: the handshake cycles of ``cmd``, ``a``, ``b`` and
    ``o`` and the counters ``busy``, ``stall_a``, ``stall_b``, ``stall_out``, ``idle`` and
    ``rejected``, given a :class:`Source` for each of ``cmd``, ``a`` and ``b`` and the ready
    schedule of ``o``.

    Cycle rule, as the engine's: a command is taken when no command is active; a good one
    starts its steps in the next cycle. A step runs when the beats it needs are in their
    buffers (written in an earlier cycle) and, if it emits, the output register is empty or
    taken this cycle; otherwise it stalls, counted as ``stall_out``, else ``stall_a``, else
    ``stall_b``. A buffer takes a beat while it holds fewer than ``buffer_depth``. Cycles with
    no active command count ``busy`` when a command is offered, ``stall_out`` while a row waits
    for ``ready``, else ``idle``.
    """
    shapes = [tuple(s) for s in shapes]
    steps = [command_steps(config, *s) if min(s) else None for s in shapes]
    beats_a, beats_b, rows = (int(sum(p[:, k].sum() for p in steps if p is not None))
                              for k in range(3))
    # Each step as one small integer (bit 0: takes A, bit 1: takes B, bit 2: emits): a flat
    # list is quicker to build and to read than a list of rows.
    programs = [None if p is None else (p[:, 0] | p[:, 1] << 1 | p[:, 2] << 2).tolist()
                for p in steps]
    cmd = Producer(sources["cmd"], len(shapes))
    a, b = Producer(sources["a"], beats_a), Producer(sources["b"], beats_b)
    out = Consumer(ready)
    depth = config.buffer_depth
    count = dict.fromkeys(COUNTERS, 0)
    level_a = level_b = 0
    program, pos = None, 0
    o_valid = False
    t = 0
    limit = 64 * (sum(len(p) for p in programs if p) + len(shapes) + 1) + 100_000
    while len(out.cycles) < rows or cmd.sent < len(shapes):
        if t > limit:
            raise RuntimeError(f"gemm timed model: no progress after {t} cycles")
        o_ready = ready[t]
        pop_a = pop_b = False
        emit = False
        if program is None:
            if cmd.offers(t):
                cmd.take(t)
                count["busy"] += 1
                program, pos = programs[cmd.sent - 1], 0
                count["rejected"] += program is None
            elif o_valid and not o_ready:
                count["stall_out"] += 1
            else:
                count["idle"] += 1
        else:
            code = program[pos]
            take_a, take_b, collect = code & 1, code >> 1 & 1, code >> 2
            if collect and o_valid and not o_ready:
                count["stall_out"] += 1
            elif take_a and not level_a:
                count["stall_a"] += 1
            elif take_b and not level_b:
                count["stall_b"] += 1
            else:
                count["busy"] += 1
                pop_a, pop_b, emit = take_a, take_b, collect
                pos += 1
                if pos == len(program):
                    program = None
        if o_valid and o_ready:
            out.take(t)
        o_valid = (o_valid and not o_ready) or emit
        push_a = level_a < depth and a.offers(t)
        if push_a:
            a.take(t)
        push_b = level_b < depth and b.offers(t)
        if push_b:
            b.take(t)
        level_a += push_a - pop_a
        level_b += push_b - pop_b
        t += 1
    return Timing({"cmd": cmd.cycles, "a": a.cycles, "b": b.cycles, "o": out.cycles}, count)


def command_cycles(config, m: int, k: int, n: int) -> int:
    """Cycles of one command, from its accept to its last row leaving the engine."""
    if min(m, k, n) == 0:
        return 1
    R, C = config.rows, config.cols
    if config.dataflow == "os":
        tiles = math.ceil(m / R) * math.ceil(n / C)
        m_last = m - (math.ceil(m / R) - 1) * R
        return 1 + (tiles - 1) * max(k, R, C) + k + C + m_last
    chunks = [min(config.acc_rows, m - c0) for c0 in range(0, m, config.acc_rows)]
    passes = math.ceil(n / C) * math.ceil(k / R)
    steps = passes * sum(max(mc, R) for mc in chunks) - max(chunks[-1], R)
    return 2 + steps + chunks[-1] + R + C


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
