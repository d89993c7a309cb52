"""MX quantizer: one block of 32 FP32 (or BF16) values in, one MXFP4 or MXFP8 block out.

For activations produced on-chip. Shared exponent ``e = floor(log2(amax)) - emax`` (``emax`` the
element type's largest exponent: 2 for E2M1, 8 for E4M3) clamped to the E8M0 range
``[-127, 127]``; each element is ``x / 2**e`` rounded to the nearest element value, ties to
even, saturating (E2M1 at +-6, E4M3 at +-448), keeping its sign (a negative that rounds to zero
gives -0). A block with any NaN or +-Inf gets scale 0xFF (E8M0 NaN) and all element codes 0.
This is the same function as :func:`scoville.sim.golden.mx.quantize_mxfp4` and
:func:`scoville.sim.golden.mx.quantize_mxfp8`.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.comb import leading_one, max_tree, no_cut, wire
from .lib.formats import E8M0_NAN, ELEMENT_BITS, FP32, MX_BLOCK
from .lib.params import check_choice, check_int, param
from .lib.pipeline import CutPoints, stall_pipeline

__all__ = ["OUT_FORMATS", "MxQuant", "MxQuantConfig", "block_codes", "block_max_exp",
           "out_layout", "round_e2m1", "round_e4m3"]

#: The output formats, and their elements' bits and largest exponents.
OUT_FORMATS = {"mxfp4": (4, 2), "mxfp8": (8, 8)}


def out_layout(config) -> data.StructLayout:
    """The output payload: 32 element codes (E2M1 or E4M3, element 0 lowest) and the E8M0
    scale."""
    bits = OUT_FORMATS[config.out_fmt][0]
    return data.StructLayout({"codes": data.ArrayLayout(bits, MX_BLOCK), "scale": unsigned(8)})


#: The input formats (their widths: :data:`~scoville.rtl.lib.formats.ELEMENT_BITS`); BF16 is the top
#: half of an FP32.
IN_FORMATS = ("fp32", "bf16")


@dataclass(frozen=True)
class MxQuantConfig:
    """Parameters of :class:`MxQuant`.

    Attributes
    ----------
    in_fmt : str
        ``fp32`` or ``bf16`` input elements.
    out_fmt : str
        ``mxfp4`` (E2M1 elements) or ``mxfp8`` (E4M3 elements).
    latency : int
        Register stages from an input handshake to the block being valid: ``latency - 1``
        cut the logic (:attr:`MxQuant.CUTS`: at 2, after the block's largest magnitude), the
        last follows the rounding. By default 4, the fewest within the levels budget of
        docs/levels.md.
    """

    in_fmt: str = param("fp32", "fp32, bf16", "input element format")
    out_fmt: str = param("mxfp4", "mxfp4, mxfp8", "output format")
    latency: int = param(4, "2..5", "register stages")

    def __post_init__(self):
        check_choice("in_fmt", self.in_fmt, IN_FORMATS)
        check_choice("out_fmt", self.out_fmt, tuple(OUT_FORMATS))
        check_int("latency", self.latency, 2, 5)


def block_max_exp(m: Module, xs, *, name: str):
    """The largest exponent field of the binary32 values ``xs``, all the shared exponent
    needs of their largest magnitude (:func:`block_codes`), and whether any is NaN or Inf."""
    _, max_exp, special = _max_exp(m, xs, name=name, cut=no_cut)
    return max_exp, special


#: The values of a block whose exponents the first stages of the tree reduce to one.
_EXP_GROUP = 8


def _max_exp(m: Module, xs, *, name: str, cut):
    """:func:`block_max_exp`, cut (``cut(i, ...)``) at point 0, the largest exponent field of
    each eighth of the block found, and 1, the block's; returns ``xs`` as they come through
    the cuts, the largest exponent field and the NaN-or-Inf flag."""
    xs = [Value.cast(x) for x in xs]
    exps = [wire(m, f"{name}_exp{k}", x[23:31]) for k, x in enumerate(xs)]
    special = wire(m, f"{name}_special", Cat(*(e == 0xFF for e in exps)).any())
    groups = [max_tree(m, f"{name}_max{g}", exps[g:g + _EXP_GROUP])
              for g in range(0, len(exps), _EXP_GROUP)]
    *got, special = cut(0, *xs, *groups, special)
    xs, groups = got[:len(xs)], got[len(xs):]
    max_exp = wire(m, f"{name}_max_exp", max_tree(m, f"{name}_maxg", groups), 8)
    *xs, max_exp, special = cut(1, *xs, max_exp, special)
    return xs, max_exp, special


def block_codes(m: Module, xs, max_exp, special, out_fmt: str, *, name: str, cut=None):
    """The element codes (E2M1 or E4M3, each its sign above its magnitude) and the E8M0 scale
    of the block of binary32 values ``xs`` whose largest exponent field is ``max_exp``
    (:func:`block_max_exp`): the module's function (a block with a NaN or an Inf,
    ``special``, gets codes 0 and scale 0xFF). ``cut`` (as
    :func:`~scoville.rtl.lib.fp32.fp32_add`'s): cut points 2 (the shared exponent and each
    significand's trailing zeros found) and 3 (each element shifted to the fixed point it
    rounds in).

    The shared exponent ``floor(log2(amax)) - emax`` clamped at -127 needs only the largest
    exponent field: a normal amax's ``floor(log2)`` is its field less 127, and a block whose
    largest field is 0 (subnormals and zeros) has ``floor(log2(amax)) <= -127``, clamped."""
    cut = cut or no_cut
    bits, emax = OUT_FORMATS[out_fmt]
    e = Signal(signed(10), name=f"{name}_e")
    unclamped = wire(m, f"{name}_e_raw", max_exp - 127 - emax, signed(10))
    m.d.comb += e.eq(Mux((max_exp == 0) | (unclamped < -127), -127, unclamped))
    # Each significand's trailing zeros, found beside the shared exponent (the sticky bit is
    # then a comparison with the right shift, not a mask of it).
    tzs = [_trailing_zeros(m, _significand(raw), f"{name}{k}") for k, raw in enumerate(xs)]
    n = len(xs)
    got = cut(2, *xs, *tzs, e, special)
    xs, tzs, (e, special) = got[:n], got[n:2 * n], got[2 * n:]
    fixed = []
    for k, raw in enumerate(xs):
        x = data.View(FP32, raw)
        shifts = _fixed_shifts(m, x.exp, e, **_FIXED[bits], name=f"{name}{k}")
        t, sticky = _fixed_apply(m, _significand(raw), *shifts, tzs[k],
                                 width=_FIXED[bits]["width"], name=f"{name}{k}")
        fixed += [t, sticky, x.sign]
    *fixed, e, special = cut(3, *fixed, e, special)
    rounding = _round_e2m1 if bits == 4 else _round_e4m3
    codes = []
    for k in range(len(xs)):
        t, sticky, sign = fixed[3 * k:3 * k + 3]
        mag = rounding(m, t, sticky, f"{name}{k}")
        codes.append(wire(m, f"{name}{k}_code", Mux(special, 0, Cat(mag, sign)), bits))
    scale = wire(m, f"{name}_scale", Mux(special, E8M0_NAN, (e + 127)[:8]), 8)
    return codes, scale


def _significand(raw):
    """The 24-bit significand (hidden bit included) of the binary32 value ``raw``."""
    x = data.View(FP32, raw)
    return Cat(x.man, x.exp != 0)


def _trailing_zeros(m: Module, sig, name: str):
    """The trailing zeros of ``sig`` (31 when it is 0): the position of the highest set bit
    of ``sig`` reversed, from the top."""
    width = len(sig)
    sig = wire(m, f"{name}_sig", sig)
    top = leading_one(m, f"{name}_low", Cat(*(sig[width - 1 - k] for k in range(width))))
    return wire(m, f"{name}_tz", Mux(sig == 0, 31, width - 1 - top), range(32))


def _fixed_point(m: Module, sig, exp_field, e, *, units: int, width: int, name: str):
    """``|x| / 2**e`` in units of ``2**-units`` as a ``width``-bit integer ``t`` (the caller
    knows it fits), and ``sticky``, whether any bit below it is set; ``|x| = sig *
    2**(max(exp_field, 1) - 150)``, ``sig`` the 24-bit significand (hidden bit included):
    :func:`_fixed_shifts`, then :func:`_fixed_apply`."""
    shifts = _fixed_shifts(m, exp_field, e, units=units, width=width, name=name)
    return _fixed_apply(m, sig, *shifts, _trailing_zeros(m, sig, name), width=width,
                        name=name)


def _fixed_shifts(m: Module, exp_field, e, *, units: int, width: int, name: str):
    """The shifts that take ``sig * 2**(max(exp_field, 1) - 150)`` to units of
    ``2**(e - units)`` (:func:`_fixed_point`): ``rs`` right (at most 25), ``ls`` left (at most
    ``width``), and whether it is right (``neg``)."""
    shift = Signal(signed(11), name=f"{name}_sh")
    m.d.comb += shift.eq(Mux(exp_field == 0, 1, exp_field) - 150 + units - e)
    rs = Signal(range(26), name=f"{name}_rs")
    m.d.comb += rs.eq(Mux(shift >= 0, 0, Mux(shift < -25, 25, -shift)))
    ls = Signal(range(width + 1), name=f"{name}_ls")
    m.d.comb += ls.eq(Mux(shift > width, width, Mux(shift > 0, shift, 0)))
    return rs, ls, wire(m, f"{name}_neg", shift < 0)


def _fixed_apply(m: Module, sig, rs, ls, neg, tz, *, width: int, name: str):
    """``t`` and ``sticky`` of :func:`_fixed_point` from the shifts (:func:`_fixed_shifts`)
    and ``tz``, the trailing zeros of ``sig`` (31 when it is 0): a bit below ``t`` is set
    when the right shift is past them."""
    t = Signal(width, name=f"{name}_t")
    sticky = Signal(name=f"{name}_st")
    m.d.comb += [t.eq(Mux(neg, sig >> rs, sig << ls)), sticky.eq(neg & (rs > tz))]
    return t, sticky


#: The fixed point each element format rounds in (:func:`_fixed_point`'s ``units`` and
#: ``width``), by its bits.
_FIXED = {4: {"units": 2, "width": 5}, 8: {"units": 10, "width": 19}}


def round_e2m1(m: Module, sig, exp_field, e, name):
    """E2M1 magnitude code (0..7) of ``sig * 2**(max(exp_field, 1) - 150) / 2**e``, rounded to
    nearest even and saturated. ``sig`` is the 24-bit significand (hidden bit included)."""
    t, sticky = _fixed_point(m, sig, exp_field, e, **_FIXED[4], name=name)
    return _round_e2m1(m, t, sticky, name)


def _round_e2m1(m: Module, t, sticky, name):
    """:func:`round_e2m1` of the value ``t`` quarters (below 32) and ``sticky`` below."""
    code = Signal(3, name=f"{name}_code")

    def rne(q, guard, rest):
        return q + (guard & (rest | q[0]))

    with m.If(t < 8):  # |v| < 2: steps of 0.5, codes 0..4
        m.d.comb += code.eq(rne(t[1:], t[0], sticky))
    with m.Elif(t < 16):  # 2 <= |v| < 4: steps of 1, codes 4..6 (4.0 is code 6)
        q = t[2:]  # 2 or 3
        m.d.comb += code.eq(rne(q, t[1], sticky | t[0]) + 2)
    with m.Else():  # 4 <= |v| < 8: steps of 2; 6 and above saturate to code 7
        q = t[3:]  # 2 or 3
        up = rne(q, t[2], sticky | (t[:2] != 0))
        m.d.comb += code.eq(Mux(up >= 3, 7, 6))
    return code


def round_e4m3(m: Module, sig, exp_field, e, name, *, saturate: bool = True):
    """E4M3 magnitude code (0..0x7E) of ``sig * 2**(max(exp_field, 1) - 150) / 2**e``, rounded
    to nearest even and saturated at 448 (``saturate=False``: the 8-bit code before saturation,
    0x7F and above past 464). ``sig`` is the 24-bit significand.

    ``t`` is the value in units of 2^-10 (half the smallest E4M3 subnormal; it is below 2^19
    since the value is below 2^9) and ``sticky`` the bits below. With ``p`` the leading one of
    ``t``, ``d = max(p - 3, 1)`` bits are rounded off: ``q = t >> d`` is the significand
    (1.mmm for a normal, 0.mmm at ``d = 1``) and the code is ``(d << 3) + round(q) - 8``; a
    rounding carry to 16 moves into the exponent field by itself."""
    t, sticky = _fixed_point(m, sig, exp_field, e, **_FIXED[8], name=name)
    return _round_e4m3(m, t, sticky, name, saturate=saturate)


def _round_e4m3(m: Module, t, sticky, name, *, saturate: bool = True):
    """:func:`round_e4m3` of the value ``t`` (units of 2^-10, below 2^19) and ``sticky``
    below."""
    lead = leading_one(m, f"{name}_lead", t)
    d = Signal(range(17), name=f"{name}_d")
    m.d.comb += d.eq(Mux(lead > 4, lead - 3, 1))
    dm1 = Signal(range(16), name=f"{name}_dm1")
    m.d.comb += dm1.eq(d - 1)
    q = Signal(5, name=f"{name}_q")
    rest = Signal(name=f"{name}_rest")
    m.d.comb += [q.eq(t >> d), rest.eq(((t & ((1 << dm1) - 1)) != 0) | sticky)]
    guard = (t >> dm1)[0]
    up = guard & (rest | q[0])
    code = Signal(8, name=f"{name}_code")
    m.d.comb += code.eq((d << 3) + q + up - 8)
    if not saturate:
        return code
    out = Signal(7, name=f"{name}_mag")
    m.d.comb += out.eq(Mux(code >= 0x7F, 0x7E, code))
    return out


class MxQuant(wiring.Component):
    """Quantizes one block of 32 values per beat into MXFP4 or MXFP8.

    Attributes
    ----------
    i : In(stream.Signature(ArrayLayout(in_bits, 32)))
        Element ``k`` in bits ``k * in_bits`` upward.
    o : Out(stream.Signature(out_layout))
        Payload fields ``codes`` (32 E2M1 or E4M3 codes, element 0 lowest) and ``scale``
        (E8M0).
    latency : int
        Cycles from an input handshake to its block being valid (``config.latency``).
    """

    #: The cut points registered at each latency less one (0: the largest exponent field of
    #: each eighth of the block found; 1: the block's; 2: the shared exponent; 3: each element
    #: shifted to its fixed point): the fewest levels in the longest stage, mapped for delay,
    #: of every choice (docs/levels.md).
    CUTS = {1: (1,), 2: (0, 2), 3: (0, 2, 3), 4: (0, 1, 2, 3)}

    def __init__(self, config: MxQuantConfig):
        self._config = config
        self.in_bits = ELEMENT_BITS[config.in_fmt]
        self.out_layout = out_layout(config)
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(self.in_bits, MX_BLOCK))),
            "o": Out(stream.Signature(self.out_layout)),
        })

    @property
    def config(self) -> MxQuantConfig:
        return self._config

    @property
    def latency(self) -> int:
        return self._config.latency

    def elaborate(self, platform):
        m = Module()
        en = stall_pipeline(m, self.i, self.o, self.latency)
        pad = 32 - self.in_bits
        # The block as FP32; its largest magnitude (and whether anything is NaN or Inf); the
        # shared exponent and every element rounded to E2M1 or E4M3: cut where ``CUTS`` says,
        # the last stage after it.
        x_full = [Cat(Const(0, pad), self.i.payload[k]) for k in range(MX_BLOCK)]
        cut = CutPoints(m, en, self.CUTS[self.latency - 1], "q")
        xs, max_exp, special = _max_exp(m, x_full, name="in", cut=cut)
        codes, scale = block_codes(m, xs, max_exp, special, self._config.out_fmt, name="el",
                                   cut=cut)
        cut.check("MxQuant")
        with m.If(en):
            m.d.sync += [self.o.payload.codes.eq(Cat(*codes)), self.o.payload.scale.eq(scale)]
        return m
