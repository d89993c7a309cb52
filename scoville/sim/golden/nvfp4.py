"""NVFP4 quantization: E2M1 elements, one E4M3 scale per 16 elements, one FP32 scale per tensor.

The recipe is torchao's (``torchao/prototype/mx_formats/nvfp4_tensor.py``), evaluated with one
rounding per step: the per-tensor scale is rounded once to float32, the block scale once to E4M3
and each element once to E2M1, all from float64 quotients. torchao computes the same steps in
float32 arithmetic, whose extra roundings can move a block scale that lies within a few float32
ulps of an E4M3 rounding tie by one E4M3 step. docs/numerics.md states every choice made here.
"""

import ml_dtypes
import numpy as np

from scoville.rtl.lib.formats import NVFP4_BLOCK

from .mx import as_float64, encode_e2m1, from_blocks, round_to_grid, to_blocks

__all__ = ["dequantize_nvfp4", "quantize_nvfp4"]

#: E4M3 byte written for a block holding NaN or +-Inf (S.1111.111 with S = 0).
E4M3_NAN = 0x7F
E4M3_MAX = 448.0
#: Smallest normal E4M3 value; torchao clamps block scales up to it (``E4M3_EPS``).
E4M3_MIN_NORMAL = 2.0**-6
_E2M1_MAX = 6.0
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32_TINY = float(np.finfo(np.float32).smallest_subnormal)
_E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                         -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
_E4M3_VALUES = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def quantize_nvfp4(x, axis=-1, tensor_scale=None):
    """Quantize ``x`` to NVFP4 in 16-element blocks along ``axis``.

    Steps, in float64:

    1. ``tensor_scale = float32(amax / (448 * 6))``, amax over all blocks free of NaN and Inf.
       It is kept within float32: at least 2^-149 (the smallest subnormal) so that a tiny tensor
       never divides by zero, at most the largest finite float32 (only float64 inputs above
       about 9.1e41 reach it). An all-zero tensor gets ``tensor_scale = 1.0``.
    2. ``block_scale = block_amax / (6 * tensor_scale)``, clamped to [2^-6, 448] as torchao does
       (``ml_dtypes.float8_e4m3fn`` would turn 480 and up into NaN), then rounded to nearest E4M3,
       ties to even. An all-zero block therefore gets 2^-6 (byte 0x08) and codes 0.
    3. Each element is the E2M1 code of ``x / (block_scale * tensor_scale)``, rounded to nearest,
       ties to even, saturating at +-6.

    A block holding NaN or +-Inf gets the E4M3 NaN byte 0x7F and all element codes 0, and does
    not take part in the tensor amax.

    Parameters
    ----------
    x : array_like
        Real values, any float dtype including ``ml_dtypes.bfloat16``; computed in float64.
    axis : int
        Axis split into blocks of 16.
    tensor_scale : float, optional
        A calibrated per-tensor scale to use instead of step 1 (torchao's ``per_tensor_scale``);
        rounded to float32, it must be positive and finite.

    Returns
    -------
    codes : numpy.ndarray
        uint8 E2M1 codes 0..15, shape of ``x``.
    block_scales : numpy.ndarray
        uint8 bit patterns of OCP E4M3 (``float8_e4m3fn``), shape of ``x`` with ``axis`` divided
        by 16.
    tensor_scale : numpy.float32
        The per-tensor scale.

    Raises
    ------
    ValueError
        If the length along ``axis`` is not a multiple of 16, ``axis`` is not an axis of ``x``, or
        ``tensor_scale`` is not a positive finite float32.
    """
    blocks = to_blocks(as_float64(x), axis, NVFP4_BLOCK, "quantize_nvfp4")
    special = ~np.isfinite(blocks).all(axis=-1)
    clean = np.where(special[..., None], 0.0, blocks)
    block_amax = np.abs(clean).max(axis=-1, initial=0.0)
    if tensor_scale is None:
        tensor_scale = _tensor_scale(float(block_amax.max(initial=0.0)))
    else:
        tensor_scale = np.float32(tensor_scale)
        if not (np.isfinite(tensor_scale) and tensor_scale > 0):
            raise ValueError(f"quantize_nvfp4: tensor_scale {tensor_scale!r} is not allowed; "
                             "allowed: a positive finite float32")
    wanted = block_amax / (_E2M1_MAX * np.float64(tensor_scale))
    block_scale = round_to_grid(np.clip(wanted, E4M3_MIN_NORMAL, E4M3_MAX), 3, -6)
    total = block_scale * np.float64(tensor_scale)
    codes = encode_e2m1(clean / total[..., None])
    codes[special] = 0
    scale_bytes = block_scale.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    scale_bytes[special] = E4M3_NAN
    return from_blocks(codes, axis), np.moveaxis(scale_bytes, -1, axis), tensor_scale


def dequantize_nvfp4(codes, block_scales, tensor_scale, axis=-1):
    """Values of NVFP4 data (as :func:`quantize_nvfp4` returns it).

    Each value is ``E2M1(code) * E4M3(block_scale) * tensor_scale``, exact in float64 and then
    rounded to float32. A NaN block scale (0x7F or 0xFF) makes the whole block NaN.

    Parameters
    ----------
    codes : array_like
        Integer E2M1 codes 0..15.
    block_scales : array_like
        Integer E4M3 bit patterns 0..255, shape of ``codes`` with ``axis`` divided by 16.
    tensor_scale : float
        The per-tensor scale, used as a float32.
    axis : int
        Axis along which ``codes`` is split into blocks of 16.

    Returns
    -------
    numpy.ndarray
        float32, shape of ``codes``.

    Raises
    ------
    ValueError
        If codes or scales are out of range or their shapes do not agree.
    """
    codes = np.asarray(codes)
    block_scales = np.asarray(block_scales)
    for what, arr, top in (("E2M1 codes", codes, 15), ("E4M3 scales", block_scales, 255)):
        if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < 0 or arr.max() > top)):
            raise ValueError(f"dequantize_nvfp4: {what} must be integers in 0..{top}")
    blocks = to_blocks(codes, axis, NVFP4_BLOCK, "dequantize_nvfp4")
    if block_scales.ndim == codes.ndim:
        block_scales = np.moveaxis(block_scales, axis, -1)
    if block_scales.shape != blocks.shape[:-1]:
        raise ValueError(f"dequantize_nvfp4: block_scales have shape {block_scales.shape} after "
                         f"moving axis {axis} last; expected {blocks.shape[:-1]}, one per block "
                         "of 16")
    total = _E4M3_VALUES[block_scales] * np.float64(np.float32(tensor_scale))
    with np.errstate(over="ignore", invalid="ignore"):
        return from_blocks(_E2M1_VALUES[blocks] * total[..., None], axis).astype(np.float32)


def _tensor_scale(amax):
    if amax == 0:
        return np.float32(1.0)
    with np.errstate(over="ignore"):
        scale = np.float32(amax / (E4M3_MAX * _E2M1_MAX))
    return np.float32(min(max(float(scale), _FLOAT32_TINY), _FLOAT32_MAX))
