"""Stream timing shared by every timed model, and the timed model of a stalling pipeline.

A timed model predicts the cycle of every handshake on every stream of a block from its
config, its transactions and the stream schedules alone (it never looks at the DUT). Cycle 0 is
the first cycle a testbench may offer data; a handshake in cycle ``t`` happens at the rising
edge that ends it.

Streams follow the rules of ``amaranth.lib.stream``, and the testbench's producers and
consumers behave as modelled here:

- a :class:`Source` offers its beats in order: beat ``k`` from the first cycle ``t`` at or
  after its arrival (and after beat ``k - 1`` was taken) where its valid schedule is true,
  then holds it until it is taken;
- a sink raises ``ready`` in cycle ``t`` when its ready :class:`Schedule` is true there.

Models compose: a part's model takes a :class:`Source` for each input stream (its beats'
arrival cycles and valid schedule) and returns a :class:`Timing` with the handshake cycles of
each stream; :meth:`Source.after` turns one part's output handshakes into the next part's input
arrivals. The coupling runs one way: a part's output is modelled against a fixed ready
schedule, so chaining is exact where the next part always takes what arrives (it is always
ready, or a buffer between them never fills); a composed block whose parts back-pressure each
other models that buffer or steps its parts' models together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Consumer",
    "Producer",
    "Queue",
    "Schedule",
    "Source",
    "StallPipeline",
    "Timing",
    "describe_divergence",
    "divergence",
    "first_difference",
    "pipeline_cycles_ideal",
    "pipeline_timing",
]


class Schedule:
    """An endless, replayable sequence of booleans: true with probability ``1 - gap``.

    Two instances with the same ``seed`` and ``gap`` give the same sequence, so the testbench
    and the timed model see the same gaps.
    """

    _CHUNK = 4096

    def __init__(self, seed, gap: float):
        self._rng = np.random.default_rng(seed)
        self._gap = gap
        # One byte per cycle (1 true, 0 false): a million cycles take a megabyte.
        self._bits = bytearray()

    def __getitem__(self, t: int) -> bool:
        bits = self._bits
        while t >= len(bits):
            if self._gap == 0:
                bits.extend(b"\x01" * self._CHUNK)
            else:
                bits.extend((self._rng.random(self._CHUNK) >= self._gap).astype(np.uint8))
        return bits[t] == 1

    @classmethod
    def pattern(cls, bits: str) -> Schedule:
        """A schedule that follows ``bits`` (``1`` true, ``0`` false), then is always true."""
        schedule = cls(0, 0.0)
        schedule._bits.extend(c == "1" for c in bits)
        return schedule

    @property
    def drawn(self) -> bytearray:
        """The values drawn so far, cycle ``t`` at index ``t`` (1 true, 0 false); it grows in
        place as later cycles are asked for (a timed model's loop may index it directly)."""
        return self._bits

    def words(self, first: int, count: int) -> list[int]:
        """Cycles ``32 * first`` to ``32 * (first + count) - 1`` as ``count`` 32-bit words,
        cycle ``t`` in bit ``t % 32`` of word ``t // 32``."""
        self[32 * (first + count)]
        bits = np.frombuffer(bytes(self._bits[32 * first: 32 * (first + count)]), np.uint8)
        return np.packbits(bits, bitorder="little").view("<u4").tolist()


#: A schedule that is always true: a producer that keeps up, or a sink that is always ready.
ALWAYS = Schedule(0, 0.0)


@dataclass(frozen=True)
class Source:
    """When a producer offers its beats.

    Attributes
    ----------
    valid : Schedule
        Cycles in which the producer may raise ``valid`` for its next beat.
    arrivals : sequence of int, optional
        ``arrivals[k]``: the first cycle beat ``k`` exists (every beat from cycle 0 if not
        given). A composed block feeds a part's output handshakes here.
    """

    valid: Schedule = ALWAYS
    arrivals: Sequence[int] | None = None

    def __post_init__(self):
        a = self.arrivals
        if a is not None and any(a[k + 1] < a[k] for k in range(len(a) - 1)):
            raise ValueError("parameter 'arrivals' must not decrease: beats arrive in order")

    @classmethod
    def after(cls, handshakes: Sequence[int], delay: int = 1,
              valid: Schedule = ALWAYS) -> Source:
        """Beats that arrive ``delay`` cycles after another stream's handshakes."""
        return cls(valid, [h + delay for h in handshakes])


class Producer:
    """A :class:`Source` in a timed model's cycle loop, an input port of a unit model
    (:mod:`scoville.sim.cycles.unit`): :meth:`offers` says whether the producer holds a beat on
    the stream in cycle ``t`` (the model may ask in any cycles, in increasing order),
    :attr:`payload` is that beat (``payloads[k]`` for beat ``k``, None without), :meth:`take`
    records the handshake."""

    __slots__ = ("_arrivals", "_at", "_payloads", "_valid", "count", "cycles", "sent")

    def __init__(self, source: Source, count: int, payloads: Sequence | None = None):
        self._payloads = payloads
        self._valid = source.valid
        self._arrivals = source.arrivals
        if self._arrivals is not None and len(self._arrivals) < count:
            raise ValueError(f"source has {len(self._arrivals)} arrivals for {count} beats")
        self.count = count
        self.sent = 0
        self.cycles: list[int] = []
        self._at = self._first_offer(0) if count else None

    def _first_offer(self, earliest: int) -> int:
        """The cycle the next beat is first offered: at or after ``earliest`` and its
        arrival, where the valid schedule is true."""
        t = earliest
        if self._arrivals is not None:
            t = max(t, self._arrivals[self.sent])
        valid = self._valid
        bits = valid.drawn
        while True:
            # The first true cycle at or after t among those drawn (a search in C), else
            # draw further.
            found = bits.find(1, t)
            if found >= 0:
                return found
            t = max(t, len(bits))
            valid[t]

    def offers(self, t: int) -> bool:
        return self._at is not None and self._at <= t

    @property
    def payload(self):
        """The beat offered next (None when the producer was given no payloads)."""
        return None if self._payloads is None else self._payloads[self.sent]

    @property
    def next_offer(self) -> int | None:
        """The cycle the next beat is first offered (None when every beat was taken)."""
        return self._at

    def take(self, t: int) -> None:
        self.cycles.append(t)
        self.sent += 1
        self._at = self._first_offer(t + 1) if self.sent < self.count else None


class Consumer:
    """A sink in a timed model's cycle loop, an output port of a unit model: ``ready``
    follows its schedule (:meth:`accepts`); :meth:`take` records the handshake."""

    __slots__ = ("_bits", "cycles", "ready")

    def __init__(self, ready: Schedule = ALWAYS):
        self.ready = ready
        self._bits = ready.drawn
        self.cycles: list[int] = []

    def accepts(self, t: int) -> bool:
        """``ready`` in cycle ``t``."""
        bits = self._bits
        if t >= len(bits):
            self.ready[t + 4096]
        return bits[t] == 1

    def take(self, t: int) -> None:
        self.cycles.append(t)


@dataclass
class Timing:
    """What a timed model predicts.

    Attributes
    ----------
    handshakes : dict of str to list of int
        For each stream, the cycle of each of its handshakes, in order.
    counters : dict of str to int
        For each performance counter of the block, the cycles (or events) of its kind, from
        cycle 0 up to and including :attr:`cycles` - 1.
    """

    handshakes: dict[str, list[int]]
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def cycles(self) -> int:
        """Cycles up to and including the last handshake (0 when there is none)."""
        return max((h[-1] + 1 for h in self.handshakes.values() if h), default=0)


def divergence(predicted: dict[str, Sequence[int]], observed: dict[str, Sequence[int]]):
    """The earliest handshake where ``observed`` differs from ``predicted``: ``(cycle,
    stream, beat, predicted cycle, observed cycle)`` (``None`` for a handshake one side did
    not make), the cycle the earlier of the two; ``None`` when they agree."""
    worst = None
    for name, want in predicted.items():
        got = list(observed.get(name, ()))
        want = list(want)
        if got == want:
            continue
        for k in range(max(len(want), len(got))):
            p = want[k] if k < len(want) else None
            o = got[k] if k < len(got) else None
            if p != o:
                when = min(c for c in (p, o) if c is not None)
                if worst is None or when < worst[0]:
                    worst = (when, name, k, p, o)
                break
    return worst


def first_difference(predicted: dict[str, Sequence[int]],
                     observed: dict[str, Sequence[int]]) -> str:
    """The earliest handshake where ``observed`` differs from ``predicted``, as one line
    naming the stream, the beat, and both cycles; ``""`` when they agree."""
    worst = divergence(predicted, observed)
    return "" if worst is None else describe_divergence(worst)


def describe_divergence(worst) -> str:
    """A :func:`divergence` as one line naming the stream, the beat, and both cycles."""
    _, name, k, p, o = worst
    show = lambda c: "none" if c is None else f"cycle {c}"  # noqa: E731
    return f"first differing handshake: stream {name} beat {k}: predicted {show(p)}, " \
           f"observed {show(o)}"


def pipeline_cycles_ideal(items: int, latency: int) -> int:
    """The fast path: cycles for ``items`` back-to-back items with no gaps and no
    back-pressure."""
    return items + latency if items else 0


def pipeline_timing(
    items: int, latency: int, source: Source = Source(), ready: Schedule = ALWAYS,
    emits: Sequence[bool] | None = None,
) -> Timing:
    """Timed model of a ``latency``-stage stalling pipeline
    (:func:`scoville.rtl.lib.pipeline.stall_chain`) with streams ``i`` and ``o``.

    The pipeline advances as a whole when its last stage is empty, holds an item that emits
    nothing, or is taken. ``emits[k]`` says whether item ``k`` produces an output (reducing
    units emit only at the end of a reduction); every item does by default.
    """
    if emits is not None and items and not emits[items - 1]:
        raise ValueError("parameter 'emits': the last item must emit (it ends the run)")
    outputs = items if emits is None else sum(bool(e) for e in emits)
    emitting = [True] * items if emits is None else [bool(e) for e in emits[:items]]
    src = Producer(source, items)
    took: list[int] = []
    # The stages as a ring: stage j is ``stages[(head + j) % latency]``, None when empty, else
    # whether its item emits. Advancing moves ``head`` back one place, onto the last stage.
    stages: list[bool | None] = [None] * latency
    head = held = 0  # held: stages that hold an item
    bits = ready.drawn  # grows in place as ready[t] reaches past it
    t = 0
    while len(took) < outputs:
        last = head - 1 if head else latency - 1
        out_valid = stages[last]
        if t >= len(bits):
            ready[t]
        if not out_valid or bits[t]:
            if out_valid:
                took.append(t)
            entering = None
            if src.offers(t):
                entering = emitting[src.sent]
                src.take(t)
            held += (entering is not None) - (stages[last] is not None)
            stages[last] = entering
            head = last
            if not held and src.next_offer is not None:
                # Empty, and nothing changes until the source offers its next beat.
                t = max(t + 1, src.next_offer)
                continue
        t += 1
    return Timing({"i": src.cycles, "o": took})


class StallPipeline:
    """A ``latency``-stage stalling pipeline (:func:`scoville.rtl.lib.pipeline.stall_pipeline`)
    as a unit model (:mod:`scoville.sim.cycles.unit`), for a composed block's model to step
    beside its other parts; the rule is :func:`pipeline_timing`'s: the stages advance together
    when the last is empty or taken, so ``i.ready`` is ``not o_valid or o.ready`` (a method of
    the cycle, :meth:`i_ready`: it passes the consumer's ``ready`` through).

    Parameters
    ----------
    latency : int
    i : input port
    o : output port
    """

    __slots__ = ("_held", "_stages", "i", "o")

    def __init__(self, latency: int, i, o):
        self._stages = [False] * latency
        self._held = 0  # beats in the stages
        self.i, self.o = i, o

    @property
    def o_valid(self) -> bool:
        return self._stages[-1]

    def i_ready(self, t: int) -> bool:
        """``i.ready`` in cycle ``t``."""
        return not self._stages[-1] or self.o.accepts(t)

    def step(self, t: int) -> None:
        if not self._held and not self.i.offers(t):
            return  # empty and nothing offered: the stages stay empty
        stages = self._stages
        o_ready = self.o.accepts(t)
        out = stages[-1]
        if out and o_ready:
            self.o.take(t)
        if not out or o_ready:
            i_valid = self.i.offers(t)
            if i_valid:
                self.i.take(t)
            stages.pop()
            stages.insert(0, i_valid)
            self._held += i_valid - out


class Queue:
    """A first-word-fall-through queue of ``depth`` entries between input port ``i`` and
    output port ``o`` (``amaranth.lib.fifo.SyncFIFO``): ``i`` is ready while it holds fewer
    than ``depth`` (as the cycle starts), ``o`` offers its oldest entry while it holds any;
    an entry written in cycle ``t`` is offered from ``t + 1``."""

    __slots__ = ("_depth", "_items", "i", "o")

    def __init__(self, depth: int, i, o):
        self._depth, self.i, self.o = depth, i, o
        self._items: list = []

    def i_ready(self, t: int) -> bool:
        return len(self._items) < self._depth

    @property
    def o_valid(self) -> bool:
        return bool(self._items)

    @property
    def o_payload(self):
        return self._items[0] if self._items else None

    def step(self, t: int) -> None:
        pop = bool(self._items) and self.o.accepts(t)
        if pop:
            self.o.take(t)
        if self.i.offers(t) and self.i_ready(t):
            self._items.append(self.i.payload)
            self.i.take(t)
        if pop:
            self._items.pop(0)
