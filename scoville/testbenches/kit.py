"""What every Scoville testbench shares: the run's parameters, reset, the stream driver and
monitor (:class:`~scoville.testbenches.freerun.FreeRun`, on the free-running harness of
:mod:`scoville.sim.harness`), the timing check against the timed model, the scoreboard and the
metrics file.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from cocotb.triggers import FallingEdge, RisingEdge

from scoville.blocks import get_block, parse_params
from scoville.sim.cycles.stream import Schedule, first_difference
from scoville.sim.flow import ENV_BLOCK, ENV_METRICS, ENV_PARAMS, ENV_SEED
from scoville.sim.harness import stream_names

from .codec import codecs
from .coverage import Coverage, bins_of
from .failures import Failure, Kind
from .freerun import FreeRun, Observed, idle_inputs, read_int

__all__ = [
    "FreeRun",
    "Observed",
    "RunContext",
    "context",
    "join_words",
    "read_int",
    "record",
    "reset",
    "reset_midway",
    "scoreboard",
    "stream_schedules",
    "timing_errors",
]


@dataclass(frozen=True)
class RunContext:
    """The parameters the flow handed to this simulation."""

    block: str
    config: Any
    workload: Any
    seed: int

    @functools.cached_property
    def component(self):
        """The block's component for this config, as its entry builds it: its streams and
        their layouts, its memory ports (what the harness and the codecs need)."""
        return get_block(self.block).component(self.config)

    @functools.cached_property
    def coverage(self) -> Coverage:
        """The run's coverage bins (:mod:`~scoville.testbenches.coverage`): its testbench's
        ``BINS`` (but those this config cannot reach) and a stall bin for each stream of this
        config's component."""
        return Coverage(bins_of(get_block(self.block).testbench,
                                stream_names(self.component), self.config))

    @functools.cached_property
    def codecs(self) -> dict:
        """A :class:`~scoville.testbenches.codec.Codec` for each stream of the block."""
        return codecs(self.component)

    def rng(self, stream: int) -> np.random.Generator:
        """An independent, replayable generator for one purpose of one test."""
        return np.random.default_rng([self.seed, stream])

    def describe(self) -> str:
        return f"block {self.block} {self.config} {self.workload} seed {self.seed}"


def context() -> RunContext:
    """Read the block, its parameters and the seed from the flow's environment."""
    block = get_block(os.environ[ENV_BLOCK])
    config, workload = parse_params(block, json.loads(os.environ[ENV_PARAMS]))
    return RunContext(block.name, config, workload, int(os.environ[ENV_SEED]))


def record(test: str, **metrics: Any) -> None:
    """Write a test's metrics where the flow collects them (a test that records twice keeps
    the last metrics, and the sum of both's ``coverage``)."""
    path = Path(os.environ[ENV_METRICS]) / f"{test}.json"
    if "coverage" in metrics and path.is_file():
        before = json.loads(path.read_text()).get("coverage", {})
        metrics["coverage"] = {name: n + before.get(name, 0)
                               for name, n in metrics["coverage"].items()}
    path.write_text(json.dumps(metrics))


async def reset(dut, order: list[str], cycles: int = 4, *, held=None) -> None:
    """Stop the harness and hold ``rst`` for ``cycles`` (the harness generates the clock).
    ``order`` lists the design's streams. ``held()``, if given, runs in the last cycle of the
    reset, when every register holds its reset value."""
    idle_inputs(dut, order)
    dut.rst.value = 1
    for _ in range(cycles):
        await FallingEdge(dut.clk)
    if held is not None:
        held()
    dut.rst.value = 0
    await RisingEdge(dut.clk)


async def reset_midway(dut, what: str, bench: FreeRun, cycles: int, zero=()) -> None:
    """Run ``bench`` for ``cycles`` cycles, then reset the design in the middle of its work
    (streams busy, beats in flight) and check that it is back in its reset state: no output
    stream offers a beat and every signal in ``zero`` (counters, status) reads 0."""
    seen = await bench.run(cycles, stop_after=cycles)
    moved = sum(len(h) for h in seen.handshakes.values())
    expected = sum(bench.expected(name) for name in bench.order)
    assert 0 < moved < expected, (
        f"{what}: the reset came after {moved} of {expected} handshakes: not mid-run")

    def check():
        for name in bench.names[1]:
            if read_int(getattr(dut, f"valid_{name}"), f"{name}.valid"):
                raise Failure(Kind.PROTOCOL, f"{what}: {name}.valid is high in reset")
        for name in zero:
            value = read_int(getattr(dut, name), name)
            if value:
                raise Failure(Kind.COUNTER, f"{what}: {name} = {value} in reset")

    await reset(dut, bench.order, held=check)


def timing_errors(what: str, model, observed: Observed, counters=()) -> list[tuple[Kind, str]]:
    """The ways ``observed`` disagrees with the timed model's prediction ``model`` (a
    :class:`~scoville.sim.cycles.stream.Timing`), each with its kind: the first differing
    handshake (:attr:`Kind.TIMING`), then each watched counter in ``counters`` that differs
    from the model's count of its kind (:attr:`Kind.COUNTER`)."""
    errors = []
    first = first_difference(model.handshakes, observed.handshakes)
    if first:
        errors.append((Kind.TIMING,
                       f"{what}: {first} (cycles {observed.cycles}, model {model.cycles})"))
    for name in counters:
        if observed.change[name] != model.counters[name]:
            errors.append((Kind.COUNTER, f"{what}: counter {name} = {observed.change[name]}, "
                                         f"model {model.counters[name]}"))
    return errors


def scoreboard(what: str, expected, got) -> tuple[int, int | None, str]:
    """Compare two equal-length sequences of outputs; return the mismatch count, the index of
    the first mismatching output (``None`` when all match) and a message naming it (index,
    expected, got), or ``""``. An output that is a list (one value per lane) counts one
    mismatch per differing lane."""
    expected = list(expected)
    got = list(got)
    if len(expected) != len(got):
        return max(len(expected), len(got)), None, (
            f"{what}: expected {len(expected)} results, got {len(got)}"
        )

    def wrong(e, g) -> int:
        if isinstance(e, list) and isinstance(g, list) and len(e) == len(g):
            return sum(x != y for x, y in zip(e, g, strict=True))
        return int(e != g)

    counts = [wrong(e, g) for e, g in zip(expected, got, strict=True)]
    total = sum(counts)
    if not total:
        return 0, None, ""
    k = next(i for i, c in enumerate(counts) if c)
    return total, k, (
        f"{what}: {total} mismatches; first at index {k}: expected {expected[k]}, got {got[k]}"
    )


def stream_schedules(ctx: RunContext, sources, sinks, *, gaps: bool = True) -> tuple[dict, dict]:
    """The valid schedule of each source stream and the ready schedule of each sink stream
    (by name): the workload's gaps and back-pressure, or none; the testbench drives them and
    the timed model is fed them."""
    w = ctx.workload
    gap, bp = (w.gap, w.backpressure) if gaps else (0.0, 0.0)
    return ({name: Schedule([ctx.seed, 2, k], gap) for k, name in enumerate(sources)},
            {name: Schedule([ctx.seed, 3, k], bp) for k, name in enumerate(sinks)})


def join_words(values, width: int) -> int:
    """One integer of ``values``, ``width`` bits each, the first lowest (a beat or a memory
    word of several fields)."""
    out = 0
    for k, v in enumerate(values):
        out |= int(v) << (width * k)
    return out
