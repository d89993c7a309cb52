"""Timed model of the ``rmsnorm`` block, from the rules its module states
(:mod:`scoville.rtl.rmsnorm`): ``slots`` token slots, the accumulator's fixed delay, one rsqrt unit
of fixed latency, and the scaler's two-stage stalling pipeline.

Per token k (its beats ``n = hidden / lanes``):

- its first beat may be taken once slot ``k mod slots`` is free (from the cycle after token
  ``k - slots``'s last beat entered the scaler), each beat when offered;
- ``v`` is offered from ``a_k + 3`` (``a_k`` its last beat's handshake); the rsqrt unit takes
  it at ``s_k = max(a_k + 3, s_{k-1} + L)`` (``L`` the rsqrt latency: the unit takes the next
  value the cycle it hands a result on);
- its beats may enter the scaler from ``s_k + L + 1``, after token ``k - 1``'s last; the
  scaler's two stages advance when the output is empty or taken.

The closed form for streams that keep up is :func:`ideal_cycles`.
"""

from __future__ import annotations

from scoville.rtl.rmsnorm import SCALE_LATENCY, V_DELAY, RmsNormConfig

from .stream import ALWAYS, Consumer, Producer, Schedule, Source, Timing

__all__ = ["ideal_cycles", "timing"]

_NEVER = 1 << 62


def timing(config: RmsNormConfig, tokens: int, source: Source | None = None,
           ready: Schedule = ALWAYS) -> Timing:
    """Every handshake of ``tokens`` tokens on ``i`` (``source``'s valid schedule; always
    valid when None) and ``o`` (``ready``)."""
    n, lat = config.beats, config.rsqrt_latency
    beats = tokens * n
    src, out = Producer(source or Source(), beats), Consumer(ready)
    free_at = [0] * config.slots  # the cycle each slot is free from
    r_at: list[int] = []  # the cycle each token's beats may enter the scaler from
    rs_free = 0  # the cycle the rsqrt unit may take the next value
    stages = [None, None]  # the scaler's stages: None, or (token, beat)
    entered = 0  # beats that entered the scaler
    t = 0
    while len(out.cycles) < beats:
        # The input: the next beat of token k when its slot is free (or it has begun).
        k, b = divmod(src.sent, n)
        if src.sent < beats and src.offers(t) and (b or t >= free_at[k % config.slots]):
            src.take(t)
            if b == 0:
                free_at[k % config.slots] = _NEVER  # until its last beat enters the scaler
            if b == n - 1:
                s = max(t + V_DELAY, rs_free)
                rs_free = s + lat
                r_at.append(s + lat + 1)
        # The scaler: a two-stage stalling pipeline fed from the tokens whose r is ready.
        last = stages[-1]
        o_ready = out.accepts(t)
        if last is not None and o_ready:
            out.take(t)
        if last is None or o_ready:
            kin, bin_ = divmod(entered, n)
            entering = None
            if entered < beats and kin < len(r_at) and t >= r_at[kin]:
                entering = (kin, bin_)
                entered += 1
                if bin_ == n - 1:
                    free_at[kin % config.slots] = t + 1
            stages = [entering, stages[0]]
        t += 1
        if not any(stages) and src.sent < beats and src.next_offer is not None:
            # Nothing moves before the next beat is offered or a token's r is ready.
            wake = [src.next_offer] + ([r_at[entered // n]] if entered // n < len(r_at) else [])
            t = max(t, min(wake))
    return Timing({"i": src.cycles, "o": out.cycles})


def ideal_cycles(config: RmsNormConfig, tokens: int) -> int:
    """The fast path: cycles for ``tokens`` tokens offered back to back to an output that is
    always ready (the last output handshake's cycle plus one)."""
    n, lat = config.beats, config.rsqrt_latency
    first_in = [0] * tokens
    last_in = [0] * tokens
    entry = [0] * tokens  # the cycle each token's first beat enters the scaler
    rs = -lat
    for k in range(tokens):
        start = last_in[k - 1] + 1 if k else 0
        if k >= config.slots:  # its slot: free after token k - slots's last beat entered
            start = max(start, entry[k - config.slots] + n)
        first_in[k] = start
        last_in[k] = start + n - 1
        rs = max(last_in[k] + V_DELAY, rs + lat)
        ready = rs + lat + 1
        entry[k] = max(ready, entry[k - 1] + n if k else 0)
    return entry[-1] + n - 1 + SCALE_LATENCY + 1 if tokens else 0
