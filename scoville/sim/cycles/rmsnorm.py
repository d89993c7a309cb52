"""Timed model of the ``rmsnorm`` block, from the rules its module states
(:mod:`scoville.rtl.rmsnorm`): ``slots`` token slots, the accumulator's fixed delay, one rsqrt unit
of fixed latency, and the scaler's two-stage stalling pipeline.

Per token k (its beats ``n``: ``hidden / lanes``, or the runtime width, which
:meth:`Norm.set_width` changes only while the block is empty):

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
           ready: Schedule = ALWAYS, width: int | None = None) -> Timing:
    """Every handshake of ``tokens`` tokens on ``i`` (``source``'s valid schedule; always
    valid when None) and ``o`` (``ready``), each token ``width`` beats (the ``width`` port of
    a ``runtime`` block; ``hidden / lanes`` when None)."""
    beats = tokens * (config.beats if width is None else width)
    src, out = Producer(source or Source(), beats), Consumer(ready)
    unit = Norm(config, src, out)
    if width is not None:
        unit.set_width(width)
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
    the RTL does (token k takes slot k mod ``slots``). A token is :attr:`width` beats:
    ``hidden / lanes`` until :meth:`set_width` (a ``runtime`` block's ``width`` port)."""

    __slots__ = ("_cfg", "_free_at", "_in", "_n", "_out", "_r_at", "_rs_free", "_stages",
                 "i", "o")

    def __init__(self, config: RmsNormConfig, i, o):
        self._cfg, self.i, self.o = config, i, o
        self._n = config.beats  # beats a token
        self._free_at = [0] * config.slots  # the cycle each slot is free from
        self._r_at: list[int] = []  # the cycle each token's beats may enter the scaler from
        self._rs_free = 0  # the cycle the rsqrt unit may take the next value
        self._stages = [None, None]  # the scaler's stages: None, or (token, beat)
        self._in = self._out = (0, 0)  # (token, beat) of the next beat taken; to enter

    @property
    def width(self) -> int:
        """Beats a token."""
        return self._n

    @property
    def empty(self) -> bool:
        """No token in the block: every beat taken has entered the scaler and left it."""
        return self._in == self._out and not any(self._stages)

    def set_width(self, beats: int) -> None:
        """Tokens of ``beats`` beats from now on (the ``width`` port); only while the block
        is :attr:`empty`, and only a ``runtime`` block takes other than ``hidden / lanes``."""
        cfg = self._cfg
        if isinstance(beats, bool) or not isinstance(beats, int) or not (
                1 <= beats <= cfg.beats if cfg.runtime else beats == cfg.beats):
            allowed = f"1..{cfg.beats}" if cfg.runtime else f"{cfg.beats} (runtime = 0)"
            raise ValueError(f"parameter 'width' = {beats!r} is not allowed; allowed: "
                             f"{allowed}")
        if beats != self._n and not self.empty:
            raise ValueError(f"parameter 'width' = {beats} while a token of {self._n} beats "
                             "is in the block; allowed: a change only while it is empty")
        self._n = beats

    def i_ready(self, t: int) -> bool:
        """``i.ready`` in cycle ``t``: the token is being taken, or its slot is free."""
        k, b = self._in
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
        k = self._out[0]
        return self._r_at[k] if k < len(self._r_at) else _NEVER

    def step(self, t: int) -> None:
        cfg, n = self._cfg, self._n
        if self.i_ready(t) and self.i.offers(t):
            k, b = self._in
            self.i.take(t)
            self._in = (k + 1, 0) if b == n - 1 else (k, b + 1)
            if b == 0:
                self._free_at[k % cfg.slots] = _NEVER  # until its last beat enters the scaler
            if b == n - 1:
                s = max(t + V_DELAY, self._rs_free)
                self._rs_free = s + cfg.rsqrt_latency
                self._r_at.append(self._rs_free + 1)
        # The scaler: a two-stage stalling pipeline fed from the tokens whose r is ready.
        o_ready = self.o.accepts(t)
        if self.o_valid and o_ready:
            self.o.take(t)
        if not self.o_valid or o_ready:
            k, b = self._out
            entering = None
            if k < len(self._r_at) and t >= self._r_at[k]:
                entering = self._out
                self._out = (k + 1, 0) if b == n - 1 else (k, b + 1)
                if b == n - 1:
                    self._free_at[k % cfg.slots] = t + 1
            self._stages = [entering, self._stages[0]]


def ideal_cycles(config: RmsNormConfig, tokens: int, width: int | None = None) -> int:
    """The fast path: cycles for ``tokens`` tokens of ``width`` beats (``hidden / lanes``
    when None) offered back to back to an output that is always ready (the last output
    handshake's cycle plus one)."""
    n, lat = width or config.beats, config.rsqrt_latency
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
