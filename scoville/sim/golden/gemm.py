"""C = A x B as :class:`scoville.rtl.gemm.Gemm` computes it, the order in which its operand
beats go in and its rows of C come out, and :func:`matmul`, the same product of real matrices
quantized to a format.

What each format computes (``docs/numerics.md`` states it to the bit; the PE:
:mod:`scoville.rtl.gemm_arith`); none of it depends on the dataflow, except through ``bf16``'s
partial sums:

``int8``, ``int4``
    The exact integer product reduced modulo 2^32 (INT32 with wrap-around).
``mxfp4``, ``mxfp8``, ``mxfp8`` x ``mxfp4``
    For each output and each 32-element block along K, the exact sum of the element products
    times ``2**(sa + sb - 254)``, rounded once to float32 (NaN if either scale is 0xFF or an
    E4M3 element is NaN); the blocks are added in order into a float32 accumulator that starts
    at +0. For ``mxfp4`` this is :func:`scoville.sim.golden.mx_dot.mx_dot` for every (row of
    A, column of B).
``nvfp4``
    The same with 16-element blocks and E4M3 block scales (each block value is exact in
    float32), then the float32 sum times the float32 product of the two tensor scales, as
    :func:`scoville.sim.golden.nvfp4_dot.nvfp4_dot`.
``bf16``
    Each product of two bfloat16 values rounded once to float32, added into one of ``L``
    float32 partial sums (the config's :attr:`~scoville.rtl.gemm.GemmConfig.sums`; 1 on
    ``ws``): step k's into sum ``k mod L``, each in K order from +0 (with ``L = 1`` all in K
    order); then the sums, in the order ``0, 1, ..., L - 1`` (a sum without a step +0), added
    as a tree: neighbours, then neighbouring sums, an odd one out passed on to the next level
    (3 sums: ``(s0 + s1) + s2``; 4: ``(s0 + s1) + (s2 + s3)``), each addition rounded once.
    A sum's steps do not depend on K: trailing zero products (a causal mask's) change no
    sum.

Every NaN result is the canonical quiet NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scoville.rtl.gemm import GemmConfig
from scoville.rtl.lib.formats import ELEMENT_BITS

from .fp4_mul import E2M1_VALUES
from .fp32_add import canonical_bits, sum_in_order
from .mx import E4M3_VALUES, quantize_bf16, quantize_mxfp4, quantize_mxfp8
from .nvfp4 import quantize_nvfp4

__all__ = ["Operands", "element_values", "gemm", "matmul", "operand_beats", "result_rows"]


@dataclass(frozen=True)
class Operands:
    """The operands of one GEMM.

    Attributes
    ----------
    a, b : np.ndarray
        ``(M, K)`` and ``(K, N)``: signed integers, or element codes (E2M1 0..15, E4M3 0..255,
        bfloat16 bit patterns 0..65535).
    sa, sb : np.ndarray or None
        Block formats only: the block scale codes (E8M0, or E4M3 for ``nvfp4``),
        ``(M, ceil(K / block))`` and ``(ceil(K / block), N)``.
    scale_a, scale_b : float or None
        ``nvfp4`` only: the float32 tensor scales of A and B.
    """

    a: np.ndarray
    b: np.ndarray
    sa: np.ndarray | None = None
    sb: np.ndarray | None = None
    scale_a: float | None = None
    scale_b: float | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        (m, k), n = self.a.shape, self.b.shape[1]
        return m, k, n


def element_values(fmt: str, codes) -> np.ndarray:
    """The float64 value of each element code of a floating-point format (NaN for NaN codes;
    block scales not applied)."""
    codes = np.asarray(codes)
    if fmt in ("mxfp4", "nvfp4"):
        return E2M1_VALUES.astype(np.float64)[codes]
    if fmt == "mxfp8":
        return E4M3_VALUES[codes]
    if fmt == "bf16":
        with np.errstate(invalid="ignore"):  # signalling NaNs
            return (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    raise ValueError(f"element_values: fmt {fmt!r} has no float elements; allowed: mxfp4, "
                     "nvfp4, mxfp8, bf16")


def gemm(config, ops: Operands) -> np.ndarray:
    """``A x B`` as the engine computes it: int32, or float32 bits as uint32; shape (M, N)."""
    m, k, n = ops.shape
    if ops.b.shape[0] != k:
        raise ValueError(f"A is {ops.a.shape} but B is {ops.b.shape}: inner dimensions differ")
    arith = config.arith
    if arith.kind == "int":
        wide = ops.a.astype(np.int64) @ ops.b.astype(np.int64)
        return wide.astype(np.uint32).view(np.int32)
    a = element_values(config.fmt, ops.a)
    b = element_values(config.b_format, ops.b)
    with np.errstate(over="ignore", invalid="ignore"):
        if arith.kind == "float":
            return canonical_bits(float_sums(a, b, config.sums))
        block = arith.block
        blocks = math.ceil(k / block)
        pad = blocks * block - k
        a = np.pad(a, ((0, 0), (0, pad))).reshape(m, blocks, block)
        b = np.pad(b, ((0, pad), (0, 0))).reshape(blocks, block, n)
        # Exact: every product is a multiple of 2**-18 below 2**18 in magnitude, so the block
        # sums need at most 41 of float64's 53 bits.
        sums = np.einsum("mqk,qkn->mnq", a, b)
        sa, sb = ops.sa.astype(np.int64)[:, None, :], ops.sb.astype(np.int64).T[None, :, :]
        if arith.tensor_scale:
            values = (sums * E4M3_VALUES[sa] * E4M3_VALUES[sb]).astype(np.float32)
        else:
            values = np.ldexp(sums, sa + sb - 254).astype(np.float32)
            values[(sa == 0xFF) | (sb == 0xFF)] = np.nan
        acc = sum_in_order(values.reshape(m * n, blocks))
        if arith.tensor_scale:
            tensor = np.float32(ops.scale_a) * np.float32(ops.scale_b)
            acc = (acc * tensor).astype(np.float32)
    return canonical_bits(acc).reshape(m, n)


def float_sums(a, b, sums: int) -> np.ndarray:
    """``bf16``'s C (float32) from the float64 values ``a`` (M x K) and ``b`` (K x N) of its
    elements, in ``sums`` partial sums (the module says in which order)."""
    k = a.shape[1]
    # Each product exact in float64 (8-bit significands), then rounded once; one outer
    # product at a time, so memory stays ``sums`` x M x N.
    part = np.zeros((sums, a.shape[0], b.shape[1]), np.float32)
    for q in range(k):
        part[q % sums] = part[q % sums] + np.outer(a[:, q], b[q]).astype(np.float32)
    # Sums 0 and 1, 2 and 3, ..., then neighbouring sums, an odd one out passed on.
    level = list(part)
    while len(level) > 1:
        level = [level[j] + level[j + 1] for j in range(0, len(level) - 1, 2)] \
            + level[len(level) - len(level) % 2:]
    return level[0]


def add_latency(fmt: str, sums: int | None) -> int | None:
    """The array's ``add_latency`` that gives ``sums`` partial sums in ``fmt`` (only ``bf16``
    has them); None (its default) where ``sums`` is None or the format has none."""
    return None if sums is None or fmt != "bf16" else sums - 1


def matmul(a, b, fmt: str, b_fmt: str | None = None, *, sums: int | None = None) -> np.ndarray:
    """C = A x B with A and B quantized to ``fmt`` (B to ``b_fmt``, by default ``fmt``) along
    K, computed as the engine does (:func:`gemm`, bit for bit in either dataflow).

    Quantization: ``int8``/``int4``: A and B are integers in the format's range, taken as
    they are. ``mxfp4``/``mxfp8``: :func:`~scoville.sim.golden.mx.quantize_mxfp4` /
    :func:`~scoville.sim.golden.mx.quantize_mxfp8` in blocks of 32 along K. ``nvfp4``:
    :func:`~scoville.sim.golden.nvfp4.quantize_nvfp4` in blocks of 16 along K, each operand
    with its default tensor scale. ``bf16``: round to nearest even. K that is not a multiple
    of the block is padded with zeros (the engine sums a partial block over its elements,
    which is the same).

    Parameters
    ----------
    a, b : array_like
        ``(M, K)`` and ``(K, N)``: real values (any float dtype), or integers for the int
        formats.
    fmt, b_fmt : str
        A pair of :data:`scoville.rtl.gemm_arith.PAIRS`.
    sums : int, optional
        ``bf16``: the partial sums of each output (an array's
        :attr:`~scoville.rtl.gemm.GemmConfig.sums`); None: the default ``os`` array's.

    Returns
    -------
    numpy.ndarray
        ``(M, N)`` float32, or int32 for the int formats.

    Raises
    ------
    ValueError
        A pair of formats that is not allowed, shapes that do not multiply, or integers out of
        range.
    """
    config = GemmConfig(fmt=fmt, b_fmt=b_fmt or "same", add_latency=add_latency(fmt, sums))
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: A is {a.shape} and B is {b.shape}; allowed: (M, K) and "
                         "(K, N)")
    arith = config.arith
    if arith.kind == "int":
        bits = ELEMENT_BITS[fmt]
        ops = Operands(_ints(a, bits, "A"), _ints(b, bits, "B"))
        return gemm(config, ops)
    if arith.kind == "float":
        ops = Operands(quantize_bf16(a), quantize_bf16(b))
        return gemm(config, ops).view(np.float32)
    k = a.shape[1]
    pad = -k % arith.block
    a = np.pad(a.astype(np.float64), ((0, 0), (0, pad)))
    b = np.pad(b.astype(np.float64), ((0, pad), (0, 0)))
    quantizers = {"mxfp4": quantize_mxfp4, "mxfp8": quantize_mxfp8}
    if arith.tensor_scale:
        qa, sa, ta = quantize_nvfp4(a, axis=1)
        qb, sb, tb = quantize_nvfp4(b, axis=0)
        ops = Operands(qa, qb, sa, sb, ta, tb)
    else:
        qa, sa = quantizers[fmt](a, axis=1)
        qb, sb = quantizers[config.b_format](b, axis=0)
        ops = Operands(qa, qb, sa, sb)
    return gemm(config, ops).view(np.float32)


def _ints(x, bits: int, what: str) -> np.ndarray:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if x.dtype.kind not in "iu" or (x.size and (x.min() < lo or x.max() > hi)):
        raise ValueError(f"matmul: {what} must hold integers in {lo}..{hi} for int{bits}")
    return x.astype(np.int64)


def operand_beats(config, ops: Operands, fill=None) -> tuple[dict, dict]:
    """The A and B beats of one GEMM, in the order the engine takes them.

    Returns two dicts with ``data`` (``(beats, lanes)``) and, for block formats, ``scale``
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

    def limits(shape):
        bits = shape.width
        return (-(1 << (bits - 1)), 1 << (bits - 1)) if shape.signed else (0, 1 << bits)

    arith = config.arith
    a = padded(ops.a, (mp, kp), *limits(arith.a_shape))
    b = padded(ops.b, (k, np_), *limits(arith.b_shape))
    if config.mx:
        # The scale of every element: that of its block.
        block = arith.block
        sa = padded(np.repeat(ops.sa, block, axis=1)[:, :k], (mp, kp), 0, 256)
        sb = padded(np.repeat(ops.sb, block, axis=0)[:k], (k, np_), 0, 256)
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
