"""FP4 E2M1 values and the exact FP4 x FP4 product, as :class:`scoville.rtl.fp4_mul.Fp4Mul`
computes.

Element decoding uses ``ml_dtypes.float4_e2m1fn``, which matches the OCP MX v1.0 E2M1 table.
"""

import ml_dtypes
import numpy as np

__all__ = ["E2M1_VALUES", "fp4_block_sums", "fp4_mul"]

#: The value of each E2M1 code 0..15 (code 8 is -0.0).
E2M1_VALUES = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)


def fp4_mul(a, b):
    """Exact products of E2M1 codes ``a`` and ``b`` (broadcast), in quarters, as int16.

    The RTL's 9-bit output holds the same integers; -0 times anything is 0.
    """
    a = np.asarray(a, dtype=np.uint8)
    b = np.asarray(b, dtype=np.uint8)
    if a.size and (a.max(initial=0) > 15 or b.max(initial=0) > 15):
        raise ValueError("E2M1 codes must be in 0..15")
    halves = (E2M1_VALUES * 2).astype(np.int16)
    return (halves[a] * halves[b]).astype(np.int16)


def fp4_block_sums(a, b, block: int):
    """Exact sums, in quarters, of the products of rows of E2M1 codes ``a`` and ``b`` (shape
    ``(n, block * blocks)``) over each ``block`` elements. Returns int64, shape ``(n, blocks)``.
    """
    a = np.asarray(a, dtype=np.uint8)
    b = np.asarray(b, dtype=np.uint8)
    n, k = a.shape
    if k % block:
        raise ValueError(f"the dot-product length must be a multiple of {block}; got {k}")
    return fp4_mul(a.reshape(n, -1, block), b.reshape(n, -1, block)).astype(np.int64).sum(-1)
