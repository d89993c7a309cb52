"""INT4/INT8 dot products with INT32 accumulation, as :class:`scoville.rtl.int_mac.IntMac` computes.

The sum wraps modulo 2^32 (two's complement), like NumPy int32 arithmetic.
"""

import numpy as np

__all__ = ["int_mac", "wrap_int32"]


def wrap_int32(x):
    """Reduce integers modulo 2^32 into -2^31..2^31-1."""
    return ((np.asarray(x, dtype=np.int64) + 2**31) % 2**32 - 2**31).astype(np.int64)


def int_mac(a, b, acc, bits: int):
    """Dot products of rows of ``a`` and ``b`` (shape ``(n, k)``) starting from ``acc`` (shape
    ``(n,)``), wrapped to INT32. Elements must lie in the signed ``bits``-bit range."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if a.size and (a.min() < lo or a.max() > hi or b.min() < lo or b.max() > hi):
        raise ValueError(f"elements must be in {lo}..{hi} for {bits}-bit integers")
    return wrap_int32(np.asarray(acc, dtype=np.int64) + (a * b).sum(axis=-1))
