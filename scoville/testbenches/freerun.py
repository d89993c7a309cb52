"""The testbench side of the free-running harness (:mod:`scoville.sim.harness`).

:class:`FreeRun` loads every source's payloads and valid schedule and every sink's ready
schedule into the harness's rings, raises ``run`` and lets the design run. It wakes every
:data:`~scoville.sim.harness.WAKE` cycles (one timer callback, no callback per cycle), and then,
in zero simulated time, reads back the handshake records and refills the rings through files;
it also wakes when the harness says every expected handshake has happened. So the simulator
runs at its own speed, and the testbench still sees every handshake with its cycle and every
payload a sink took. A data stream the harness's memory agent serves is given as a
:class:`Memory`: the memory's words, loaded before the run, and its latency and bandwidth.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from amaranth.lib.data import StructLayout
from cocotb.triggers import FallingEdge, Timer
from cocotb.utils import get_sim_time

from scoville.sim.cycles.memory import check_memory
from scoville.sim.cycles.stream import ALWAYS, Schedule
from scoville.sim.flow import ENV_KEEP_RINGS
from scoville.sim.harness import DEPTH, MEM_DEPTH, PERIOD_NS, SCHED_WORDS, WAKE, ports

from .codec import Codec
from .failures import Failure, Kind

__all__ = ["FreeRun", "Memory", "Observed", "idle_inputs", "read_int"]

PERIOD_PS = 1000 * PERIOD_NS


@dataclass
class Observed:
    """What a run saw.

    Attributes
    ----------
    payloads : dict
        Each sink's payloads, in order.
    cycles : int
        Cycles up to and including the last handshake.
    handshakes : dict
        Each stream's handshake cycles, in order.
    change : dict
        Each watched output's change over the run (cycle 0 up to and including the cycle of
        the last handshake); an output with a ``data.StructLayout`` (the ``counters`` port) by
        its fields' names (dotted when nested), each modulo its width.
    wall_s : float
        Wall time from releasing the design (``run``) to reading back its last records.
    service_s : float
        Of that, the time spent loading and draining the rings.
    waited : dict
        Each stream's cycles with a beat waiting (``valid`` high, ``ready`` low) before the run
        ended: a source's are the block's back-pressure, a sink's the testbench's.
    """

    payloads: dict[str, list[int]]
    cycles: int
    handshakes: dict[str, list[int]]
    change: dict[str, int]
    wall_s: float = 0.0
    service_s: float = 0.0
    waited: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Memory:
    """What the harness's memory agent serves on one data stream.

    Attributes
    ----------
    image : list of int or numpy.ndarray
        The memory's words from address 0 (at most :data:`~scoville.sim.harness.MEM_DEPTH`),
        as integers or as rows of whole bytes, most significant first
        (:meth:`~scoville.testbenches.codec.Codec.pack_bytes`).
    words : int
        The words the design is expected to read (the data stream's handshakes).
    latency : int
        Cycles from a request's handshake to the first cycle its words may be offered.
    bytes_per_cycle : int
        The memory's bandwidth (:mod:`scoville.sim.cycles.memory`).
    valid : Schedule
        The data stream's valid schedule.
    fault : int or None
        For a data stream with a ``last`` bit: the word (counted from the run's first) whose
        ``last`` is flipped, a response that ends early or runs long; None for none.
    """

    image: object
    words: int
    latency: int
    bytes_per_cycle: int
    valid: Schedule = ALWAYS
    fault: int | None = None


def read_int(handle, name: str, *, signed: bool = False) -> int:
    """The value of a signal; an X or Z bit is a failure naming the signal."""
    value = handle.value
    try:
        return value.to_signed() if signed else int(value)
    except ValueError:
        raise Failure(Kind.PROTOCOL, f"{name} is not 0/1: {value}") from None


def idle_inputs(dut, order: list[str]) -> None:
    """Drive every input of the harness for ``order``'s streams to 0: stopped, nothing
    loaded, every file strobe low."""
    dut.run.value = 0
    dut.sched_loaded.value = 0
    for port in ("hdump", "hlo", "hhi"):
        getattr(dut, port).value = 0
    for name in order:
        ports = ["total", "sload", "slo", "shi"]
        if hasattr(dut, f"dump_{name}"):
            ports += ["dump", "dlo", "dhi"]
        if hasattr(dut, f"load_{name}"):
            ports += ["load", "lo", "hi", "loaded"]
        if hasattr(dut, f"mload_{name}"):
            ports += ["lat", "bpc", "mload", "mlo", "mhi"]
        for port in ports:
            getattr(dut, f"{port}_{name}").value = 0


def _segments(first: int, end: int, depth: int) -> list[tuple[int, int, int]]:
    """Items ``first .. end - 1`` of an endless sequence kept in a ring of ``depth``: the
    contiguous pieces as ``(item, ring index, count)``."""
    out = []
    while first < end:
        at = first % depth
        n = min(end - first, depth - at)
        out.append((first, at, n))
        first += n
    return out


def _read_raw(path: Path, n: int) -> tuple[bytes, int]:
    """The ``n`` entries of a record file the harness wrote with ``$writememh`` (one entry per
    line, in hex, every line as many digits as the entry's width needs; ``//`` lines are
    address comments) as bytes, each entry its whole bytes, most significant first, and the
    bytes of an entry. An X or Z bit is a failure."""
    lines = [line for line in path.read_text().split("\n") if line and line[0] != "/"]
    if len(lines) != n:
        raise AssertionError(f"{path.name}: {len(lines)} entries, expected {n}")
    if not n:
        return b"", 0
    text = "".join(lines) if len(lines[0]) % 2 == 0 else "".join("0" + x for x in lines)
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise Failure(Kind.PROTOCOL, f"{path.name}: an X or Z in a record") from None
    return raw, len(raw) // n


def _read_words(path: Path, n: int) -> list[int]:
    """The ``n`` entries of a record file (:func:`_read_raw`) as integers."""
    raw, size = _read_raw(path, n)
    if size in (1, 2, 4, 8):
        return np.frombuffer(raw, dtype=f">u{size}").tolist()
    return [int.from_bytes(raw[k:k + size], "big") for k in range(0, len(raw), size)]


#: Each file strobe of the harness: its port, its range ports and the file it reads (``{n}``:
#: the stream's name; a dump writes its files itself).
_STROBES = {
    "load": ("load_{n}", "lo_{n}", "hi_{n}", "data_{n}.bin"),
    "sload": ("sload_{n}", "slo_{n}", "shi_{n}", "sched_{n}.bin"),
    "mload": ("mload_{n}", "mlo_{n}", "mhi_{n}", "mem_{n}.bin"),
    "dump": ("dump_{n}", "dlo_{n}", "dhi_{n}", ""),
    "hdump": ("hdump", "hlo", "hhi", ""),
}


class FreeRun:
    """Drives the source streams and takes the sink streams of a design inside the harness.

    ``component`` is the design (the harness is built from its signature); ``sources`` maps
    a stream name to ``(items, valid schedule)``: packed payloads, offered in order (integers,
    or the rows of :meth:`~scoville.testbenches.codec.Codec.pack_bytes`);
    ``sinks`` maps a stream name to ``(count, ready schedule)``; ``memories`` maps each data
    stream the memory agent serves to its :class:`Memory`. ``watch`` names plain outputs of the
    design (counters) whose change over the run :meth:`run` returns.
    """

    def __init__(self, dut, component, sources: dict, sinks: dict, watch=(), memories=None):
        self.dut = dut
        streams, _ = ports(component)
        self.order = [s.name for s in streams]
        # A memory's words leave out their stream's ``last`` bit (the agent sets it).
        self._bytes = {s.name: -(-(s.width - s.last) // 8) for s in streams}
        self._last = {s.name for s in streams if s.last}
        served = {s.name for s in streams if s.answers}
        memories = dict(memories or {})
        if set(memories) != served:
            raise ValueError(f"memories for streams {sorted(memories)}; the design's memory "
                             f"agents serve {sorted(served)}")
        self.memories = {}
        for name, mem in memories.items():
            check_memory(mem.latency, mem.bytes_per_cycle)
            rows = self._rows(name, mem.image)
            if len(rows) > MEM_DEPTH:
                raise ValueError(f"stream {name}: a memory image of {len(rows)} words; the "
                                 f"agent holds {MEM_DEPTH}")
            self.memories[name] = (rows, mem)
        self.sources = {name: (self._rows(name, items), valid)
                        for name, (items, valid) in sources.items()}
        self.sinks = dict(sinks)
        self.names = ([*self.sources, *self.memories], list(self.sinks))
        self.watch = tuple(watch)
        members = component.signature.members
        self._layouts = {name: Codec(members[name].shape) for name in self.watch
                         if isinstance(members[name].shape, StructLayout)}
        self._schedules = {name: schedule for name, (_, schedule)
                           in {**self.sources, **self.sinks}.items()}
        self._schedules.update((name, mem.valid) for name, (_, mem) in self.memories.items())
        self._dir = Path.cwd()

    def _rows(self, name: str, items) -> np.ndarray:
        """A source's payloads as the rings load them: a row of whole bytes per beat, most
        significant first (:meth:`Codec.pack_bytes`; a list of integers is converted)."""
        size = self._bytes[name]
        if isinstance(items, np.ndarray):
            if items.ndim != 2 or items.shape[1] != size:
                raise ValueError(f"stream {name}: payload rows of shape {items.shape}, "
                                 f"expected (beats, {size})")
            return items
        data = b"".join(int(v).to_bytes(size, "big") for v in items)
        return np.frombuffer(data, dtype=np.uint8).reshape(len(items), size)

    def _set(self, name: str, value: int) -> None:
        getattr(self.dut, name).value = value

    def _get(self, name: str) -> int:
        return read_int(getattr(self.dut, name), name)

    async def _strobe(self, pieces: list[tuple[str, str, int, int, bytes | None]]) -> None:
        """For each ``(kind, stream, ring index, count, data)`` in ``pieces``: write ``data``
        (unless None) to the file the strobe of ``kind`` reads, set its range ports and raise
        it, all in one time step; then lower them all. ``kind``: ``load`` (payloads), ``sload``
        (schedule words), ``mload`` (a memory agent's words), ``dump`` (a sink's payload
        records) or ``hdump`` (every stream's handshake bits; no stream)."""
        if not pieces:
            return
        raised = []
        for kind, name, at, n, data in pieces:
            strobe, lo, hi, file = (x.format(n=name) for x in _STROBES[kind])
            if data is not None:
                (self._dir / file).write_bytes(data)
            self._set(lo, at)
            self._set(hi, at + n - 1)
            self._set(strobe, 1)
            raised.append(strobe)
        await Timer(1, "ps")
        for strobe in raised:
            self._set(strobe, 0)
        await Timer(1, "ps")

    async def _service(self, cycle: int) -> None:
        """Drain the records and refill the rings, as of ``cycle`` (zero simulated time): the
        handshakes of the cycles before it and every sink's payloads, then every source's
        payloads up to a ring ahead and every schedule a ring ahead. Each ring's range is in
        up to two pieces (it wraps); the first pieces of every ring go in one time step, the
        second ones in the next."""
        counts = {name: self._get(f"count_{name}") for name in self._all}
        for name in self.sinks:
            # Payloads not yet drained are overwritten after a whole ring.
            if counts[name] - self._drained[name] > DEPTH:
                raise AssertionError(f"stream {name}: {counts[name] - self._drained[name]} "
                                     f"handshakes since the last service, more than a ring "
                                     f"({DEPTH})")
        first = self._hit_cycle
        if cycle // 32 - first // 32 >= SCHED_WORDS:
            raise AssertionError(f"{cycle - first} cycles since the last service: the handshake "
                                 f"rings ({SCHED_WORDS} words of 32 cycles) have wrapped")
        hits = _segments(first // 32, -(-cycle // 32), SCHED_WORDS) if cycle > first else []
        data = {name: _segments(self._drained[name], counts[name], DEPTH) for name in self.sinks}
        ends = {name: min(counts[name] + DEPTH, len(items))
                for name, (items, _) in self.sources.items()}
        loads = {name: _segments(self._loaded[name], ends[name], DEPTH)
                 for name in self.sources}
        sched_end = cycle // 32 + SCHED_WORDS
        scheds = _segments(self._sched_words, sched_end, SCHED_WORDS)
        words = {name: [] for name in self._all}
        for piece in range(2):
            todo = []
            if piece < len(hits):
                todo.append(("hdump", "", hits[piece][1], hits[piece][2], None))
            for name, segs in data.items():
                if piece < len(segs):
                    todo.append(("dump", name, segs[piece][1], segs[piece][2], None))
            for name, segs in loads.items():
                if piece < len(segs):
                    at, n = segs[piece][1], segs[piece][2]
                    items = self.sources[name][0]
                    todo.append(("load", name, at, n, items[segs[piece][0]:][:n].tobytes()))
            if piece < len(scheds):
                at, n = scheds[piece][1], scheds[piece][2]
                todo += [("sload", name, at, n,
                          np.array(s.words(scheds[piece][0], n), dtype=">u4").tobytes())
                         for name, s in self._schedules.items()]
            await self._strobe(todo)
            if piece < len(hits):
                for name in self._all:
                    raw, _ = _read_raw(self._dir / f"hits_{name}.hex", hits[piece][2])
                    words[name].append(raw)
            for name, segs in data.items():
                if piece < len(segs):
                    n = segs[piece][2]
                    self.payloads[name] += _read_words(self._dir / f"data_{name}.hex", n)
                    self._drained[name] += n
        # Handshake bits to cycles: bit t % 32 of the word of cycle t, for first <= t < cycle.
        for name, parts in words.items():
            if not parts:
                continue
            bits = np.unpackbits(np.frombuffer(b"".join(parts), ">u4").astype("<u4")
                                 .view(np.uint8), bitorder="little")
            at = np.flatnonzero(bits) + 32 * (first // 32)
            new = at[(at >= first) & (at < cycle)].tolist()
            if len(self.handshakes[name]) + len(new) != counts[name]:
                raise AssertionError(f"stream {name}: the harness counted {counts[name]} "
                                     f"handshakes by cycle {cycle}, its records "
                                     f"{len(self.handshakes[name]) + len(new)}")
            self.handshakes[name] += new
        self._hit_cycle = cycle
        for name, end in ends.items():
            self._loaded[name] = end
            self._set(f"loaded_{name}", end)
        self._sched_words = sched_end
        self._set("sched_loaded", 32 * sched_end)

    async def run(self, timeout: int, *, expect: int | None = None,
                  stop_after: int | None = None) -> Observed:
        """Run until every sink has its count and every source has handed over its items;
        return what was observed. ``expect``: the cycles the timed model predicts, so the
        testbench wakes when the run should end (else it finds the end at its next
        service). ``stop_after``: stop after that many cycles instead (to interrupt a run),
        returning what was observed so far."""
        dut = self.dut
        self._all = [*self.names[0], *self.names[1]]
        self._drained = dict.fromkeys(self.sinks, 0)
        self._hit_cycle = 0
        self._loaded = dict.fromkeys(self.sources, 0)
        self._sched_words = 0
        self.handshakes = {name: [] for name in self._all}
        self.payloads = {name: [] for name in self.sinks}
        for name, (items, _) in self.sources.items():
            self._set(f"total_{name}", len(items))
        for name, (count, _) in self.sinks.items():
            self._set(f"total_{name}", count)
        for name, (_, mem) in self.memories.items():
            self._set(f"total_{name}", mem.words)
            self._set(f"lat_{name}", mem.latency)
            self._set(f"bpc_{name}", mem.bytes_per_cycle)
            if name in self._last:
                self._set(f"fault_{name}", 0xFFFFFFFF if mem.fault is None else mem.fault)
        await FallingEdge(dut.clk)
        await Timer(1, "ns")
        await self._strobe([("mload", name, 0, len(rows), rows.tobytes())
                            for name, (rows, _) in self.memories.items() if len(rows)])
        await self._service(0)
        self._check(0)
        if os.environ.get(ENV_KEEP_RINGS):
            self._keep_rings()
        self._set("run", 1)  # this cycle is cycle 0
        # Every wake is 1 ns after a falling edge, timed from here rather than from the last
        # wake, so the picoseconds the file strobes take never add up.
        origin = get_sim_time("ps")
        start = time.perf_counter()
        self._service_s = 0.0
        cycle = 0
        limit = timeout if stop_after is None else min(timeout, stop_after)
        finished = False
        # The harness's end-of-run snapshot is taken the cycle after the last handshake.
        end = None if expect is None else expect + 1
        while True:
            step = min(WAKE, max(limit - cycle, 1))
            if end is not None and cycle < end:
                step = min(step, end - cycle)
            await Timer(origin + (cycle + step) * PERIOD_PS - get_sim_time("ps"), "ps")
            if self._get("done") and not self._get("ended"):
                await Timer(origin + (cycle + step + 1) * PERIOD_PS - get_sim_time("ps"), "ps")
            finished = bool(self._get("ended"))
            cycle = self._get("cycle")
            self._check(cycle)
            began = time.perf_counter()
            await self._service(cycle)
            self._service_s += time.perf_counter() - began
            for name, (count, _) in self.sinks.items():
                if len(self.handshakes[name]) > count:
                    self._set("run", 0)
                    raise Failure(Kind.DATA, f"stream {name}: {len(self.handshakes[name])} "
                                             f"handshakes by cycle {cycle}, {count} expected")
            if finished or (stop_after is not None and cycle >= stop_after):
                break
            if cycle >= timeout:
                self._set("run", 0)
                raise Failure(
                    Kind.TIMEOUT, f"timeout after {cycle} cycles: "
                    + ", ".join(f"{n} {len(self.handshakes[n])}/{self.expected(n)}"
                                for n in self._all))
        wall = time.perf_counter() - start
        # The harness samples the watched outputs at the end of a finished run only.
        change = self._change() if finished else {}
        self._set("run", 0)
        if finished:
            for name in self._all:
                got = len(self.handshakes[name])
                if got != self.expected(name):
                    raise Failure(Kind.DATA, f"stream {name}: {got} handshakes, expected "
                                             f"{self.expected(name)}")
        last = max((h[-1] + 1 for h in self.handshakes.values() if h), default=0)
        waited = {name: self._get(f"waited_{name}") for name in self._all}
        return Observed(self.payloads, last, self.handshakes, change, wall, self._service_s,
                        waited)

    def _keep_rings(self) -> None:
        """Copy the rings as first loaded (each source's payload file, each stream's schedule
        file) to ``rings/``, with ``rings.json``: per stream, whether it is a source, its
        expected handshakes and the entries loaded."""
        keep = self._dir / "rings"
        keep.mkdir(exist_ok=True)
        streams = {}
        for name in self._all:
            source = name in self.sources
            files = [f"sched_{name}.bin", *([f"data_{name}.bin"] if source else []),
                     *([f"mem_{name}.bin"] if name in self.memories else [])]
            for file in files:
                if (self._dir / file).exists():
                    shutil.copyfile(self._dir / file, keep / file)
            streams[name] = {"source": source, "total": self.expected(name),
                             "loaded": self._loaded.get(name, 0)}
            if name in self.memories:
                rows, mem = self.memories[name]
                streams[name]["memory"] = {"words": len(rows), "latency": mem.latency,
                                           "bytes_per_cycle": mem.bytes_per_cycle}
        (keep / "rings.json").write_text(json.dumps({"sched_words": self._sched_words,
                                                     "streams": streams}))

    def _change(self) -> dict[str, int]:
        """Each watched output's change between the harness's samples of it."""
        change = {}
        for name in self.watch:
            start, end = self._get(f"{name}_start"), self._get(f"{name}_end")
            if name not in self._layouts:
                change[name] = end - start
                continue
            codec = self._layouts[name]
            fields = codec.unpack([start, end])
            for field, (a, b) in fields.items():
                mod = 1 << codec.fields[field].width
                if codec.fields[field].count:
                    # An array of counters: each one's change.
                    change[field] = [(int(y) - int(x)) % mod for x, y in zip(a, b, strict=True)]
                else:
                    change[field] = (int(b) - int(a)) % mod
        return change

    def expected(self, name: str) -> int:
        """The handshakes the run expects on stream ``name``."""
        if name in self.sources:
            return len(self.sources[name][0])
        if name in self.memories:
            return self.memories[name][1].words
        return self.sinks[name][0]

    def _check(self, cycle: int) -> None:
        if self._get("err"):
            stream = self.order[self._get("err_stream")]
            cycle = self._get("err_cycle")
            kind = self._get("err_kind")
            if kind == 2:
                raise Failure(Kind.PROTOCOL, f"an X or Z on stream {stream} in cycle {cycle}")
            if kind == 3:
                raise Failure(Kind.PROTOCOL, f"bad read request on stream {stream} in cycle "
                                             f"{cycle}: 0 words, or past the memory's "
                                             f"{MEM_DEPTH} words")
            what = "payload changed" if kind else "valid dropped"
            raise Failure(Kind.PROTOCOL, f"protocol violation on stream {stream} in cycle "
                                         f"{cycle}: {what} while a beat waited for ready")
        if self._get("ioerr"):
            raise AssertionError(f"the harness read a short ring file by cycle {cycle} "
                                 f"(in {self._dir})")
        if self._get("starved"):
            raise AssertionError(f"the harness ran dry by cycle {cycle}: refills came too late")
