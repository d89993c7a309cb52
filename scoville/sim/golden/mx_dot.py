"""MXFP4 dot products with FP32 accumulation, as :class:`scoville.rtl.mx_dot.MxDot` computes.

Per block: the exact sum of E2M1 products times ``2**(sa + sb - 254)``, rounded once to
float32 (NaN if either scale is 0xFF); blocks are then added in order into a float32
accumulator starting at +0. Every NaN is the canonical 0x7FC00000.
"""

import numpy as np

from scoville.rtl.lib.formats import MX_BLOCK

from .fp4_mul import fp4_block_sums
from .fp32_add import canonical_bits, sum_in_order

__all__ = ["mx_dot"]



def mx_dot(a, b, sa, sb):
    """Dot products of rows of E2M1 codes ``a``, ``b`` (shape ``(n, 32 * blocks)``) with E8M0
    scales ``sa``, ``sb`` (shape ``(n, blocks)``). Returns float32 bits, uint32, shape ``(n,)``.
    """
    sums = fp4_block_sums(a, b, MX_BLOCK)
    exps = np.asarray(sa, dtype=np.int64) + np.asarray(sb, dtype=np.int64) - 256
    with np.errstate(over="ignore"):
        blocks = np.ldexp(sums.astype(np.float64), exps).astype(np.float32)
    nan = (np.asarray(sa) == 0xFF) | (np.asarray(sb) == 0xFF)
    blocks[nan] = np.nan
    return canonical_bits(sum_in_order(blocks))
