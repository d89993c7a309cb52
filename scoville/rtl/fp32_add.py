"""The streaming IEEE-754 binary32 adder block: lanes of :func:`~scoville.rtl.lib.fp32.fp32_add`,
which matches NumPy float32 addition bit for bit (round to nearest even, subnormals kept, no
flush to zero), except that every NaN it produces is the canonical quiet NaN ``FP32_QNAN``.
"""

from dataclasses import dataclass

from .lib.fp32 import fp32_add
from .lib.params import check_int, param
from .lib.pipeline import LaneUnit

__all__ = ["Fp32Add", "Fp32AddConfig", "fp32_add"]


@dataclass(frozen=True)
class Fp32AddConfig:
    """Parameters of :class:`Fp32Add`.

    Attributes
    ----------
    lanes : int
        Additions computed per cycle.
    latency : int
        Register stages between input and output: up to five inside the adder's logic
        (:attr:`Fp32Add.CUTS`), one after it. The default, 3, is the fewest whose longest
        cycle mapped for delay is within issue #36's 40 levels (``docs/levels.md``).
    """

    lanes: int = param(1, "1..16", "additions per cycle")
    latency: int = param(3, "1..6", "register stages")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, 16)
        check_int("latency", self.latency, 1, 6)


class Fp32Add(LaneUnit):
    """``lanes`` IEEE-754 binary32 adders (:func:`fp32_add`) behind one stream (see
    :class:`~scoville.rtl.lib.pipeline.LaneUnit`): binary32 encodings in, their sums out. Of
    the ``latency`` register stages, up to five cut the adder's logic (after ordering the
    operands, aligning, adding, and half and whole normalizing: :attr:`CUTS`), the last
    follows it."""

    #: The adder's cut points (:func:`fp32_add`'s ``cut``) registered at each count of inner
    #: stages: the fewest levels in the longest stage, then the fewest flip-flops, of every
    #: choice, mapped for delay (docs/levels.md).
    CUTS = {1: (2,), 2: (1, 3), 3: (0, 2, 3), 4: (0, 1, 2, 3), 5: (0, 1, 2, 3, 4)}

    def __init__(self, config: Fp32AddConfig):
        super().__init__(config, 32, 32)

    def lane(self, m, k, a, b, cut=None):
        return fp32_add(m, a, b, name=f"add{k}", cut=cut)
