"""Greedy sampling: a token's ``vocab`` FP32 logits in beats of ``lanes``, out the lowest index
of the largest (IEEE order: -0 equals +0; a NaN is never chosen; a token of NaNs gives index
0) and that logit (:mod:`scoville.sim.golden.argmax`).

A reducing stalling pipeline of two stages (:func:`~scoville.rtl.lib.pipeline.stall_chain`:
its timed model is :func:`~scoville.sim.cycles.stream.pipeline_timing` with a token's last
beat emitting): the first takes a beat's best lane (a tree of comparisons, the lower lane on a
tie), the second keeps the token's best so far (replaced only by a strictly larger one, so the
earlier index stays on a tie) and hands it on after the token's last beat.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.comb import wire
from .lib.fp32 import fp32_is_nan, fp32_key
from .lib.params import ParamError, check_int, param
from .lib.pipeline import stall_chain

__all__ = ["Argmax", "ArgmaxConfig", "out_layout"]

LATENCY = 2


@dataclass(frozen=True)
class ArgmaxConfig:
    """Parameters of :class:`Argmax`.

    Attributes
    ----------
    vocab : int
        Logits a token (V), a multiple of ``lanes``.
    lanes : int
        Logits a beat.
    """

    vocab: int = param(256, "lanes..262144, a multiple of lanes", "logits a token")
    lanes: int = param(8, "1, 2, 4, ..., 32", "logits a beat")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, 32, choices=[1 << k for k in range(6)])
        check_int("vocab", self.vocab, self.lanes, 262144)
        if self.vocab % self.lanes:
            raise ParamError(f"parameter 'vocab' = {self.vocab} is not allowed with lanes = "
                             f"{self.lanes}; allowed: a multiple of {self.lanes}")

    @property
    def beats(self) -> int:
        return self.vocab // self.lanes


def out_layout(config: ArgmaxConfig) -> data.StructLayout:
    """The answer: the chosen ``index`` and its logit ``value``."""
    return data.StructLayout({"index": unsigned(max(config.vocab - 1, 1).bit_length()),
                              "value": unsigned(32)})


def _key(m, x, name):
    """An order key of binary32 ``x``: IEEE order with -0 = +0 (``fp32_key`` of -0 as +0),
    every NaN 0 (below -Inf)."""
    x = Value.cast(x)
    ordered = fp32_key(m, Mux(x[:31] == 0, 0, x), name=f"{name}_ordered")
    return wire(m, name, Mux(fp32_is_nan(x), 0, ordered), unsigned(32))


class Argmax(wiring.Component):
    """The index of each token's largest logit (the module says which, and when).

    Attributes
    ----------
    i : In(stream.Signature(ArrayLayout(32, lanes)))
        A beat of logits, lane 0 the lowest index.
    o : Out(stream.Signature(out_layout(config)))
        One answer a token.
    latency : int
        Cycles from a token's last beat's handshake to its answer being valid.
    """

    latency = LATENCY

    def __init__(self, config: ArgmaxConfig):
        self._config = config
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(32, config.lanes))),
            "o": Out(stream.Signature(out_layout(config))),
        })

    @property
    def config(self) -> ArgmaxConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        n, lanes = cfg.beats, cfg.lanes
        index_bits = len(self.o.payload.index)
        s2_last = Signal()
        en, valid = stall_chain(m, self.i, self.o, LATENCY, emits=s2_last)
        beat = Signal(range(max(n, 2)))
        take = self.i.valid & self.i.ready
        with m.If(take):
            m.d.sync += beat.eq(Mux(beat == n - 1, 0, beat + 1))
        # Stage 1: the beat's best lane, by a tree (the lower lane wins a tie).
        level = [(_key(m, self.i.payload[k], f"key{k}"), k, self.i.payload[k])
                 for k in range(lanes)]
        while len(level) > 1:
            nxt = []
            for j in range(0, len(level), 2):
                (ka, la, va), (kb, lb, vb) = level[j], level[j + 1]
                b_wins = wire(m, f"win_{len(level)}_{j}", kb > ka)
                nxt.append((wire(m, f"k_{len(level)}_{j}", Mux(b_wins, kb, ka)),
                            wire(m, f"l_{len(level)}_{j}", Mux(b_wins, lb, la),
                                 unsigned(max(lanes - 1, 1).bit_length())),
                            wire(m, f"v_{len(level)}_{j}", Mux(b_wins, vb, va), 32)))
            level = nxt
        key, lane, value = level[0]
        s1_key, s1_value = Signal(32), Signal(32)
        s1_index = Signal(index_bits)
        s1_first, s1_last = Signal(), Signal()
        with m.If(en):
            m.d.sync += [s1_key.eq(key), s1_value.eq(value),
                         s1_index.eq(beat * lanes + lane),
                         s1_first.eq(beat == 0), s1_last.eq(beat == n - 1)]
        # Stage 2: the token's best so far.
        best_key = Signal(32)
        take_new = s1_first | (s1_key > best_key)
        with m.If(en & valid[0]):
            m.d.sync += s2_last.eq(s1_last)
            with m.If(take_new):
                m.d.sync += [best_key.eq(s1_key), self.o.payload.index.eq(s1_index),
                             self.o.payload.value.eq(Mux(s1_key == 0, 0x7FC0_0000,
                                                         s1_value))]
        return m
