"""IEEE-754 binary32 arithmetic as combinational logic, shared by every block that computes in
FP32: each function adds its logic to a module and returns the result's bits.

- :func:`fp32_add`, :func:`fp32_mul`: match NumPy float32 bit for bit (round to nearest even,
  subnormals kept, no flush to zero), except that every NaN produced is the canonical quiet
  NaN :data:`~scoville.rtl.lib.formats.FP32_QNAN`.
- :func:`scaled_int_to_fp32`: an exact scaled integer ``value * 2**exp`` rounded once to
  binary32 (where an exact block sum of the MX and NVFP4 dot products meets FP32).
- :func:`fp32_exp2`: the base-2 exponential for softmax, by range reduction, a 65-entry table
  and a chord (:mod:`scoville.rtl.exp2` states the algorithm and its error; the streaming unit
  is that block).
- :func:`fp32_recip` (correctly rounded), :func:`fp32_sigmoid`, :func:`fp32_to_bf16`,
  :func:`fp32_key` (an order key for a running max), :func:`fp32_bits` (a Python float's bits,
  for constants): the pieces of attention's online softmax and the MoE router and SwiGLU.
"""

import math
import struct

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data

from .comb import leading_one, no_cut, normalize_steps, wire
from .formats import FP32, FP32_QNAN

__all__ = ["EXP2_FRAC_BITS", "EXP2_INDEX_BITS", "FP32_INF", "ONE", "exp2_table", "fp32_add",
           "fp32_bits", "fp32_exp2", "fp32_is_nan", "fp32_key", "fp32_mul", "fp32_recip",
           "fp32_sigmoid", "fp32_to_bf16", "fp32_tree_sum", "magnitude_to_fp32",
           "scaled_int_to_fp32"]


FP32_INF = 0x7F80_0000
#: 1.0 in binary32.
ONE = 0x3F80_0000


def fp32_bits(value: float) -> int:
    """The binary32 bits of ``value`` rounded to binary32 (to nearest, ties to even)."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


#: Width of the working sum: carry, hidden bit, 23 fraction bits, guard, round, sticky.
_SUM_BITS = 28


def fp32_add(m, a, b, *, name="fp32_add", cut=None):
    """Add combinational logic for the IEEE-754 binary32 sum ``a + b`` to ``m``.

    Rounds to nearest, ties to even. Subnormal operands and results are kept (no flush to
    zero, no denormals-are-zero); a finite sum too large for binary32 gives +-Inf. Signed
    zeros follow IEEE 754: ``x + (-x)`` is +0 and ``(-0) + (-0)`` is -0. ``Inf + (-Inf)`` and
    any NaN operand give a NaN, and every NaN result is the canonical quiet NaN
    :data:`FP32_QNAN` (0x7FC00000): NaN payloads and signs are not propagated. Apart from
    that NaN encoding, the result equals NumPy float32 addition bit for bit.

    The operands are ordered by magnitude, the smaller one is aligned with guard, round and
    sticky bits, the 28-bit sum or difference is normalized by a leading-zero shift capped
    so that the exponent stays >= 1 (which yields subnormal results exactly), and the packed
    exponent and fraction are rounded with one increment, whose carry moves into the exponent
    (subnormal to normal, or largest finite to Inf).

    Parameters
    ----------
    m : Module
        The module that receives the intermediate signals (combinational, but for the
        registers of ``cut``).
    a, b : Value
        32-bit binary32 encodings (anything castable to a 32-bit value).
    name : str
        Prefix of the intermediate signals' names; give each adder of a module its own.
    cut : callable, optional
        Where the sum may be pipelined (:class:`~scoville.rtl.lib.pipeline.LaneUnit`'s
        ``cut``): called as ``cut(i, *values)`` at cut points 0 (the operands ordered by
        magnitude, their exponents' gap and the result's class found), 1 (the smaller
        significand aligned), 2 (the sum or difference), 3 (half normalized: shifted by 16
        and 8 places or not) and 4 (normalized), the logic going on with the values it
        returns (registers, where the caller cuts). None: no cut, the sum combinational.

    Returns
    -------
    Signal
        The 32-bit binary32 encoding of the sum (driven in ``m.d.comb`` after the last cut).
    """
    cut = cut or no_cut
    a = data.View(FP32, a)
    b = data.View(FP32, b)
    swap = b.as_value()[:31] > a.as_value()[:31]
    big = wire(m, f"{name}_big", Mux(swap, b, a), FP32)
    small = wire(m, f"{name}_small", Mux(swap, a, b), FP32)
    subtract = wire(m, f"{name}_subtract", big.sign ^ small.sign)

    # Subnormals share exponent 1 with the smallest normals; their hidden bit is 0. Both
    # exponents' gaps are computed beside the comparison, which picks one.
    exp_a = Mux(a.exp == 0, 1, a.exp)
    exp_b = Mux(b.exp == 0, 1, b.exp)
    exp_big = wire(m, f"{name}_exp_big", Mux(swap, exp_b, exp_a), 8)
    gap = wire(m, f"{name}_gap", Mux(swap, exp_b - exp_a, exp_a - exp_b)[:8])
    # Past 27 places the whole small significand is sticky.
    dist = wire(m, f"{name}_dist", Mux(gap > 27, 27, gap)[:5])
    sig_big = wire(m, f"{name}_sig_big", Cat(Const(0, 3), big.man, big.exp != 0))
    sig_small = wire(m, f"{name}_sig_small", Cat(Const(0, 3), small.man, small.exp != 0))
    # The result's sign and class: an exact zero is +0 unless both operands are -0; NaN sorts
    # above Inf by magnitude, so ``big`` is a NaN whenever either operand is.
    sign = wire(m, f"{name}_sign", big.sign)
    both_neg = wire(m, f"{name}_both_neg", big.sign & small.sign)
    special = wire(m, f"{name}_special", big.exp == 0xFF)
    invalid = wire(m, f"{name}_invalid", (big.man != 0) | ((small.exp == 0xFF) & subtract))
    flags = cut(0, sign, both_neg, special, invalid, subtract, exp_big, dist, sig_big,
                sig_small)
    sign, both_neg, special, invalid, subtract, exp_big, dist, sig_big, sig_small = flags

    # The bits shifted out of the small significand, found beside the shift: a mask of the
    # low ``dist`` places.
    shifted = wire(m, f"{name}_shifted", sig_small >> dist)
    below = Cat(*(dist > k for k in range(27)))
    lost = wire(m, f"{name}_lost", (sig_small & below) != 0)
    aligned = wire(m, f"{name}_aligned", Cat(shifted[0] | lost, shifted[1:27]))
    flags = sign, both_neg, special, invalid
    *flags, subtract, exp_big, sig_big, aligned = cut(1, *flags, subtract, exp_big, sig_big,
                                                      aligned)
    total = wire(
        m, f"{name}_total", Mux(subtract, sig_big - aligned, sig_big + aligned)[:_SUM_BITS]
    )
    *flags, exp_big, total = cut(2, *flags, exp_big, total)

    # The sentinel stops the shift where the exponent would reach 0: the result is subnormal.
    # A leading-zero shift of 16, 8, 4, 2 and 1 places (normalize's), cut after the 8.
    sentinel = wire(m, f"{name}_sentinel", Const(1 << (_SUM_BITS - 1), _SUM_BITS) >> exp_big)
    zero = wire(m, f"{name}_zero", total == 0)
    norm, probe, high = normalize_steps(m, name, total, total | sentinel, (16, 8))
    *flags, exp_big, zero, norm, probe, h16, h8 = cut(3, *flags, exp_big, zero, norm, probe,
                                                      *high)
    norm, _, low = normalize_steps(m, name, norm, probe, (4, 2, 1))
    shift = Cat(*reversed([h16, h8, *low]))
    *flags, exp_big, zero, norm, shift = cut(4, *flags, exp_big, zero, norm, shift)
    exp = wire(m, f"{name}_exp", (exp_big + 1 - shift)[:9])
    is_normal = norm[_SUM_BITS - 1]
    exp_field = Mux(is_normal, exp[:8], 0)
    lsb, guard, sticky = norm[4], norm[3], norm[:3] != 0
    rounded = wire(m, f"{name}_rounded",
                   (Cat(norm[4:27], exp_field) + (guard & (sticky | lsb)))[:31])
    overflow = wire(m, f"{name}_overflow", is_normal & (exp >= 0xFF))
    sign, both_neg, special, invalid = flags
    magnitude = Mux(overflow, 0x7F80_0000, rounded)[:31]
    finite = Cat(magnitude, Mux(zero, both_neg, sign))
    infinite = Cat(Const(0x7F80_0000, 31), sign)
    return wire(m, f"{name}_sum", Mux(special, Mux(invalid, FP32_QNAN, infinite), finite))


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
    return _operand_end(m, name, *_operand_start(m, name, x, man_bits))


def _operand_start(m, name, x, man_bits, steps=None):
    """:func:`_operand` up to its normalizing shift's first ``steps`` steps (all by default):
    ``(sign, is_nan, is_inf, is_zero, significand so far, biased exponent, shift so far)``,
    for :func:`_operand_end` to finish (a pipeline may cut between them)."""
    x = wire(m, f"{name}_bits", x, unsigned(man_bits + 9))
    man, biased, sign = x[:man_bits], x[man_bits:man_bits + 8], x[man_bits + 8]
    top = wire(m, f"{name}_top", biased == 0xFF)
    is_nan = wire(m, f"{name}_nan", top & (man != 0))
    is_inf = wire(m, f"{name}_inf", top & (man == 0))
    is_zero = wire(m, f"{name}_zero", x[:man_bits + 8] == 0)
    # Subnormals share exponent 1 with the smallest normals; their hidden bit is 0.
    every = _shift_steps(man_bits + 1)
    sig, _, taken = normalize_steps(m, name, Cat(man, biased != 0), None,
                                    every[:len(every) if steps is None else steps])
    return sign, is_nan, is_inf, is_zero, sig, biased, Cat(*reversed(taken))


def _operand_end(m, name, sign, is_nan, is_inf, is_zero, sig, biased, shifted):
    """:func:`_operand` from :func:`_operand_start`'s values: the normalizing shift's other
    steps, then the exponent less the whole shift."""
    every = _shift_steps(len(sig))
    if len(shifted) < len(every):
        sig, _, taken = normalize_steps(m, f"{name}_end", sig, None, every[len(shifted):])
        shifted = Cat(*reversed(taken), shifted)
    lz = wire(m, f"{name}_shift", shifted)
    exp = wire(m, f"{name}_exp", Mux(biased == 0, 1, biased) - lz, signed(10))
    return sign, is_nan, is_inf, is_zero, sig, exp


def _shift_steps(width: int) -> list[int]:
    """The steps of :func:`~scoville.rtl.lib.comb.normalize`'s shifter at ``width`` bits."""
    return [1 << k for k in reversed(range((width - 1).bit_length()))]


def fp32_mul(m: Module, a, b, *, name: str = "mul", man_bits: int = 23, cut=None) -> Signal:
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
    cut : callable, optional
        Where the product may be pipelined (as :func:`fp32_add`'s ``cut``): cut points 4
        (the operands' classes found and two of their normalizing shifts' five steps taken;
        only where ``cut.active`` holds it), 0 (their significands normalized), 1 (the significands'
        product in two partial products, by each half of ``b``'s), 2 (the product summed,
        normalized and its right shift for a subnormal result found) and 3 (shifted, the
        rounding increment decided).

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
    cut = cut or no_cut
    # Each operand's normalizing shift; where the cut registers point 4, its first two steps
    # and the rest in turn (else the netlist of no cut there).
    if 4 in getattr(cut, "active", ()):
        both = cut(4, *_operand_start(m, f"{name}_a", a, man_bits, 2),
                   *_operand_start(m, f"{name}_b", b, man_bits, 2))
        sign_a, nan_a, inf_a, zero_a, sig_a, exp_a = _operand_end(m, f"{name}_a", *both[:7])
        sign_b, nan_b, inf_b, zero_b, sig_b, exp_b = _operand_end(m, f"{name}_b", *both[7:])
    else:
        sign_a, nan_a, inf_a, zero_a, sig_a, exp_a = _operand(m, f"{name}_a", a, man_bits)
        sign_b, nan_b, inf_b, zero_b, sig_b, exp_b = _operand(m, f"{name}_b", b, man_bits)
    sign = wire(m, f"{name}_sign", sign_a ^ sign_b)
    invalid = wire(m, f"{name}_invalid", nan_a | nan_b | (inf_a & zero_b) | (zero_a & inf_b))
    inf = wire(m, f"{name}_inf", inf_a | inf_b)
    zero = wire(m, f"{name}_zero", zero_a | zero_b)
    # The product is sig_a * sig_b times a power of two from exp_a + exp_b (binary32: its
    # leading one at bit 47 or 46 of 48).
    exp = wire(m, f"{name}_exp_sum", exp_a + exp_b - 127, signed(11))
    flags = sign, invalid, inf, zero
    *flags, exp, sig_a, sig_b = cut(0, *flags, exp, sig_a, sig_b)

    width = 2 * man_bits + 2
    half = (man_bits + 1) // 2
    lo = wire(m, f"{name}_prod_lo", sig_a * sig_b[:half])
    hi = wire(m, f"{name}_prod_hi", sig_a * sig_b[half:])
    *flags, exp, lo, hi = cut(1, *flags, exp, lo, hi)
    prod = wire(m, f"{name}_prod", lo + (hi << half), unsigned(width))
    high = prod[width - 1]
    # Narrow operands: the product's bits below the top ``width`` are zeros.
    norm = wire(m, f"{name}_normprod",
                Cat(Const(0, 48 - width), Mux(high, prod, prod << 1)[:width]))
    exp = wire(m, f"{name}_exp", exp + high, signed(11))

    # Sticky, guard, then the 24 kept bits (hidden bit at 25).
    kept = wire(m, f"{name}_kept", Cat(norm[:23] != 0, norm[23:48]))
    rshift = wire(
        m,
        f"{name}_rshift",
        Mux(exp > 0, 0, Mux(exp < 1 - _MAX_RSHIFT, _MAX_RSHIFT, 1 - exp)),
        range(_MAX_RSHIFT + 1),
    )
    *flags, exp, kept, rshift = cut(2, *flags, exp, kept, rshift)
    # Zeros below ``kept`` catch the bits that the right shift moves out.
    shifted = wire(m, f"{name}_shifted", Cat(Const(0, _MAX_RSHIFT), kept) >> rshift)
    low = shifted[_MAX_RSHIFT:]
    sticky = shifted[: _MAX_RSHIFT + 1] != 0
    guard, lsb, hidden = low[1], low[2], low[25]
    exp_field = Mux(hidden, exp[:8], 0)
    packed = wire(m, f"{name}_packed", Cat(low[2:25], exp_field))
    up = wire(m, f"{name}_up", guard & (sticky | lsb))
    big = wire(m, f"{name}_big", exp >= 0xFF)
    *flags, big, packed, up = cut(3, *flags, big, packed, up)
    rounded = wire(m, f"{name}_rounded", (packed + up)[:31])
    magnitude = wire(m, f"{name}_magnitude", Mux(big, FP32_INF, rounded)[:31])

    sign, invalid, inf, zero = flags
    out = Signal(32, name=f"{name}_fp32")
    with m.If(invalid):
        m.d.comb += out.eq(FP32_QNAN)
    with m.Elif(inf):
        m.d.comb += out.eq(Cat(Const(FP32_INF, 31), sign))
    with m.Elif(zero):
        m.d.comb += out.eq(Cat(Const(0, 31), sign))
    with m.Else():
        m.d.comb += out.eq(Cat(magnitude, sign))
    return out


def scaled_int_to_fp32(m: Module, value, exp, *, name: str = "cvt", cut=None) -> Signal:
    """Add the logic for binary32 ``round(value * 2**exp)`` to ``m``; return its bits.

    Parameters
    ----------
    value : signed Value
        The exact integer (its width ``W`` sets the size of the logic).
    exp : signed Value
        The power of two.
    cut : callable, optional
        Where the conversion may be pipelined (:func:`magnitude_to_fp32`'s cut points).
    """
    sign = wire(m, f"{name}_sign", value < 0)
    mag = wire(m, f"{name}_mag", Mux(value < 0, -value, value), unsigned(len(value)))
    return magnitude_to_fp32(m, sign, mag, exp, name=name, cut=cut)


def magnitude_to_fp32(m: Module, sign, mag, exp, *, name: str = "cvt", cut=None,
                      product: bool = False) -> Signal:
    """Add the logic for binary32 ``(-1)**sign * round(mag * 2**exp)`` to ``m`` (``mag`` an
    unsigned integer, ``exp`` signed); return its bits (+0 for a zero ``mag``).

    ``cut`` (as :func:`fp32_add`'s): called as ``cut(i, *values)`` at cut points 2 (the
    operands as given), 0 (the leading one found and the shifts worked out) and 1 (the
    magnitude shifted and the rounding decided), the logic going on with the values it
    returns. ``product``: ``mag`` is a product, whose high bits come last (its leading one
    found by a chain: :func:`~scoville.rtl.lib.comb.leading_one`).

    Notes
    -----
    With ``p`` the leading-one position of ``mag`` and ``E = p + exp + 127`` the biased
    exponent, the result is ``(max(E - 1, 0) << 23) + round(mag >> s)`` with
    ``s = p - 23 - min(E - 1, 0)``: the 24-bit significand of a normal number lands on the
    exponent field through its hidden bit, and a subnormal's field is the value in units of
    2^-149. A rounding carry moves into the exponent by itself, the encoding being monotonic.
    """
    cut = cut or no_cut
    sign, mag, exp = cut(2, sign, mag, exp)
    width = len(mag)
    p = leading_one(m, f"{name}_lead", mag, chain=product)

    wide = signed(max(len(exp), 8) + 4)
    # E - 1, and whether the result is subnormal (E - 1 < 0), from p and a term of ``exp``
    # taken beside the leading one's search.
    e1 = wire(m, f"{name}_e1", p + wire(m, f"{name}_x", exp + 126, wide), wide)
    sub = wire(m, f"{name}_sub", e1 < 0)
    # The shift s (right when positive, left when negative) either way, each clamped, then
    # chosen: normal, s = p - 23; subnormal, s = p - 23 - (E - 1) = -exp - 149, which does not
    # wait for p. Right shifts beyond width + 1 all round to zero: capped, so the logic stays
    # small. A left shift is below 23 either way (a subnormal's s > p - 23 >= -23).
    cap = width + 1
    tiny = wire(m, f"{name}_tiny", -exp - 149, wide)
    rs = Signal(range(cap + 1), name=f"{name}_rs")
    ls = Signal(range(24), name=f"{name}_ls")
    left = Signal(name=f"{name}_left")
    m.d.comb += [
        rs.eq(Mux(sub, wire(m, f"{name}_rs_sub",
                            Mux(tiny > cap, cap, Mux(tiny > 0, tiny, 0)), range(cap + 1)),
                  Mux(p > 23, p - 23, 0))),
        ls.eq(Mux(sub, wire(m, f"{name}_ls_sub", Mux(tiny < 0, -tiny, 0), range(24)),
                  Mux(p < 23, 23 - p, 0))),
        left.eq(Mux(sub, tiny < 0, p < 23)),
    ]
    field = wire(m, f"{name}_field", Mux(e1 > 0, e1, 0), unsigned(len(e1)))
    sign, mag, field, left, rs, ls = cut(0, sign, mag, field, left, rs, ls)

    quot = Signal(unsigned(width), name=f"{name}_q")
    rem = Signal(unsigned(width), name=f"{name}_rem")
    half = Signal(unsigned(cap + 1), name=f"{name}_half")
    m.d.comb += [
        quot.eq(mag >> rs),
        rem.eq(mag - (quot << rs)),
        half.eq((1 << rs) >> 1),
    ]
    up = wire(m, f"{name}_up", (rs != 0) & ((rem > half) | ((rem == half) & quot[0])))
    base = wire(m, f"{name}_base", Mux(left, mag << ls, quot), unsigned(width + 24))
    zero = wire(m, f"{name}_zero", mag == 0)
    sign, zero, field, base, up = cut(1, sign, zero, field, base, up)

    # (A left shift has nothing to round: ``up`` is 0.)
    bits = Signal(unsigned(40), name=f"{name}_bits")
    m.d.comb += bits.eq((field << 23) + base + up)
    out = Signal(32, name=f"{name}_fp32")
    with m.If(zero):
        m.d.comb += out.eq(0)
    with m.Elif(bits >= FP32_INF):
        m.d.comb += out.eq(FP32_INF | (sign << 31))
    with m.Else():
        m.d.comb += out.eq(bits[:31] | (sign << 31))
    return out


def fp32_is_nan(x):
    """Whether binary32 bits ``x`` encode a NaN (any payload, either sign): an expression,
    no signal of its own."""
    x = Value.cast(x)
    return (x[23:31] == 0xFF) & (x[:23] != 0)


def fp32_to_bf16(m, x, *, name: str):
    """``x`` (binary32 bits) rounded to BF16 bits: to nearest, ties to even, subnormals kept,
    overflow to +-Inf, every NaN the quiet NaN 0x7FC0 (``quantize_bf16``)."""
    x = Value.cast(x)
    nan = fp32_is_nan(x)
    rounded = wire(m, f"{name}_rnd", x + 0x7FFF + x[16], unsigned(33))
    return wire(m, name, Mux(nan, 0x7FC0, rounded[16:32]), unsigned(16))


def fp32_tree_sum(m, values, *, name: str):
    """The FP32 sum of ``values`` (a power of two of them) as a binary tree: neighbours, then
    neighbouring sums, each addition rounded once (:func:`fp32_add`)."""
    level = list(values)
    while len(level) > 1:
        level = [fp32_add(m, level[k], level[k + 1], name=f"{name}_{len(level)}_{k}")
                 for k in range(0, len(level), 2)]
    return level[0]


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


#: Fraction bits of the fixed-point ``x`` (step 1).
EXP2_FRAC_BITS = 16
#: Bits of ``f`` that index the table (step 2); the other ``EXP2_FRAC_BITS - EXP2_INDEX_BITS``
#: interpolate.
EXP2_INDEX_BITS = 6


def exp2_table() -> list[int]:
    """``T[j] = round(2**(j / 64) * 2**23)`` for j = 0..64 (``T[64] = 2**24``)."""
    size = 1 << EXP2_INDEX_BITS
    return [round(2 ** (j / size) * 2**23) for j in range(size + 1)]


def fp32_exp2(m, x, *, name: str = "exp2", cut=None):
    """Add combinational logic for ``exp2(x)`` (binary32 bits ``x``) to ``m``; return the 32-bit
    binary32 result (the module's docstring says how, and how exact). ``cut`` (as
    :func:`fp32_add`'s): cut points 0 (the shift that reduces ``x`` found), 1 (``x`` reduced to
    ``n``, the table's index and the chord's fraction), 2 (the table read) and 3 (the chord's
    product)."""
    cut = cut or no_cut
    x = data.View(FP32, x)
    frac, low = EXP2_FRAC_BITS, EXP2_FRAC_BITS - EXP2_INDEX_BITS
    # |x| = sig * 2**(exp - 150); |x| * 2**16 = sig >> (134 - exp) for exp <= 134 (|x| < 256).
    sig = wire(m, f"{name}_sig", Cat(x.man, x.exp != 0))
    rshift = wire(m, f"{name}_rshift", Mux(x.exp > 134 - 25, 134 - x.exp, 25)[:5])
    # The result's class: a NaN, or |x| >= 256 (Inf or +0 by its sign).
    nan = wire(m, f"{name}_nan", (x.exp == 0xFF) & (x.man != 0))
    big = wire(m, f"{name}_big", x.exp > 134)
    sign = x.sign
    nan, big, sign, sig, rshift = cut(0, nan, big, sign, sig, rshift)
    mag = wire(m, f"{name}_mag", sig >> rshift, unsigned(24))
    lost = wire(m, f"{name}_lost", (mag << rshift)[:24] != sig)
    # floor(x * 2**16): the magnitude truncated, or minus it rounded up for negative x.
    t = wire(m, f"{name}_t", Mux(sign, -(mag + lost), mag), signed(26))
    n = wire(m, f"{name}_n", t[frac:], signed(26 - frac))
    index = wire(m, f"{name}_index", t[low:frac])
    r = wire(m, f"{name}_r", t[:low])
    nan, big, sign, n, index, r = cut(1, nan, big, sign, n, index, r)

    table = exp2_table()
    base = wire(m, f"{name}_base", Array(Const(v, 24) for v in table[:-1])[index])
    step = wire(m, f"{name}_step",
                Array(Const(b - a, 19) for a, b in zip(table, table[1:], strict=False))[index])
    nan, big, sign, n, base, step, r = cut(2, nan, big, sign, n, base, step, r)
    chord = wire(m, f"{name}_chord", (step * r) >> low)
    nan, big, sign, n, base, chord = cut(3, nan, big, sign, n, base, chord)
    mant = wire(m, f"{name}_mant", (base + chord)[:23])
    finite = wire(m, f"{name}_finite", Cat(mant, (n + 127)[:8]))

    overflow = ~sign & (big | (n >= 128))
    underflow = sign & (big | (n < -126))
    out = Signal(32, name=f"{name}_fp32")
    with m.If(nan):
        m.d.comb += out.eq(FP32_QNAN)
    with m.Elif(overflow):
        m.d.comb += out.eq(FP32_INF)
    with m.Elif(underflow):
        m.d.comb += out.eq(0)
    with m.Else():
        m.d.comb += out.eq(finite)
    return out


_NEG_LOG2E = Const(fp32_bits(-math.log2(math.e)), 32)
_BIG = 253  # the biased exponent of 2^126: no normal reciprocal from there up


def fp32_sigmoid(m, z, *, name: str):
    """``1 / fp32(1 + exp2(fp32(z * -log2 e)))``, the reciprocal rounded once; 0 once the
    denominator reaches 2^126 (below z = -87.3), NaN for a NaN ``z``
    (:func:`scoville.sim.golden.moe.sigmoid_unit`)."""
    t = fp32_mul(m, z, _NEG_LOG2E, name=f"{name}_t")
    d = fp32_add(m, Const(ONE, 32), fp32_exp2(m, t, name=f"{name}_exp"), name=f"{name}_d")
    return wire(m, name, Mux(fp32_is_nan(d), FP32_QNAN,
                             Mux(d[23:31] >= _BIG, 0, fp32_recip(m, d, name=f"{name}_r"))), 32)
