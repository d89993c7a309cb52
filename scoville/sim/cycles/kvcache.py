"""Cycle model of the KV-cache scratchpad (:class:`scoville.rtl.kvcache.KvCache`).

The cache has two engines. The *request engine* takes requests in order and answers each; the
*read engine* streams a read's lines on ``rd`` while the request engine goes on with the next
requests. Only appends run beside a read; every other request waits in decode until the read
engine is idle, and so does an append that must copy a shared page (copy-on-write).

Request engine: a request's cost counts its handshake cycle, one cycle to decode and check it,
the cycles of its work and one to answer, when ``wd`` always has the next line and ``resp`` is
always ready (``P``: pages walked; ``B``: append lines; ``PL``: page lines):

=================================  =================  ======================================
request                            cycles             why
=================================  =================  ======================================
alloc, read, or a failing request  3                  a read hands its lines to the read
                                                      engine; a failing append also drains
                                                      its B lines (+ B)
free, fork                         4 + 3P             table entry, reference count,
                                                      write-back per page, then done
append into its own page           5 + B              table entry, reference count, B lines
append that opens a page           6 + B              + 1 to take the page
append into a shared page          7 + PL + B         + the copy, a line per cycle
append with no page free           5 + B              drains its lines
=================================  =================  ======================================

Cycles the streams make it wait are stalls (counter ``stalls``), cycles waiting for the read
engine are ``read_waits``, cycles with no request ``idle``; the RTL's ``busy`` counter is
exactly the sum of the costs.

Read engine: a read of N lines (L tokens, ``token_lines`` each) is busy N + 1 cycles: it
issues one line per cycle and hands the last one over a cycle later (counter ``read_cycles``;
cycles ``rd`` is not ready are ``read_stalls`` on top). From the request's handshake to its last
line, a read on an idle engine takes ``READ_LATENCY + N`` cycles.

The components of the RTL map onto the model: the request engine is
:class:`~scoville.rtl.kvcache.KvCache`'s state machine (its page walks are the costs of
:class:`~scoville.rtl.kvcache_pages.PageAllocator`'s one-cycle reads), the read engine is
:class:`~scoville.rtl.kvcache_linereader.LineReader`, and the banks
(:class:`~scoville.rtl.kvcache_banks.Banks`) take a line a cycle and never conflict, so they add no
term of their own.

:func:`run_cycles` puts both engines on one time line for streams that keep up: the exact
cycle count of a request sequence, waits included (the fast path). :func:`timing` is the
cycle-level model for any stream timing: the request engine's state machine and the read
engine, cycle by cycle, against the schedules of ``req``, ``wd``, ``rd`` and ``resp``; it
predicts the cycle of every handshake on the four streams and every cycle counter.
:func:`units_timing` is the same model built as the RTL is, from the unit models of the walk,
the append and the read engine (each from its RTL unit's docstring); :class:`Engine` is the
cache as one unit model, for the attention model to step. Tests hold the three to one rule.
"""

from __future__ import annotations

from scoville.rtl.kvcache import COUNTERS, Op, Status

from . import unit
from .kvcache_append import Append, Appender
from .kvcache_linereader import LineReader
from .kvcache_refs import RefWalk
from .stream import ALWAYS, Consumer, Producer, Schedule, Source, Timing
from .unit import run

__all__ = ["COUNTERS", "READ_LATENCY", "Engine", "engine_cycles", "engine_timing", "read_cycles",
           "read_utilization", "request_cycles", "run_cycles", "timing", "units_timing"]



#: Cycles of a read on an idle engine beyond one per line: handshake, decode (the engine
#: starts), and the output register.
READ_LATENCY = 3


def read_cycles(config, tokens: int, lines: int = 0) -> int:
    """Cycles from a read's request handshake to its last line, engine idle and ``rd``
    ready: ``READ_LATENCY`` plus one per line, ``lines`` per token (0: all
    ``ceil(head_dim * bits / (banks * word_bits))`` of them)."""
    return READ_LATENCY + tokens * (lines or config.token_lines)


def read_utilization(config, tokens: int) -> float:
    """Fraction of cycles the banks deliver a line when reads of ``tokens`` tokens follow
    each other: a read starts once the previous one has handed over its last line, so each
    takes its lines plus 2 cycles."""
    lines = tokens * config.token_lines
    return lines / (lines + 2)


def request_cycles(config, outcome) -> int:
    """Request-engine cycles of one request, from its
    :class:`~scoville.sim.golden.kvcache.Outcome`."""
    op, ok = outcome.op, outcome.status == Status.OK
    if op == Op.APPEND:
        if outcome.reached == "decode":
            return 3 + config.append_beats
        return (5 + config.append_beats + int(outcome.new_page)
                + (config.page_lines + 1) * int(outcome.copied))
    if ok and op in (Op.FREE, Op.FORK):
        return 4 + 3 * outcome.walked
    return 3


def engine_cycles(outcome) -> int:
    """Read-engine cycles of one request (0 unless a read that succeeds)."""
    return len(outcome.data) + 1 if outcome.data else 0


def run_cycles(config, outcomes) -> int:
    """Cycles of a whole request sequence with streams that keep up: up to and including the
    last handshake on ``resp`` or ``rd``.

    ``t`` is the cycle a request is taken; ``idle_at`` the first cycle the read engine is
    idle. A request other than an append decodes at ``max(t + 1, idle_at)``; a read starts
    the engine there, which issues its N lines in the next N cycles and hands over the last
    one in the cycle after. An append that copies waits in its fourth cycle for the engine.
    """
    t = 0
    idle_at = 0
    end = 0
    for out in outcomes:
        cost = request_cycles(config, out)
        if out.op == Op.APPEND:
            wait = max(0, idle_at - (t + 3)) if out.copied else 0
            t += cost + wait
        else:
            decode = max(t + 1, idle_at)
            if out.data:
                n = len(out.data)
                idle_at = decode + n + 2
                end = max(end, decode + n + 2)
            t = decode + cost - 1
        end = max(end, t)
    return end


def _steps(config, out) -> list[tuple[str, int]]:
    """The request engine's path through one request after its handshake cycle, as ``(step,
    n)``: ``decode`` (one cycle; n = 1: it first waits while the read engine is busy),
    ``decide`` (an append's choice of page, one cycle; n = 1: a copy-on-write first waits while
    the read engine is busy), ``start`` (a read's decode: waits, then starts the read engine on
    n lines), ``work`` (n cycles), ``copy`` (n cycles, all but the first copying a line),
    ``write`` and ``drain`` (take n ``wd`` beats), ``resp`` (the answer, until ``resp`` is
    ready)."""
    if out.op == Op.APPEND:
        beats = config.append_beats
        if out.reached == "decode":
            return [("decode", 0), ("drain", beats), ("resp", 0)]
        # Decode, the page's reference count, then the choice of page (A_DEC).
        steps = [("decode", 0), ("work", 1), ("decide", int(out.copied))]
        if out.reached == "page":
            return [*steps, ("drain", beats), ("resp", 0)]
        if out.new_page:
            steps.append(("work", 1))
        if out.copied:
            steps.append(("copy", config.page_lines + 1))
        return [*steps, ("write", beats), ("resp", 0)]
    if out.data:
        return [("start", len(out.data)), ("resp", 0)]
    walk = out.status == Status.OK and out.op in (Op.FREE, Op.FORK)
    return [("decode", 1), ("work", 3 * out.walked + 1 if walk else 0), ("resp", 0)]


class Engine:
    """The cache's two engines as a unit model (:mod:`scoville.sim.cycles.unit`), for a composed
    block that drives the cache's streams with wires from its own units (:func:`engine_timing`
    steps it between the streams' schedules; :func:`timing` is the same rule written as one
    loop for speed, and a test checks that the two agree).

    A request's path is :func:`_steps` of its outcome, given when the request is taken. The
    stream signals of the cycle about to be stepped are :attr:`req_ready`, :attr:`wd_ready`,
    :attr:`resp_valid`, :attr:`rd_valid` and :attr:`rd_last`.

    Parameters
    ----------
    config : KvCacheConfig
    req : input port
        Requests; a beat's payload is its :class:`~scoville.sim.golden.kvcache.Outcome`.
    wd : input port
        An append's lines.
    rd, resp : output port
        Lines read, and answers.

    Attributes
    ----------
    counters : dict of str to int
        :data:`COUNTERS` so far (``reads``: lines handed over).
    """

    __slots__ = ("_at", "_cfg", "_left", "_out_valid", "_plan", "_remaining", "counters", "rd",
                 "req", "resp", "wd")

    def __init__(self, config, req, wd, rd, resp):
        self._cfg = config
        self.req, self.wd, self.rd, self.resp = req, wd, rd, resp
        self._plan: list[tuple[str, int]] = []
        self._at = 0
        self._left = 0
        self._remaining = 0
        self._out_valid = False
        self.counters = dict.fromkeys(COUNTERS, 0)

    @property
    def req_ready(self) -> bool:
        return self._at == len(self._plan)

    @property
    def _step(self) -> str | None:
        return self._plan[self._at][0] if self._at < len(self._plan) else None

    @property
    def wd_ready(self) -> bool:
        return self._step in ("write", "drain")

    @property
    def resp_valid(self) -> bool:
        return self._step == "resp"

    @property
    def rd_valid(self) -> bool:
        return self._out_valid

    @property
    def rd_last(self) -> bool:
        """The line on ``rd`` is its read's last (``rd``'s ``last``): no line of the read is
        left to put out (a read starts only once the previous one's lines have all gone)."""
        return self._out_valid and self._remaining == 0

    def step(self, t: int) -> None:
        """Cycle ``t``, by the rule :func:`timing` states."""
        count = self.counters
        engine_busy = self._remaining > 0 or self._out_valid
        start = 0
        if self._at == len(self._plan):
            if self.req.offers(t):
                self._plan, self._at = _steps(self._cfg, self.req.payload), 0
                self.req.take(t)
                self._left = self._plan[0][1]
                count["busy"] += 1
            else:
                count["idle"] += 1
        else:
            step, n = self._plan[self._at]
            done = False
            if step in ("work", "copy"):
                if step == "copy" and self._left <= n - 1:
                    count["copies"] += 1
                self._left -= 1
                done = self._left <= 0
                count["busy"] += 1
            elif step in ("write", "drain"):
                if self.wd.offers(t):
                    self.wd.take(t)
                    count["writes"] += step == "write"
                    self._left -= 1
                    done = self._left == 0
                    count["busy"] += 1
                else:
                    count["stalls"] += 1
            elif step == "resp":
                if self.resp.accepts(t):
                    self.resp.take(t)
                    done = True
                    count["busy"] += 1
                else:
                    count["stalls"] += 1
            elif engine_busy and (step == "start" or n):
                count["read_waits"] += 1
            else:
                start = n if step == "start" else 0
                done = True
                count["busy"] += 1
            plan = self._plan
            while done and self._at < len(plan):
                self._at += 1
                self._left = plan[self._at][1] if self._at < len(plan) else 0
                done = self._at < len(plan) and plan[self._at][0] == "work" and self._left == 0
        if engine_busy:
            count["read_cycles"] += 1
        rd_ready = self.rd.accepts(t)
        if self._out_valid:
            if rd_ready:
                self.rd.take(t)
                count["reads"] += 1
            else:
                count["read_stalls"] += 1
        if not self._out_valid or rd_ready:
            self._out_valid = self._remaining > 0
            if self._out_valid:
                self._remaining -= 1
        self._remaining += start


def timing(config, outcomes, sources: dict[str, Source] | None = None,
           ready: dict[str, Schedule] | None = None) -> Timing:
    """Timed model of a request sequence (the reference model's ``Outcome`` of each): the
    handshake cycles of ``req``, ``wd``, ``rd`` and ``resp`` and the counters
    :data:`COUNTERS`, given a :class:`Source` for ``req`` and ``wd`` and the ready schedules
    of ``rd`` and ``resp`` (each keeps up when not given).

    Each cycle, as the RTL: the request engine takes a request when idle, decodes it (a
    request other than an append first waits while the read engine is busy), works through
    its fixed cycles, takes an append's ``wd`` beats (a cycle without one is a stall), and
    holds its answer until ``resp`` is ready (a stall); an append that copies waits for the
    read engine in its fourth cycle. A read's decode starts the read engine, which moves one
    line per cycle into its output register while the register is empty or taken.

    Traced (:func:`~scoville.sim.cycles.unit.recording`), it steps the cache's unit models
    (:func:`units_timing`, the same handshakes), which show their states a cycle at a time.
    """
    if unit.recording_active():
        return units_timing(config, outcomes, sources, ready)
    sources, ready = sources or {}, ready or {}
    outcomes = list(outcomes)
    req = Producer(sources.get("req", Source()), len(outcomes))
    beats = sum(config.append_beats for o in outcomes if o.op == Op.APPEND)
    wd = Producer(sources.get("wd", Source()), beats)
    rd, resp = Consumer(ready.get("rd", ALWAYS)), Consumer(ready.get("resp", ALWAYS))
    rd_lines = sum(len(o.data) for o in outcomes)
    plans = [_steps(config, o) for o in outcomes]
    # The loop is the model's whole cost: per-cycle state in locals, the ready schedules read
    # from their drawn bits (drawn ahead in chunks), counters as plain integers.
    idle = busy = stalls = read_waits = copies = writes = read_busy = read_stalls = 0
    plan: list[tuple[str, int]] = []  # the current request's steps; plan[at:] to go
    at = 0
    left = 0  # cycles or beats left in the current step
    remaining = 0  # lines the read engine has yet to issue
    out_valid = False  # the read engine's output register holds a line
    rd_bits, resp_bits = rd.ready.drawn, resp.ready.drawn
    horizon = 0
    rd_taken, resp_taken = rd.cycles, resp.cycles
    n_out = len(outcomes)
    t = 0
    limit = 1_000_000 + 100 * (len(outcomes) + beats + rd_lines)
    while len(resp_taken) < n_out or len(rd_taken) < rd_lines:
        if t > limit:
            raise RuntimeError(f"kvcache timed model: no progress after {t} cycles")
        engine_busy = remaining > 0 or out_valid
        if not engine_busy:
            # With the read engine idle, the request engine's waits and fixed steps have no
            # other effect: jump over all but their last cycle.
            if at == len(plan):
                nxt = req.next_offer
                if nxt is not None and nxt > t:
                    idle += nxt - t
                    t = nxt
                    continue
            else:
                step, n = plan[at]
                if (step == "work" or step == "copy") and left > 1:
                    k = left - 1
                    busy += k
                    if step == "copy":
                        copies += k if left <= n - 1 else max(0, n - 2)
                    left = 1
                    t += k
                    continue
                if (step == "write" or step == "drain") and left > 1:
                    while left > 1:
                        # The next beat: offered already (held), or from its first offer.
                        nxt = max(wd.next_offer, t)
                        stalls += nxt - t
                        wd.take(nxt)
                        busy += 1
                        writes += step == "write"
                        left -= 1
                        t = nxt + 1
                    continue
        if t >= horizon:
            horizon = t + 4096
            rd.ready[horizon]
            resp.ready[horizon]
        rd_ready = rd_bits[t]
        start = 0
        if at == len(plan):
            if req.offers(t):
                req.take(t)
                plan, at = plans[req.sent - 1], 0
                left = plan[0][1]
                busy += 1
            else:
                idle += 1
        else:
            step, n = plan[at]
            done = False
            if step == "work" or step == "copy":
                if step == "copy" and left <= n - 1:
                    copies += 1
                left -= 1
                done = left <= 0
                busy += 1
            elif step == "write" or step == "drain":
                if wd.offers(t):
                    wd.take(t)
                    if step == "write":
                        writes += 1
                    left -= 1
                    done = left == 0
                    busy += 1
                else:
                    stalls += 1
            elif step == "resp":
                if resp_bits[t]:
                    resp_taken.append(t)
                    done = True
                    busy += 1
                else:
                    stalls += 1
            elif engine_busy and (step == "start" or n):  # decode, decide, start
                read_waits += 1
            else:
                start = n if step == "start" else 0
                done = True
                busy += 1
            while done and at < len(plan):
                at += 1
                left = plan[at][1] if at < len(plan) else 0
                # A step of no cycles (a failing request's work) is passed at once.
                done = at < len(plan) and plan[at][0] == "work" and left == 0
        # The read engine.
        if engine_busy:
            read_busy += 1
        if out_valid:
            if rd_ready:
                rd_taken.append(t)
            else:
                read_stalls += 1
        if not out_valid or rd_ready:
            out_valid = remaining > 0
            if out_valid:
                remaining -= 1
        remaining += start
        t += 1
    count = {"idle": idle, "busy": busy, "stalls": stalls, "read_waits": read_waits,
             "copies": copies, "writes": writes, "read_cycles": read_busy,
             "read_stalls": read_stalls}
    assert set(count) | {"reads"} == set(COUNTERS), "a counter the model does not count"
    count["reads"] = len(rd.cycles)
    return Timing({"req": req.cycles, "wd": wd.cycles, "rd": rd.cycles, "resp": resp.cycles},
                  count)



def _stepped(config, outcomes, sources, ready, build) -> Timing:
    """Run a unit-model rendering of the cache, ``build(req, wd, rd, resp)`` (an object with
    ``cycle(t)``, ``parts()`` and ``counters``), against the streams' schedules."""
    sources, ready = sources or {}, ready or {}
    outcomes = list(outcomes)
    beats = sum(config.append_beats for o in outcomes if o.op == Op.APPEND)
    req = Producer(sources.get("req", Source()), len(outcomes), outcomes)
    wd = Producer(sources.get("wd", Source()), beats)
    rd, resp = Consumer(ready.get("rd", ALWAYS)), Consumer(ready.get("resp", ALWAYS))
    rd_lines = sum(len(o.data) for o in outcomes)
    block = build(req, wd, rd, resp)
    run("kvcache", block.cycle,
        lambda: len(resp.cycles) == len(outcomes) and len(rd.cycles) == rd_lines,
        1_000_000 + 100 * (len(outcomes) + beats + rd_lines), block.parts)
    counters = dict(block.counters, reads=len(rd.cycles))
    return Timing({"req": req.cycles, "wd": wd.cycles, "rd": rd.cycles, "resp": resp.cycles},
                  counters)


class _OneEngine:
    """The :class:`Engine` alone, as :func:`_stepped` runs a rendering."""

    def __init__(self, config, req, wd, rd, resp):
        self.engine = Engine(config, req, wd, rd, resp)
        self.counters = self.engine.counters

    def cycle(self, t: int) -> int:
        self.engine.step(t)
        return t + 1

    def parts(self) -> dict:
        return {"engine": self.engine}


def engine_timing(config, outcomes, sources: dict[str, Source] | None = None,
                  ready: dict[str, Schedule] | None = None) -> Timing:
    """:func:`timing` by stepping the :class:`Engine` (the unit model a composed block steps),
    through :func:`~scoville.sim.cycles.unit.run`: slower than :func:`timing`'s one loop; a
    test checks that the two agree, handshake for handshake and counter for counter."""
    return _stepped(config, outcomes, sources, ready,
                    lambda *ports: _OneEngine(config, *ports))


def _append_kind(out) -> Append:
    """What an append does, from its outcome (:class:`Append`)."""
    if out.reached == "decode":
        return Append.DROP
    if out.reached == "page":
        return Append.FULL
    if out.copied:
        return Append.COPY
    return Append.NEW_PAGE if out.new_page else Append.WRITE


class _Units:
    """The cache as its RTL is built: the request engine (its states: idle, decode, the walk,
    the append, the answer) stepping the unit models of the reference walk, the append and the
    read engine (:mod:`.kvcache_refs`, :mod:`.kvcache_append`, :mod:`.kvcache_linereader`),
    each from its RTL unit's docstring; the request engine's cycles counted as the RTL counts
    them (``busy`` is what is neither idle, a stall nor a wait)."""

    def __init__(self, config, req, wd, rd, resp):
        self.req, self.resp = req, resp
        self.walk = RefWalk()
        self.append = Appender(page_lines=config.page_lines, beats=config.append_beats, wd=wd)
        self.reader = LineReader(rd)
        self.state, self.out = "idle", None
        self.counters = dict.fromkeys(COUNTERS, 0)

    def parts(self) -> dict:
        return {"engine": self, "walk": self.walk, "append": self.append,
                "reader": self.reader}

    def line_trace(self) -> str:
        return self.state if self.out is None else f"{self.state} {Op(self.out.op).name}"

    def cycle(self, t: int) -> int:
        """Cycle ``t``: the request engine's moves from its state and its units' at the
        cycle's start, then every unit steps."""
        walk, app, reader, out = self.walk, self.append, self.reader, self.out
        count, state = self.counters, self.state
        busy = reader.busy
        app.engine_busy = busy
        walk.start = app.start = reader.start = None
        idle = wait = stall = False
        nxt = state
        if state == "idle":
            if self.req.offers(t):
                self.out = self.req.payload
                self.req.take(t)
                nxt = "decode"
            else:
                idle = True
        elif state == "decode":
            if busy and out.op != Op.APPEND:
                wait = True
            elif out.op == Op.APPEND:
                app.start, nxt = _append_kind(out), "append"
            elif out.status == Status.OK and out.op in (Op.FREE, Op.FORK):
                walk.start, nxt = out.walked, "walk"
            else:
                reader.start = len(out.data) if out.data else None
                nxt = "resp"
        elif state == "resp":
            if self.resp.accepts(t):
                self.resp.take(t)
                nxt, self.out = "idle", None
            else:
                stall = True
        walk.step(t)
        app.step(t)
        reader.step(t)
        if state == "walk" and walk.done or state == "append" and app.done:
            nxt = "resp"
        stall = stall or app.wd_stall
        wait = wait or app.read_wait
        count["idle"] += idle
        count["stalls"] += stall
        count["read_waits"] += wait
        count["busy"] += not (idle or stall or wait)
        count["read_cycles"] += busy
        count["read_stalls"] += reader.stall
        count["writes"] += app.writes
        count["copies"] += app.copying
        self.state = nxt
        return t + 1


def units_timing(config, outcomes, sources: dict[str, Source] | None = None,
                 ready: dict[str, Schedule] | None = None) -> Timing:
    """:func:`timing` by stepping the cache's unit models as the RTL composes its units
    (:class:`_Units`): a model built from the units' contracts, not from the block's cost
    table; a test checks that it agrees with :func:`timing` and the :class:`Engine`,
    handshake for handshake and counter for counter. Traced
    (:func:`~scoville.sim.cycles.unit.recording`), :func:`timing` runs this one."""
    return _stepped(config, outcomes, sources, ready, lambda *ports: _Units(config, *ports))
