"""The base-2 exponential of binary32 values, for softmax: :func:`fp32_exp2` and the streaming
unit :class:`Exp2`.

``exp2(x)`` in four steps (``docs/numerics.md``, "exp2"):

1. Range reduction: ``t = floor(x * 2**16)`` exactly, as a signed fixed-point integer, so
   ``x ~ n + f`` with ``n = t >> 16`` (an integer) and ``f = (t mod 2**16) / 2**16`` in [0, 1).
2. ``2**f`` by a table and a chord: ``f = (i + r / 2**10) / 64`` with ``i`` its top 6 bits and
   ``r`` its low 10; with ``T[j] = round(2**(j / 64) * 2**23)`` (``j`` = 0..64, 24 bits), the
   significand is ``T[i] + floor((T[i + 1] - T[i]) * r / 2**10)``, in [2**23, 2**24).
3. The result is ``2**n`` times that significand: exponent field ``n + 127``, fraction its low
   23 bits.
4. Outside the normal range: ``n >= 128`` gives +Inf, ``n < -126`` gives +0 (results below the
   smallest normal flush to zero, as GPU ``ex2.approx.ftz`` does); +Inf gives +Inf, -Inf +0,
   a NaN the canonical NaN.

Relative error against ``2**x``: below 2**-16 * ln 2 (the truncation of ``x``) plus
(ln 2 / 64)**2 / 8 (the chord) plus the table's and the chord's roundings, about 2.6e-5 in
all; ``scripts/exp2_error.py`` measures it. :func:`scoville.sim.golden.exp2.exp2` is the golden
model.
"""

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Mux, Signal, signed, unsigned
from amaranth.lib import data

from .comb import wire
from .formats import FP32, FP32_QNAN
from .params import check_int, param
from .pipeline import LaneUnit

__all__ = ["EXP2_FRAC_BITS", "EXP2_INDEX_BITS", "Exp2", "Exp2Config", "exp2_table", "fp32_exp2"]

#: Fraction bits of the fixed-point ``x`` (step 1).
EXP2_FRAC_BITS = 16
#: Bits of ``f`` that index the table (step 2); the other ``EXP2_FRAC_BITS - EXP2_INDEX_BITS``
#: interpolate.
EXP2_INDEX_BITS = 6

_FP32_INF = 0x7F80_0000


def exp2_table() -> list[int]:
    """``T[j] = round(2**(j / 64) * 2**23)`` for j = 0..64 (``T[64] = 2**24``)."""
    size = 1 << EXP2_INDEX_BITS
    return [round(2 ** (j / size) * 2**23) for j in range(size + 1)]


def fp32_exp2(m, x, *, name: str = "exp2"):
    """Add combinational logic for ``exp2(x)`` (binary32 bits ``x``) to ``m``; return the 32-bit
    binary32 result (the module's docstring says how, and how exact)."""
    x = data.View(FP32, x)
    frac, low = EXP2_FRAC_BITS, EXP2_FRAC_BITS - EXP2_INDEX_BITS
    # |x| = sig * 2**(exp - 150); |x| * 2**16 = sig >> (134 - exp) for exp <= 134 (|x| < 256).
    sig = wire(m, f"{name}_sig", Cat(x.man, x.exp != 0))
    rshift = wire(m, f"{name}_rshift", Mux(x.exp > 134 - 25, 134 - x.exp, 25)[:5])
    mag = wire(m, f"{name}_mag", sig >> rshift, unsigned(24))
    lost = wire(m, f"{name}_lost", (mag << rshift)[:24] != sig)
    # floor(x * 2**16): the magnitude truncated, or minus it rounded up for negative x.
    t = wire(m, f"{name}_t", Mux(x.sign, -(mag + lost), mag), signed(26))
    n = wire(m, f"{name}_n", t[frac:], signed(26 - frac))
    index = wire(m, f"{name}_index", t[low:frac])
    r = wire(m, f"{name}_r", t[:low])

    table = exp2_table()
    base = wire(m, f"{name}_base", Array(Const(v, 24) for v in table[:-1])[index])
    step = wire(m, f"{name}_step",
                Array(Const(b - a, 19) for a, b in zip(table, table[1:], strict=False))[index])
    mant = wire(m, f"{name}_mant", (base + ((step * r) >> low))[:23])
    finite = wire(m, f"{name}_finite", Cat(mant, (n + 127)[:8]))

    big = x.exp > 134  # |x| >= 256
    overflow = ~x.sign & (big | (n >= 128))
    underflow = x.sign & (big | (n < -126))
    out = Signal(32, name=f"{name}_fp32")
    with m.If((x.exp == 0xFF) & (x.man != 0)):
        m.d.comb += out.eq(FP32_QNAN)
    with m.Elif(overflow):
        m.d.comb += out.eq(_FP32_INF)
    with m.Elif(underflow):
        m.d.comb += out.eq(0)
    with m.Else():
        m.d.comb += out.eq(finite)
    return out


@dataclass(frozen=True)
class Exp2Config:
    """Parameters of :class:`Exp2`.

    Attributes
    ----------
    lanes : int
        Results computed per cycle.
    latency : int
        Register stages between input and output.
    """

    lanes: int = param(1, "1..16", "results per cycle")
    latency: int = param(2, "1..4", "register stages")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, 16)
        check_int("latency", self.latency, 1, 4)


class Exp2(LaneUnit):
    """``lanes`` base-2 exponentials (:func:`fp32_exp2`) behind one stream (see
    :class:`~scoville.rtl.pipeline.LaneUnit`): binary32 encodings ``x`` in, ``exp2(x)`` out.
    The logic is combinational; the ``latency`` register stages follow it."""

    OPERANDS = ("x",)

    def __init__(self, config: Exp2Config):
        super().__init__(config, 32, 32)

    def lane(self, m, k, x):
        return fp32_exp2(m, x, name=f"exp2_{k}")
