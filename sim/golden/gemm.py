"""C = A x B as :class:`scoville.rtl.gemm.Gemm` computes it, and the order in which its operand
beats go in and its rows of C come out.

``int8``/``int4``: the exact integer product reduced modulo 2^32 (INT32 with wrap-around; the
order of the additions does not matter). ``mxfp4``: for each output and each 32-element block
along K, the exact sum of E2M1 products times ``2**(sa + sb - 254)``, rounded once to float32
(NaN if either scale is 0xFF); the blocks are added in order into a float32 accumulator that
starts at +0, every NaN canonical. This is :func:`scoville.sim.golden.mx_dot.mx_dot` for every
(row of A, column of B), and it does not depend on the dataflow: both dataflows form the exact
block sum before rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scoville.rtl.formats import MX_BLOCK

from .fp4_mul import E2M1_VALUES
from .fp32_add import canonical_bits, sum_in_order

__all__ = ["Operands", "gemm", "operand_beats", "result_rows"]



@dataclass(frozen=True)
class Operands:
    """The operands of one GEMM.

    Attributes
    ----------
    a, b : np.ndarray
        ``(M, K)`` and ``(K, N)``: signed integers, or E2M1 codes 0..15 for ``mxfp4``.
    sa, sb : np.ndarray or None
        ``mxfp4`` only: E8M0 scale codes, ``(M, ceil(K / 32))`` and ``(ceil(K / 32), N)``.
    """

    a: np.ndarray
    b: np.ndarray
    sa: np.ndarray | None = None
    sb: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        (m, k), n = self.a.shape, self.b.shape[1]
        return m, k, n


def gemm(config, ops: Operands) -> np.ndarray:
    """``A x B`` as the engine computes it: int32, or float32 bits as uint32; shape (M, N)."""
    m, k, n = ops.shape
    if ops.b.shape[0] != k:
        raise ValueError(f"A is {ops.a.shape} but B is {ops.b.shape}: inner dimensions differ")
    if not config.mx:
        wide = ops.a.astype(np.int64) @ ops.b.astype(np.int64)
        return wide.astype(np.uint32).view(np.int32)
    blocks = math.ceil(k / MX_BLOCK)
    pad = blocks * MX_BLOCK - k
    halves = (E2M1_VALUES * 2).astype(np.float64)
    a = np.pad(halves[ops.a], ((0, 0), (0, pad))).reshape(m, blocks, MX_BLOCK)
    b = np.pad(halves[ops.b], ((0, pad), (0, 0))).reshape(blocks, MX_BLOCK, n)
    # Block sums in quarters: integers below 2^13, so float64 holds them exactly.
    sums = np.einsum("mqk,qkn->mnq", a, b)
    exps = ops.sa.astype(np.int64)[:, None, :] + ops.sb.astype(np.int64).T[None, :, :] - 256
    with np.errstate(over="ignore"):
        values = np.ldexp(sums, exps).astype(np.float32)
    values[(ops.sa[:, None, :] == 0xFF) | (ops.sb.T[None, :, :] == 0xFF)] = np.nan
    return canonical_bits(sum_in_order(values.reshape(m * n, blocks))).reshape(m, n)


def operand_beats(config, ops: Operands, fill=None) -> tuple[dict, dict]:
    """The A and B beats of one GEMM, in the order the engine takes them.

    Returns two dicts with ``data`` (``(beats, lanes)``) and, for ``mxfp4``, ``scale``
    (``(beats, lanes)``, or ``(beats,)`` for A in ``ws``). Lanes outside the matrices hold
    values drawn from ``fill`` (a NumPy generator; the engine must ignore them) or zeros.

    ``os``: for each output tile (row tiles outer, column tiles inner), K beats; beat k of A is
    column k of the tile's rows of A, beat k of B is row k of its columns of B.
    ``ws``: for each column tile, each chunk of ``acc_rows`` rows of A, each K tile of
    ``rows`` (K tiles inner): the B beats are the K tile's rows of B (only those below K),
    then the A beats are the chunk's rows of A over the K tile.
    """
    m, k, n = ops.shape
    R, C = config.rows, config.cols
    # The matrices padded to whole tiles (and, in ws, A to whole K tiles), the padding drawn
    # from ``fill``; every beat is then a slice.
    mp, np_, kp = -(-m // R) * R, -(-n // C) * C, -(-k // R) * R

    def padded(values, shape, lo, hi):
        out = np.zeros(shape, np.int64) if fill is None else fill.integers(lo, hi, shape)
        out[: values.shape[0], : values.shape[1]] = values
        return out

    lo, hi = (0, 16) if config.mx else (-(1 << (config.bits - 1)), 1 << (config.bits - 1))
    a = padded(ops.a, (mp, kp), lo, hi)
    b = padded(ops.b, (k, np_), lo, hi)
    if config.mx:
        # The scale of every element: that of its block.
        sa = padded(np.repeat(ops.sa, MX_BLOCK, axis=1)[:, :k], (mp, kp), 0, 256)
        sb = padded(np.repeat(ops.sb, MX_BLOCK, axis=0)[:k], (k, np_), 0, 256)
    a_beats, a_scales, b_beats, b_scales = [], [], [], []
    if config.dataflow == "os":
        for i0 in range(0, m, R):
            for j0 in range(0, n, C):
                a_beats.append(a[i0 : i0 + R, :k].T)
                b_beats.append(b[:, j0 : j0 + C])
                if config.mx:
                    a_scales.append(sa[i0 : i0 + R, :k].T)
                    b_scales.append(sb[:, j0 : j0 + C])
    else:
        for j0 in range(0, n, C):
            for c0 in range(0, m, config.acc_rows):
                rows = slice(c0, min(c0 + config.acc_rows, m))
                for k0 in range(0, k, R):
                    b_beats.append(b[k0 : k0 + R, j0 : j0 + C])
                    a_beats.append(a[rows, k0 : k0 + R])
                    if config.mx:
                        b_scales.append(sb[k0 : k0 + R, j0 : j0 + C])
                        a_scales.append(sa[rows, k0])
    return _stack(a_beats, a_scales), _stack(b_beats, b_scales)


def _stack(beats: list, scales: list) -> dict:
    out = {"data": np.concatenate(beats)}
    if scales:
        out["scale"] = np.concatenate(scales)
    return out


def result_rows(config, c: np.ndarray) -> np.ndarray:
    """The rows of C (from :func:`gemm`) as the engine emits them, ``cols`` values each (as
    uint32 bit patterns; columns beyond N are 0): ``os`` by output tile, rows of a tile in
    order; ``ws`` by column tile, then rows in order."""
    m, n = c.shape
    R, C = config.rows, config.cols
    bits = c.view(np.uint32)
    out = []

    def row(i, j0):
        values = np.zeros(C, np.uint32)
        part = bits[i, j0 : j0 + C]
        values[: len(part)] = part
        return values

    if config.dataflow == "os":
        for i0 in range(0, m, R):
            for j0 in range(0, n, C):
                out.extend(row(i, j0) for i in range(i0, min(i0 + R, m)))
    else:
        for j0 in range(0, n, C):
            out.extend(row(i, j0) for i in range(m))
    return np.array(out, dtype=np.uint32).reshape(-1, C)
