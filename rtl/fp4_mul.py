"""FP4 (E2M1) arithmetic: decoding and the exact FP4 x FP4 multiplier.

E2M1 (OCP MX v1.0): bits ``S EE M``, bias 1, no Inf or NaN; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
Every product of two E2M1 values is a multiple of 1/4 in [-36, 36], so it is held exactly as a
signed fixed-point integer counting quarters (9 bits).
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Mux, signed
from amaranth.lib import data

from .formats import E2M1
from .params import check_int, param
from .pipeline import LaneUnit

__all__ = ["PRODUCT_SHAPE", "Fp4Mul", "Fp4MulConfig", "e2m1_product"]


#: An exact E2M1 product in quarters: -144..144.
PRODUCT_SHAPE = signed(9)


def e2m1_product(a, b):
    """The exact product of two E2M1 codes (4-bit values) in quarters, as a 9-bit signed value.

    Each magnitude is ``sig << shift`` halves with ``sig = {exp != 0, man}`` (0..3) and
    ``shift = max(exp - 1, 0)``, so the product is a 2x2-bit multiply and a shift by at most 4.
    """
    a = data.View(E2M1, a)
    b = data.View(E2M1, b)
    sig_a = Cat(a.man, a.exp != 0)
    sig_b = Cat(b.man, b.exp != 0)
    sh_a = Mux(a.exp == 0, 0, a.exp - 1)[:2]
    sh_b = Mux(b.exp == 0, 0, b.exp - 1)[:2]
    mag = ((sig_a * sig_b) << (sh_a + sh_b)[:3])[:8]
    return Mux(a.sign ^ b.sign, -mag, mag)


@dataclass(frozen=True)
class Fp4MulConfig:
    """Parameters of :class:`Fp4Mul`.

    Attributes
    ----------
    lanes : int
        Products computed per cycle.
    latency : int
        Register stages between input and output.
    """

    lanes: int = param(1, "1..64", "products per cycle")
    latency: int = param(1, "1..4", "register stages")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, 64)
        check_int("latency", self.latency, 1, 4)


class Fp4Mul(LaneUnit):
    """``lanes`` exact FP4 x FP4 multipliers behind one stream (see
    :class:`~scoville.rtl.pipeline.LaneUnit`): E2M1 codes in, signed 9-bit products counting
    quarters out."""

    def __init__(self, config: Fp4MulConfig):
        super().__init__(config, 4, PRODUCT_SHAPE)

    def lane(self, m, k, a, b):
        return e2m1_product(a, b)
