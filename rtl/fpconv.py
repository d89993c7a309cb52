"""Conversion of an exact scaled integer ``value * 2**exp`` to IEEE-754 binary32.

Used where an exact block sum meets FP32 (MX and NVFP4 dot products). One rounding, to nearest
with ties to even; subnormal results are kept; results beyond the binary32 range become +-Inf.
"""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned

from .comb import leading_one

__all__ = ["FP32_INF", "scaled_int_to_fp32"]

FP32_INF = 0x7F80_0000


def scaled_int_to_fp32(m: Module, value, exp, *, name: str = "cvt") -> Signal:
    """Add the logic for binary32 ``round(value * 2**exp)`` to ``m``; return its bits.

    Parameters
    ----------
    value : signed Value
        The exact integer (its width ``W`` sets the size of the logic).
    exp : signed Value
        The power of two.

    Notes
    -----
    With ``p`` the leading-one position of ``|value|`` and ``E = p + exp + 127`` the biased
    exponent, the result is ``(max(E - 1, 0) << 23) + round(|value| >> s)`` with
    ``s = p - 23 - min(E - 1, 0)``: the 24-bit significand of a normal number lands on the
    exponent field through its hidden bit, and a subnormal's field is the value in units of
    2^-149. A rounding carry moves into the exponent by itself, the encoding being monotonic.
    """
    width = len(value)
    mag = Signal(unsigned(width), name=f"{name}_mag")
    sign = Signal(name=f"{name}_sign")
    m.d.comb += [sign.eq(value < 0), mag.eq(Mux(value < 0, -value, value))]

    p = leading_one(m, f"{name}_lead", mag)

    wide = signed(max(len(exp), 8) + 4)
    e1 = Signal(wide, name=f"{name}_e1")  # E - 1
    m.d.comb += e1.eq(p + exp + 126)
    shift = Signal(wide, name=f"{name}_shift")
    m.d.comb += shift.eq(p - 23 - Mux(e1 < 0, e1, 0))

    # Right shifts beyond width + 1 all round to zero: cap them so the logic stays small.
    cap = width + 1
    rs = Signal(range(cap + 1), name=f"{name}_rs")
    m.d.comb += rs.eq(Mux(shift > cap, cap, Mux(shift > 0, shift, 0)))
    ls = Signal(range(24), name=f"{name}_ls")
    m.d.comb += ls.eq(Mux(shift < 0, -shift, 0))

    quot = Signal(unsigned(width), name=f"{name}_q")
    rem = Signal(unsigned(width), name=f"{name}_rem")
    half = Signal(unsigned(cap + 1), name=f"{name}_half")
    m.d.comb += [
        quot.eq(mag >> rs),
        rem.eq(mag - (quot << rs)),
        half.eq((1 << rs) >> 1),
    ]
    up = (rs != 0) & ((rem > half) | ((rem == half) & quot[0]))
    sig = Signal(unsigned(width + 24), name=f"{name}_sig")
    m.d.comb += sig.eq(Mux(shift < 0, mag << ls, quot + up))

    bits = Signal(unsigned(40), name=f"{name}_bits")
    m.d.comb += bits.eq((Mux(e1 > 0, e1, 0) << 23) + sig)
    out = Signal(32, name=f"{name}_fp32")
    with m.If(mag == 0):
        m.d.comb += out.eq(0)
    with m.Elif(bits >= FP32_INF):
        m.d.comb += out.eq(FP32_INF | (sign << 31))
    with m.Else():
        m.d.comb += out.eq(bits[:31] | (sign << 31))
    return out
