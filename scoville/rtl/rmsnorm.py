"""RMSNorm: each token's ``hidden`` FP32 values normalized by their root mean square and scaled
by a weight, as Hugging Face's ``GptOssRMSNorm`` and ``DeepseekV3RMSNorm`` in FP32.

The function (:mod:`scoville.sim.golden.rmsnorm` states it to the bit): the sum of squares
in beats of ``lanes`` (each beat's squares added as a binary tree, the beat sums in order from
+0), ``mean = fp32(ss * fp32(1 / H))`` (``H`` the token's values: ``hidden``, or ``width *
lanes`` with ``runtime``), ``r = rsqrt(fp32(mean + fp32(eps)))`` correctly rounded
(:mod:`scoville.rtl.rmsnorm_rsqrt`), ``y = fp32(fp32(x r) w)``.

Streams: ``i`` takes a token as ``n = hidden / lanes`` beats, each ``lanes`` values ``x`` and
their weights ``w`` (the caller replays the weight vector with every token); ``o`` gives the
token's ``y`` in the same beats.

Runtime width (``runtime = 1``): the port ``width`` (1 to ``hidden / lanes``) is the beats of
a token, ``n = width``, and ``H = width * lanes``; ``fp32(1 / H)`` comes from a ROM of one
entry a width, read into a register every cycle. The caller holds ``width`` while any token
is in the block (from its first beat's handshake until its last output beat is taken) and
changes it only when the block is empty; a token narrower than ``hidden`` takes the first
``width`` beats of its slot. With ``runtime = 0`` there is no port and ``n = hidden / lanes``.

The parts:

- **the buffer** (``amaranth.lib.memory``): ``slots`` slots of a token's beats; a token takes
  the next slot in turn (token k slot k mod ``slots``);
- **the accumulator**: a beat's squares and their tree in the cycle it is taken, into a
  register; the next cycle that sum into the token's running FP32 sum; the cycle after its last
  beat's sum, ``v = fp32(mean + eps)`` into the slot's ``v`` register (``fp32(1 / H)`` a
  constant, or the ROM's register);
- **the rsqrt unit** (:class:`~scoville.rtl.rmsnorm_rsqrt.Rsqrt`): the slots' ``v`` in token
  order, one at a time, its result into the slot's ``r`` register the cycle it is valid;
- **the scaler**: a two-stage stalling pipeline (the buffer's read, then the two products into
  the output register) over the beats of the slot whose ``r`` is ready, tokens in order.

Timing (``scoville/sim/cycles/rmsnorm.py`` models it from these rules): ``i.ready`` is high
while the next token's slot is free or the token is being taken (after its first beat); a slot
is free from the cycle after its token's last beat enters the scaler. A token whose last beat
is taken in cycle ``a`` offers ``v`` from cycle ``a + 3``; the rsqrt unit takes it in the
first such cycle it is ready (:mod:`~scoville.rtl.rmsnorm_rsqrt`), after the previous
token's, and the result is in the slot's register ``rsqrt latency`` cycles later, its beats
entering the scaler from the next cycle, after the previous token's. The scaler's stages
advance together when the output is empty or taken. A token spends about ``2 n + rsqrt
latency + 5`` cycles in the block (``n`` its beats), so a beat a cycle needs ``slots`` of
about that over ``n`` (the default 4 for 8 beats a token and 4 rsqrt bits a cycle).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .lib.fp32 import fp32_add, fp32_bits, fp32_mul, fp32_tree_sum
from .lib.params import ParamError, check_int, param
from .lib.pipeline import stall_pipeline
from .rmsnorm_rsqrt import ROOT_BITS, Rsqrt, rsqrt_latency

__all__ = ["LANES", "RmsNorm", "RmsNormConfig", "in_layout"]

LANES = tuple(1 << k for k in range(6))
#: Cycles from a token's last input beat to its ``v`` offered to the rsqrt unit.
V_DELAY = 3
#: The scaler's stages.
SCALE_LATENCY = 2


@dataclass(frozen=True)
class RmsNormConfig:
    """Parameters of :class:`RmsNorm`.

    Attributes
    ----------
    hidden : int
        Values a token (H).
    lanes : int
        Values a beat (a power of two dividing ``hidden``).
    eps : float
        Added to the mean square (rounded to FP32).
    rsqrt_bits : int
        Bits of the reciprocal square root's recurrence a cycle (its latency:
        ``ceil(26 / rsqrt_bits) + 1`` cycles).
    slots : int
        Tokens the buffer holds.
    runtime : int
        1: the port ``width`` sets a token's beats at run time, 1 to ``hidden / lanes``
        (``mean = fp32(ss * fp32(1 / (width * lanes)))``, the reciprocal from a ROM), held
        while any token is in the block; 0: every token is ``hidden`` values.
    """

    hidden: int = param(64, "lanes..8192, a multiple of lanes", "values a token")
    lanes: int = param(8, "1, 2, 4, ..., 32", "values a beat")
    eps: float = param(1e-5, "a positive number below 1", "added to the mean square")
    rsqrt_bits: int = param(4, f"1..{ROOT_BITS}", "the rsqrt recurrence's bits a cycle")
    slots: int = param(4, "2..8", "tokens the buffer holds")
    runtime: int = param(0, "0, 1", "1: a token's beats from the port width (1..hidden/lanes)")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, 32, choices=LANES)
        check_int("hidden", self.hidden, self.lanes, 8192)
        if self.hidden % self.lanes:
            raise ParamError(f"parameter 'hidden' = {self.hidden} is not allowed with lanes = "
                             f"{self.lanes}; allowed: a multiple of {self.lanes}")
        if isinstance(self.eps, bool) or not isinstance(self.eps, (int, float)) or \
                not 0 < self.eps < 1:
            raise ParamError(f"parameter 'eps' = {self.eps!r} is not allowed; allowed: a "
                             "positive number below 1")
        check_int("rsqrt_bits", self.rsqrt_bits, 1, ROOT_BITS)
        check_int("slots", self.slots, 2, 8)
        check_int("runtime", self.runtime, 0, 1, choices=(0, 1))

    @property
    def beats(self) -> int:
        """Beats a token."""
        return self.hidden // self.lanes

    @property
    def rsqrt_latency(self) -> int:
        return rsqrt_latency(self.rsqrt_bits)


def in_layout(config: RmsNormConfig) -> data.StructLayout:
    """A beat of ``i``: ``lanes`` values ``x`` and their weights ``w`` (binary32, lane 0
    lowest)."""
    lanes = data.ArrayLayout(32, config.lanes)
    return data.StructLayout({"x": lanes, "w": lanes})


class RmsNorm(wiring.Component):
    """Normalizes tokens of ``hidden`` values, or of ``width`` beats (the module says how and
    when).

    Attributes
    ----------
    i : In(stream.Signature(in_layout(config)))
    o : Out(stream.Signature(ArrayLayout(32, lanes)))
    width : In(range(1, hidden / lanes + 1))
        The beats of a token; only with ``runtime = 1``.
    """

    def __init__(self, config: RmsNormConfig):
        self._config = config
        super().__init__({
            "i": In(stream.Signature(in_layout(config))),
            "o": Out(stream.Signature(data.ArrayLayout(32, config.lanes))),
            **({"width": In(range(1, config.beats + 1))} if config.runtime else {}),
        })

    @property
    def config(self) -> RmsNormConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        n, lanes, slots = cfg.beats, cfg.lanes, cfg.slots
        m.submodules.buffer = buf = Memory(shape=in_layout(cfg), depth=slots * n, init=[])
        m.submodules.rsqrt = rs = Rsqrt(cfg.rsqrt_bits)
        wp, rp = buf.write_port(), buf.read_port()
        busy = Signal(slots)  # a slot holds a token not yet all in the scaler
        v_ready, r_ready = Signal(slots), Signal(slots)
        v_val = Array(Signal(32, name=f"v{s}") for s in range(slots))
        r_val = Array(Signal(32, name=f"r{s}") for s in range(slots))

        # The input side: token slot, beat index; the beat into the buffer.
        in_slot, in_beat = Signal(range(slots)), Signal(range(max(n, 2)))
        take = self.i.valid & self.i.ready
        m.d.comb += [self.i.ready.eq((in_beat != 0) | ~busy.bit_select(in_slot, 1)),
                     wp.addr.eq(in_slot * n + in_beat), wp.data.eq(self.i.payload),
                     wp.en.eq(take)]
        last_beat = self.width - 1 if cfg.runtime else n - 1
        first, last = in_beat == 0, in_beat == last_beat
        with m.If(take):
            m.d.sync += in_beat.eq(Mux(last, 0, in_beat + 1))
            with m.If(last):
                m.d.sync += in_slot.eq(_next(in_slot, slots))
        v, v_slot, v_done = self._accumulate(m, take, first, last, in_slot)
        with m.If(v_done):
            m.d.sync += v_val[v_slot].eq(v)

        # The rsqrt unit: the slots' v in token order; its results into the slots' r.
        rs_in, rs_out = Signal(range(slots)), Signal(range(slots))
        m.d.comb += [rs.i.valid.eq(v_ready.bit_select(rs_in, 1)), rs.i.payload.eq(v_val[rs_in]),
                     rs.o.ready.eq(1)]
        rs_take = rs.i.valid & rs.i.ready
        with m.If(rs_take):
            m.d.sync += rs_in.eq(_next(rs_in, slots))
        with m.If(rs.o.valid):
            m.d.sync += [rs_out.eq(_next(rs_out, slots)), r_val[rs_out].eq(rs.o.payload)]

        # The scaler: the beats of the slot whose r is ready.
        out_slot, out_beat = Signal(range(slots)), Signal(range(max(n, 2)))
        src = stream.Signature(1).create()  # an address beat (its payload unused)
        m.d.comb += src.valid.eq(r_ready.bit_select(out_slot, 1))
        en = stall_pipeline(m, src, self.o, SCALE_LATENCY)
        m.d.comb += [rp.addr.eq(out_slot * n + out_beat), rp.en.eq(en)]
        r_stage = Signal(32)
        with m.If(en):
            m.d.sync += r_stage.eq(r_val[out_slot])
        line = data.View(in_layout(cfg), rp.data)
        ys = []
        for k in range(lanes):
            xr = fp32_mul(m, line.x[k], r_stage, name=f"xr{k}")
            ys.append(fp32_mul(m, xr, line.w[k], name=f"y{k}"))
        with m.If(en):
            m.d.sync += self.o.payload.eq(Cat(*ys))
        addr_take = src.valid & src.ready
        done = addr_take & (out_beat == last_beat)
        with m.If(addr_take):
            m.d.sync += out_beat.eq(Mux(done, 0, out_beat + 1))
            with m.If(done):
                m.d.sync += out_slot.eq(_next(out_slot, slots))

        # The slots' flags: busy from a token's first beat to its last beat's entry into the
        # scaler; v from the accumulator to the rsqrt unit; r from the rsqrt result to the
        # last beat's entry.
        for s in range(slots):
            with m.If(take & first & (in_slot == s)):
                m.d.sync += busy[s].eq(1)
            with m.If(done & (out_slot == s)):
                m.d.sync += [busy[s].eq(0), r_ready[s].eq(0)]
            with m.If(rs_take & (rs_in == s)):
                m.d.sync += v_ready[s].eq(0)
            with m.If(v_done & (v_slot == s)):
                m.d.sync += v_ready[s].eq(1)
            with m.If(rs.o.valid & (rs_out == s)):
                m.d.sync += r_ready[s].eq(1)
        return m

    def _accumulate(self, m, take, first, last, in_slot):
        """The sum of squares and ``v = fp32(mean + eps)``: ``(v, its slot, valid)``, valid
        in the one cycle ``v`` is to be stored (two after the token's last beat)."""
        cfg = self._config
        x = self.i.payload.x
        squares = [fp32_mul(m, x[k], x[k], name=f"sq{k}") for k in range(cfg.lanes)]
        beat_sum = fp32_tree_sum(m, squares, name="tree")
        sq, sq_valid, sq_first, sq_last = Signal(32), Signal(), Signal(), Signal()
        sq_slot, acc_slot = Signal.like(in_slot), Signal.like(in_slot)
        m.d.sync += [sq_valid.eq(take), sq_first.eq(first), sq_last.eq(last)]
        with m.If(take):
            m.d.sync += [sq.eq(beat_sum), sq_slot.eq(in_slot)]
        acc, acc_last = Signal(32), Signal()
        m.d.sync += acc_last.eq(sq_valid & sq_last)
        with m.If(sq_valid):
            m.d.sync += [acc.eq(Mux(sq_first, sq, fp32_add(m, acc, sq, name="acc"))),
                         acc_slot.eq(sq_slot)]
        mean = fp32_mul(m, acc, self._reciprocal(m), name="mean")
        v = fp32_add(m, mean, Const(fp32_bits(cfg.eps), 32), name="v")
        return v, acc_slot, acc_last

    def _reciprocal(self, m):
        """``fp32(1 / H)``: a constant, or with ``runtime`` the register of a ROM's entry for
        ``width`` (read every cycle: ``width`` is held while the token is in the block)."""
        cfg = self._config
        if not cfg.runtime:
            return Const(fp32_bits(1.0 / cfg.hidden), 32)
        m.submodules.reciprocal = rom = Memory(
            shape=32, depth=cfg.beats,
            init=[fp32_bits(1.0 / (w * cfg.lanes)) for w in range(1, cfg.beats + 1)])
        port = rom.read_port()
        m.d.comb += port.addr.eq(self.width - 1)
        return port.data


def _next(counter, modulus: int):
    """``counter + 1`` modulo ``modulus``."""
    return Mux(counter == modulus - 1, 0, counter + 1)
