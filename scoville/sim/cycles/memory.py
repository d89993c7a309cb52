"""The timed model of the harness's memory agent (:mod:`scoville.sim.harness`): a memory that
answers read requests ``(addr, len)`` with a latency and a bandwidth.

To the cycle, as the harness does it:

- a request is taken in a cycle where the request stream's ready schedule is true and the
  agent holds fewer than :data:`~scoville.sim.harness.MEM_QUEUE` requests (taken and not yet
  answered in full);
- the words of a request taken in cycle ``c`` can be offered from cycle ``c + latency``, after
  every word of the requests before it;
- a byte budget starts at one word's bytes ``B``; every cycle it grows by ``bytes_per_cycle``,
  less ``B`` when a word is taken, and is capped at ``B + bytes_per_cycle - 1``; a word is first
  offered only in a cycle where the budget holds ``B`` and the data stream's valid schedule is
  true; an offered word is held until taken.

So the memory delivers ``min(1, bytes_per_cycle / B)`` words per cycle while it is kept busy,
and never more than one word per cycle.
"""

from __future__ import annotations

from collections import deque

from scoville.sim.harness import MEM_QUEUE

from .stream import ALWAYS, Schedule

__all__ = ["MemoryAgent", "MemoryMux", "check_memory"]


def check_memory(latency, bytes_per_cycle) -> None:
    """One line naming the parameter when the agent's latency or bandwidth is not allowed."""
    for name, value, lo in (("mem_latency", latency, 1), ("mem_bytes_per_cycle",
                                                          bytes_per_cycle, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value < 2**31:
            raise ValueError(f"parameter '{name}' must be an integer in {lo}..2**31-1; "
                             f"got {value!r}")


class MemoryAgent:
    """The memory agent as a unit model (:mod:`scoville.sim.cycles.unit`): built with the
    memory's latency, bandwidth, word width and data-valid schedule, then given its ports with
    :meth:`attach` by the model that steps it.

    The harness also stops offering once the data stream has its expected words
    (:class:`~scoville.testbenches.freerun.Memory` ``words``); the model assumes that count is
    the words the design requests, as a testbench that takes it from the golden model's
    requests does."""

    __slots__ = ("_bpc", "_budget", "_cap", "_hold", "_latency", "_queue", "_ready", "_valid",
                 "beat", "cycles", "nbytes", "rdata", "req")

    def __init__(self, latency: int, bytes_per_cycle: int, word_bits: int,
                 valid: Schedule = ALWAYS):
        check_memory(latency, bytes_per_cycle)
        self._latency = latency
        self._bpc = bytes_per_cycle
        self.nbytes = -(-word_bits // 8)
        self._cap = self.nbytes + bytes_per_cycle - 1
        self._budget = self.nbytes
        self._valid = valid
        self._ready = ALWAYS
        self._hold = False
        # Per request taken and not answered in full: [first cycle its words are due, words].
        self._queue: deque[list[int]] = deque()
        self.beat = 0
        self.req = self.rdata = None
        #: The cycle of every word handshake.
        self.cycles: list[int] = []

    def attach(self, req, rdata, ready: Schedule = ALWAYS) -> None:
        """The agent's ports: ``req`` (an input port; a request's payload is its words) and
        ``rdata`` (an output port); ``ready`` is the request stream's ready schedule."""
        self.req, self.rdata, self._ready = req, rdata, ready

    def req_ready(self, t: int) -> bool:
        """``req.ready`` in cycle ``t``: the schedule allows it and the agent holds fewer than
        :data:`~scoville.sim.harness.MEM_QUEUE` requests."""
        return len(self._queue) < MEM_QUEUE and self._ready[t]

    def offers(self, t: int) -> bool:
        """``rdata.valid`` in cycle ``t``."""
        if self._hold:
            return True
        q = self._queue
        return (bool(q) and t >= q[0][0] and self._budget >= self.nbytes
                and self._valid[t])

    def step(self, t: int) -> None:
        """The end of cycle ``t``: a word offered and taken, a request taken."""
        offered = self.offers(t)
        taken = offered and self.rdata.accepts(t)
        request = self.req.payload if self.req.offers(t) and self.req_ready(t) else None
        self._hold = offered and not taken
        grow = self._budget + self._bpc - (self.nbytes if taken else 0)
        self._budget = grow if grow < self._cap else self._cap
        if request is not None:
            self.req.take(t)
            self._queue.append([t + self._latency, request])
        if taken:
            self.rdata.take(t)
            self.cycles.append(t)
            self.beat += 1
            if self.beat == self._queue[0][1]:
                self._queue.popleft()
                self.beat = 0

    @property
    def idle(self) -> bool:
        """No request is waiting to be answered."""
        return not self._queue


class MemoryMux:
    """The unit model of :class:`scoville.rtl.lib.memmux.MemoryMux`, from its docstring:
    requests granted round robin (from the client after the last granted) while the tag queue
    has fewer than ``depth`` entries, passed through to ``req`` in the cycle offered; each of
    the memory's words passed through to the client at the queue's head, which leaves with
    its ``len``-th word. Requests' payloads are their words.

    Parameters
    ----------
    depth : int
    creq : list of input ports
    crdata : list of output ports
    req : output port
    rdata : input port
    """

    __slots__ = ("_depth", "_got", "_ptr", "_queue", "creq", "crdata", "rdata", "req")

    def __init__(self, depth: int, creq, crdata, req, rdata):
        self._depth, self.creq, self.crdata, self.req, self.rdata = depth, creq, crdata, req, rdata
        self._ptr = self._got = 0
        self._queue: deque[list[int]] = deque()   # [client, words] per request taken

    def grant(self, t: int) -> int | None:
        """The client whose request is offered on ``req`` in cycle ``t`` (None: none)."""
        if len(self._queue) >= self._depth:
            return None
        n = len(self.creq)
        for off in range(n):
            i = (self._ptr + off) % n
            if self.creq[i].offers(t):
                return i
        return None

    def crdata_valid(self, i: int, t: int) -> bool:
        """``crdata[i].valid`` in cycle ``t``."""
        q = self._queue
        return bool(q) and q[0][0] == i and self.rdata.offers(t)

    def rdata_ready(self, t: int) -> bool:
        q = self._queue
        return bool(q) and self.crdata[q[0][0]].accepts(t)

    def step(self, t: int) -> None:
        g = self.grant(t)
        word = self.rdata_ready(t) and self.rdata.offers(t)
        if g is not None and self.req.accepts(t):
            words = self.creq[g].payload
            self.creq[g].take(t)
            self.req.take(t)
            self._queue.append([g, words])
            self._ptr = (g + 1) % len(self.creq)
        if word:
            head = self._queue[0]
            self.rdata.take(t)
            self.crdata[head[0]].take(t)
            self._got += 1
            if self._got == head[1]:
                self._queue.popleft()
                self._got = 0
