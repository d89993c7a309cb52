"""Rotary position embedding: a head's rotary part rotated by its position's cosines and sines,
in FP32, as Hugging Face's ``apply_rotary_pos_emb`` (GPT-OSS: pairs are the two halves) and
``apply_rotary_pos_emb_interleave`` (DeepSeek-V3: pairs are neighbours), YaRN's scale folded
into the cosines and sines (:mod:`scoville.sim.golden.rope` says how the table is made).

For each pair ``(x1, x2)`` and its ``c``, ``s``: ``y1 = fp32(fp32(x1 c) - fp32(x2 s))``, ``y2 =
fp32(fp32(x2 c) + fp32(x1 s))``; the result is laid out in halves (every ``y1``, then every
``y2``) with either pairing, as Hugging Face returns it. The products and sums are IEEE
binary32 (round to nearest even, subnormals kept), every NaN the canonical quiet NaN.

A beat is one vector and its position's table row; a stalling pipeline of ``latency`` stages
(:func:`~scoville.rtl.lib.pipeline.stall_pipeline`: its timed model is the shared
:func:`~scoville.sim.cycles.stream.pipeline_timing`), up to ten of them cutting the products'
and the sums' logic (:func:`cuts`: :func:`~scoville.rtl.lib.fp32.fp32_mul`'s and
:func:`~scoville.rtl.lib.fp32.fp32_add`'s cut points), the rest after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.blockdot import ADD_CUTS
from .lib.fp32 import fp32_add, fp32_mul
from .lib.params import ParamError, check_int, param
from .lib.pipeline import delay, stall_pipeline, through_cuts

__all__ = ["Rope", "RopeConfig", "cuts", "in_layout"]

#: The products' cut points (``fp32_mul``'s) at each count of cuts: point 4 splits the
#: operands' normalizing shift, the longest stage of the input's (whose values each feed two
#: products).
MUL_CUTS = {1: (1,), 2: (0, 1), 3: (0, 1, 2), 4: (4, 0, 1, 2), 5: (4, 0, 1, 2, 3)}
#: Which operation each register stage inside the logic cuts, in turn: a stage more cuts the
#: products (``fp32_mul``) or the sums (``fp32_add``) once more, at the cut points
#: :data:`MUL_CUTS` and :data:`~scoville.rtl.lib.blockdot.ADD_CUTS` give for their counts.
CUT_ORDER = ("add", "mul", "add", "mul", "add", "mul", "mul", "mul", "add", "add")
#: The latency by default: the fewest stages whose longest cycle mapped for delay is within
#: issue #36's 40 levels (``docs/levels.md``).
DEFAULT_LATENCY = 9


def cuts(latency: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The cut points registered inside the products and inside the sums at ``latency``
    (:data:`CUT_ORDER`'s first ``latency - 1`` entries; the last stage follows the logic)."""
    took = CUT_ORDER[:max(latency - 1, 0)]
    n_mul, n_add = took.count("mul"), took.count("add")
    return MUL_CUTS.get(n_mul, ()), ADD_CUTS.get(n_add, ())


@dataclass(frozen=True)
class RopeConfig:
    """Parameters of :class:`Rope`.

    Attributes
    ----------
    dim : int
        Elements of the rotary part (even): GPT-OSS's head, 64; DeepSeek-V3's
        ``qk_rope_head_dim``, 64.
    interleaved : int
        1: pairs are neighbours ``(x[2i], x[2i+1])`` (DeepSeek-V3's ``rope_interleave``); 0:
        the halves ``(x[i], x[i + dim/2])``.
    latency : int
        Register stages: the first up to ten cut the products and the sums (:func:`cuts`),
        the rest follow them. Default 9 (:data:`DEFAULT_LATENCY`): 39 levels mapped for delay.
    """

    dim: int = param(16, "2..128, even", "elements rotated")
    interleaved: int = param(0, "0, 1", "pairs of neighbours (1) or of halves (0)")
    latency: int = param(DEFAULT_LATENCY, f"1..{len(CUT_ORDER) + 1}", "register stages")

    def __post_init__(self):
        check_int("dim", self.dim, 2, 128)
        if self.dim % 2:
            raise ParamError(f"parameter 'dim' = {self.dim} is not allowed; allowed: an even "
                             "number 2..128")
        check_int("interleaved", self.interleaved, 0, 1)
        check_int("latency", self.latency, 1, len(CUT_ORDER) + 1)


def in_layout(config: RopeConfig) -> data.StructLayout:
    """A beat of ``i``: the vector ``x`` and its position's ``cos`` and ``sin`` (binary32,
    element 0 lowest)."""
    half = data.ArrayLayout(32, config.dim // 2)
    return data.StructLayout({"x": data.ArrayLayout(32, config.dim), "cos": half,
                              "sin": half})


class Rope(wiring.Component):
    """Rotates one vector a beat (the module says how).

    Attributes
    ----------
    i : In(stream.Signature(in_layout(config)))
    o : Out(stream.Signature(ArrayLayout(32, dim)))
        ``y``, in halves.
    latency : int
    """

    def __init__(self, config: RopeConfig):
        self._config = config
        super().__init__({
            "i": In(stream.Signature(in_layout(config))),
            "o": Out(stream.Signature(data.ArrayLayout(32, config.dim))),
        })

    @property
    def config(self) -> RopeConfig:
        return self._config

    @property
    def latency(self) -> int:
        return self._config.latency

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        half = cfg.dim // 2
        en = stall_pipeline(m, self.i, self.o, cfg.latency)
        mul_cuts, add_cuts = cuts(cfg.latency)
        p = self.i.payload
        first, second = [], []

        def cut_op(op, active, a, b, name):
            """``op`` (fp32_mul or fp32_add) registered at its cut points ``active``."""
            return through_cuts(m, en, active, name, f"Rope's {op.__name__} {name}",
                                lambda cut: op(m, a, b, name=name, cut=cut))

        def mul(a, b, name):
            return cut_op(fp32_mul, mul_cuts, a, b, name)

        def add(a, b, name):
            return cut_op(fp32_add, add_cuts, a, b, name)

        for k in range(half):
            x1, x2 = (p.x[2 * k], p.x[2 * k + 1]) if cfg.interleaved else \
                (p.x[k], p.x[k + half])
            c, s = p.cos[k], p.sin[k]
            x1c, x2s = mul(x1, c, f"x1c{k}"), mul(x2, s, f"x2s{k}")
            x2c, x1s = mul(x2, c, f"x2c{k}"), mul(x1, s, f"x1s{k}")
            # a - b is a + (-b) exactly, zeros' signs included.
            first.append(add(x1c, x2s ^ (1 << 31), f"y1_{k}"))
            second.append(add(x2c, x1s, f"y2_{k}"))
        out = Cat(*first, *second)
        inside = len(mul_cuts) + len(add_cuts)
        reg = delay(m, out, cfg.latency - inside, en, name="y")
        m.d.comb += self.o.payload.eq(reg)
        return m
