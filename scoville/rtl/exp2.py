"""The base-2 exponential of binary32 values, for softmax: the streaming unit :class:`Exp2`,
lanes of :func:`~scoville.rtl.lib.fp32.fp32_exp2` (the shared FP32 module), whose algorithm this
docstring states.

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

from .lib.fp32 import EXP2_FRAC_BITS, EXP2_INDEX_BITS, exp2_table, fp32_exp2
from .lib.params import check_int, param
from .lib.pipeline import LaneUnit

__all__ = ["EXP2_FRAC_BITS", "EXP2_INDEX_BITS", "Exp2", "Exp2Config", "exp2_table",
           "fp32_exp2"]


@dataclass(frozen=True)
class Exp2Config:
    """Parameters of :class:`Exp2`.

    Attributes
    ----------
    lanes : int
        Results computed per cycle.
    latency : int
        Register stages between input and output: up to four inside the logic
        (:attr:`Exp2.CUTS`), one after it.
    """

    lanes: int = param(1, "1..16", "results per cycle")
    latency: int = param(4, "1..5", "register stages")

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, 16)
        check_int("latency", self.latency, 1, 5)


class Exp2(LaneUnit):
    """``lanes`` base-2 exponentials (:func:`fp32_exp2`) behind one stream (see
    :class:`~scoville.rtl.lib.pipeline.LaneUnit`): binary32 encodings ``x`` in, ``exp2(x)`` out.
    Of the ``latency`` register stages, up to four cut the logic (after finding the reducing
    shift, reducing, reading the table and the chord's product: :attr:`CUTS`), the last
    follows it."""

    OPERANDS = ("x",)
    #: The cut points (:func:`fp32_exp2`'s ``cut``) registered at each count of inner stages:
    #: the fewest levels in the longest stage, mapped for delay, of every choice
    #: (docs/levels.md).
    CUTS = {1: (1,), 2: (1, 3), 3: (0, 1, 3), 4: (0, 1, 2, 3)}

    def __init__(self, config: Exp2Config):
        super().__init__(config, 32, 32)

    def lane(self, m, k, x, cut=None):
        return fp32_exp2(m, x, name=f"exp2_{k}", cut=cut)
