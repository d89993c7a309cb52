"""Cycle model of :class:`scoville.rtl.gemm.Gemm`, and the usual analytical references.

The engine runs a fixed schedule per command and holds (stalls) whole cycles when an operand
beat is missing or a row of C cannot leave; it counts those cycles. So for any stream timing

    cycles = run_cycles(config, shapes) + stall cycles (the engine's counters)

where cycle 0 is the first cycle the command may be offered and the count runs up to and
including the handshake of the last row of C. With streams that keep up the stalls are 0.

Per command (``R`` x ``C`` array; M, K, N):

``os``: ``T = ceil(M/R) * ceil(N/C)`` output tiles, ``max(K, R, C)`` steps apart::

    1 + (T - 1) * max(K, R, C) + K + C + m_last

(the accept cycle; the tiles; C cycles for the last tile's final step to cross the array; one
row of C per cycle for its ``m_last = M - (ceil(M/R) - 1) * R`` rows).

``ws``: ``ceil(N/C) * ceil(M/acc_rows) * ceil(K/R)`` weight tiles; a tile whose chunk of A has
``mc`` rows takes ``max(mc, R)`` steps (one A row, and one weight row, per step)::

    1 + 1 + sum(max(mc, R) over all tiles but the last) + mc_last + R + C

(the accept cycle; the prologue step that writes the first weight row; the tiles; the last
tile's rows crossing R rows and C columns and its last row leaving).

A run of commands takes the sum of its commands plus 1 (the last row's handshake). A rejected
command (a zero dimension) takes 1 cycle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = [
    "command_cycles",
    "ideal_cycles",
    "run_cycles",
    "scalesim_cycles",
    "useful_macs",
    "utilization",
]


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
    return sum(command_cycles(config, *shape) for shape in shapes) + 1


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
