"""RMS normalization as the decoder computes it, bit for bit, and :func:`reference`, the same
in float64 (Hugging Face's ``GptOssRMSNorm`` and ``DeepseekV3RMSNorm``).

The steps, for each token's H values ``x`` (FP32), its weight ``w`` (FP32) and ``eps``:

1. **Sum of squares**, FP32: the H values in beats of ``lanes`` (a power of two dividing H);
   in a beat each square ``fp32(x_h * x_h)``, the squares added pairwise (neighbours, then
   neighbouring sums, a binary tree), each addition rounded once; the beat sums added in
   order into an accumulator that starts at +0. ``lanes = 1`` is the plain sum in order.
2. **Mean**: ``m = fp32(ss * fp32(1 / H))`` (exact for H a power of two).
3. **Reciprocal square root**: ``r = rsqrt(fp32(m + fp32(eps)))``, correctly rounded
   (:func:`rsqrt`).
4. **Scale**: ``y_h = fp32(fp32(x_h * r) * w_h)``, the order of Hugging Face's float32 steps.

Every NaN is the canonical quiet NaN (:func:`~scoville.sim.golden.fp32_add.canonical_bits`).
"""

from __future__ import annotations

import math

import numpy as np

from .fp32_add import canonical_bits, tree_sum

__all__ = ["normalize", "pairwise_sum", "reference", "rmsnorm", "rsqrt"]

_F32 = np.float32


def rsqrt(v) -> np.ndarray:
    """``1 / sqrt(v)`` for float32 ``v``, rounded once to the nearest float32 (no result is a
    tie): computed exactly with integers (``math.isqrt``), not from a library's square root.
    ``rsqrt(+0) = +inf``, ``rsqrt(-0) = -inf``, ``rsqrt(+inf) = +0``; NaN for NaN and for
    negative values (IEEE 754's rSqrt)."""
    v = np.asarray(v, np.float32)
    out = np.empty(v.shape, np.float32)
    flat, res = v.reshape(-1), out.reshape(-1)
    for i, x in enumerate(flat.tolist()):
        res[i] = _rsqrt_one(x)
    return canonical_bits(out).view(np.float32)


def _rsqrt_one(x: float) -> float:
    if math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return math.copysign(math.inf, x)
    if math.isinf(x):
        return 0.0
    # x = m * 2**e exactly, m an integer below 2**24 (float32 values).
    mant, exp = math.frexp(x)
    m, e = int(mant * (1 << 24)), exp - 24
    if e % 2:
        m, e = m * 2, e - 1
    # 1/sqrt(x) = 2**(-e/2) / sqrt(m); q = floor(2**s / sqrt(m)) with 27 or more bits.
    s = 27 + (m.bit_length() + 1) // 2
    big = 1 << (2 * s)
    q = math.isqrt(big // m)
    exact = q * q * m == big
    # Round q (and the sticky bit) to 24 significant bits, to nearest even.
    shift = q.bit_length() - 24
    keep, rem = q >> shift, q & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if rem > half or (rem == half and (not exact or keep & 1)):
        keep += 1
    return float(_F32(math.ldexp(keep, shift - s - e // 2)))


def pairwise_sum(values, lanes: int) -> np.ndarray:
    """Row sums of float32 ``values`` (n, H) in step 1's order: beats of ``lanes``, each
    beat's binary tree, the beat sums in order from +0. Float32."""
    values = np.asarray(values, np.float32)
    n, h = values.shape
    if lanes < 1 or lanes & (lanes - 1) or h % lanes:
        raise ValueError(f"parameter 'lanes' = {lanes} is not allowed with {h} values; "
                         f"allowed: a power of two dividing {h}")
    acc = np.zeros(n, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for b in range(0, h, lanes):
            acc = (acc + tree_sum(values[:, b:b + lanes])).astype(np.float32)
    return acc


def rmsnorm(config, x, weight) -> np.ndarray:
    """The ``rmsnorm`` block's outputs (:class:`~scoville.rtl.rmsnorm.RmsNormConfig`: its
    ``eps`` and ``lanes``) for tokens ``x`` (T, H) and weights (H,) or a row a token (T, H):
    (T, H) float32. ``H`` is ``hidden``, or with ``runtime`` the tokens' width (``width *
    lanes`` values, ``width`` 1 to ``hidden / lanes``): step 2 divides by the tokens' own
    ``H``."""
    h = np.shape(x)[-1]
    if config.runtime:
        if h % config.lanes or not config.lanes <= h <= config.hidden:
            raise ValueError(f"parameter 'x' has {h} values a token; allowed: a multiple of "
                             f"{config.lanes} in {config.lanes}..{config.hidden}")
    elif h != config.hidden:
        raise ValueError(f"parameter 'x' has {h} values a token; allowed: {config.hidden}")
    return normalize(x, weight, config.eps, lanes=config.lanes)


def normalize(x, weight, eps: float, *, lanes: int = 1) -> np.ndarray:
    """``x`` (T, H) float32 normalized per token and scaled by ``weight`` (H,) or (T, H), as
    the module says: (T, H) float32."""
    x = np.asarray(x, np.float32)
    w = np.asarray(weight, np.float32)
    h = x.shape[-1]
    if w.shape not in ((h,), x.shape):
        raise ValueError(f"parameter 'weight' has shape {w.shape}; allowed: ({h},) or "
                         f"{x.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        ss = pairwise_sum((x * x).astype(np.float32), lanes)
        mean = (ss * _F32(1.0 / h)).astype(np.float32)
        r = rsqrt((mean + _F32(eps)).astype(np.float32))
        y = ((x * r[:, None]).astype(np.float32) * w).astype(np.float32)
    return canonical_bits(y).view(np.float32)


def reference(x, weight, eps: float) -> np.ndarray:
    """RMSNorm in float64: ``weight * x / sqrt(mean(x^2) + eps)``."""
    x = np.asarray(x, np.float64)
    var = np.mean(x * x, axis=-1, keepdims=True)
    return np.asarray(weight, np.float64) * (x / np.sqrt(var + eps))
