"""Attention's units alone: each RTL unit in Amaranth's simulator against its unit model
(:mod:`scoville.sim.cycles.attention_transpose`), handshake for handshake, on random
schedules (gaps on the inputs, back-pressure on the outputs, light and heavy)."""

import numpy as np
import pytest

from scoville.rtl.attention_transpose import LinesToBeats as LinesToBeatsRtl
from scoville.sim.cycles.attention_transpose import LinesToBeats
from scoville.sim.cycles.stream import Consumer, Producer, Schedule, Source
from scoville.sim.cycles.unit import run

from .amsim import handshakes

#: (dim, cols, token_lines, v_lines, v_tiles, v_queue): K in one line or two, V whole or in
#: two column tiles, a queue of one or three tokens.
SHAPES = [(4, 2, 2, 1, 2, 2), (4, 4, 1, 2, 1, 3), (8, 4, 2, 1, 2, 1)]


def _reads(rng, shape, chunks: int) -> tuple[list[int], int]:
    """The lasts of a run's lines (per chunk: a K read of n tokens, then a V read per column
    tile) and the beats it makes."""
    dim, cols, tl, vl, vt, _ = shape
    lasts, beats = [], 0
    for _ in range(chunks):
        n = int(rng.integers(1, 3 * cols + 1))
        for lines in [n * tl] + [n * vl] * vt:
            lasts += [0] * (lines - 1) + [1]
        beats += -(-n // cols) * dim + n * vt
    return lasts, beats


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.8])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_lines_to_beats_unit_model_is_its_rtl(shape, gap):
    dim, cols, tl, vl, vt, vq = shape
    seed = hash((shape, gap)) % 2**32
    rng = np.random.default_rng(seed)
    lasts, beats = _reads(rng, shape, 4)
    line_bits = dim * 16 // tl
    dut = LinesToBeatsRtl(line_bits=line_bits, token_lines=tl, v_lines=vl, dim=dim,
                          v_width=cols if vt > 1 else dim, v_tiles=vt, cols=cols,
                          kv_fmt="bf16", v_queue=vq)
    payloads = [{"data": int(rng.integers(0, 2**min(line_bits, 62))), "last": last}
                for last in lasts]
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    got = handshakes(dut, {"i": (payloads, valid)}, {"o": (beats, ready)})
    i, o = Producer(Source(valid), len(lasts), lasts), Consumer(ready)
    unit = LinesToBeats(dim=dim, cols=cols, token_lines=tl, v_lines=vl, v_tiles=vt,
                        v_queue=vq, i=i, o=o)

    def cycle(t):
        unit.step(t)
        return t + 1

    run("lines_to_beats", cycle, lambda: len(o.cycles) == beats, 100_000)
    assert {"i": i.cycles, "o": o.cycles} == got
