"""MX block dot products with FP32 accumulation.

Two MXFP4 blocks (32 E2M1 elements each, with E8M0 scales ``sa``, ``sb``) give
``2**(sa + sb - 254) * sum(a_i * b_i)``, the sum exact (a multiple of 1/4 below 4608 in
magnitude). Each block result is rounded once to binary32, then added into a binary32
accumulator with :func:`~scoville.rtl.fp32.fp32_add` (round to nearest even, subnormals kept),
so a long dot product is ``acc = fp32(acc + fp32(block_k))`` in block order, as current MX
tensor hardware accumulates. A NaN scale (0xFF) makes its block, and so the result, NaN.
"""

from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .fp4 import e2m1_product
from .fp32 import FP32_QNAN, fp32_add
from .fpconv import scaled_int_to_fp32
from .params import check_int, param
from .pipeline import stall_chain

__all__ = ["BLOCK", "MxDot", "MxDotConfig"]

#: Elements per MX block.
BLOCK = 32


@dataclass(frozen=True)
class MxDotConfig:
    """Parameters of :class:`MxDot`.

    Attributes
    ----------
    lanes : int
        E2M1 products per cycle; a block takes ``32 / lanes`` beats.
    """

    lanes: int = param(8, "1, 2, 4, 8, 16, 32", "products per cycle")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, 32, choices=(1, 2, 4, 8, 16, 32))

    @property
    def beats_per_block(self) -> int:
        return BLOCK // self.lanes


class MxDot(wiring.Component):
    """Streaming MXFP4 dot-product unit with FP32 accumulation.

    A dot product is a run of blocks; each block arrives as ``32 / lanes`` beats of ``lanes``
    element pairs (element ``k`` of a beat is element ``beat * lanes + k`` of the block). The
    scales are read on a block's final beat; ``last`` is read on a block's final beat and ends
    the dot product, whose FP32 result is then emitted and the accumulator cleared to +0.

    Attributes
    ----------
    i : In(stream.Signature(...))
        Payload fields ``a``, ``b`` (arrays of ``lanes`` E2M1 codes), ``sa``, ``sb`` (E8M0
        scale codes) and ``last``.
    o : Out(stream.Signature(32))
        The binary32 bits of each dot product.
    latency : int
        Cycles from the handshake of a dot product's final beat to its result being valid.
    """

    latency = 3

    def __init__(self, config: MxDotConfig):
        self._config = config
        lanes = config.lanes
        self.in_layout = data.StructLayout({
            "a": data.ArrayLayout(4, lanes),
            "b": data.ArrayLayout(4, lanes),
            "sa": unsigned(8),
            "sb": unsigned(8),
            "last": unsigned(1),
        })
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(32)),
        })

    @property
    def config(self) -> MxDotConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        lanes = self._config.lanes
        beats = self._config.beats_per_block
        s3_last = Signal()
        en, valid = stall_chain(m, self.i, self.o, self.latency, emits=s3_last)

        # Stage 1: the exact sum of this beat's products, and where the beat sits in its block.
        beat = Signal(range(max(beats, 2)))
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += beat.eq(Mux(beat == beats - 1, 0, beat + 1))
        p = self.i.payload
        partial = sum(e2m1_product(p.a[k], p.b[k]) for k in range(lanes))
        s1_sum = Signal(signed(9 + lanes.bit_length()))
        s1_first, s1_end, s1_last, s1_nan = Signal(), Signal(), Signal(), Signal()
        s1_exp = Signal(unsigned(9))
        with m.If(en):
            m.d.sync += [
                s1_sum.eq(partial),
                s1_first.eq(beat == 0),
                s1_end.eq(beat == beats - 1),
                s1_last.eq(p.last & (beat == beats - 1)),
                s1_nan.eq((p.sa == 0xFF) | (p.sb == 0xFF)),
                s1_exp.eq(p.sa + p.sb),
            ]

        # Stage 2: the exact block sum, in quarters (|sum| <= 32 * 144).
        s2_sum = Signal(signed(14))
        s2_end, s2_last, s2_nan = Signal(), Signal(), Signal()
        s2_exp = Signal(unsigned(9))
        with m.If(en & valid[0]):
            m.d.sync += [
                s2_sum.eq(Mux(s1_first, 0, s2_sum) + s1_sum),
                s2_end.eq(s1_end),
                s2_last.eq(s1_last),
                s2_nan.eq(s1_nan),
                s2_exp.eq(s1_exp),
            ]

        # Stage 3: round the block to FP32 (quarters: 2^(sa+sb-254-2)) and accumulate.
        exp = Signal(signed(11))
        m.d.comb += exp.eq(s2_exp - 256)
        block = Signal(32)
        m.d.comb += block.eq(Mux(s2_nan, FP32_QNAN, scaled_int_to_fp32(m, s2_sum, exp)))
        acc = Signal(32)
        total = Signal(32)
        m.d.comb += total.eq(fp32_add(m, acc, block))
        result = Signal(32)
        with m.If(en & valid[1]):
            m.d.sync += s3_last.eq(s2_last)
            with m.If(s2_end):
                m.d.sync += [result.eq(total), acc.eq(Mux(s2_last, 0, total))]
        m.d.comb += self.o.payload.eq(result)
        return m
