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

:func:`run_cycles` puts both engines on one time line for streams that keep up: the exact
cycle count of a request sequence, waits included.
"""

from __future__ import annotations

from scoville.rtl.kvcache import OPS, STATUS

__all__ = ["READ_LATENCY", "engine_cycles", "read_cycles", "read_utilization",
           "request_cycles", "run_cycles"]

#: Cycles of a read on an idle engine beyond one per line: handshake, decode (the engine
#: starts), and the output register.
READ_LATENCY = 3


def read_cycles(config, tokens: int) -> int:
    """Cycles from a read's request handshake to its last line, engine idle and ``rd``
    ready: ``READ_LATENCY`` plus one per line, ``ceil(head_dim * bits / (banks *
    word_bits))`` lines per token."""
    return READ_LATENCY + tokens * config.token_lines


def read_utilization(config, tokens: int) -> float:
    """Fraction of cycles the banks deliver a line when reads of ``tokens`` tokens follow
    each other: a read starts once the previous one has handed over its last line, so each
    takes its lines plus 2 cycles."""
    lines = tokens * config.token_lines
    return lines / (lines + 2)


def request_cycles(config, outcome) -> int:
    """Request-engine cycles of one request, from its
    :class:`~scoville.sim.golden.kvcache.Outcome`."""
    op, ok = outcome.op, outcome.status == STATUS["ok"]
    if op == OPS["append"]:
        if outcome.reached == "decode":
            return 3 + config.append_beats
        return (5 + config.append_beats + int(outcome.new_page)
                + (config.page_lines + 1) * int(outcome.copied))
    if ok and op in (OPS["free"], OPS["fork"]):
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
        if out.op == OPS["append"]:
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
