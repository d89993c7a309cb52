"""Symmetric INT4 / INT8 block quantization with one float32 scale per block.

Integers are two's complement: INT4 holds -8..7, INT8 -128..127. Rounding is ``np.rint`` of a
float64 quotient (to nearest, ties to even) followed by a clamp; floats are never cast to
``ml_dtypes.int4``, which truncates toward zero and wraps (8.0 becomes -8). docs/numerics.md
states every choice made here.
"""

import numpy as np

from .mx import as_float64, from_blocks, to_blocks

__all__ = ["dequantize_int", "quantize_int"]

_BITS = (4, 8)
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32_TINY = float(np.finfo(np.float32).smallest_subnormal)


def quantize_int(x, bits, block=32, axis=-1):
    """Quantize ``x`` to ``bits``-bit integers with one scale per ``block`` elements along
    ``axis``.

    ``scale = float32(amax / qmax)`` with ``qmax = 2^(bits-1) - 1`` (7 or 127), kept within
    float32 (at least 2^-149, at most the largest finite float32); ``q = clip(rint(x / scale),
    -2^(bits-1), qmax)``. The scale is symmetric, so quantization itself never produces -8 or
    -128; the clamp keeps the full two's complement range for data that does.

    Special blocks: an all-zero block gets scale 1.0 and ``q = 0``; a block holding NaN or +-Inf
    gets scale NaN and ``q = 0``, so that it dequantizes to NaN.

    Parameters
    ----------
    x : array_like
        Real values, any float dtype including ``ml_dtypes.bfloat16``; computed in float64.
    bits : int
        4 or 8.
    block : int
        Elements per scale, a positive integer.
    axis : int
        Axis split into blocks.

    Returns
    -------
    q : numpy.ndarray
        int8, shape of ``x``.
    scales : numpy.ndarray
        float32, shape of ``x`` with ``axis`` divided by ``block``.

    Raises
    ------
    ValueError
        If ``bits`` or ``block`` is not allowed, the length along ``axis`` is not a multiple of
        ``block``, or ``axis`` is not an axis of ``x``.
    """
    lo, hi = _limits(bits, block)
    blocks = to_blocks(as_float64(x), axis, block, "quantize_int")
    special = ~np.isfinite(blocks).all(axis=-1)
    clean = np.where(special[..., None], 0.0, blocks)
    amax = np.abs(clean).max(axis=-1, initial=0.0)
    with np.errstate(over="ignore"):
        scale = (amax / hi).astype(np.float32).astype(np.float64)
    scale = np.where(amax > 0, np.clip(scale, _FLOAT32_TINY, _FLOAT32_MAX), 1.0)
    q = np.clip(np.rint(clean / scale[..., None]), lo, hi).astype(np.int8)
    q[special] = 0
    scale[special] = np.nan
    return from_blocks(q, axis), np.moveaxis(scale.astype(np.float32), -1, axis)


def dequantize_int(q, scales, block=32, axis=-1):
    """Values ``q * scale`` (as :func:`quantize_int` returns them), rounded once to float32.

    Parameters
    ----------
    q : array_like
        Integers, shape ``(..., n, ...)`` with ``n`` a multiple of ``block`` along ``axis``.
    scales : array_like
        Float scales, shape of ``q`` with ``axis`` divided by ``block``.
    block : int
        Elements per scale.
    axis : int
        Axis along which ``q`` is split into blocks.

    Returns
    -------
    numpy.ndarray
        float32, shape of ``q``.

    Raises
    ------
    ValueError
        If ``q`` is not integer, ``block`` is not a positive integer, or the shapes disagree.
    """
    _limits(8, block)
    q = np.asarray(q)
    if q.dtype.kind not in "iu":
        raise ValueError(f"dequantize_int: q must be integers, got dtype {q.dtype}")
    scales = as_float64(scales)
    blocks = to_blocks(q.astype(np.float64), axis, block, "dequantize_int")
    if scales.ndim == q.ndim:
        scales = np.moveaxis(scales, axis, -1)
    if scales.shape != blocks.shape[:-1]:
        raise ValueError(f"dequantize_int: scales have shape {scales.shape} after moving axis "
                         f"{axis} last; expected {blocks.shape[:-1]}, one per block of {block}")
    with np.errstate(over="ignore", invalid="ignore"):
        return from_blocks(blocks * scales[..., None], axis).astype(np.float32)


def _limits(bits, block):
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or bits not in _BITS:
        raise ValueError(f"bits {bits!r} is not allowed; allowed: {_BITS}")
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block {block!r} is not allowed; allowed: a positive integer")
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
