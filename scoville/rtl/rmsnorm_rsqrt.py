"""The RMSNorm's reciprocal square root: binary32 ``1 / sqrt(v)``, correctly rounded, by a
digit recurrence (one unit, one value at a time).

The function (:func:`scoville.sim.golden.rmsnorm.rsqrt`): the float32 nearest ``1 / sqrt(v)``
(no result is a tie); ``+0 -> +inf``, ``-0 -> -inf``, ``+inf -> +0``, the canonical quiet NaN
for a NaN or a negative ``v``. Every finite positive binary32 has a normal result.

The method: ``v = m * 2**e`` with ``m`` an integer in ``[2**23, 2**25)`` and ``e`` even
(subnormals normalized first); ``1 / sqrt(v) = 2**(-e/2) * q * 2**-37`` with ``q = 2**37 /
sqrt(m)`` in ``[2**24, 2**26)``. The recurrence finds ``r = floor(q)`` from its top bit down,
keeping ``R = 2**74 - r**2 m`` (never negative) and ``P = r m``: bit ``j`` is set when ``T =
P 2**(j+1) + m 4**j`` is at most ``R`` (then ``R -= T``, ``P += m 2**j``), only shifts, adds
and compares. ``r`` and the sticky ``R != 0`` round to 24 bits, to nearest even.

Timing: ``i.ready`` while the unit is empty or its result is taken in that cycle; a value
taken in cycle ``t`` gives its result on ``o`` from cycle ``t + latency``, ``latency =
ceil(26 / bits) + 1`` (``bits`` of ``r`` a cycle), held until taken.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.comb import normalize, wire
from .lib.formats import FP32, FP32_QNAN

__all__ = ["ROOT_BITS", "Rsqrt", "rsqrt_latency"]

#: Bits of ``r = floor(2**37 / sqrt(m))``.
ROOT_BITS = 26
_S = 37
_WIDE = 80  # R, T and P << (j + 1) stay below 2**78


def rsqrt_latency(bits: int) -> int:
    """Cycles from a value's handshake to its result being valid."""
    return -(-ROOT_BITS // bits) + 1


class State(enum.Enum, shape=2):
    IDLE = 0
    RUN = 1
    DONE = 2


class Rsqrt(wiring.Component):
    """``1 / sqrt(v)`` of binary32 values (the module says how and when).

    Attributes
    ----------
    i : In(stream.Signature(32))
        ``v``.
    o : Out(stream.Signature(32))
        ``1 / sqrt(v)``.
    latency : int
        Cycles from a handshake on ``i`` to the result valid on ``o``.
    """

    def __init__(self, bits: int):
        if not 1 <= bits <= ROOT_BITS:
            raise ValueError(f"parameter 'bits' = {bits} is not allowed; allowed: "
                             f"1..{ROOT_BITS}")
        self._bits = bits
        super().__init__({"i": In(stream.Signature(32)), "o": Out(stream.Signature(32))})

    @property
    def latency(self) -> int:
        return rsqrt_latency(self._bits)

    def elaborate(self, platform):
        m = Module()
        state = Signal(State)
        take_out = self.o.valid & self.o.ready
        m.d.comb += [self.o.valid.eq(state == State.DONE),
                     self.i.ready.eq((state == State.IDLE) | take_out)]
        mant, half_e, special, special_bits = self._operand(m, self.i.payload)
        # The recurrence's state: its digits so far, R, P, the next bit's index.
        r = Signal(ROOT_BITS)
        rem = Signal(_WIDE)
        prod = Signal(_WIDE)
        j = Signal(range(ROOT_BITS + self._bits))
        mm = Signal(25)
        e2 = Signal(signed(9))  # e / 2
        is_special = Signal()
        out_special = Signal(32)
        with m.If(take_out):
            m.d.sync += state.eq(State.IDLE)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [state.eq(State.RUN), r.eq(0), rem.eq(1 << (2 * _S)), prod.eq(0),
                         j.eq(ROOT_BITS - 1), mm.eq(mant), e2.eq(half_e),
                         is_special.eq(special), out_special.eq(special_bits)]
        with m.If(state == State.RUN):
            nr, nrem, nprod = r, rem, prod
            for k in range(self._bits):
                jk = wire(m, f"j{k}", j - k, signed(7))
                live = jk >= 0
                t = wire(m, f"t{k}", ((nprod << (jk + 1)[:5]) + (mm << (2 * jk)[:6]))[:_WIDE])
                take = wire(m, f"take{k}", live & (t <= nrem))
                bit = wire(m, f"bit{k}", Const(1, ROOT_BITS) << jk[:5], ROOT_BITS)
                nr = wire(m, f"r{k}", Mux(take, nr | bit, nr), ROOT_BITS)
                nrem = wire(m, f"rem{k}", Mux(take, nrem - t, nrem)[:_WIDE])
                nprod = wire(m, f"prod{k}", Mux(take, nprod + (mm << jk[:5]), nprod)[:_WIDE])
            m.d.sync += [r.eq(nr), rem.eq(nrem), prod.eq(nprod), j.eq(j - self._bits)]
            with m.If(j < self._bits):
                m.d.sync += state.eq(State.DONE)
        m.d.comb += self.o.payload.eq(Mux(is_special, out_special,
                                          self._round(m, r, rem != 0, e2)))
        return m

    @staticmethod
    def _operand(m, v):
        """``(m, e / 2, special, result)``: the integer ``m`` in ``[2**23, 2**25)`` and half
        the even ``e`` with ``v = m * 2**e``, and for a zero, Inf, NaN or negative ``v`` its
        result."""
        x = data.View(FP32, v)
        sig = Cat(x.man, x.exp != 0)  # 24 bits
        norm, lz = normalize(m, "rs", sig)
        e = wire(m, "rs_e", Mux(x.exp == 0, 1, x.exp) - 150 - lz, signed(10))
        odd = e[0]
        mant = wire(m, "rs_m", Mux(odd, norm << 1, norm)[:25])
        half = wire(m, "rs_half", (Mux(odd, e - 1, e) >> 1), signed(9))
        zero = (x.exp == 0) & (x.man == 0)
        nan = (x.exp == 0xFF) & (x.man != 0)
        special = wire(m, "rs_special", zero | nan | (x.exp == 0xFF) | x.sign)
        result = Mux(nan | (x.sign & ~zero), FP32_QNAN,
                     Mux(zero, Cat(Const(0x7F80_0000, 31), x.sign), Const(0, 32)))
        return mant, half, special, wire(m, "rs_special_bits", result, 32)

    @staticmethod
    def _round(m, r, sticky, e2):
        """The binary32 of ``r * 2**(-37 - e2)`` rounded to 24 bits, nearest even."""
        top = r[ROOT_BITS - 1]  # r in [2**25, 2**26): two bits below the 24 kept
        keep = wire(m, "rd_keep", Mux(top, r[2:], r[1:25]), 24)
        guard = Mux(top, r[1], r[0])
        rest = Mux(top, r[0] | sticky, sticky)
        up = guard & (rest | keep[0])
        total = wire(m, "rd_total", keep + up, 25)
        carry = total[24]
        # keep in [2**23, 2**24]: the biased exponent 113 + shift - e/2 (+1 on a carry out).
        exp = wire(m, "rd_exp", 113 + Mux(top, 2, 1) - e2 + carry, signed(10))
        return wire(m, "rd_bits", Cat(Mux(carry, 0, total[:23]), exp[:8], Const(0, 1)), 32)
