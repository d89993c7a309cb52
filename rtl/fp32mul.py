"""IEEE-754 binary32 multiplication as reusable combinational logic.

:func:`fp32_mul` adds the logic for ``a * b`` to a module. It matches NumPy float32
multiplication bit for bit (round to nearest even, subnormal operands and results kept, no flush
to zero), except that every NaN it produces is the canonical quiet NaN :data:`FP32_QNAN`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned

from .comb import normalize, wire
from .formats import FP32_QNAN
from .fpconv import FP32_INF

__all__ = ["fp32_mul"]


#: Right shifts of the product for subnormal results stop here: from 25 places on, even the
#: hidden bit lies below the guard position and the result rounds to zero.
_MAX_RSHIFT = 25


def _operand(m, name, x, man_bits):
    """Split ``x`` (sign, 8-bit exponent, ``man_bits`` fraction bits: binary32 or bfloat16)
    into its class, a normalized significand and an exponent.

    Returns ``(sign, is_nan, is_inf, is_zero, sig, exp)``: ``sig`` is ``man_bits + 1`` bits
    with its top bit set (for nonzero finite ``x``) and ``|x| = sig * 2**(exp - 127 -
    man_bits)``, ``exp`` signed; a subnormal's exponent goes below 1 by its leading-zero count.
    """
    x = wire(m, f"{name}_bits", x, unsigned(man_bits + 9))
    man, biased, sign = x[:man_bits], x[man_bits:man_bits + 8], x[man_bits + 8]
    top = wire(m, f"{name}_top", biased == 0xFF)
    is_nan = wire(m, f"{name}_nan", top & (man != 0))
    is_inf = wire(m, f"{name}_inf", top & (man == 0))
    is_zero = wire(m, f"{name}_zero", x[:man_bits + 8] == 0)
    # Subnormals share exponent 1 with the smallest normals; their hidden bit is 0.
    sig, lz = normalize(m, name, Cat(man, biased != 0))
    exp = wire(m, f"{name}_exp", Mux(biased == 0, 1, biased) - lz, signed(10))
    return sign, is_nan, is_inf, is_zero, sig, exp


def fp32_mul(m: Module, a, b, *, name: str = "mul", man_bits: int = 23) -> Signal:
    """Add the logic for the IEEE-754 binary32 product ``a * b`` to ``m``; return its bits.

    Rounds to nearest, ties to even. Subnormal operands and results are kept (no flush to
    zero, no denormals-are-zero), including a subnormal that rounds up to the smallest
    normal; a finite product too large for binary32 gives +-Inf and one too small gives a
    signed zero. The sign of every non-NaN result, zeros and infinities included, is the XOR
    of the operands' signs. ``0 * Inf`` and any NaN operand give a NaN, and every NaN result is
    the canonical quiet NaN :data:`FP32_QNAN` (0x7FC00000): NaN payloads and signs are not
    propagated. Apart from that NaN encoding, the result equals NumPy float32 multiplication
    bit for bit.

    Parameters
    ----------
    m : Module
        The module that receives the intermediate signals (combinational only).
    a, b : Value
        32-bit binary32 encodings (anything castable to a 32-bit value), or, with
        ``man_bits=7``, 16-bit bfloat16 encodings.
    name : str
        Prefix of the intermediate signals' names; give each multiplier of a module its own.
    man_bits : int
        Fraction bits of the operands: 23 (binary32) or 7 (bfloat16, whose product is the
        binary32 product of the operands widened exactly, from an 8 x 8-bit multiplier).

    Returns
    -------
    Signal
        The 32-bit binary32 encoding of the product.

    Notes
    -----
    Each operand's significand is normalized by its leading-zero count, so the 48-bit product
    of the two 24-bit significands has its leading one at bit 47 or 46; one conditional
    shift puts it at bit 47, which gives the biased exponent ``E`` of the result. The low 23
    bits below the guard bit are folded into one sticky bit. For ``E < 1`` (a subnormal or
    zero result) the kept bits are shifted right by ``1 - E`` places (at most 25) with the
    lost bits folded into the sticky bit, so that they count units of 2^-149. The packed
    exponent and fraction are rounded with one increment whose carry moves into the
    exponent: largest subnormal to smallest normal, or largest finite to Inf.
    """
    sign_a, nan_a, inf_a, zero_a, sig_a, exp_a = _operand(m, f"{name}_a", a, man_bits)
    sign_b, nan_b, inf_b, zero_b, sig_b, exp_b = _operand(m, f"{name}_b", b, man_bits)
    sign = wire(m, f"{name}_sign", sign_a ^ sign_b)

    width = 2 * man_bits + 2
    prod = wire(m, f"{name}_prod", sig_a * sig_b, unsigned(width))
    high = prod[width - 1]
    # Narrow operands: the product's bits below the top ``width`` are zeros.
    norm = wire(m, f"{name}_normprod",
                Cat(Const(0, 48 - width), Mux(high, prod, prod << 1)[:width]))
    # The product is sig_a * sig_b * 2**(exp_a + exp_b - 300), with its leading one at 47.
    exp = wire(m, f"{name}_exp", exp_a + exp_b - 127 + high, signed(11))

    # Sticky, guard, then the 24 kept bits (hidden bit at 25).
    kept = wire(m, f"{name}_kept", Cat(norm[:23] != 0, norm[23:48]))
    rshift = wire(
        m,
        f"{name}_rshift",
        Mux(exp > 0, 0, Mux(exp < 1 - _MAX_RSHIFT, _MAX_RSHIFT, 1 - exp)),
        range(_MAX_RSHIFT + 1),
    )
    # Zeros below ``kept`` catch the bits that the right shift moves out.
    shifted = wire(m, f"{name}_shifted", Cat(Const(0, _MAX_RSHIFT), kept) >> rshift)
    low = shifted[_MAX_RSHIFT:]
    sticky = shifted[: _MAX_RSHIFT + 1] != 0
    guard, lsb, hidden = low[1], low[2], low[25]
    exp_field = Mux(hidden, exp[:8], 0)
    rounded = wire(
        m, f"{name}_rounded", (Cat(low[2:25], exp_field) + (guard & (sticky | lsb)))[:31]
    )
    magnitude = wire(m, f"{name}_magnitude", Mux(exp >= 0xFF, FP32_INF, rounded)[:31])

    invalid = nan_a | nan_b | (inf_a & zero_b) | (zero_a & inf_b)
    out = Signal(32, name=f"{name}_fp32")
    with m.If(invalid):
        m.d.comb += out.eq(FP32_QNAN)
    with m.Elif(inf_a | inf_b):
        m.d.comb += out.eq(Cat(Const(FP32_INF, 31), sign))
    with m.Elif(zero_a | zero_b):
        m.d.comb += out.eq(Cat(Const(0, 31), sign))
    with m.Else():
        m.d.comb += out.eq(Cat(magnitude, sign))
    return out
