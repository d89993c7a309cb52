"""MXFP4 dot products with FP32 accumulation, as :class:`scoville.rtl.mxdot.MxDot` computes.

Per block: the exact sum of E2M1 products times ``2**(sa + sb - 254)``, rounded once to
float32 (NaN if either scale is 0xFF); blocks are then added in order into a float32
accumulator starting at +0. Every NaN is the canonical 0x7FC00000.
"""

import numpy as np

from .fp4 import fp4_mul

__all__ = ["FP32_QNAN", "mx_block_dot_exact", "mx_dot"]

FP32_QNAN = np.uint32(0x7FC0_0000)
BLOCK = 32


def mx_block_dot_exact(a, b):
    """Exact block sums in quarters: ``a``, ``b`` are E2M1 codes of shape ``(..., 32)``."""
    return fp4_mul(a, b).astype(np.int64).sum(axis=-1)


def mx_dot(a, b, sa, sb):
    """Dot products of rows of E2M1 codes ``a``, ``b`` (shape ``(n, 32 * blocks)``) with E8M0
    scales ``sa``, ``sb`` (shape ``(n, blocks)``). Returns float32 bits, uint32, shape ``(n,)``.
    """
    a = np.asarray(a, dtype=np.uint8)
    b = np.asarray(b, dtype=np.uint8)
    n, k = a.shape
    if k % BLOCK:
        raise ValueError(f"the dot-product length must be a multiple of {BLOCK}; got {k}")
    sums = mx_block_dot_exact(a.reshape(n, -1, BLOCK), b.reshape(n, -1, BLOCK))
    exps = np.asarray(sa, dtype=np.int64) + np.asarray(sb, dtype=np.int64) - 256
    with np.errstate(over="ignore"):
        blocks = np.ldexp(sums.astype(np.float64), exps).astype(np.float32)
    nan = (np.asarray(sa) == 0xFF) | (np.asarray(sb) == 0xFF)
    blocks[nan] = np.nan
    acc = np.zeros(n, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(blocks.shape[1]):
            acc = (acc + blocks[:, j]).astype(np.float32)
    bits = acc.view(np.uint32).copy()
    bits[np.isnan(acc)] = FP32_QNAN
    return bits
