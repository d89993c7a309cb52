"""MX quantization (OCP Microscaling v1.0): MXFP4 (E2M1 elements) and MXFP8 (E4M3 elements), one
E8M0 scale per 32 elements; and the round-to-nearest-even cast to bfloat16.

The model works in float64, where float32, bfloat16 and their subnormals are exact, and rounds
once: elements are divided by a power of two (exact, via ``np.ldexp``) and rounded to nearest,
ties to even, saturating at +-6. ``ml_dtypes`` casts are not used for rounding: its float64 to
``float4_e2m1fn`` cast goes through float32 and so rounds twice (2.5 + 2^-40 becomes 2, not 3),
and its ``float8_e8m0fnu`` cast rounds ties up. docs/numerics.md states every choice made here.
"""

import ml_dtypes
import numpy as np

from scoville.rtl.lib.formats import E8M0_BIAS, E8M0_NAN, MX_BLOCK

__all__ = [
    "E4M3_VALUES",
    "dequantize_mxfp4",
    "dequantize_mxfp8",
    "encode_e2m1",
    "encode_e4m3",
    "pack_fp4",
    "quantize_bf16",
    "quantize_mxfp4",
    "quantize_mxfp8",
    "unpack_fp4",
]

_E2M1_EMAX = 2
_E2M1_MAX = 6.0
_E4M3_EMAX = 8
_E4M3_MAX = 448.0
#: The value of each E4M3 (OCP ``float8_e4m3fn``) code 0..255; codes 0x7F and 0xFF are NaN.
E4M3_VALUES = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
#: E2M1 magnitude code for each value 2*|v| in 0..12 (only 0, 1, 2, 3, 4, 6, 8, 12 occur).
_E2M1_CODE_OF_HALVES = np.array([0, 1, 2, 3, 4, 0, 5, 0, 6, 0, 0, 0, 7], dtype=np.uint8)
_E2M1_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
_E2M1_VALUES = np.concatenate([_E2M1_MAGNITUDES, -_E2M1_MAGNITUDES])


def as_float64(x):
    """``x`` as a float64 array (float32, float64, bfloat16 and integers convert exactly)."""
    x = np.asarray(x)
    if np.iscomplexobj(x):
        raise ValueError(f"input must be real, got dtype {x.dtype}")
    return x.astype(np.float64)


def to_blocks(x, axis, block, what):
    """View ``x`` with ``axis`` moved last and split into blocks: shape ``(..., n // block,
    block)``.

    Raises
    ------
    ValueError
        If ``axis`` is out of range or the length along it is not a multiple of ``block``.
    """
    if not isinstance(axis, (int, np.integer)) or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{what}: axis {axis!r} is not an axis of an array with {x.ndim} "
                         f"dimensions; allowed: integers in {-x.ndim}..{x.ndim - 1}")
    moved = np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    if n % block:
        raise ValueError(f"{what}: length {n} along axis {axis} is not a multiple of the block "
                         f"size {block}; allowed: lengths that are multiples of {block}")
    return moved.reshape(moved.shape[:-1] + (n // block, block))


def from_blocks(blocked, axis):
    """Undo :func:`to_blocks` for an array of shape ``(..., n // block, block)``."""
    flat = blocked.reshape(blocked.shape[:-2] + (-1,))
    return np.moveaxis(flat, -1, axis)


def round_to_grid(a, mantissa_bits, emin):
    """Round non-negative finite float64 ``a`` to nearest, ties to even, on the grid of a binary
    float with ``mantissa_bits`` fraction bits and smallest normal exponent ``emin`` (no upper
    limit: callers clamp first). Exact: only scaling by powers of two and ``np.rint``."""
    _, e = np.frexp(a)
    exponent = np.maximum(e - 1, emin) - mantissa_bits
    return np.ldexp(np.rint(np.ldexp(a, -exponent)), exponent)


def encode_e2m1(y):
    """E2M1 codes (uint8 0..15) of float64 ``y``: round to nearest, ties to even, saturating at
    +-6.

    The sign is kept, also when the magnitude rounds to zero (-0.2 gives code 8, -0); +-inf
    saturates to +-6.

    Raises
    ------
    ValueError
        If ``y`` holds NaN: E2M1 has no NaN, and callers give NaN blocks their own codes.
    """
    y = np.asarray(y, dtype=np.float64)
    if np.isnan(y).any():
        raise ValueError("encode_e2m1: E2M1 has no NaN; allowed: values free of NaN")
    magnitude = round_to_grid(np.minimum(np.abs(y), _E2M1_MAX), 1, 0)
    codes = _E2M1_CODE_OF_HALVES[(2 * magnitude).astype(np.intp)]
    return codes | (np.signbit(y).astype(np.uint8) << 3)


def quantize_mxfp4(x, axis=-1):
    """Quantize ``x`` to MXFP4 in 32-element blocks along ``axis``.

    Each block gets the shared exponent ``e = floor(log2(amax)) - 2`` (amax = largest magnitude in
    the block, found exactly with ``np.frexp``), clamped to the E8M0 range -127..127; its scale
    code is ``e + 127``. Each element becomes the E2M1 code of ``x / 2^e``, rounded to nearest
    with ties to even and saturated at +-6 (:func:`encode_e2m1`).

    Special blocks:

    - all zero (or whose amax is below 2^-125): ``e = -127``, scale code 0; +0 gives code 0,
      -0 and negatives that round to zero give code 8 (-0).
    - any NaN or +-Inf element: scale code 0xFF (E8M0 NaN) and all 32 element codes 0, so that
      the whole block dequantizes to NaN. E2M1 has no Inf, and saturating an Inf to 6 * 2^127
      would hide an overflow as a finite number.
    - finite values of 2^130 or more (float64 input only): ``e`` clamps to 127 and the elements
      saturate at +-6 * 2^127.

    Parameters
    ----------
    x : array_like
        Real values, any float dtype including ``ml_dtypes.bfloat16``; computed in float64.
    axis : int
        Axis split into blocks of 32.

    Returns
    -------
    codes : numpy.ndarray
        uint8 E2M1 codes 0..15, shape of ``x``.
    scales : numpy.ndarray
        uint8 E8M0 codes, shape of ``x`` with ``axis`` divided by 32.

    Raises
    ------
    ValueError
        If the length along ``axis`` is not a multiple of 32, or ``axis`` is not an axis of ``x``.
    """
    return _quantize_mx(x, axis, _E2M1_EMAX, encode_e2m1, "quantize_mxfp4")


def quantize_mxfp8(x, axis=-1):
    """Quantize ``x`` to MXFP8 (E4M3 elements) in 32-element blocks along ``axis``.

    The rule of :func:`quantize_mxfp4` with E4M3's largest exponent: ``e = floor(log2(amax)) -
    8``; each element is the E4M3 code of ``x / 2^e`` rounded to nearest, ties to even, and
    saturated at +-448 (:func:`encode_e4m3`). A block holding NaN or +-Inf gets scale 0xFF and
    codes 0 (it dequantizes to NaN); an all-zero block gets scale code 0.

    Returns
    -------
    codes : numpy.ndarray
        uint8 E4M3 codes, shape of ``x``.
    scales : numpy.ndarray
        uint8 E8M0 codes, shape of ``x`` with ``axis`` divided by 32.

    Raises
    ------
    ValueError
        If the length along ``axis`` is not a multiple of 32, or ``axis`` is not an axis of ``x``.
    """
    return _quantize_mx(x, axis, _E4M3_EMAX, encode_e4m3, "quantize_mxfp8")


def _quantize_mx(x, axis, emax, encode, what):
    """The OCP MX v1.0 quantization of ``x`` along ``axis``, elements of largest exponent
    ``emax`` encoded by ``encode`` (see :func:`quantize_mxfp4`)."""
    blocks = to_blocks(as_float64(x), axis, MX_BLOCK, what)
    special = ~np.isfinite(blocks).all(axis=-1)
    clean = np.where(special[..., None], 0.0, blocks)
    amax = np.abs(clean).max(axis=-1, initial=0.0)
    _, e = np.frexp(amax)
    shared = np.where(amax > 0, e - 1 - emax, -E8M0_BIAS)
    shared = np.clip(shared, -E8M0_BIAS, E8M0_BIAS).astype(np.int32)
    codes = encode(np.ldexp(clean, -shared[..., None]))
    codes[special] = 0
    scales = np.where(special, E8M0_NAN, shared + E8M0_BIAS).astype(np.uint8)
    return from_blocks(codes, axis), np.moveaxis(scales, -1, axis)


def encode_e4m3(y):
    """E4M3 (OCP ``float8_e4m3fn``) codes (uint8) of float64 ``y``: round to nearest, ties to
    even, subnormals kept, saturating at +-448 (+-inf too); the sign of zero is kept.

    Raises
    ------
    ValueError
        If ``y`` holds NaN (callers give NaN blocks their own codes).
    """
    y = np.asarray(y, dtype=np.float64)
    if np.isnan(y).any():
        raise ValueError("encode_e4m3: allowed: values free of NaN")
    magnitude = round_to_grid(np.minimum(np.abs(y), _E4M3_MAX), 3, -6)
    # Every magnitude is now an E4M3 value, so the cast is exact.
    return np.copysign(magnitude, y).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def dequantize_mxfp8(codes, scales, axis=-1):
    """Values of MXFP8 ``codes`` (E4M3) with E8M0 ``scales``, as :func:`dequantize_mxfp4` does
    for MXFP4: ``E4M3(code) * 2^(scale - 127)`` exact in float64, then float32; scale 0xFF or
    an E4M3 NaN code gives NaN."""
    codes = _check_codes(codes, 255, "E4M3 codes")
    return _dequantize_mx(codes, scales, axis, E4M3_VALUES, "dequantize_mxfp8")


def quantize_bf16(x):
    """The bfloat16 bit patterns (uint16) of ``x``: rounded once from float64 to nearest, ties
    to even, subnormals kept, overflow to +-inf, every NaN the quiet NaN 0x7FC0 (``ml_dtypes``
    casts float64 through float32 and so rounds twice)."""
    x = as_float64(x)
    finite = np.isfinite(x)
    magnitude = round_to_grid(np.where(finite, np.abs(x), 0.0), 7, -126)
    with np.errstate(over="ignore"):
        values = np.where(finite, np.copysign(magnitude, x), x).astype(np.float32)
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), bits).astype(np.uint16)


def dequantize_mxfp4(codes, scales, axis=-1):
    """Values of MXFP4 ``codes`` with E8M0 ``scales`` (as :func:`quantize_mxfp4` returns them).

    Each value is ``E2M1(code) * 2^(scale - 127)``, exact in float64 and rounded to float32 only
    where it leaves the float32 range (scale codes 253 and 254 with large elements overflow to
    +-inf). Scale 0xFF makes the whole block NaN.

    Parameters
    ----------
    codes : array_like
        Integer E2M1 codes 0..15.
    scales : array_like
        Integer E8M0 codes 0..255, shape of ``codes`` with ``axis`` divided by 32.
    axis : int
        Axis along which ``codes`` is split into blocks of 32.

    Returns
    -------
    numpy.ndarray
        float32, shape of ``codes``.

    Raises
    ------
    ValueError
        If codes or scales are out of range or their shapes do not agree.
    """
    codes = _check_codes(codes, 15, "E2M1 codes")
    return _dequantize_mx(codes, scales, axis, _E2M1_VALUES, "dequantize_mxfp4")


def _dequantize_mx(codes, scales, axis, table, what):
    scales = _check_codes(scales, 255, "E8M0 scales")
    blocks = to_blocks(codes, axis, MX_BLOCK, what)
    if scales.ndim == codes.ndim:
        scales = np.moveaxis(scales, axis, -1)
    if scales.shape != blocks.shape[:-1]:
        raise ValueError(f"{what}: scales have shape {scales.shape} after moving axis "
                         f"{axis} last; expected {blocks.shape[:-1]}, one per block of 32")
    exponent = scales.astype(np.int32) - E8M0_BIAS
    values = np.ldexp(table[blocks], exponent[..., None])
    values[scales == E8M0_NAN] = np.nan
    with np.errstate(over="ignore"):
        return from_blocks(values, axis).astype(np.float32)


def pack_fp4(codes):
    """Pack E2M1 codes two per byte along the last axis: element ``2i`` in the low nibble of byte
    ``i``, element ``2i + 1`` in the high nibble (the gpt-oss ``blocks`` layout).

    Raises
    ------
    ValueError
        If a code is outside 0..15 or the last axis has odd length.
    """
    codes = _check_codes(codes, 15, "E2M1 codes")
    if codes.ndim == 0 or codes.shape[-1] % 2:
        raise ValueError(f"pack_fp4: last axis has shape {codes.shape}; allowed: an even length")
    codes = codes.astype(np.uint8)
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_fp4(packed):
    """Inverse of :func:`pack_fp4`: uint8 codes, twice as many along the last axis."""
    packed = _check_codes(packed, 255, "packed bytes").astype(np.uint8)
    if packed.ndim == 0:
        raise ValueError("unpack_fp4: input must have at least one axis")
    codes = np.empty(packed.shape[:-1] + (2 * packed.shape[-1],), dtype=np.uint8)
    codes[..., 0::2] = packed & 0xF
    codes[..., 1::2] = packed >> 4
    return codes


def _check_codes(codes, top, what):
    codes = np.asarray(codes)
    if codes.dtype.kind not in "iu":
        raise ValueError(f"{what} must be integers, got dtype {codes.dtype}")
    if codes.size and (codes.min() < 0 or codes.max() > top):
        raise ValueError(f"{what} must be in 0..{top}")
    return codes
