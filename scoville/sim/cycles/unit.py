"""The protocol every unit model follows, the wire between two of them, and the one run loop.

A *unit model* is the timed model of one RTL unit, stepped once per cycle. It is built with
its ports and follows one rule:

- what it shows its neighbours in a cycle (its outputs' ``valid``, its inputs' ``ready``) is a
  property of its state at the cycle's start (a unit whose ``ready`` passes its consumer's
  ``ready`` through, as a stalling pipeline does, shows it as a method of the cycle);
- :meth:`step` ``(t)`` commits cycle ``t``: the unit takes what its input ports offer when it is
  ready (``port.offers(t)``, ``port.payload``, ``port.take(t)``), hands its output over when the
  output port accepts (``port.accepts(t)``, ``port.take(t)``), and moves to its next state.

A port is a :class:`~scoville.sim.cycles.stream.Producer` or a
:class:`~scoville.sim.cycles.stream.Consumer` at the block's boundary (a stream the testbench
drives, by its schedule), or a :class:`Wire` between two units, which the composed model sets
each cycle from the two units' properties before it steps them (both units see the
handshake; either may call ``take``). So a unit model is the same object alone (checked
against its RTL unit) and inside a block.

:func:`run` is the loop of the timed models: cycle after cycle until the run is done, with
one check that the model makes progress. A composed model that names its parts (``parts``)
can be traced: while :func:`recording` a :class:`Trace`, :func:`run` writes down, for each
cycle of the trace's window, each unit model's state at the cycle's start (:func:`line`) and
the wires between units that made a handshake in it, as PyMTL3's line traces do
(``scoville sim BLOCK --trace FROM:TO`` prints them beside the RTL's handshakes).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Trace", "Wire", "hand_over_together", "line", "recording", "recording_active",
           "run"]


class Wire:
    """A stream between two unit models, for the cycle about to be stepped: the producer's
    ``valid`` and ``payload`` and the consumer's ``ready`` (set by the composed model with
    :meth:`set`), ``taken`` once the consumer took the beat in it, and ``cycles``, the cycle
    of every handshake so far. It is both an input port (:meth:`offers`) and an output port
    (:meth:`accepts`)."""

    __slots__ = ("cycles", "payload", "ready", "taken", "valid")

    def __init__(self):
        self.valid = self.ready = self.taken = False
        self.payload: Any = None
        self.cycles: list[int] = []

    def set(self, valid: bool, ready: bool = True, payload: Any = None) -> None:
        """The cycle's ``valid``, ``ready`` and ``payload``; not yet taken."""
        self.valid, self.ready, self.payload, self.taken = valid, ready, payload, False

    def offers(self, t: int) -> bool:
        return self.valid

    def accepts(self, t: int) -> bool:
        return self.ready

    def take(self, t: int) -> None:
        """The handshake of cycle ``t`` (either side may call it; it counts once)."""
        if not self.taken:
            self.taken = True
            self.cycles.append(t)


def hand_over_together(t: int, ports, sent: list[bool]) -> tuple[list[bool], bool]:
    """Beats offered together on ``ports`` (output ports), each held until taken (``sent``:
    those taken before cycle ``t``; :func:`scoville.rtl.lib.pipeline.offer_together`): hands
    over those accepted in cycle ``t``. Returns the flags after it and whether every beat is
    now taken (the flags then all clear, for the next set)."""
    done = [s or p.accepts(t) for s, p in zip(sent, ports, strict=True)]
    for s, d, p in zip(sent, done, ports, strict=True):
        if d and not s:
            p.take(t)
    if all(done):
        return [False] * len(done), True
    return done, False


class Trace:
    """A timed model's line trace for cycles ``first`` to ``last``: ``states[t]``, each unit
    model's state at the start of cycle ``t`` (by the unit's name in its block; :func:`line`);
    ``wires[t]``, the wires between units that made a handshake in cycle ``t``. A cycle the
    model skipped (nothing changes in it) starts in the state of the next modelled cycle's
    start and moves no beat. Nothing is read before ``first``."""

    def __init__(self, first: int, last: int):
        if not 0 <= first <= last:
            raise ValueError(f"trace window {first}:{last}: allowed FROM:TO with 0 <= FROM <= TO")
        self.first, self.last = first, last
        self.states: dict[int, dict[str, str | dict[str, str]]] = {}
        self.wires: dict[int, list[str]] = {}
        self.model = ""

    @classmethod
    def parse(cls, window: str) -> Trace:
        """A trace of the window ``FROM:TO`` (as ``--trace`` takes it); ``ValueError`` when it
        is not two cycles with ``0 <= FROM <= TO``."""
        first, sep, last = window.partition(":")
        if not sep:
            raise ValueError(f"trace window {window!r}: allowed FROM:TO")
        return cls(int(first), int(last))


_recording: Trace | None = None


@contextmanager
def recording(trace: Trace | None) -> Iterator[Trace | None]:
    """Within the block, the first :func:`run` of a model that names its parts fills
    ``trace`` (``None``: nothing is recorded)."""
    global _recording
    before, _recording = _recording, trace
    try:
        yield trace
    finally:
        _recording = before


def recording_active() -> bool:
    """Whether a trace waits for a model's run (a model with a faster untraceable loop then
    takes its traceable one)."""
    return _recording is not None


def _short(value) -> str | None:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, (list, deque)):
        return f"#{len(value)}"
    return None


def line(unit) -> str | dict[str, str]:
    """A unit model's state: its ``line_trace()`` if it has one (PyMTL3's name), else each of
    its attributes that holds a name, a number or a flag, and the length of each list or
    queue (``#n``), by name in the order the unit set them, ports left out (a trace shows
    those that change)."""
    line_trace = getattr(unit, "line_trace", None)
    if callable(line_trace):
        return line_trace()
    names = getattr(unit, "__dict__", None)
    if names is None:   # every class's slots, the base's first (a subclass adds its own)
        slots = [slot for cls in reversed(type(unit).__mro__)
                 for slot in cls.__dict__.get("__slots__", ())]
        names = {slot: getattr(unit, slot, None) for slot in dict.fromkeys(slots)}
    words = {}
    for key, value in names.items():
        text = _short(value)
        if text is not None:
            words[key.lstrip("_")] = text
    return words


def _states(named: dict[str, Any]) -> dict[str, str | dict[str, str]]:
    """Each unit model's state (:func:`line`) among a model's named parts."""
    return {key: line(part) for key, part in named.items() if not isinstance(part, Wire)}


def run(name: str, cycle: Callable[[int], int], done: Callable[[], bool], limit: int,
        parts: Callable[[], dict[str, Any]] | None = None) -> int:
    """Step a timed model: ``cycle(t)`` models cycle ``t`` (and may skip cycles where nothing
    can change) and returns the next cycle to model, until ``done()``. Raises one line naming
    the model when it runs past ``limit`` cycles (a model that makes no progress, or a run
    whose streams never let it finish). Returns the first cycle not modelled.

    ``parts()``: the model's unit models and the wires between them, by name, for a trace
    (:func:`recording`)."""
    global _recording
    trace = _recording if parts is not None else None
    if trace is not None:
        _recording = None  # the block's own run only, not its parts' or a later model's
        trace.model = name
    t = 0
    backfill = range(0)  # skipped cycles of the window: the state at the next cycle's start
    while not done():
        if t > limit:
            raise RuntimeError(f"{name} timed model: no progress after {t} cycles")
        if trace is None or (t > trace.last and not backfill):
            t = cycle(t)
            continue
        named = parts() if t >= trace.first or backfill else None
        if named is not None:
            states = _states(named)
            for c in backfill:
                trace.states[c] = states
        after = cycle(t)
        if trace.first <= t <= trace.last:
            trace.states[t] = states
            trace.wires[t] = [key for key, part in named.items()
                              if isinstance(part, Wire) and part.cycles and part.cycles[-1] == t]
        # Cycles the model skipped (nothing changes in them): each starts in the state the
        # next modelled cycle starts in.
        backfill = range(max(t + 1, trace.first), min(after, trace.last + 1))
        t = after
    if trace is not None and backfill:
        states = _states(parts())
        for c in backfill:
            trace.states[c] = states
    return t
