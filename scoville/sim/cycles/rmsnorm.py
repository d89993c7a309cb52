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

__all__ = ["Norm", "ideal_cycles", "timing"]

_NEVER = 1 << 62


def timing(config: RmsNormConfig, tokens: int, source: Source | None = None,
           ready: Schedule = ALWAYS) -> Timing:
    """Every handshake of ``tokens`` tokens on ``i`` (``source``'s valid schedule; always
    valid when None) and ``o`` (``ready``)."""
    beats = tokens * config.beats
    src, out = Producer(source or Source(), beats), Consumer(ready)
    unit = Norm(config, src, out)
    t = 0
    while len(out.cycles) < beats:
        unit.step(t)
        t += 1
        if unit.idle and src.sent < beats and src.next_offer is not None:
            # Nothing moves before the next beat is offered or a token's r is ready.
            t = max(t, min(src.next_offer, unit.wake))
    return Timing({"i": src.cycles, "o": out.cycles})


class Norm:
    """The block as a unit model (:mod:`scoville.sim.cycles.unit`) between its ports ``i`` (an
    input port) and ``o`` (an output port), from the rules above; it runs on across calls, as
    the RTL does (token k takes slot k mod ``slots``)."""

    __slots__ = ("_cfg", "_entered", "_free_at", "_r_at", "_rs_free", "_stages", "_taken",
                 "i", "o")

    def __init__(self, config: RmsNormConfig, i, o):
        self._cfg, self.i, self.o = config, i, o
        self._free_at = [0] * config.slots  # the cycle each slot is free from
        self._r_at: list[int] = []  # the cycle each token's beats may enter the scaler from
        self._rs_free = 0  # the cycle the rsqrt unit may take the next value
        self._stages = [None, None]  # the scaler's stages: None, or (token, beat)
        self._entered = self._taken = 0  # beats that entered the scaler; beats taken

    def i_ready(self, t: int) -> bool:
        """``i.ready`` in cycle ``t``: the token is being taken, or its slot is free."""
        k, b = divmod(self._taken, self._cfg.beats)
        return bool(b) or t >= self._free_at[k % self._cfg.slots]

    @property
    def o_valid(self) -> bool:
        return self._stages[-1] is not None

    @property
    def idle(self) -> bool:
        """The scaler is empty (only a beat in, or a token's r, moves it on)."""
        return not any(self._stages)

    @property
    def wake(self) -> int:
        """The cycle the next token's r is ready (a far cycle when none is pending)."""
        k = self._entered // self._cfg.beats
        return self._r_at[k] if k < len(self._r_at) else _NEVER

    def step(self, t: int) -> None:
        cfg = self._cfg
        n, lat = cfg.beats, cfg.rsqrt_latency
        if self.i_ready(t) and self.i.offers(t):
            k, b = divmod(self._taken, n)
            self.i.take(t)
            self._taken += 1
            if b == 0:
                self._free_at[k % cfg.slots] = _NEVER  # until its last beat enters the scaler
            if b == n - 1:
                s = max(t + V_DELAY, self._rs_free)
                self._rs_free = s + lat
                self._r_at.append(s + lat + 1)
        # The scaler: a two-stage stalling pipeline fed from the tokens whose r is ready.
        o_ready = self.o.accepts(t)
        if self.o_valid and o_ready:
            self.o.take(t)
        if not self.o_valid or o_ready:
            kin, bin_ = divmod(self._entered, n)
            entering = None
            if kin < len(self._r_at) and t >= self._r_at[kin]:
                entering = (kin, bin_)
                self._entered += 1
                if bin_ == n - 1:
                    self._free_at[kin % cfg.slots] = t + 1
            self._stages = [entering, self._stages[0]]


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
