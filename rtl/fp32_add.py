"""IEEE-754 binary32 arithmetic: the combinational adder and the streaming adder unit.

:func:`fp32_add` is the reusable part: combinational logic for ``a + b`` that matches
NumPy float32 addition bit for bit (round to nearest even, subnormals kept, no flush to zero),
except that every NaN it produces is the canonical quiet NaN :data:`FP32_QNAN`.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Mux
from amaranth.lib import data

from .comb import normalize, wire
from .formats import FP32, FP32_QNAN
from .params import check_int, param
from .pipeline import LaneUnit

__all__ = ["Fp32Add", "Fp32AddConfig", "fp32_add"]


#: Width of the working sum: carry, hidden bit, 23 fraction bits, guard, round, sticky.
_SUM_BITS = 28


def fp32_add(m, a, b, *, name="fp32_add"):
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
        The module that receives the intermediate signals (combinational only).
    a, b : Value
        32-bit binary32 encodings (anything castable to a 32-bit value).
    name : str
        Prefix of the intermediate signals' names; give each adder of a module its own.

    Returns
    -------
    Signal
        The 32-bit binary32 encoding of the sum, driven in ``m.d.comb``.
    """
    a = data.View(FP32, a)
    b = data.View(FP32, b)
    swap = b.as_value()[:31] > a.as_value()[:31]
    big = wire(m, f"{name}_big", Mux(swap, b, a), FP32)
    small = wire(m, f"{name}_small", Mux(swap, a, b), FP32)
    subtract = wire(m, f"{name}_subtract", big.sign ^ small.sign)

    # Subnormals share exponent 1 with the smallest normals; their hidden bit is 0.
    exp_big = wire(m, f"{name}_exp_big", Mux(big.exp == 0, 1, big.exp))
    exp_small = wire(m, f"{name}_exp_small", Mux(small.exp == 0, 1, small.exp))
    sig_big = wire(m, f"{name}_sig_big", Cat(Const(0, 3), big.man, big.exp != 0))
    sig_small = wire(m, f"{name}_sig_small", Cat(Const(0, 3), small.man, small.exp != 0))

    # Past 27 places the whole small significand is sticky.
    dist = wire(m, f"{name}_gap", (exp_big - exp_small)[:8])
    dist = wire(m, f"{name}_dist", Mux(dist > 27, 27, dist)[:5])
    shifted = wire(m, f"{name}_shifted", sig_small >> dist)
    lost = (shifted << dist)[:27] != sig_small
    aligned = wire(m, f"{name}_aligned", Cat(shifted[0] | lost, shifted[1:27]))
    total = wire(
        m, f"{name}_total", Mux(subtract, sig_big - aligned, sig_big + aligned)[:_SUM_BITS]
    )

    # The sentinel stops the shift where the exponent would reach 0: the result is subnormal.
    sentinel = wire(m, f"{name}_sentinel", Const(1 << (_SUM_BITS - 1), _SUM_BITS) >> exp_big)
    norm, shift = normalize(m, name, total, total | sentinel)
    exp = wire(m, f"{name}_exp", (exp_big + 1 - shift)[:9])
    is_normal = norm[_SUM_BITS - 1]
    exp_field = Mux(is_normal, exp[:8], 0)
    lsb, guard, sticky = norm[4], norm[3], norm[:3] != 0
    rounded = (Cat(norm[4:27], exp_field) + (guard & (sticky | lsb)))[:31]
    overflow = is_normal & (exp >= 0xFF)
    magnitude = Mux(overflow, 0x7F80_0000, rounded)[:31]
    # An exact zero is +0 unless both operands are -0.
    sign = Mux(total == 0, big.sign & small.sign, big.sign)
    finite = Cat(magnitude, sign)

    # NaN sorts above Inf by magnitude, so ``big`` is a NaN whenever either operand is.
    invalid = (big.man != 0) | ((small.exp == 0xFF) & subtract)
    infinite = Cat(Const(0x7F80_0000, 31), big.sign)
    special = Mux(invalid, FP32_QNAN, infinite)
    return wire(m, f"{name}_sum", Mux(big.exp == 0xFF, special, finite))


@dataclass(frozen=True)
class Fp32AddConfig:
    """Parameters of :class:`Fp32Add`.

    Attributes
    ----------
    lanes : int
        Additions computed per cycle.
    latency : int
        Register stages between input and output.
    """

    lanes: int = param(1, "1..16", "additions per cycle")
    latency: int = param(1, "1..4", "register stages")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, 16)
        check_int("latency", self.latency, 1, 4)


class Fp32Add(LaneUnit):
    """``lanes`` IEEE-754 binary32 adders (:func:`fp32_add`) behind one stream (see
    :class:`~scoville.rtl.pipeline.LaneUnit`): binary32 encodings in, their sums out. The
    adders are combinational; the ``latency`` register stages follow them."""

    def __init__(self, config: Fp32AddConfig):
        super().__init__(config, 32, 32)

    def lane(self, m, k, a, b):
        return fp32_add(m, a, b, name=f"add{k}")
