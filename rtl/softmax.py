"""Binary32 pieces of attention's online softmax (``docs/attention.md``): rounding to BF16,
an order key for the running max, and a correctly rounded reciprocal for the final
normalization. Each adds combinational logic to a module and returns its result."""

import struct

from amaranth.hdl import Cat, Const, Mux, Value, unsigned

from .comb import wire

__all__ = ["ONE", "fp32_bits", "fp32_key", "fp32_recip", "fp32_to_bf16"]

#: 1.0 in binary32.
ONE = 0x3F80_0000


def fp32_bits(value: float) -> int:
    """The binary32 bits of ``value`` rounded to binary32 (to nearest, ties to even)."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


def fp32_to_bf16(m, x, *, name: str):
    """``x`` (binary32 bits) rounded to BF16 bits: to nearest, ties to even, subnormals kept,
    overflow to +-Inf, every NaN the quiet NaN 0x7FC0 (``quantize_bf16``)."""
    x = Value.cast(x)
    nan = (x[23:31] == 0xFF) & (x[:23] != 0)
    rounded = wire(m, f"{name}_rnd", x + 0x7FFF + x[16], unsigned(33))
    return wire(m, name, Mux(nan, 0x7FC0, rounded[16:32]), unsigned(16))


def fp32_key(m, x, *, name: str):
    """An unsigned key whose order is the order of non-NaN binary32 values ``x`` (-0 below
    +0): the magnitude with the sign bit set for positives, every bit inverted for
    negatives."""
    x = Value.cast(x)
    return wire(m, name, Mux(x[31], ~x, x | 0x8000_0000), unsigned(32))


def fp32_recip(m, x, *, name: str):
    """``1 / x`` rounded to nearest, ties to even, for a positive normal binary32 ``x`` below
    2**126 (the softmax's sum is at least 1): the significand's quotient
    ``floor(2**49 / M)`` with a sticky remainder, rounded to 24 bits."""
    x = Value.cast(x)
    exp, frac = x[23:31], x[:23]
    sig = Cat(frac, Const(1, 1))
    num = Const(1 << 49, 50)
    q = wire(m, f"{name}_q", num // sig, unsigned(27))
    sticky = wire(m, f"{name}_sticky", (q * sig)[:50] != num)
    keep = q[2:27]
    up = q[1] & (q[0] | sticky | keep[0])
    rounded = wire(m, f"{name}_sig", keep + up, unsigned(26))
    # A power of two is exact (the quotient is 2**26); rounding may carry to 2**24.
    carry = (rounded[24] | (frac == 0))
    field = wire(m, f"{name}_exp", 253 - exp + carry, unsigned(8))
    return wire(m, name, Cat(Mux(carry, 0, rounded[:23]), field), unsigned(32))
