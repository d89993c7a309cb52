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

__all__ = ["timing"]


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
    burst, depth = cfg.burst, cfg.buffer
    busy, left, reserved, inner, out = False, 0, 0, 0, False
    rejected = 0
    reqs: list[int] = []
    outs: list[int] = []
    t = 0
    while len(outs) < words or producer.sent < len(commands):
        # Offers of this cycle, from the registers at its start.
        take_cmd = not busy and producer.offers(t)
        size = left if left < burst else burst
        issue = busy and reserved + size <= depth and req_ready[t] and memory.room()
        offered = memory.offers(t)
        write = offered and inner != depth - 1
        ready = o_ready[t]
        pop = out and ready
        load = inner > 0 and (not out or ready)
        # The registers at the end of the cycle.
        if take_cmd:
            if good[producer.sent]:
                busy, left = True, commands[producer.sent][1]
            else:
                rejected += 1
            producer.take(t)
        if issue:
            reqs.append(t)
            left -= size
            busy = left > 0
            reserved += size
        if pop:
            outs.append(t)
            reserved -= 1
        out = load or (out and not ready)
        inner += write - load
        memory.step(t, offered, write, size if issue else None)
        t += 1
    return Timing({"cmd": producer.cycles, "req": reqs, "rdata": memory.cycles, "o": outs},
                  {"rejected": rejected})
