"""Rotary position embedding with YaRN scaling, as the decoder computes it, bit for bit, and in
float64 as Hugging Face's ``GptOssRotaryEmbedding`` and ``DeepseekV3RotaryEmbedding`` define
it.

**Frequencies** (:func:`frequencies`), float64, from a Hugging Face ``rope_parameters`` dict
(``rope_type`` ``default`` or ``yarn``; ``rope_theta``, ``factor``, ``beta_fast``,
``beta_slow``, ``original_max_position_embeddings``, ``truncate``, ``attention_factor``,
``mscale``, ``mscale_all_dim``) and the rotary width ``dim``: YaRN's blend of the
interpolated and extrapolated inverse frequencies (``transformers.modeling_rope_utils``'s
``_compute_yarn_parameters``; ``truncate`` false in GPT-OSS, so its correction range is not
rounded to whole dimensions) and its attention factor (given, or ``0.1 ln(factor) + 1``, or
with ``mscale`` and ``mscale_all_dim`` their ratio: 1 in DeepSeek-V3, whose softmax scale
takes ``mscale_all_dim``'s factor squared instead, :func:`softmax_scale`).

**The table** (:func:`table`): for each position p and frequency i, ``cos(p theta_i) * a`` and
``sin(p theta_i) * a`` (``a`` the attention factor) computed in float64 and rounded once to
FP32. The decoder reads a position's row from memory; it computes no trigonometry.

**The rotation** (:func:`rotate`), FP32: pairs ``(x1, x2)`` of the rotary part are the two
halves (GPT-OSS; DeepSeek-V3 with ``rope_interleave`` false) or the even and odd elements
(DeepSeek-V3's ``rope_interleave``); ``y1 = fp32(fp32(x1 c) - fp32(x2 s))``, ``y2 =
fp32(fp32(x2 c) + fp32(x1 s))``; the result is laid out in halves (all y1, then all y2) either
way, as Hugging Face's ``apply_rotary_pos_emb_interleave`` returns it.
"""

from __future__ import annotations

import math

import numpy as np

from .fp32_add import canonical_bits

__all__ = ["frequencies", "reference", "rope", "rotate", "softmax_scale", "table"]

_F32 = np.float32
_KINDS = ("default", "yarn")


def _mscale(scale: float, m: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def _params(rope: dict) -> dict:
    kind = rope.get("rope_type", "default")
    if kind not in _KINDS:
        raise ValueError(f"parameter 'rope_parameters.rope_type' = {kind!r} is not allowed; "
                         f"allowed: {', '.join(_KINDS)}")
    if "rope_theta" not in rope:
        raise ValueError("parameter 'rope_parameters.rope_theta' is missing; allowed: a "
                         "positive number")
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"parameter 'rope_parameters.partial_rotary_factor' = "
                         f"{rope['partial_rotary_factor']!r} is not allowed; allowed: 1.0")
    if kind == "yarn" and not rope.get("original_max_position_embeddings"):
        raise ValueError("parameter 'rope_parameters.original_max_position_embeddings' is "
                         "missing; allowed: a positive integer (YaRN's)")
    return rope


def frequencies(rope: dict, dim: int, max_position_embeddings: int | None = None
                ) -> tuple[np.ndarray, float]:
    """``(inv_freq (dim/2,) float64, attention_factor)`` of a ``rope_parameters`` dict for a
    rotary width ``dim`` (even)."""
    rope = _params(rope)
    if dim < 2 or dim % 2:
        raise ValueError(f"parameter 'dim' = {dim} is not allowed; allowed: an even number "
                         "from 2")
    base = float(rope["rope_theta"])
    pos = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    if rope.get("rope_type", "default") == "default":
        return 1.0 / pos, 1.0
    original = rope["original_max_position_embeddings"]
    factor = rope.get("factor")
    if factor is None:
        factor = max_position_embeddings / original
    factor = float(factor)
    attention = rope.get("attention_factor")
    if attention is None:
        m, m_all = rope.get("mscale"), rope.get("mscale_all_dim")
        attention = _mscale(factor, m) / _mscale(factor, m_all) if m and m_all \
            else _mscale(factor)
    fast, slow = rope.get("beta_fast") or 32, rope.get("beta_slow") or 1

    def correction(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction(fast), correction(slow)
    if rope.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    inv = (1 / (factor * pos)) * (1 - extrapolation) + (1 / pos) * extrapolation
    return inv, float(attention)


def softmax_scale(rope: dict, head_dim: int) -> float:
    """The attention's score scale: ``head_dim ** -0.5``, times ``mscale_all_dim``'s YaRN
    factor squared when the dict sets one (DeepSeek-V3, Hugging Face's
    ``yarn_apply_mscale``)."""
    scale = head_dim ** -0.5
    if rope.get("rope_type", "default") != "default" and rope.get("mscale_all_dim"):
        if not isinstance(rope.get("factor"), (int, float)):
            raise ValueError(f"parameter 'rope_parameters.factor' = {rope.get('factor')!r} is "
                             "not allowed with mscale_all_dim; allowed: a positive number")
        m = _mscale(float(rope["factor"]), rope["mscale_all_dim"])
        scale = scale * m * m
    return scale


def table(rope: dict, dim: int, positions, max_position_embeddings: int | None = None
          ) -> tuple[np.ndarray, np.ndarray]:
    """``(cos, sin)``, each (len(positions), dim/2) float32: the table rows of ``positions``,
    the attention factor folded in, each value float64 rounded once."""
    inv, a = frequencies(rope, dim, max_position_embeddings)
    angles = np.asarray(positions, np.float64)[:, None] * inv[None, :]
    return (np.cos(angles) * a).astype(np.float32), (np.sin(angles) * a).astype(np.float32)


def _pairs(x, interleaved: bool):
    if interleaved:
        return x[..., 0::2], x[..., 1::2]
    half = x.shape[-1] // 2
    return x[..., :half], x[..., half:]


def rotate(x, cos, sin, *, interleaved: bool = False) -> np.ndarray:
    """``x`` (T, ..., dim) float32 rotated by its token's table row ``cos``, ``sin`` (T,
    dim/2), as the module says: (T, ..., dim) float32, laid out in halves."""
    x = np.asarray(x, np.float32)
    shape = (len(x),) + (1,) * (x.ndim - 2) + (x.shape[-1] // 2,)
    c, s = np.asarray(cos, np.float32).reshape(shape), np.asarray(sin, np.float32).reshape(shape)
    x1, x2 = _pairs(x, interleaved)
    with np.errstate(over="ignore", invalid="ignore"):
        y1 = ((x1 * c).astype(np.float32) - (x2 * s).astype(np.float32)).astype(np.float32)
        y2 = ((x2 * c).astype(np.float32) + (x1 * s).astype(np.float32)).astype(np.float32)
    return canonical_bits(np.concatenate([y1, y2], axis=-1)).view(np.float32)


def rope(config, x, cos, sin) -> np.ndarray:
    """The ``rope`` block's outputs (:class:`~scoville.rtl.rope.RopeConfig`: its
    ``interleaved``) for vectors ``x`` (N, dim) and their table rows ``cos``, ``sin`` (N,
    dim/2): (N, dim) float32, every NaN canonical."""
    return rotate(x, cos, sin, interleaved=bool(config.interleaved))


def reference(x, positions, rope: dict, *, interleaved: bool = False,
              max_position_embeddings: int | None = None) -> np.ndarray:
    """The rotation in float64 from the formula (no table): ``x`` (T, ..., dim)."""
    x = np.asarray(x, np.float64)
    inv, a = frequencies(rope, x.shape[-1], max_position_embeddings)
    angles = np.asarray(positions, np.float64)[:, None] * inv[None, :]
    shape = (len(x),) + (1,) * (x.ndim - 2) + (x.shape[-1] // 2,)
    c, s = (np.cos(angles) * a).reshape(shape), (np.sin(angles) * a).reshape(shape)
    x1, x2 = _pairs(x, interleaved)
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
