"""What every Scoville testbench shares: the run's parameters, reset, the lockstep stream
driver/monitor, the scoreboard and the metrics file.

Timing discipline (the same on Icarus and Verilator): every design is simulated inside
:class:`~scoville.sim.harness.StreamHarness`, which registers each stream's handshake at the
rising edge; one coroutine wakes just after each falling edge, reads what fired and drives the
next cycle's inputs, so stimulus and sampling never race and each cycle costs one callback.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from scoville.blocks import get_block, parse_params
from scoville.sim.cycles.stream import ALWAYS, Schedule, Source, first_difference, pipeline_timing
from scoville.sim.flow import ENV_BLOCK, ENV_METRICS, ENV_PARAMS, ENV_SEED
from scoville.sim.harness import stream_names

__all__ = [
    "Lockstep",
    "Observed",
    "RunContext",
    "context",
    "pack",
    "pack_rows",
    "read_int",
    "record",
    "reset",
    "reset_midway",
    "scoreboard",
    "stream_schedules",
    "timing_errors",
    "unpack",
]


@dataclass(frozen=True)
class RunContext:
    """The parameters the flow handed to this simulation."""

    block: str
    config: Any
    workload: Any
    seed: int

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
    """Write a test's metrics where the flow collects them."""
    path = Path(os.environ[ENV_METRICS]) / f"{test}.json"
    path.write_text(json.dumps(metrics))


def read_int(handle, name: str, *, signed: bool = False) -> int:
    """The value of a signal; an X or Z bit is a failure naming the signal."""
    value = handle.value
    try:
        return value.to_signed() if signed else int(value)
    except ValueError:
        raise AssertionError(f"{name} is not 0/1: {value}") from None


async def reset(dut, inputs: dict[str, int], cycles: int = 4, seed: int = 0, *,
                clock: bool = True, held=None) -> None:
    """Start the clock (unless ``clock`` is false: it runs already) and hold ``rst`` for
    ``cycles`` while toggling ``inputs`` (name -> width), so that no combinational block is
    left unevaluated at time 0 (an Icarus pitfall). ``held()``, if given, runs in the last
    cycle of the reset, when every register holds its reset value."""
    if clock:
        Clock(dut.clk, 10, unit="ns").start()
    rng = random.Random(seed)
    dut.rst.value = 1
    for _ in range(cycles):
        await FallingEdge(dut.clk)
        for name, width in inputs.items():
            getattr(dut, name).value = rng.getrandbits(width)
    await FallingEdge(dut.clk)
    if held is not None:
        held()
    dut.rst.value = 0
    for name in inputs:
        if name.endswith("valid"):
            getattr(dut, name).value = 0
    await RisingEdge(dut.clk)


@dataclass
class Observed:
    """What a :class:`Lockstep` run saw.

    Attributes
    ----------
    payloads : dict
        Each sink's payloads, in order.
    cycles : int
        Cycles up to and including the last handshake.
    handshakes : dict
        Each stream's handshake cycles, in order.
    change : dict
        Each watched signal's change over the run.
    """

    payloads: dict[str, list[int]]
    cycles: int
    handshakes: dict[str, list[int]]
    change: dict[str, int]


async def reset_midway(dut, what: str, bench: Lockstep, cycles: int, inputs: dict[str, int],
                       seed: int, zero=()) -> None:
    """Run ``bench`` for ``cycles`` cycles, then reset the design in the middle of its work
    (streams busy, beats in flight) and check that it is back in its reset state: no output
    stream offers a beat and every signal in ``zero`` (counters, status) reads 0."""
    await bench.run(cycles, stop_after=cycles)

    def check():
        for name in bench.names[1]:
            valid = read_int(getattr(dut, f"{name}__valid"), f"{name}__valid")
            assert valid == 0, f"{what}: {name}.valid is high in reset"
        for name in zero:
            value = read_int(getattr(dut, name), name)
            assert value == 0, f"{what}: {name} = {value} in reset"

    await reset(dut, inputs, seed=seed + 1, clock=False, held=check)


def timing_errors(what: str, model, observed: Observed, counters=()) -> list[str]:
    """The ways ``observed`` disagrees with the timed model's prediction ``model`` (a
    :class:`~scoville.sim.cycles.stream.Timing`): the first differing handshake, then each
    watched counter in ``counters`` that differs from the model's count of its kind."""
    errors = []
    first = first_difference(model.handshakes, observed.handshakes)
    if first:
        errors.append(f"{what}: {first} (cycles {observed.cycles}, model {model.cycles})")
    for name in counters:
        if observed.change[name] != model.counters[name]:
            errors.append(f"{what}: counter {name} = {observed.change[name]}, "
                          f"model {model.counters[name]}")
    return errors


class Lockstep:
    """Drives several source streams of a design wrapped in
    :class:`~scoville.sim.harness.StreamHarness` and takes several sink streams, with one
    simulator callback per cycle.

    Just after each falling edge it reads which streams fired at the rising edge before (the
    harness's ``fired`` bits, one per stream in ``order``) and the payloads the sinks handed
    over (``NAME_taken``), then drives the next cycle's ``valid``, ``payload`` and ``ready``.
    ``sources`` maps a stream name to ``(items, valid schedule)``; ``sinks`` maps a stream
    name to ``(count, ready schedule)``. ``watch`` names output signals whose change over the
    run (cycle 0 up to and including the cycle of the last handshake) :meth:`run` returns.
    Every handshake of every stream is recorded with its cycle.
    """

    def __init__(self, dut, order: list[str], sources: dict, sinks: dict, watch=()):
        self.dut = dut
        self.sources = [
            (1 << order.index(name), items, valid, getattr(dut, f"{name}__valid"),
             getattr(dut, f"{name}__payload"))
            for name, (items, valid) in sources.items()
        ]
        self.sinks = [
            (1 << order.index(name), count, ready, getattr(dut, f"{name}__ready"),
             getattr(dut, f"{name}_taken"))
            for name, (count, ready) in sinks.items()
        ]
        self.names = (list(sources), list(sinks))
        self.watch = {name: getattr(dut, name) for name in watch}

    async def run(self, timeout: int, *, stop_after: int | None = None) -> Observed:
        """Run until every sink has its count and every source has handed over its items;
        return what was observed. ``stop_after``: stop after that many cycles instead (to
        interrupt a run), returning what was observed so far."""
        sent = [0] * len(self.sources)
        offering = [False] * len(self.sources)
        driven = [None] * len(self.sources)
        ready_driven = [None] * len(self.sinks)
        got = [[] for _ in self.sinks]
        fired_at = [[] for _ in self.sources], [[] for _ in self.sinks]
        todo = sum(count for _, count, *_ in self.sinks) + sum(
            len(items) for _, items, *_ in self.sources)
        clk, fired = self.dut.clk, self.dut.fired
        start = {}
        for t in range(timeout + 1):
            await FallingEdge(clk)
            if t == 0:
                start = {name: read_int(h, name) for name, h in self.watch.items()}
            else:
                bits = read_int(fired, "fired")
                for s, (bit, *_) in enumerate(self.sources):
                    if bits & bit:
                        sent[s] += 1
                        offering[s] = False
                        fired_at[0][s].append(t - 1)
                        todo -= 1
                for k, (bit, _, _, _, taken) in enumerate(self.sinks):
                    if bits & bit:
                        got[k].append(read_int(taken, "taken payload"))
                        fired_at[1][k].append(t - 1)
                        todo -= 1
                if todo == 0 or t == stop_after:
                    change = {n: read_int(h, n) - start[n] for n, h in self.watch.items()}
                    for _, _, _, v, _ in self.sources:
                        v.value = 0
                    for _, _, _, r, _ in self.sinks:
                        r.value = 0
                    handshakes = dict(zip(self.names[0], fired_at[0], strict=True))
                    handshakes.update(zip(self.names[1], fired_at[1], strict=True))
                    return Observed(dict(zip(self.names[1], got, strict=True)), t, handshakes,
                                    change)
            for s, (_, items, valid, v, payload) in enumerate(self.sources):
                if not offering[s] and sent[s] < len(items) and valid[t]:
                    offering[s] = True
                    payload.value = items[sent[s]]
                if offering[s] != driven[s]:
                    v.value = int(offering[s])
                    driven[s] = offering[s]
            for k, (_, _, ready, r, _) in enumerate(self.sinks):
                if ready[t] != ready_driven[k]:
                    r.value = int(ready[t])
                    ready_driven[k] = ready[t]
        sources = zip(self.names[0], self.sources, sent, strict=True)
        sinks = zip(self.names[1], self.sinks, got, strict=True)
        raise AssertionError(
            f"timeout after {timeout} cycles: sent "
            + ", ".join(f"{n} {c}/{len(src[1])}" for n, src, c in sources)
            + "; received "
            + ", ".join(f"{n} {len(g)}/{snk[1]}" for n, snk, g in sinks)
        )


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


def pack(values, width: int) -> int:
    """Pack integers (two's complement, ``width`` bits each) into one word, element 0 lowest."""
    mask = (1 << width) - 1
    word = 0
    for k, v in enumerate(values):
        word |= (int(v) & mask) << (k * width)
    return word


def pack_rows(values, width: int) -> list[int]:
    """:func:`pack` of every row of the 2-D integer array ``values``, vectorized where the
    width allows (whole bytes, or 4 bits)."""
    values = np.ascontiguousarray(np.asarray(values, dtype=np.int64) & ((1 << width) - 1))
    n, lanes = values.shape
    if width % 8 == 0:
        raw = values.astype("<u8").view(np.uint8).reshape(n, lanes, 8)[:, :, : width // 8]
    elif width == 4:
        if lanes % 2:
            values = np.pad(values, ((0, 0), (0, 1)))
        raw = (values[:, 0::2] | values[:, 1::2] << 4).astype(np.uint8)
    else:
        return [pack(row, width) for row in values]
    return [int.from_bytes(row.tobytes(), "little") for row in raw.reshape(n, -1)]


def unpack(word: int, width: int, count: int, *, signed: bool = False) -> list[int]:
    """Split a word into ``count`` fields of ``width`` bits, element 0 lowest."""
    mask = (1 << width) - 1
    out = []
    for k in range(count):
        v = (word >> (k * width)) & mask
        if signed and v >> (width - 1):
            v -= 1 << width
        out.append(v)
    return out


def stream_schedules(ctx: RunContext, sources, sinks, *, gaps: bool = True) -> tuple[dict, dict]:
    """The valid schedule of each source stream and the ready schedule of each sink stream
    (by name): the workload's gaps and back-pressure, or none; the testbench drives them and
    the timed model is fed them."""
    w = ctx.workload
    gap, bp = (w.gap, w.backpressure) if gaps else (0.0, 0.0)
    return ({name: Schedule([ctx.seed, 2, k], gap) for k, name in enumerate(sources)},
            {name: Schedule([ctx.seed, 3, k], bp) for k, name in enumerate(sinks)})


def schedules(ctx: RunContext, *, gaps: bool = True) -> tuple[Schedule, Schedule]:
    """The valid and ready schedules of a test: the workload's gaps, or none."""
    if not gaps:
        return ALWAYS, ALWAYS
    w = ctx.workload
    return Schedule([ctx.seed, 2], w.gap), Schedule([ctx.seed, 3], w.backpressure)


async def check_stream(
    dut,
    ctx: RunContext,
    test: str,
    items: list[int],
    expected: list,
    *,
    decode,
    latency: int,
    in_width: int,
    gaps: bool = True,
    emits=None,
    describe=None,
    interrupt: bool = False,
    **metrics,
) -> None:
    """Drive packed ``items`` through the block's ``i``/``o`` streams, decode every output word
    with ``decode``, compare with ``expected`` and every handshake with the timed model
    (:func:`~scoville.sim.cycles.stream.pipeline_timing`); record the metrics and assert.

    ``emits[k]`` says whether item ``k`` produces an output (reducing units). ``describe(k)``
    may add the inputs of output ``k`` to the mismatch message. ``interrupt``: first run the
    same stimulus halfway and reset the design in the middle of it (:func:`reset_midway`).
    """
    inputs = {"i__valid": 1, "i__payload": in_width, "o__ready": 1}
    await reset(dut, inputs, seed=ctx.seed)
    valid, ready = schedules(ctx, gaps=gaps)
    order = stream_names(get_block(ctx.block).component(ctx.config))
    what = f"{ctx.describe()}: {test}"

    def bench():
        return Lockstep(dut, order, sources={"i": (items, valid)},
                        sinks={"o": (len(expected), ready)})

    model = pipeline_timing(len(items), latency, Source(valid), ready, emits)
    if interrupt:
        await reset_midway(dut, what, bench(), model.cycles // 2, inputs, ctx.seed)
    seen = await bench().run(timeout=2 * model.cycles + 200)
    got = [decode(w) for w in seen.payloads["o"]]
    mismatches, first, why = scoreboard(what, expected, got)
    if first is not None and describe is not None:
        why += f" ({describe(first)})"
    errors = timing_errors(what, model, seen)
    record(test, mismatches=mismatches, cycles=seen.cycles, model_cycles=model.cycles,
           timing_errors=len(errors), items=len(items), outputs=len(expected), **metrics)
    assert mismatches == 0, why
    assert not errors, errors[0]


def _ints(values) -> list[int]:
    return [int(v) for v in values]


async def check_lanes(
    dut, ctx: RunContext, test: str, a, b, model, *, width: int, out_width: int,
    signed: bool = False, show=_ints, gaps: bool, count_as: str = "pairs",
    interrupt: bool = False,
) -> None:
    """:func:`check_stream` for a lane-parallel unit (:class:`~scoville.rtl.pipeline.LaneUnit`):
    operand arrays ``a`` and ``b`` (``width``-bit codes, padded with zeros to whole beats) in,
    ``model(a, b)`` (``out_width``-bit lane results) expected. ``show`` turns a beat's values
    into what is compared and printed; the number of pairs is recorded as ``count_as``."""
    lanes = ctx.config.lanes
    pad = (-len(a)) % lanes
    a = np.concatenate([a, np.zeros(pad, a.dtype)])
    b = np.concatenate([b, np.zeros(pad, b.dtype)])
    items = [pack(a[k : k + lanes], width) | pack(b[k : k + lanes], width) << (width * lanes)
             for k in range(0, len(a), lanes)]
    want = [show(beat) for beat in np.asarray(model(a, b)).reshape(-1, lanes)]

    def operands(k):
        lo, hi = k * lanes, (k + 1) * lanes
        return f"pairs {lo}..{hi - 1}: a={show(a[lo:hi])} b={show(b[lo:hi])}"

    await check_stream(
        dut, ctx, test, items, want,
        decode=lambda w: show(unpack(w, out_width, lanes, signed=signed)),
        latency=ctx.config.latency, in_width=2 * width * lanes, gaps=gaps,
        describe=operands, interrupt=interrupt, **{count_as: len(a)},
    )
