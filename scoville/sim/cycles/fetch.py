"""Timed model of :class:`scoville.rtl.fetch.Fetch` against the harness's memory agent.

The engine, its buffer and the memory back-pressure each other (the buffer's room decides when
a request goes out, the memory when words come back, the consumer when the buffer drains), so
the model steps them together, cycle by cycle, with the registers of the RTL:

- the command register: a command is taken when none is held; a good one is held from the next
  cycle until its last request is taken;
- ``reserved``: words requested and not yet taken on ``o``; a request of ``s`` words is offered
  while ``reserved + s <= buffer``;
- the buffer, ``amaranth.lib.fifo.SyncFIFOBuffered``: ``inner`` words in its memory (room while
  ``inner < buffer - 1``) and an output register ``out``; a word moves from memory to the
  output register in a cycle where the memory holds one and the output register is empty or
  ``o.ready`` is high, and is offered on ``o`` from the next cycle;
- the memory: :class:`~scoville.sim.cycles.memory.MemoryAgent`.
"""

from __future__ import annotations

from collections.abc import Sequence

from scoville.rtl.fetch import FetchConfig

from .memory import MemoryAgent
from .stream import ALWAYS, Consumer, Producer, Schedule, Source, Timing
from .unit import Wire, run

__all__ = ["Engine", "timing"]


class Engine:
    """The engine's registers as a unit model (:mod:`scoville.sim.cycles.unit`): :func:`timing`
    steps it and the memory agent between the block's streams; a composed block steps them
    beside its other parts, with wires where its parts drive the engine.

    Parameters
    ----------
    cfg : FetchConfig
    cmd : input port
        Commands, ``(addr, len)`` payloads.
    req : output port
        Read requests to the memory; a beat's payload is its words.
    rdata : input port
        The memory's words.
    o : output port
        The words out.

    Attributes
    ----------
    o_valid : bool
        A word is offered on ``o`` (at the start of the cycle about to be stepped).
    rejected : int
        Commands rejected so far.
    """

    __slots__ = ("_burst", "_busy", "_cfg", "_depth", "_inner", "_left", "_reserved", "cmd",
                 "o", "o_valid", "rdata", "rejected", "req")

    def __init__(self, cfg: FetchConfig, cmd, req, rdata, o):
        self._cfg = cfg
        self.cmd, self.req, self.rdata, self.o = cmd, req, rdata, o
        self._burst, self._depth = cfg.burst, cfg.buffer
        self._busy, self._left, self._reserved, self._inner = False, 0, 0, 0
        self.o_valid = False
        self.rejected = 0

    @property
    def ready(self) -> bool:
        """``cmd.ready``: no command is held."""
        return not self._busy

    @property
    def req_size(self) -> int:
        """The words of the next request."""
        return self._left if self._left < self._burst else self._burst

    @property
    def req_valid(self) -> bool:
        """A request is offered: a command is held and the buffer has room for its words."""
        return self._busy and self._reserved + self.req_size <= self._depth

    @property
    def rdata_ready(self) -> bool:
        """The buffer's memory has room for a word."""
        return self._inner != self._depth - 1

    def step(self, t: int) -> None:
        size = self.req_size
        issue = self.req_valid and self.req.accepts(t)
        write = self.rdata_ready and self.rdata.offers(t)
        o_ready = self.o.accepts(t)
        pop = self.o_valid and o_ready
        load = self._inner > 0 and (not self.o_valid or o_ready)
        if not self._busy and self.cmd.offers(t):
            addr, words = self.cmd.payload
            self.cmd.take(t)
            if self._cfg.accepts(addr, words):
                self._busy, self._left = True, words
            else:
                self.rejected += 1
        if issue:
            self.req.take(t)
            self._left -= size
            self._busy = self._left > 0
            self._reserved += size
        if write:
            self.rdata.take(t)
        if pop:
            self.o.take(t)
            self._reserved -= 1
        self.o_valid = load or (self.o_valid and not o_ready)
        self._inner += write - load


def timing(cfg: FetchConfig, commands: Sequence[tuple[int, int]], memory: MemoryAgent,
           cmd: Source | None = None, req_ready: Schedule = ALWAYS,
           o_ready: Schedule = ALWAYS) -> Timing:
    """The cycle of every handshake on ``cmd``, ``req``, ``rdata`` and ``o``, and the
    ``rejected`` counter, for ``commands`` (``(addr, len)`` each) offered as ``cmd`` says, the
    memory answering as ``memory`` does (a fresh agent; the model steps it), the memory taking
    requests as ``req_ready`` allows and the consumer taking words as ``o_ready`` does."""
    good = [cfg.accepts(a, n) for a, n in commands]
    words = sum(n for (_, n), ok in zip(commands, good, strict=True) if ok)
    producer = Producer(cmd or Source(), len(commands), commands)
    req, rdata, out = Wire(), Wire(), Consumer(o_ready)
    memory.attach(req, rdata, req_ready)
    engine = Engine(cfg, producer, req, rdata, out)

    def cycle(t: int) -> int:
        req.set(engine.req_valid, memory.req_ready(t), engine.req_size)
        rdata.set(memory.offers(t), engine.rdata_ready)
        engine.step(t)
        memory.step(t)
        return t + 1

    run("fetch", cycle, lambda: len(out.cycles) == words and producer.sent == len(commands),
        1_000_000 + 1000 * (len(commands) + words),
        lambda: {"engine": engine, "memory": memory, "req": req, "rdata": rdata})
    return Timing({"cmd": producer.cycles, "req": req.cycles, "rdata": memory.cycles,
                   "o": out.cycles}, {"rejected": engine.rejected})
