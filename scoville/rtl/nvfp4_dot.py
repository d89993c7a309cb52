"""NVFP4 block dot products: 16-element E2M1 blocks with E4M3 scales, FP32 accumulation, and a
per-tensor FP32 scale applied at the end.

Each block gives ``sum(a_i * b_i) * sa * sb`` exactly (an integer of at most 21 bits times a
power of two, always inside the binary32 normal range, so its conversion is exact); blocks are
added in order into a binary32 accumulator with :func:`~scoville.rtl.lib.fp32.fp32_add`; at the
end of a dot product the sum is multiplied once by the tensor scale (the product of both
tensors' FP32 scales) with :func:`~scoville.rtl.lib.fp32.fp32_mul`. An E4M3 NaN scale (0x7F,
0xFF) makes its block, and so the result, NaN.
"""

from dataclasses import dataclass

from amaranth.hdl import Module, Signal, unsigned

from .lib.blockdot import (
    BlockDotUnit,
    block_stage,
    block_sums,
    dot_cuts,
    latency_range,
    nvfp4_block_value,
    nvfp4_scale_terms,
    settle_latency,
)
from .lib.formats import NVFP4_BLOCK
from .lib.fp32 import fp32_mul
from .lib.params import check_int, param
from .lib.pipeline import delay, stall_chain, through_cuts

__all__ = ["Nvfp4Dot", "Nvfp4DotConfig"]

#: The latency by default (or the most its lanes allow, if fewer): the block value and the
#: accumulator cut within the levels budget of docs/levels.md where the lanes allow it.
DEFAULT_LATENCY = 12
#: Lanes that divide a block into whole beats.
_LANES = tuple(k for k in range(1, NVFP4_BLOCK + 1) if NVFP4_BLOCK % k == 0)


@dataclass(frozen=True)
class Nvfp4DotConfig:
    """Parameters of :class:`Nvfp4Dot`.

    Attributes
    ----------
    lanes : int
        E2M1 products per cycle; a block takes ``16 / lanes`` beats.
    latency : int
        Register stages from a dot product's final beat to its result: two add the block
        sums, one follows the block's value and its accumulation, one the tensor scale's
        product; the others cut them (:func:`~scoville.rtl.lib.blockdot.dot_cuts`), the
        accumulator's adder at most one fewer times than a block's beats.
    """

    lanes: int = param(4, "1, 2, 4, 8, 16", "products per cycle")
    latency: int = param(None, latency_range("nvfp4", 4, NVFP4_BLOCK, _LANES)
                                + f"; unset: {DEFAULT_LATENCY}, or its lanes' most if fewer",
                                "register stages")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, NVFP4_BLOCK, choices=_LANES)
        settle_latency(self, "nvfp4", 4, DEFAULT_LATENCY)

    @property
    def beats_per_block(self) -> int:
        return NVFP4_BLOCK // self.lanes


class Nvfp4Dot(BlockDotUnit):
    """Streaming NVFP4 dot-product unit.

    A dot product is a run of blocks, each ``16 / lanes`` beats of ``lanes`` element pairs.
    The block scales ``sa``, ``sb`` are read on a block's final beat; ``last`` and the tensor
    scale ``scale`` are read on the final beat of a dot product's final block.

    Attributes
    ----------
    i : In(stream.Signature(...))
        Payload fields ``a``, ``b`` (arrays of ``lanes`` E2M1 codes), ``sa``, ``sb`` (E4M3
        codes), ``scale`` (binary32) and ``last``.
    o : Out(stream.Signature(32))
        The binary32 bits of each dot product.
    latency : int
        Cycles from the handshake of a dot product's final beat to its result being valid
        (the config's).
    """

    def __init__(self, config: Nvfp4DotConfig):
        super().__init__(config, {"scale": unsigned(32)})

    @property
    def latency(self) -> int:
        return self._config.latency

    def elaborate(self, platform):
        m = Module()
        lanes = self._config.lanes
        s4_last = Signal()
        en, valid = stall_chain(m, self.i, self.o, self.latency, emits=s4_last)

        # Stages 1 and 2: exact block sums; the E4M3 block scales decoded into the product of
        # their 4-bit significands, ``sig``, and its power of two, ``exp``.
        p = self.i.payload
        sums = block_sums(m, self.i, en, valid, lanes=lanes, block=NVFP4_BLOCK, carry={
            **nvfp4_scale_terms(p.sa, p.sb), "scale": p.scale})
        c = sums.carry

        # Stage 3 (cut by the stages past the four): the block value (exact in binary32),
        # accumulated; the tensor scale beside it.
        plan = dot_cuts("nvfp4", self.latency - 4, self._config.beats_per_block)
        total, ends, kept = block_stage(
            m, en, plan, sums, valid[1],
            lambda cut: nvfp4_block_value(m, sums.sum, c["nan"], c["neg"], c["sig"], c["exp"],
                                          cut=cut),
            carry={"scale": c["scale"]})

        # The last stage (cut by the stages past the four): the tensor scale, once per dot
        # product; the emits flag beside it.
        scaled = through_cuts(
            m, en, plan.scale, "scale", "the tensor scale's product",
            lambda cut: fp32_mul(m, total, kept["scale"], name="scale_mul", cut=cut))
        ends = delay(m, ends, len(plan.scale), en, name="scale_last")
        result = Signal(32)
        with m.If(en):
            m.d.sync += [s4_last.eq(ends), result.eq(scaled)]
        m.d.comb += self.o.payload.eq(result)
        return m
