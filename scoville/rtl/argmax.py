"""Greedy sampling: a token's ``vocab`` FP32 logits in beats of ``lanes``, out the lowest index
of the largest (IEEE order: -0 equals +0; a NaN is never chosen; a token of NaNs gives index
0) and that logit (:mod:`scoville.sim.golden.argmax`).

A reducing stalling pipeline of ``latency`` stages (:func:`~scoville.rtl.lib.pipeline.stall_chain`:
its timed model is :func:`~scoville.sim.cycles.stream.pipeline_timing` with a token's last
beat emitting): a beat's best lane (each lane's order key, then a tree of comparisons, the
lower lane on a tie) in ``latency - 1`` stages, the first ``latency - 2`` of them cutting the
keys and the tree (:func:`cut_sites`); the last keeps the token's best so far (replaced only by
a strictly larger one, so the earlier index stays on a tie) and hands it on after the token's
last beat.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.comb import wire
from .lib.fp32 import fp32_is_nan, fp32_key
from .lib.params import ParamError, check_int, param
from .lib.pipeline import CutPoints, stall_chain

__all__ = ["Argmax", "ArgmaxConfig", "cut_sites", "out_layout"]


@dataclass(frozen=True)
class ArgmaxConfig:
    """Parameters of :class:`Argmax`.

    Attributes
    ----------
    vocab : int
        Logits a token (V), a multiple of ``lanes``.
    lanes : int
        Logits a beat.
    latency : int
        Register stages, 2 up to 2 + log2(lanes): each past 2 cuts the lanes' keys or
        their tree of comparisons (:func:`cut_sites`). Unset: the fewest that keep a cycle within
        issue #36's 40 levels mapped for delay (``docs/levels.md``): 2 up to 4 lanes, 3 up to
        16, 4 at 32.
    """

    vocab: int = param(256, "lanes..262144, a multiple of lanes", "logits a token")
    lanes: int = param(8, "1, 2, 4, ..., 32", "logits a beat")
    latency: int = param(None, "2..2 + log2(lanes); unset: 2 to 4 by lanes",
                         "register stages")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, 32, choices=[1 << k for k in range(6)])
        check_int("vocab", self.vocab, self.lanes, 262144)
        if self.vocab % self.lanes:
            raise ParamError(f"parameter 'vocab' = {self.vocab} is not allowed with lanes = "
                             f"{self.lanes}; allowed: a multiple of {self.lanes}")
        most = 2 + _tree_levels(self.lanes)
        if self.latency is None:
            object.__setattr__(self, "latency", DEFAULT_LATENCY[self.lanes])
        if isinstance(self.latency, bool) or not isinstance(self.latency, int):
            raise ParamError(f"parameter 'latency' must be an integer; allowed: 2..{most} at "
                             f"lanes={self.lanes}; got {self.latency!r}")
        if not 2 <= self.latency <= most:
            raise ParamError(f"parameter 'latency' = {self.latency} is out of range at "
                             f"lanes={self.lanes}; allowed: 2..{most}")

    @property
    def beats(self) -> int:
        return self.vocab // self.lanes


#: The latency by lanes when unset: the fewest stages whose longest cycle mapped for delay is
#: within issue #36's budget of 40 levels (``scoville synth argmax --map delay``, vocab 1024:
#: 16, 24 and 38 levels at 1, 2 and 4 lanes and latency 2; 31, 40 and 31 at 8, 16 and 32 lanes
#: and 3, 3 and 4; ``docs/levels.md`` has 8 lanes at every latency).
DEFAULT_LATENCY = {1: 2, 2: 2, 4: 2, 8: 3, 16: 3, 32: 4}


def _tree_levels(lanes: int) -> int:
    return lanes.bit_length() - 1


def cut_sites(lanes: int, cuts: int) -> tuple[int, ...]:
    """Where ``cuts`` registers go in the first stage's logic at ``lanes``: site 0 after the
    lanes' order keys, site ``j`` after the ``j``-th level of the tree of comparisons, up to
    its last but one (its last feeds the stage's own register). The cuts split the keys and
    the levels into runs of as even a count as they go (a level, a 32-bit comparison and its
    choice of 32 bits, is deeper than the keys)."""
    segments = _tree_levels(lanes) + 1
    if not 0 <= cuts < segments:
        raise ValueError(f"{cuts} cuts: at most {segments - 1} at {lanes} lanes")
    return tuple(int((k + 1) * segments / (cuts + 1) + 0.5) - 1 for k in range(cuts))


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

    def __init__(self, config: ArgmaxConfig):
        self._config = config
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(32, config.lanes))),
            "o": Out(stream.Signature(out_layout(config))),
        })

    @property
    def config(self) -> ArgmaxConfig:
        return self._config

    @property
    def latency(self) -> int:
        return self._config.latency

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        n, lanes = cfg.beats, cfg.lanes
        index_bits = len(self.o.payload.index)
        s2_last = Signal()
        en, valid = stall_chain(m, self.i, self.o, self.latency, emits=s2_last)
        cut = CutPoints(m, en, cut_sites(lanes, self.latency - 2), "tree")
        beat = Signal(range(max(n, 2)))
        take = self.i.valid & self.i.ready
        with m.If(take):
            m.d.sync += beat.eq(Mux(beat == n - 1, 0, beat + 1))
        # The first latency - 1 stages: the beat's best lane, by a tree (the lower lane wins a
        # tie), cut at the sites; the beat's place in its token travels with it through the
        # cuts. s1_* is the last of these stages' registers.
        lane_bits = unsigned(max(lanes - 1, 1).bit_length())
        level = [(_key(m, self.i.payload[k], f"key{k}"), k, self.i.payload[k])
                 for k in range(lanes)]
        place = (beat, beat == 0, beat == n - 1)

        def cut_level(site, level, place):
            # The keys and values, the lane numbers past the first level (before it they are
            # constants) and the place, through the cut together.
            lane_wires = not isinstance(level[0][1], int)
            flat = [x for key, lane, value in level
                    for x in ((key, lane, value) if lane_wires else (key, value))]
            got = cut(site, *flat, *place)
            if lane_wires:
                return ([tuple(got[3 * j:3 * j + 3]) for j in range(len(level))],
                        got[len(flat):])
            return ([(got[2 * j], lane, got[2 * j + 1])
                     for j, (_, lane, _) in enumerate(level)], got[len(flat):])

        level, place = cut_level(0, level, place)
        depth = 0
        while len(level) > 1:
            depth += 1
            nxt = []
            for j in range(0, len(level), 2):
                (ka, la, va), (kb, lb, vb) = level[j], level[j + 1]
                b_wins = wire(m, f"win_{depth}_{j}", kb > ka)
                nxt.append((wire(m, f"k_{depth}_{j}", Mux(b_wins, kb, ka)),
                            wire(m, f"l_{depth}_{j}", Mux(b_wins, lb, la), lane_bits),
                            wire(m, f"v_{depth}_{j}", Mux(b_wins, vb, va), 32)))
            level = nxt
            if len(level) > 1:
                level, place = cut_level(depth, level, place)
        cut.check(f"Argmax at lanes {lanes}")
        (key, lane, value), (at, first, last) = level[0], place
        s1_key, s1_value = Signal(32), Signal(32)
        s1_index = Signal(index_bits)
        s1_first, s1_last = Signal(), Signal()
        with m.If(en):
            m.d.sync += [s1_key.eq(key), s1_value.eq(value),
                         s1_index.eq(at * lanes + lane),
                         s1_first.eq(first), s1_last.eq(last)]
        # The last stage (s2): the token's best so far.
        best_key = Signal(32)
        take_new = s1_first | (s1_key > best_key)
        with m.If(en & valid[self.latency - 2]):
            m.d.sync += s2_last.eq(s1_last)
            with m.If(take_new):
                m.d.sync += [best_key.eq(s1_key), self.o.payload.index.eq(s1_index),
                             self.o.payload.value.eq(Mux(s1_key == 0, 0x7FC0_0000,
                                                         s1_value))]
        return m
