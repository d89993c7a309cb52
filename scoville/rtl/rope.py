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
:func:`~scoville.sim.cycles.stream.pipeline_timing`).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.fp32 import fp32_add, fp32_mul
from .lib.params import ParamError, check_int, param
from .lib.pipeline import delay, stall_pipeline

__all__ = ["Rope", "RopeConfig", "in_layout"]


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
        Register stages.
    """

    dim: int = param(16, "2..128, even", "elements rotated")
    interleaved: int = param(0, "0, 1", "pairs of neighbours (1) or of halves (0)")
    latency: int = param(2, "1..4", "register stages")

    def __post_init__(self):
        check_int("dim", self.dim, 2, 128)
        if self.dim % 2:
            raise ParamError(f"parameter 'dim' = {self.dim} is not allowed; allowed: an even "
                             "number 2..128")
        check_int("interleaved", self.interleaved, 0, 1)
        check_int("latency", self.latency, 1, 4)


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
        p = self.i.payload
        first, second = [], []
        for k in range(half):
            x1, x2 = (p.x[2 * k], p.x[2 * k + 1]) if cfg.interleaved else \
                (p.x[k], p.x[k + half])
            c, s = p.cos[k], p.sin[k]
            x1c = fp32_mul(m, x1, c, name=f"x1c{k}")
            x2s = fp32_mul(m, x2, s, name=f"x2s{k}")
            x2c = fp32_mul(m, x2, c, name=f"x2c{k}")
            x1s = fp32_mul(m, x1, s, name=f"x1s{k}")
            # a - b is a + (-b) exactly, zeros' signs included.
            first.append(fp32_add(m, x1c, x2s ^ (1 << 31), name=f"y1_{k}"))
            second.append(fp32_add(m, x2c, x1s, name=f"y2_{k}"))
        out = Cat(*first, *second)
        reg = delay(m, out, cfg.latency, en, name="y")
        m.d.comb += self.o.payload.eq(reg)
        return m
