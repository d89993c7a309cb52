"""NVFP4 dot products, as :class:`scoville.rtl.nvfp4_dot.Nvfp4Dot` computes.

Per block: the exact sum of E2M1 products times both E4M3 block scales (exact in float32);
blocks are added in order into a float32 accumulator starting at +0; the sum is then
multiplied once, in float32, by the tensor scale. Every NaN is the canonical 0x7FC00000.
"""

import ml_dtypes
import numpy as np

from scoville.rtl.lib.formats import NVFP4_BLOCK

from .fp4_mul import fp4_block_sums
from .fp32_add import canonical_bits, sum_in_order

__all__ = ["E4M3_VALUES", "nvfp4_dot"]


#: The value of each E4M3 code 0..255 (0x7F and 0xFF are NaN).
E4M3_VALUES = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def nvfp4_dot(a, b, sa, sb, scale):
    """Dot products of rows of E2M1 codes ``a``, ``b`` (shape ``(n, 16 * blocks)``) with E4M3
    block-scale codes ``sa``, ``sb`` (shape ``(n, blocks)``) and float32 tensor scales
    ``scale`` (shape ``(n,)``). Returns float32 bits, uint32, shape ``(n,)``."""
    sums = fp4_block_sums(a, b, NVFP4_BLOCK)
    scales = E4M3_VALUES[np.asarray(sa, np.uint8)] * E4M3_VALUES[np.asarray(sb, np.uint8)]
    blocks = (sums * 0.25 * scales).astype(np.float32)  # exact: < 2^21 times a power of two
    with np.errstate(invalid="ignore", over="ignore"):
        out = (sum_in_order(blocks) * np.asarray(scale, dtype=np.float32)).astype(np.float32)
    return canonical_bits(out)
