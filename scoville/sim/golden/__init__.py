"""Bit-exact NumPy models of the RTL's arithmetic."""

from .fp4_mul import E2M1_VALUES, fp4_mul
from .intq import dequantize_int, quantize_int
from .mx import (
    dequantize_mxfp4,
    dequantize_mxfp8,
    encode_e2m1,
    encode_e4m3,
    pack_fp4,
    quantize_bf16,
    quantize_mxfp4,
    quantize_mxfp8,
    unpack_fp4,
)
from .nvfp4 import dequantize_nvfp4, quantize_nvfp4

__all__ = ["E2M1_VALUES", "fp4_mul"]
__all__ += ["dequantize_int", "quantize_int"]
__all__ += ["dequantize_mxfp4", "dequantize_mxfp8", "encode_e2m1", "encode_e4m3", "pack_fp4",
            "quantize_bf16", "quantize_mxfp4", "quantize_mxfp8", "unpack_fp4"]
__all__ += ["dequantize_nvfp4", "quantize_nvfp4"]
