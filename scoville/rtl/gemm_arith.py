"""What a processing element of the GEMM array computes, for each pair of operand formats.

The two dataflows (:mod:`~scoville.rtl.gemm_os_dataflow`, :mod:`~scoville.rtl.gemm_ws_dataflow`)
move operands and partial sums the same way in every format; what a PE does with them is one of
three kinds, chosen by :class:`Arith` from ``fmt`` and ``b_fmt``:

``int`` (``int8``, ``int4``)
    The exact integer product, added into a wrapping INT32 sum.
``block`` (``mxfp4``, ``mxfp8``, ``mxfp8`` x ``mxfp4``, ``nvfp4``)
    The exact product of two floating-point elements as an integer counting ``2**-units``,
    added into the exact sum of a block along K (32 elements, or 16 for NVFP4); at the block's
    end the sum times the two block scales is rounded once to binary32 (:meth:`Arith.block_value`)
    and added into a binary32 accumulator. E4M3 elements have a NaN code: a block holding one
    carries a NaN flag beside its sum.
``float`` (``bf16``)
    Each product rounded once to binary32, added into a binary32 sum (one rounding per
    addition; no fused multiply-add): on ``os`` into one of the config's ``sums`` partial
    sums, step k's into sum ``k mod sums``, each in K order from +0, then the sums
    ``0, ..., sums - 1`` added as a tree (neighbours, then neighbouring sums, an odd one out
    passed on) as the row leaves the array; with one sum (``ws``, or ``add_latency`` 0), all
    in K order.

``docs/numerics.md`` states each to the bit; :func:`scoville.sim.golden.gemm.gemm` is the golden
model.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data

from .lib.blockdot import mx_block_value, mx_scale_terms, nvfp4_block_value, nvfp4_scale_terms
from .lib.comb import wire
from .lib.formats import ELEMENT_BITS
from .lib.fp32 import fp32_add, fp32_mul

__all__ = ["FORMATS", "MUL_CUTS", "PAIRS", "Arith", "FloatElement", "pair_error"]

#: The element formats of the GEMM array.
FORMATS = ("int8", "int4", "mxfp4", "nvfp4", "mxfp8", "bf16")

#: The cut points of a ``bf16`` PE's product (:func:`~scoville.rtl.lib.fp32.fp32_mul`'s) at
#: each count of cuts: its ``pe_latency`` less the register after it.
MUL_CUTS = {1: (2,), 2: (1, 2), 3: (0, 1, 2)}

#: The allowed (fmt, b_fmt) pairs: each format with itself, and MXFP8 activations with MXFP4
#: weights (the OCP MX spec's mixed-element dot product).
PAIRS = tuple((f, f) for f in FORMATS) + (("mxfp8", "mxfp4"),)


def pair_error(fmt: str, b_fmt: str) -> str | None:
    """The one-line error for a pair of formats outside :data:`PAIRS`, or None."""
    if (fmt, b_fmt) in PAIRS:
        return None
    return (f"parameter 'b_fmt' = {b_fmt!r} is not allowed with parameter 'fmt' = {fmt!r}; "
            f"allowed pairs: b_fmt=same (each format with itself), or fmt=mxfp8 with "
            f"b_fmt=mxfp4")


@dataclass(frozen=True)
class FloatElement:
    """A small floating-point element format without Inf (E2M1, E4M3).

    Its value is ``sig << shift`` units of ``2**-unit``, with ``sig = {exp != 0, man}`` and
    ``shift = max(exp, 1) - 1``; ``unit = bias + man - 1`` makes the smallest subnormal one
    unit.
    """

    man: int
    exp: int
    bias: int
    nan: bool  # S.1..1.1..1 is NaN (E4M3); E2M1 has no NaN

    @property
    def bits(self) -> int:
        return 1 + self.exp + self.man

    @property
    def unit(self) -> int:
        return self.bias + self.man - 1

    @property
    def max_shift(self) -> int:
        return (1 << self.exp) - 2

    def decode(self, m: Module, code, name: str):
        """(sign, sig, shift, is_nan) of the element with bits ``code``."""
        man, exp = code[:self.man], code[self.man:self.man + self.exp]
        sign = code[self.man + self.exp]
        sig = Cat(man, exp != 0)
        shift = wire(m, f"{name}_sh", Mux(exp == 0, 0, exp - 1), range(self.max_shift + 1))
        nan = (exp == (1 << self.exp) - 1) & (man == (1 << self.man) - 1) if self.nan else 0
        return sign, sig, shift, nan


E2M1 = FloatElement(man=1, exp=2, bias=1, nan=False)
E4M3 = FloatElement(man=3, exp=4, bias=7, nan=True)
#: The element format of each block format.
_ELEMENTS = {"mxfp4": E2M1, "nvfp4": E2M1, "mxfp8": E4M3}


class Arith:
    """The arithmetic of a PE for ``config.fmt`` x ``config.b_format`` (see the module).

    Attributes
    ----------
    kind : str
        ``int``, ``block`` or ``float``.
    block : int
        Elements per block along K (``block`` kind; 1 otherwise).
    psum_shape
        What a PE's running sum (and a ``ws`` column's partial sum) holds: ``signed(32)``,
        the exact block sum (with a NaN flag where elements have NaN), or binary32 bits.
    a_shape, b_shape
        One element of A, of B.
    scale_bits : int
        Bits of a block scale (E8M0 or E4M3; 0 without scales).
    specials : bool
        Elements can be NaN or infinite (a zero weight must then not multiply them: the
        ``ws`` array masks the products of its padding rows).
    tensor_scale : bool
        Results are multiplied by a per-command binary32 tensor scale (NVFP4).
    """

    def __init__(self, config):
        fmt, b_fmt = config.fmt, config.b_format
        self.fmt, self.b_fmt = fmt, b_fmt
        self.tensor_scale = fmt == "nvfp4"
        self.scale_bits = 0
        self.block = 1
        self.specials = False
        if fmt in ("int8", "int4"):
            self.kind = "int"
            self.a_shape = self.b_shape = signed(ELEMENT_BITS[fmt])
            self.psum_shape = signed(32)
        elif fmt == "bf16":
            self.kind = "float"
            self.a_shape = self.b_shape = unsigned(ELEMENT_BITS[fmt])
            self.psum_shape = unsigned(32)
            self.specials = True
        else:
            self.kind = "block"
            self.ea, self.eb = _ELEMENTS[fmt], _ELEMENTS[b_fmt]
            self.a_shape, self.b_shape = unsigned(self.ea.bits), unsigned(self.eb.bits)
            self.block = 16 if fmt == "nvfp4" else 32
            self.scale_bits = 8
            self.specials = self.ea.nan or self.eb.nan
            self.units = self.ea.unit + self.eb.unit
            mag = (self.ea.man + self.eb.man + 2 + self.ea.max_shift + self.eb.max_shift)
            self.mag_bits = mag
            width = mag + 1 + (self.block - 1).bit_length()
            if self.specials:
                self.psum_shape = data.StructLayout({"sum": signed(width), "nan": 1})
            else:
                self.psum_shape = signed(width)

    @property
    def e8m0_scales(self) -> bool:
        """Block scales are E8M0 (an MX format; NVFP4's are E4M3)."""
        return self.kind == "block" and not self.tensor_scale

    def product(self, m: Module, a, b, name: str, cut=None):
        """One PE's product of elements ``a`` and ``b``, as a value of :attr:`psum_shape`
        (``float``: cut at ``cut``'s points, :func:`~scoville.rtl.lib.fp32.fp32_mul`'s)."""
        if self.kind == "int":
            return wire(m, name, a * b, self.psum_shape)
        if self.kind == "float":
            return fp32_mul(m, a, b, name=name, man_bits=7, cut=cut)
        sa, siga, sha, nana = self.ea.decode(m, a, f"{name}_a")
        sb, sigb, shb, nanb = self.eb.decode(m, b, f"{name}_b")
        mag = wire(m, f"{name}_mag", (siga * sigb) << (sha + shb), unsigned(self.mag_bits))
        value = Mux(sa ^ sb, -mag, mag)
        if not self.specials:
            return wire(m, name, value, self.psum_shape)
        out = Signal(self.psum_shape, name=name)
        m.d.comb += [out.sum.eq(value), out.nan.eq(nana | nanb)]
        return out

    def cleared(self, m: Module, x, clear, name: str):
        """``x`` (a value of :attr:`psum_shape`), or zero (+0) when ``clear``."""
        return wire(m, name, Mux(clear, 0, x), self.psum_shape)

    def add(self, m: Module, x, y, name: str):
        """``x + y`` of two values of :attr:`psum_shape` (binary32: one rounding)."""
        if self.kind == "float":
            return fp32_add(m, x, y, name=name)
        if not (self.kind == "block" and self.specials):
            return wire(m, name, x + y, self.psum_shape)
        out = Signal(self.psum_shape, name=name)
        m.d.comb += [out.sum.eq(x.sum + y.sum), out.nan.eq(x.nan | y.nan)]
        return out

    def block_value(self, m: Module, total, sa, sb, name: str, cut=None):
        """The binary32 bits of a finished block: the exact sum ``total`` (a value of
        :attr:`psum_shape`) times the block scales ``sa`` and ``sb``, rounded once (exact for
        NVFP4); the canonical NaN when a scale or an element is NaN. ``cut``: the
        conversion's cut points (:func:`~scoville.rtl.lib.blockdot.mx_block_value`'s)."""
        nan = total.nan if self.specials else 0
        value = total.sum if self.specials else total
        if self.e8m0_scales:
            terms = mx_scale_terms(sa, sb)
            return mx_block_value(m, value, terms["exp"], terms["nan"] | nan,
                                  units=self.units, name=name, cut=cut)
        terms = nvfp4_scale_terms(sa, sb)
        return nvfp4_block_value(m, value, **{**terms, "nan": terms["nan"] | nan}, name=name,
                                 cut=cut)
