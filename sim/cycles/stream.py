"""Cycle model of a stalling pipeline under random valid gaps and ready back-pressure.

Cycle 0 is the first cycle the testbench may offer data. The producer offers its next item in
cycle ``t`` when ``valid[t]`` is true and then holds it until taken (stream rules); the consumer
raises ``ready`` in cycle ``t`` when ``ready[t]`` is true. The pipeline (see
:func:`scoville.rtl.pipeline.stall_pipeline`) advances as a whole when its last stage is empty
or taken. The count is the number of cycles up to and including the last output handshake.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["Schedule", "pipeline_cycles", "pipeline_cycles_ideal"]


class Schedule:
    """An endless, replayable sequence of booleans: true with probability ``1 - gap``.

    Two instances with the same ``seed`` and ``gap`` give the same sequence, so the testbench
    and the cycle model see the same gaps.
    """

    _CHUNK = 4096

    def __init__(self, seed: int, gap: float):
        self._rng = np.random.default_rng(seed)
        self._gap = gap
        self._bits: list[bool] = []

    def __getitem__(self, t: int) -> bool:
        bits = self._bits
        while t >= len(bits):
            if self._gap == 0:
                bits.extend([True] * self._CHUNK)
            else:
                bits.extend((self._rng.random(self._CHUNK) >= self._gap).tolist())
        return bits[t]


def pipeline_cycles_ideal(items: int, latency: int) -> int:
    """Cycles for ``items`` back-to-back items with no gaps and no back-pressure."""
    return items + latency if items else 0


def pipeline_cycles(
    items: int, latency: int, valid: Schedule, ready: Schedule, emits: Sequence[bool] | None = None
) -> int:
    """Cycles for ``items`` items through a ``latency``-stage stalling pipeline.

    ``emits[k]`` says whether item ``k`` produces an output (reducing units emit only at the
    end of a reduction); every item does by default. The last item must emit.
    """
    if items == 0:
        return 0
    outputs = items if emits is None else sum(bool(e) for e in emits)
    # A stage holds None (empty) or whether its item emits.
    stages: list[bool | None] = [None] * latency
    sent = received = 0
    offering = False
    t = 0
    while True:
        offering = offering or (sent < items and valid[t])
        out_valid = bool(stages[-1])
        if not out_valid or ready[t]:
            if out_valid:
                received += 1
                if received == outputs:
                    return t + 1
            entering = None
            if offering:
                entering = True if emits is None else bool(emits[sent])
                sent += 1
                offering = False
            stages = [entering] + stages[:-1]
        t += 1
