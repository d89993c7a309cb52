"""The base-2 exponential as :class:`scoville.rtl.exp2.Exp2` computes it, bit for bit.

Range reduction to ``t = floor(x * 2**16)``, a 65-entry table of ``2**(j / 64)`` with a chord
between entries, then the exponent; results below the smallest normal are +0 (the RTL's
module docstring and ``docs/numerics.md`` give the steps). Here in exact integer NumPy.
"""

import numpy as np

from scoville.rtl.lib.formats import FP32_QNAN
from scoville.rtl.lib.fp32 import EXP2_FRAC_BITS, EXP2_INDEX_BITS

__all__ = ["TABLE", "exp2", "exp2_of_fixed"]

#: ``round(2**(j / 64) * 2**23)`` for j = 0..64.
TABLE = np.rint(np.exp2(np.arange((1 << EXP2_INDEX_BITS) + 1) / (1 << EXP2_INDEX_BITS))
                * 2.0**23).astype(np.int64)


def exp2_of_fixed(t) -> np.ndarray:
    """The binary32 bits of the RTL's ``2**(t / 2**16)`` for fixed-point ``t`` (int64), inside
    the range (``-126 <= t >> 16 < 128``)."""
    t = np.asarray(t, dtype=np.int64)
    low = EXP2_FRAC_BITS - EXP2_INDEX_BITS
    n = t >> EXP2_FRAC_BITS
    index = (t >> low) & ((1 << EXP2_INDEX_BITS) - 1)
    r = t & ((1 << low) - 1)
    sig = TABLE[index] + (((TABLE[index + 1] - TABLE[index]) * r) >> low)
    return (((n + 127) << 23) | (sig & 0x7F_FFFF)).astype(np.uint32)


def exp2(x_bits) -> np.ndarray:
    """``exp2`` of binary32 encodings ``x_bits`` (uint32), as the RTL computes it (uint32 bits).

    Raises
    ------
    ValueError
        If an encoding is not an integer in 0..0xFFFFFFFF.
    """
    bits = np.asarray(x_bits)
    if bits.dtype.kind not in "iu" or (bits.size and (bits.min() < 0 or bits.max() > 0xFFFF_FFFF)):
        raise ValueError("parameter 'x_bits' must be binary32 encodings: integers in "
                         "0..0xFFFFFFFF")
    bits = bits.astype(np.uint32)
    with np.errstate(invalid="ignore"):
        x = bits.view(np.float32).astype(np.float64)
        # Exact: |x| < 256 has at most 24 significant bits above 2**-150.
        inside = np.abs(x) < 256
        t = np.floor(np.where(inside, x, 0) * 2.0**EXP2_FRAC_BITS).astype(np.int64)
        n = t >> EXP2_FRAC_BITS
        over = (x >= 256) | (inside & (n >= 128))
        under = (x <= -256) | (inside & (n < -126))
    out = exp2_of_fixed(np.where(over | under, 0, t))
    out = np.where(over, np.uint32(0x7F80_0000), out)
    out = np.where(under, np.uint32(0), out)
    return np.where(np.isnan(x), np.uint32(FP32_QNAN), out).astype(np.uint32)
