"""The exact FP4 x FP4 multiplier block: lanes of :func:`~scoville.rtl.lib.fp4.e2m1_product`,
each E2M1 product exact in quarters (9 bits signed).
"""

from dataclasses import dataclass

from .lib.fp4 import PRODUCT_SHAPE, e2m1_product
from .lib.params import check_int, param
from .lib.pipeline import LaneUnit

__all__ = ["PRODUCT_SHAPE", "Fp4Mul", "Fp4MulConfig", "e2m1_product"]


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
    :class:`~scoville.rtl.lib.pipeline.LaneUnit`): E2M1 codes in, signed 9-bit products counting
    quarters out."""

    def __init__(self, config: Fp4MulConfig):
        super().__init__(config, 4, PRODUCT_SHAPE)

    def lane(self, m, k, a, b, cut=None):
        return e2m1_product(a, b)
