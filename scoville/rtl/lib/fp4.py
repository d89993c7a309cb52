"""FP4 (E2M1) arithmetic shared by the FP4 multiplier and the block-scaled dot products.

E2M1 (OCP MX v1.0): bits ``S EE M``, bias 1, no Inf or NaN; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
Every product of two E2M1 values is a multiple of 1/4 in [-36, 36], so it is held exactly as a
signed fixed-point integer counting quarters (9 bits).
"""

from amaranth.hdl import Cat, Mux, signed
from amaranth.lib import data

from .formats import E2M1

__all__ = ["PRODUCT_SHAPE", "e2m1_product"]


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
