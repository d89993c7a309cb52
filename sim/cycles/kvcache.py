"""Cycle model of the KV-cache scratchpad (:class:`scoville.rtl.kvcache.KvCache`).

Requests are served one at a time. A request's cost counts from the cycle its ``req`` beat is
taken to the cycle its ``resp`` beat is taken, both included, when ``wd`` always has the next
line and ``rd`` and ``resp`` are always ready; the next request can be taken in the cycle after.
Every cycle the streams make it wait is a stall (the RTL's ``stalls`` counter), every cycle with
no request to take is idle; the RTL's ``busy`` counter is the sum of these costs exactly.

Each request spends one cycle on its handshake, one to decode and check it, and one to answer;
on top of that (``P``: pages walked; ``B``: append lines; ``N``: lines read; ``PL``: page lines):

=================================  ==========  ============================================
request                            cycles      why
=================================  ==========  ============================================
alloc, or any request that fails   3           (an append that fails in decode: + B, draining
in decode                                      its lines)
free, fork                         3 + 3P + 1  table entry, reference count, write-back per page
append into its own page           3 + 2 + B   table entry, reference count, B lines
append that opens a page           3 + 3 + B   + 1 to take the page
append into a shared page          3 + 3 + PL + 1 + B  + copy the page, a line per cycle
append with no page free           3 + 2 + B   drains its lines
read                               3 + N + 1   a line per cycle; the last leaves the output
                                               register before the answer
=================================  ==========  ============================================
"""

from __future__ import annotations

from scoville.rtl.kvcache import OPS, STATUS

__all__ = ["READ_LATENCY", "read_cycles", "read_utilization", "request_cycles"]

#: Cycles of a read beyond one per line: handshake, decode, the output register, the answer.
READ_LATENCY = 4


def read_cycles(config, tokens: int) -> int:
    """Cycles of a read of ``tokens`` tokens of one head: ``READ_LATENCY`` plus one per line,
    ``ceil(head_dim * bits / (banks * word_bits))`` lines per token."""
    return READ_LATENCY + tokens * config.token_lines


def read_utilization(config, tokens: int) -> float:
    """Fraction of a read's cycles in which the banks deliver a line."""
    return tokens * config.token_lines / read_cycles(config, tokens)


def request_cycles(config, outcome) -> int:
    """Cycles of one request, from its :class:`~scoville.sim.golden.kvcache.Outcome`."""
    op, ok = outcome.op, outcome.status == STATUS["ok"]
    beats = config.append_beats
    if op == OPS["append"]:
        if outcome.reached == "decode":
            return 3 + beats
        extra = 0
        if outcome.new_page:
            extra += 1
        if outcome.copied:
            extra += config.page_lines + 1
        return 5 + beats + extra
    if not ok:
        return 3
    if op in (OPS["free"], OPS["fork"]):
        return 4 + 3 * outcome.walked
    if op == OPS["read"]:
        return READ_LATENCY + len(outcome.data)
    return 3
