"""What :class:`scoville.rtl.gemm_quant.GemmQuant` computes, as the composition of its parts'
golden models: :func:`scoville.sim.golden.gemm.gemm` (C in FP32), then every row of C cut into
blocks of 32 columns and quantized by :func:`scoville.sim.golden.mx_quant.mx_quant` (to
``quant.out_fmt``), the blocks in the order the block emits them (:func:`block_order`).
"""

from __future__ import annotations

import numpy as np

from scoville.rtl.lib.formats import MX_BLOCK

from .gemm import Operands, gemm
from .mx_quant import mx_quant

__all__ = ["block_order", "gemm_quant"]


def block_order(config, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The row of C and the first column of each block, in output order: for each row tile of
    ``array.rows`` rows, for each 32 columns, the tile's rows in order."""
    R = config.array.rows
    rows, cols = [], []
    for i0 in range(0, m, R):
        tile = np.arange(i0, min(i0 + R, m))
        for j0 in range(0, n, MX_BLOCK):
            rows.append(tile)
            cols.append(np.full(len(tile), j0))
    return np.concatenate(rows), np.concatenate(cols)


def gemm_quant(config, ops: Operands) -> tuple[np.ndarray, np.ndarray]:
    """The blocks of one GEMM, in output order: element codes ``(blocks, 32)`` and E8M0 scales
    ``(blocks,)``, both uint8. N must be a multiple of 32."""
    m, _, n = ops.shape
    if n % MX_BLOCK:
        raise ValueError(f"N = {n} is not a multiple of {MX_BLOCK}")
    c = gemm(config.array, ops).view(np.float32)
    rows, starts = block_order(config, m, n)
    blocks = c[rows[:, None], starts[:, None] + np.arange(MX_BLOCK)]
    return mx_quant(config.quant, blocks)
