"""The number formats the blocks share, in one place: bit layouts, block sizes and element widths.

It holds no logic, so everyone may import it: the RTL, the golden and timed models, the
testbenches. Layouts are ``data.StructLayout`` with the significand (``man``) lowest, then the
exponent (``exp``), then the sign, as the formats put their bits. What each format means, and
its sources, is in ``docs/numerics.md``.

- E2M1 (FP4; OCP MX v1.0): bias 1, no Inf or NaN; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
- E4M3 (FP8; OCP 8-bit floating point, the ``fn`` variant): bias 7, no Inf, NaN at S.1111.111.
- E8M0 (OCP MX v1.0): an unsigned power of two 2**(code - 127); 0xFF is NaN.
- BF16 (bfloat16) and FP32 (IEEE 754 binary32).
- MXFP4 (OCP MX v1.0): blocks of :data:`MX_BLOCK` E2M1 elements sharing one E8M0 scale.
- NVFP4: blocks of :data:`NVFP4_BLOCK` E2M1 elements sharing one E4M3 scale, and a per-tensor
  FP32 scale.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data

__all__ = [
    "BF16",
    "E2M1",
    "E4M3",
    "E8M0",
    "E8M0_BIAS",
    "E8M0_NAN",
    "ELEMENT_BITS",
    "FP32",
    "FP32_QNAN",
    "MX_BLOCK",
    "NVFP4_BLOCK",
]

E2M1 = data.StructLayout({"man": unsigned(1), "exp": unsigned(2), "sign": unsigned(1)})
E4M3 = data.StructLayout({"man": unsigned(3), "exp": unsigned(4), "sign": unsigned(1)})
#: An E8M0 scale is its 8-bit biased exponent.
E8M0 = unsigned(8)
E8M0_BIAS = 127
E8M0_NAN = 0xFF
BF16 = data.StructLayout({"man": unsigned(7), "exp": unsigned(8), "sign": unsigned(1)})
FP32 = data.StructLayout({"man": unsigned(23), "exp": unsigned(8), "sign": unsigned(1)})
#: The canonical quiet NaN every FP32 result that is NaN becomes.
FP32_QNAN = 0x7FC0_0000

#: Elements sharing one E8M0 scale in an MX format.
MX_BLOCK = 32
#: Elements sharing one E4M3 scale in NVFP4.
NVFP4_BLOCK = 16

#: Bits of one element of each format (MX and NVFP4: the element, not its share of the scale).
ELEMENT_BITS = {
    "int4": 4,
    "int8": 8,
    "mxfp4": 4,
    "nvfp4": 4,
    "mxfp8": 8,
    "fp8_e4m3": 8,
    "bf16": 16,
    "fp32": 32,
}
