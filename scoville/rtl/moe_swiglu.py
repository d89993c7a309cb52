"""The MoE experts' gated activation: a column tile's (gate, up) pairs of ``h = x W_gu`` in,
the activations out, as :mod:`scoville.sim.golden.moe` computes them, bit for bit.

``gpt_oss`` (biases, clamped): ``gate + b_gate`` and ``up + b_up`` (FP32), ``g = min(gate,
7)``, ``u = clamp(up, -7, 7)``, ``fp32(fp32(u + 1) * fp32(g * sigmoid(fp32(1.702 g))))``.
``deepseek`` (no biases): ``fp32(fp32(gate * sigmoid(gate)) * up)``. The sigmoid is
:func:`fp32_sigmoid` on the ``exp2`` unit. A NaN in gives the canonical quiet NaN out.

The logic of a lane is combinational, followed by ``latency`` register stages (for synthesis
to retime), as every :class:`~scoville.rtl.lib.pipeline.LaneUnit`.
"""

from dataclasses import dataclass

from amaranth.hdl import Const, Mux

from .lib.comb import wire
from .lib.fp32 import (
    ONE,
    fp32_add,
    fp32_bits,
    fp32_is_nan,
    fp32_key,
    fp32_mul,
    fp32_sigmoid,
)
from .lib.params import check_choice, check_int, param
from .lib.pipeline import LaneUnit

__all__ = ["KINDS", "Swiglu", "SwigluConfig", "fp32_sigmoid", "swiglu"]

#: The gated activations: GPT-OSS's (biases, clamped at ``LIMIT``) and DeepSeek's (SiLU).
KINDS = ("gpt_oss", "deepseek")

#: GPT-OSS's clamp and sigmoid slope (Hugging Face ``GptOssExperts``: ``limit``, ``alpha``;
#: :data:`scoville.rtl.moe.SWIGLU_LIMIT`, ``SWIGLU_ALPHA``).
LIMIT = 7.0
ALPHA = 1.702


def swiglu(m, kind: str, gate, up, gate_bias=None, up_bias=None, *, name: str):
    """The gated activation of one (``gate``, ``up``) pair (binary32 bits) of ``kind``
    (:data:`KINDS`; ``gpt_oss`` adds ``gate_bias`` and ``up_bias`` first)."""
    n = name
    if kind == "deepseek":
        silu = fp32_mul(m, gate, fp32_sigmoid(m, gate, name=f"{n}_sig"), name=f"{n}_silu")
        return fp32_mul(m, silu, up, name=f"{n}_out")
    gate = fp32_add(m, gate, gate_bias, name=f"{n}_gb")
    up = fp32_add(m, up, up_bias, name=f"{n}_ub")
    hi, lo = fp32_bits(LIMIT), fp32_bits(-LIMIT)
    key_g, key_u = fp32_key(m, gate, name=f"{n}_kg"), fp32_key(m, up, name=f"{n}_ku")
    key_hi = fp32_key(m, Const(hi, 32), name=f"{n}_khi")
    key_lo = fp32_key(m, Const(lo, 32), name=f"{n}_klo")
    # NaN passes min and clamp (as NumPy's minimum and clip).
    g = wire(m, f"{n}_g", Mux(~fp32_is_nan(gate) & (key_g > key_hi), hi, gate), 32)
    u = wire(m, f"{n}_u", Mux(fp32_is_nan(up), up, Mux(key_u > key_hi, hi,
                                                   Mux(key_u < key_lo, lo, up))), 32)
    ga = fp32_mul(m, g, Const(fp32_bits(ALPHA), 32), name=f"{n}_ga")
    glu = fp32_mul(m, g, fp32_sigmoid(m, ga, name=f"{n}_sig"), name=f"{n}_glu")
    u1 = fp32_add(m, u, Const(ONE, 32), name=f"{n}_u1")
    return fp32_mul(m, u1, glu, name=f"{n}_out")


@dataclass(frozen=True)
class SwigluConfig:
    """Parameters of :class:`Swiglu`.

    Attributes
    ----------
    kind : str
        ``gpt_oss`` or ``deepseek`` (:data:`KINDS`).
    lanes : int
        Pairs taken per cycle.
    latency : int
        Register stages after the lanes' logic.
    """

    kind: str = param("gpt_oss", ", ".join(KINDS), "the gated activation")
    lanes: int = param(1, "1..64", "pairs per cycle")
    latency: int = param(1, "1..4", "register stages")

    def __post_init__(self):
        check_choice("kind", self.kind, KINDS)
        check_int("lanes", self.lanes, 1, 64)
        check_int("latency", self.latency, 1, 4)


class Swiglu(LaneUnit):
    """``lanes`` gated activations behind one stream (see
    :class:`~scoville.rtl.lib.pipeline.LaneUnit`): per lane ``gate`` and ``up`` (binary32), with
    ``gpt_oss`` also ``gate_bias`` and ``up_bias``; the activation out."""

    def __init__(self, config: SwigluConfig):
        if config.kind == "gpt_oss":
            self.OPERANDS = ("gate", "up", "gate_bias", "up_bias")
        else:
            self.OPERANDS = ("gate", "up")
        super().__init__(config, 32, 32)

    def lane(self, m, k, gate, up, *biases, cut=None):
        return swiglu(m, self.config.kind, gate, up, *biases, name=f"glu{k}")
