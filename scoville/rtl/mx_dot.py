"""MX block dot products with FP32 accumulation.

Two MXFP4 blocks (32 E2M1 elements each, with E8M0 scales ``sa``, ``sb``) give
``2**(sa + sb - 254) * sum(a_i * b_i)``, the sum exact (a multiple of 1/4 below 4608 in
magnitude). Each block result is rounded once to binary32, then added into a binary32
accumulator with :func:`~scoville.rtl.lib.fp32.fp32_add` (round to nearest even, subnormals kept),
so a long dot product is ``acc = fp32(acc + fp32(block_k))`` in block order, as current MX
tensor hardware accumulates. A NaN scale (0xFF) makes its block, and so the result, NaN.
"""

from dataclasses import dataclass

from amaranth.hdl import Module, Signal

from .lib.blockdot import (
    BlockDotUnit,
    block_stage,
    block_sums,
    dot_cuts,
    latency_range,
    mx_block_value,
    mx_scale_terms,
    settle_latency,
)
from .lib.formats import MX_BLOCK
from .lib.params import check_int, param
from .lib.pipeline import stall_chain

__all__ = ["MxDot", "MxDotConfig"]

#: The latency by default (or the most its lanes allow, if fewer): the block value and the
#: accumulator cut within the levels budget of docs/levels.md where the lanes allow it.
DEFAULT_LATENCY = 8
#: Lanes that divide a block into whole beats.
_LANES = tuple(k for k in range(1, MX_BLOCK + 1) if MX_BLOCK % k == 0)


@dataclass(frozen=True)
class MxDotConfig:
    """Parameters of :class:`MxDot`.

    Attributes
    ----------
    lanes : int
        E2M1 products per cycle; a block takes ``32 / lanes`` beats.
    latency : int
        Register stages from a dot product's final beat to its result: two add the block
        sums; the third follows the block's value and its accumulation, and the others cut
        them (:func:`~scoville.rtl.lib.blockdot.dot_cuts`), the accumulator's adder at most
        one fewer times than a block's beats.
    """

    lanes: int = param(8, "1, 2, 4, 8, 16, 32", "products per cycle")
    latency: int = param(None, latency_range("mx", 3, MX_BLOCK, _LANES)
                                + f"; unset: {DEFAULT_LATENCY}, or its lanes' most if fewer",
                                "register stages")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, MX_BLOCK, choices=_LANES)
        settle_latency(self, "mx", 3, DEFAULT_LATENCY)

    @property
    def beats_per_block(self) -> int:
        return MX_BLOCK // self.lanes


class MxDot(BlockDotUnit):
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
        Cycles from the handshake of a dot product's final beat to its result being valid
        (the config's).
    """

    def __init__(self, config: MxDotConfig):
        super().__init__(config, {})

    @property
    def latency(self) -> int:
        return self._config.latency

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        emits = Signal()
        en, valid = stall_chain(m, self.i, self.o, self.latency, emits=emits)

        p = self.i.payload
        sums = block_sums(m, self.i, en, valid, lanes=cfg.lanes, block=MX_BLOCK,
                          carry=mx_scale_terms(p.sa, p.sb))

        # Stage 3 (cut by the stages past it): round the block to FP32 (quarters:
        # 2^(sa+sb-254-2)) and accumulate.
        plan = dot_cuts("mx", self.latency - 3, cfg.beats_per_block)
        result, ends, _ = block_stage(
            m, en, plan, sums, valid[1],
            lambda cut: mx_block_value(m, sums.sum, **sums.carry, cut=cut))
        m.d.comb += [emits.eq(ends), self.o.payload.eq(result)]
        return m
