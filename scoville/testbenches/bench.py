"""One testbench for every composed block, as cocotbext-axi's ``TB``: an agent per stream
(a :class:`SourceAgent` for each input, a :class:`SinkAgent` for each output, the memory
agent's :class:`~scoville.testbenches.freerun.Memory` for each port it serves), one run, one
check.

A block's testbench builds its stimulus and the golden model's answers, then::

    tb = BlockBench(dut, ctx, "test_workload", sources=("cmd", "x"), sinks=("o",), gaps=True)
    tb.source["cmd"].send(commands)
    tb.sink["o"].expect(outputs, decode=lambda f: f[""].tolist(), where=lambda k: ...)
    tb.predict(timing, cfg, work, tb.valid, tb.ready)  # the timed model, same schedules
    seen = await tb.run()
    metrics = tb.check(COUNTERS, commands=len(commands))

:meth:`BlockBench.run` resets the block (first running it partway and resetting it in the
middle, if asked), drives every stream through the free-running harness and waits for the
cycle the timed model predicts; :meth:`BlockBench.check` scoreboards every sink that was
given its expected payloads, compares every handshake's cycle and each named counter with
the model, records the metrics and raises the first failure, the first failing sink first,
as a :class:`~scoville.testbenches.failures.Failure` of its kind (a wrong value or answer, a
handshake's cycle, a counter). A run that does not end is explained by its earliest evidence
first (:meth:`BlockBench.run`): the sinks' payloads so far (a wrong value), then the
handshakes so far against the model's (one made in another cycle: timing; one never made stays
a timeout, naming the first beat that never came).

Traces: when the flow asks for one (``scoville sim BLOCK --trace FROM:TO``), the model that
:meth:`BlockBench.predict` runs records each unit model's state for those cycles
(:class:`~scoville.sim.cycles.unit.Trace`), and :meth:`BlockBench.check` writes, before it
asserts, one line a cycle (:func:`trace_lines`): the handshakes the RTL made on the block's
streams beside the model's, each unit's state and the wires between units that moved a beat
(a run the harness stops, a hang or a handshake too many, writes the model's side alone).
Untraced, a timing failure names the window to replay.

A single-stream unit (``i`` in, ``o`` out, a stalling pipeline's timing) needs no more than
:func:`check_stream`, and a lane-parallel one :func:`check_lanes`: both run a BlockBench.

The schedules are the workload's (:func:`~scoville.testbenches.kit.stream_schedules`), drawn
in the order the streams are named: the sources, then the memories' data ports, then the
sinks, so that a seed replays the same gaps and back-pressure.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scoville.sim.cycles.stream import (
    ALWAYS,
    Schedule,
    Source,
    describe_divergence,
    divergence,
    pipeline_timing,
)
from scoville.sim.cycles.unit import Trace, recording
from scoville.sim.flow import ENV_METRICS, ENV_TRACE
from scoville.sim.harness import stream_names

from .failures import Failure, Kind
from .freerun import FreeRun, Memory, Observed
from .kit import RunContext, record, reset, reset_midway, scoreboard, timing_errors
from .kit import stream_schedules as _schedules

__all__ = ["BlockBench", "SinkAgent", "SourceAgent", "check_lanes", "check_stream", "trace_lines"]


class SourceAgent:
    """An input stream: its valid schedule and the payloads it offers, in order (integers,
    or rows of :meth:`~scoville.testbenches.codec.Codec.pack_bytes`)."""

    def __init__(self, name: str, valid: Schedule):
        self.name, self.valid = name, valid
        self.items: Any = []

    def send(self, items) -> None:
        """Offer ``items`` (replacing any given before)."""
        self.items = items


class SinkAgent:
    """An output stream: its ready schedule, the payloads it must carry and how to read
    them.

    ``expect(want, decode=..., where=..., label=..., kind=...)``: the run takes ``len(want)``
    beats; :meth:`check` compares ``decode(codec.unpack(payloads))`` (or the raw payloads,
    without ``decode``) with ``want``, and names the first mismatch's origin with
    ``where(index)``; a mismatch is a failure of ``kind`` (:class:`Kind.DATA
    <scoville.testbenches.failures.Kind>`; a stream of answers, :attr:`Kind.STATUS`). A sink
    never given ``expect`` takes no beat and is not scoreboarded.
    """

    def __init__(self, name: str, ready: Schedule, codec):
        self.name, self.ready, self.codec = name, ready, codec
        self.want: list | None = None
        self.label = name
        self.kind = Kind.DATA
        self._decode: Callable | None = None
        self._where: Callable[[int], str] | None = None

    def expect(self, want: Sequence, *, decode: Callable | None = None,
               where: Callable[[int], str] | None = None, label: str | None = None,
               kind: Kind = Kind.DATA) -> None:
        self.want = list(want)
        self._decode, self._where = decode, where
        self.label = label or self.name
        self.kind = kind

    @property
    def count(self) -> int:
        return 0 if self.want is None else len(self.want)

    def got(self, payloads: list[int]) -> list:
        """The payloads as compared: decoded, or raw."""
        if self._decode is None:
            return list(payloads)
        return self._decode(self.codec.unpack(payloads)) if payloads else []

    def check(self, what: str, payloads: list[int], *, so_far: bool = False) -> tuple[int, str]:
        """Mismatches against the expected payloads, and the message naming the first;
        ``so_far``: the payloads of a run that did not end, against as many expected."""
        want = self.want[:len(payloads)] if so_far else self.want
        bad, first, why = scoreboard(f"{what}: {self.label}", want, self.got(payloads))
        if first is not None and self._where is not None:
            why += f" ({self._where(first)})"
        return bad, why


class BlockBench:
    """A composed block's testbench run: ``sources``, ``memories`` (data ports the harness's
    memory agent serves) and ``sinks`` name its streams; ``gaps`` says whether they carry the
    workload's gaps and back-pressure; ``watch`` names the outputs whose change over the run
    is read (counters); ``idle`` names input streams this run leaves idle (no beat offered;
    the harness drives every stream); ``detail`` is added to the name of the run in
    messages."""

    def __init__(self, dut, ctx: RunContext, test: str, *, sources: Sequence[str],
                 sinks: Sequence[str], gaps: bool, memories: Sequence[str] = (),
                 watch: Sequence[str] = ("counters",), idle: Sequence[str] = (),
                 detail: str = ""):
        self.dut, self.ctx, self.test = dut, ctx, test
        self.what = f"{ctx.describe()}: {test}{detail}"
        valid, ready = _schedules(ctx, (*sources, *memories), sinks, gaps=gaps)
        codecs = ctx.codecs
        self.source = {name: SourceAgent(name, valid[name]) for name in sources}
        self.sink = {name: SinkAgent(name, ready[name], codecs.get(name)) for name in sinks}
        #: Each memory port's valid schedule (the memory agent's words), for the model.
        self.memory_valid = {name: valid[name] for name in memories}
        #: Each memory port's :class:`Memory`, set by the testbench before :meth:`run`.
        self.memory: dict[str, Memory] = {}
        self.watch = tuple(watch)
        self.idle = tuple(idle)
        self.seen: Observed | None = None
        self.model = None
        window = os.environ.get(ENV_TRACE)
        self.trace = Trace.parse(window) if window else None

    @property
    def valid(self) -> dict[str, Source]:
        """Each source's valid schedule, as the timed model takes it."""
        return {name: Source(agent.valid) for name, agent in self.source.items()}

    @property
    def ready(self) -> dict[str, Schedule]:
        """Each sink's ready schedule, as the timed model takes it."""
        return {name: agent.ready for name, agent in self.sink.items()}

    def predict(self, timing: Callable, *args, **kwargs):
        """The timed model's prediction, ``timing(*args, **kwargs)``, recording its trace when
        one is asked for; :meth:`run` waits for it and :meth:`check` compares with it."""
        with recording(self.trace):
            self.model = timing(*args, **kwargs)
        return self.model

    def _freerun(self) -> FreeRun:
        return FreeRun(
            self.dut, self.ctx.component,
            sources={**{name: (a.items, a.valid) for name, a in self.source.items()},
                     **{name: ([], ALWAYS) for name in self.idle}},
            sinks={name: (a.count, a.ready) for name, a in self.sink.items()},
            memories=self.memory, watch=self.watch)

    async def run(self, model=None, *, reset_first: bool = True, interrupt: bool = False,
                  zero: Sequence[str] = ("counters",),
                  after_reset: Callable[[], None] | None = None, slack: int = 2000) -> Observed:
        """Reset the block (unless ``reset_first`` is false: the run goes on from the state
        an earlier run left) and run every stream to its end; wait for the cycle the model
        (``model``, else :meth:`predict`'s) puts the last handshake at, and give up at twice
        that plus ``slack``. ``interrupt``: first run partway (half the model's cycles) and
        reset the block in the middle: no output may offer a beat and each output in ``zero``
        must read 0 in the reset, then ``after_reset()`` may check more."""
        if model is not None:
            self.model = model
        model = self.model
        if reset_first or interrupt:
            await reset(self.dut, stream_names(self.ctx.component))
        if interrupt:
            await reset_midway(self.dut, self.what, self._freerun(), model.cycles // 2,
                               zero=zero)
            if after_reset is not None:
                after_reset()
        bench = self._freerun()
        try:
            self.seen = await bench.run(timeout=2 * model.cycles + slack, expect=model.cycles)
        except BaseException as err:
            self._write_trace(None)  # the model's side: the harness stopped the run
            if isinstance(err, Failure) and err.kind is Kind.TIMEOUT:
                self._why_it_hung(bench, err)
            raise
        return self.seen

    def _why_it_hung(self, bench: FreeRun, err: Failure) -> None:
        """A run that did not end, explained by its earliest evidence: a sink's payloads so
        far against as many expected (a wrong value: that kind), then the handshakes so far
        against the model's: a handshake the RTL made in another cycle than the model's is a
        timing failure; one it never made (``observed none``) stays a timeout, now naming the
        first beat that never came."""
        hung = f"the run did not end: {err.args[0].removeprefix('[timeout] ')}"
        for agent in self.sink.values():
            if agent.want is not None:
                bad, why = agent.check(self.what, bench.payloads[agent.name], so_far=True)
                if bad:
                    raise Failure(agent.kind, f"{why}; {hung}") from err
        apart = divergence(self.model.handshakes, bench.handshakes)
        if apart is not None:
            kind = Kind.TIMEOUT if apart[4] is None else Kind.TIMING
            raise Failure(kind, f"{self.what}: {describe_divergence(apart)}; {hung}") from err

    def _write_trace(self, rtl: dict | None) -> None:
        if self.trace is not None:
            text = "\n".join(trace_lines(self.trace, rtl, self.model.handshakes,
                                         f"{self.what}:"))
            (Path(os.environ[ENV_METRICS]) / f"{self.test}.trace").write_text(text + "\n")

    def check(self, counters: Sequence[str] = (), **metrics) -> dict:
        """Scoreboard every sink given its expected payloads, compare every handshake's cycle
        and each of ``counters`` with the model; record the run's metrics (these, the
        mismatches, the cycles, the timing errors, every watched output's change as
        ``counter_<name>``, the wall times); raise the first failure (:class:`Failure`: a
        sink's mismatch, then a handshake's cycle, then a counter). Returns the metrics."""
        seen, model = self.seen, self.model
        boards = [(agent.kind, *agent.check(self.what, seen.payloads[name]))
                  for name, agent in self.sink.items() if agent.want is not None]
        errors = timing_errors(self.what, model, seen, counters)
        self.ctx.coverage.stalls(seen.waited)
        metrics = dict(
            mismatches=sum(bad for _, bad, _ in boards), cycles=seen.cycles,
            model_cycles=model.cycles, timing_errors=len(errors), **metrics,
            run_wall_s=seen.wall_s, service_wall_s=seen.service_s,
            **{f"counter_{name}": value for name, value in seen.change.items()},
            coverage=self.ctx.coverage.take())
        record(self.test, **metrics)
        self._write_trace(seen.handshakes)
        for kind, bad, why in boards:
            if bad:
                raise Failure(kind, why)
        if not errors:
            return metrics
        text = [why for _, why in errors]
        apart = divergence(model.handshakes, seen.handshakes)
        if apart is not None and self.trace is None:
            at = apart[0]
            text.append(f"to read it, replay with --trace {max(at - 20, 0)}:{at + 5}")
        raise Failure(errors[0][0], "; ".join(text))


def trace_lines(trace: Trace, rtl: dict[str, list[int]] | None, model: dict[str, list[int]],
                title: str = "") -> list[str]:
    """A line a cycle of ``trace``'s window: the cycle; the block's streams that made a
    handshake in it in the RTL (``rtl``, each stream's handshake cycles; ``None``: the run
    did not end, its column is blank) and in the timed model (``model``), a ``*`` where they
    differ; each unit model's state at the cycle's start; the wires between units that moved
    a beat in it."""
    names = list(model)
    hits = {side: {name: set(cycles.get(name, ())) for name in names}
            for side, cycles in (("rtl", rtl or {}), ("model", model))}

    def marks(side: str, t: int) -> str:
        if side == "rtl" and rtl is None:
            return " ".join(" " * len(name) for name in names)
        return " ".join(name if t in hits[side][name] else "." * len(name) for name in names)

    width = len(marks("rtl", -1))
    window = range(trace.first, trace.last + 1)
    # Of a unit's attributes, those that change in the window (and its state, if it has one).
    moving: dict[str, set[str]] = {}
    start = trace.states.get(trace.first, {})
    for t in window:
        for unit, words in trace.states.get(t, {}).items():
            if isinstance(words, dict):
                first = start.get(unit, {})
                moving.setdefault(unit, {"state"} & words.keys()).update(
                    key for key, value in words.items() if first.get(key) != value)

    def show(unit: str, words) -> str:
        if isinstance(words, str):
            return words
        return " ".join(f"{key}={value}" for key, value in words.items()
                        if key in moving[unit]) or "-"

    lines = [f"# {title} cycles {trace.first} to {trace.last} of the {trace.model} model: "
             "the block's streams that made a handshake in the RTL and in the model (* where "
             "they differ), then each unit model's state at the cycle's start and the wires "
             "between units that moved a beat"
             + ("; the run did not end: the RTL's handshakes are not known" if rtl is None
                else ""),
             f"{'':>7}  {'rtl':<{width}}    {'model':<{width}}",
             f"{'cycle':>7}  {' '.join(names)}    {' '.join(names)}  | units | wires"]
    for t in window:
        got, want = marks("rtl", t), marks("model", t)
        flag = "*" if rtl is not None and got != want else " "
        units = "  ".join(f"{name}: {show(name, words)}"
                          for name, words in trace.states.get(t, {}).items())
        wires = " ".join(trace.wires.get(t, ()))
        lines.append(f"{t:>7}  {got}  {flag} {want}  | {units} | {wires}")
    return lines


async def check_stream(
    dut,
    ctx: RunContext,
    test: str,
    inputs: dict,
    expected: list,
    *,
    decode,
    latency: int,
    gaps: bool = True,
    emits=None,
    describe=None,
    interrupt: bool = False,
    **metrics,
) -> None:
    """Drive ``inputs`` through the block's ``i``/``o`` streams, decode the outputs with
    ``decode``, compare with ``expected`` and every handshake with the timed model
    (:func:`~scoville.sim.cycles.stream.pipeline_timing`); record the metrics and assert.

    ``inputs`` holds a column per field of the ``i`` payload (one row per beat), packed by the
    RTL's layout (:class:`~scoville.testbenches.codec.Codec`); ``decode`` turns the ``o``
    payloads, unpacked into their fields' columns, into the list compared with ``expected``.

    ``emits[k]`` says whether item ``k`` produces an output (reducing units). ``describe(k)``
    may add the inputs of output ``k`` to the mismatch message. ``interrupt``: first run the
    same stimulus halfway and reset the design in the middle of it
    (:func:`~scoville.testbenches.kit.reset_midway`).
    """
    tb = BlockBench(dut, ctx, test, sources=("i",), sinks=("o",), gaps=gaps, watch=())
    items = ctx.codecs["i"].pack_bytes(**inputs)
    tb.source["i"].send(items)
    tb.sink["o"].expect(expected, decode=decode, where=describe, label="outputs")
    tb.predict(pipeline_timing, len(items), latency, Source(tb.source["i"].valid),
               tb.sink["o"].ready, emits)
    await tb.run(interrupt=interrupt, zero=(), slack=200)
    tb.check(items=len(items), outputs=len(expected), **metrics)


def _ints(values) -> list[int]:
    return [int(v) for v in values]


async def check_lanes(
    dut, ctx: RunContext, test: str, operands: dict, model, *, show=_ints, gaps: bool,
    count_as: str = "pairs", interrupt: bool = False,
) -> None:
    """:func:`check_stream` for a lane-parallel unit (:class:`~scoville.rtl.lib.pipeline.LaneUnit`):
    the arrays of ``operands`` (by payload field, codes, padded with zeros to whole beats) in,
    ``model(*operands.values())`` (lane results) expected. ``show`` turns a beat's values into
    what is compared and printed; the number of operand tuples is recorded as ``count_as``."""
    lanes = ctx.config.lanes
    n = len(next(iter(operands.values())))
    pad = (-n) % lanes
    operands = {name: np.concatenate([v, np.zeros(pad, v.dtype)]) for name, v in operands.items()}
    want = [show(beat) for beat in np.asarray(model(*operands.values())).reshape(-1, lanes)]

    def describe(k):
        lo, hi = k * lanes, (k + 1) * lanes
        values = " ".join(f"{name}={show(v[lo:hi])}" for name, v in operands.items())
        return f"{count_as} {lo}..{hi - 1}: {values}"

    await check_stream(
        dut, ctx, test, {name: v.reshape(-1, lanes) for name, v in operands.items()}, want,
        decode=lambda out: [show(beat) for beat in out[""]],
        latency=ctx.config.latency, gaps=gaps,
        describe=describe, interrupt=interrupt, **{count_as: n + pad},
    )
