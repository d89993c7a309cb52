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
from .stream import ALWAYS, Producer, Schedule, Source, Timing

__all__ = ["Engine", "timing"]


class Engine:
    """The engine's registers as an object stepped once per cycle, beside the memory agent it
    steps: :func:`timing` steps it against a command source; a composed block steps it beside
    its other parts, with the command its neighbour offers and ``o.ready`` in that cycle.

    Attributes
    ----------
    o_valid : bool
        A word is offered on ``o`` (at the start of the cycle about to be stepped).
    reqs, outs : list of int
        The cycles of the ``req`` and ``o`` handshakes.
    rejected : int
        Commands rejected so far.
    """

    __slots__ = ("_burst", "_busy", "_cfg", "_depth", "_inner", "_left", "_reserved",
                 "memory", "o_valid", "outs", "rejected", "reqs")

    def __init__(self, cfg: FetchConfig, memory: MemoryAgent):
        self._cfg, self.memory = cfg, memory
        self._burst, self._depth = cfg.burst, cfg.buffer
        self._busy, self._left, self._reserved, self._inner = False, 0, 0, 0
        self.o_valid = False
        self.rejected = 0
        self.reqs: list[int] = []
        self.outs: list[int] = []

    @property
    def ready(self) -> bool:
        """``cmd.ready``: no command is held."""
        return not self._busy

    def step(self, t: int, cmd: tuple[int, int] | None, req_ready: bool,
             o_ready: bool) -> None:
        """Cycle ``t``: ``cmd`` the offered command ``(addr, len)`` or None (taken when
        :attr:`ready`), the memory's ``req.ready`` schedule and the consumer's ``o.ready``."""
        memory = self.memory
        size = self._left if self._left < self._burst else self._burst
        issue = (self._busy and self._reserved + size <= self._depth and req_ready
                 and memory.room())
        offered = memory.offers(t)
        write = offered and self._inner != self._depth - 1
        pop = self.o_valid and o_ready
        load = self._inner > 0 and (not self.o_valid or o_ready)
        if cmd is not None and not self._busy:
            if self._cfg.accepts(*cmd):
                self._busy, self._left = True, cmd[1]
            else:
                self.rejected += 1
        if issue:
            self.reqs.append(t)
            self._left -= size
            self._busy = self._left > 0
            self._reserved += size
        if pop:
            self.outs.append(t)
            self._reserved -= 1
        self.o_valid = load or (self.o_valid and not o_ready)
        self._inner += write - load
        memory.step(t, offered, write, size if issue else None)


def timing(cfg: FetchConfig, commands: Sequence[tuple[int, int]], memory: MemoryAgent,
           cmd: Source | None = None, req_ready: Schedule = ALWAYS,
           o_ready: Schedule = ALWAYS) -> Timing:
    """The cycle of every handshake on ``cmd``, ``req``, ``rdata`` and ``o``, and the
    ``rejected`` counter, for ``commands`` (``(addr, len)`` each) offered as ``cmd`` says, the
    memory answering as ``memory`` does (a fresh agent; the model steps it), the memory taking
    requests as ``req_ready`` allows and the consumer taking words as ``o_ready`` does."""
    good = [cfg.accepts(a, n) for a, n in commands]
    words = sum(n for (_, n), ok in zip(commands, good, strict=True) if ok)
    producer = Producer(cmd or Source(), len(commands))
    engine = Engine(cfg, memory)
    t = 0
    while len(engine.outs) < words or producer.sent < len(commands):
        offer = producer.offers(t) and engine.ready
        engine.step(t, commands[producer.sent] if offer else None, req_ready[t], o_ready[t])
        if offer:
            producer.take(t)
        t += 1
    return Timing({"cmd": producer.cycles, "req": engine.reqs, "rdata": memory.cycles,
                   "o": engine.outs}, {"rejected": engine.rejected})
