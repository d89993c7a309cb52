"""INT4 and INT8 multiply-accumulate with INT32 accumulation.

Accumulation wraps modulo 2^32 (two's complement), as NumPy int32 arithmetic and integer tensor
units do; a saturating accumulator would hide overflow in a sum that later cancels.
"""

from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.formats import ELEMENT_BITS
from .lib.params import check_choice, check_int, param
from .lib.pipeline import stall_chain

__all__ = ["FORMATS", "IntMac", "IntMacConfig"]

#: The integer formats (their widths: :data:`~scoville.rtl.lib.formats.ELEMENT_BITS`).
FORMATS = ("int4", "int8")


@dataclass(frozen=True)
class IntMacConfig:
    """Parameters of :class:`IntMac`.

    Attributes
    ----------
    fmt : str
        ``int4`` (-8..7) or ``int8`` (-128..127) elements.
    lanes : int
        Products per cycle.
    """

    fmt: str = param("int8", "int4, int8", "element format")
    lanes: int = param(8, "1..64", "products per cycle")

    def __post_init__(self):
        check_choice("fmt", self.fmt, FORMATS)
        check_int("lanes", self.lanes, 1, 64)

    @property
    def bits(self) -> int:
        return ELEMENT_BITS[self.fmt]


class IntMac(wiring.Component):
    """Dot products of signed integer vectors, ``lanes`` products per beat, into INT32.

    A dot product is a run of beats ending with ``last``. Its first beat also brings ``acc``,
    the value the sum starts from (a bias or a partial sum); the result is
    ``acc + sum(a_i * b_i)`` modulo 2^32, emitted once, after the ``last`` beat.

    Attributes
    ----------
    i : In(stream.Signature(...))
        Payload fields ``a`` and ``b`` (arrays of ``lanes`` signed elements, lane 0 lowest),
        ``acc`` (signed 32, read on a dot product's first beat) and ``last``.
    o : Out(stream.Signature(signed(32)))
        One result per dot product.
    latency : int
        Cycles from the ``last`` beat's handshake to its result being valid.
    """

    latency = 2

    def __init__(self, config: IntMacConfig):
        self._config = config
        elem = signed(config.bits)
        self.in_layout = data.StructLayout({
            "a": data.ArrayLayout(elem, config.lanes),
            "b": data.ArrayLayout(elem, config.lanes),
            "acc": signed(32),
            "last": unsigned(1),
        })
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(signed(32))),
        })

    @property
    def config(self) -> IntMacConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        lanes = self._config.lanes
        s2_last = Signal()
        en, valid = stall_chain(m, self.i, self.o, self.latency, emits=s2_last)

        # A dot product starts after reset and after every ``last`` beat.
        first = Signal(init=1)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += first.eq(self.i.payload.last)

        prod_bits = 2 * self._config.bits
        dot = sum(self.i.payload.a[k] * self.i.payload.b[k] for k in range(lanes))
        s1_dot = Signal(signed(prod_bits + lanes.bit_length()))
        s1_acc = Signal(signed(32))
        s1_first = Signal()
        s1_last = Signal()
        with m.If(en):
            m.d.sync += [
                s1_dot.eq(dot),
                s1_acc.eq(self.i.payload.acc),
                s1_first.eq(first),
                s1_last.eq(self.i.payload.last),
            ]

        acc = Signal(signed(32))
        base = Signal(signed(32))
        m.d.comb += base.eq(Mux(s1_first, s1_acc, acc))
        with m.If(en & valid[0]):
            m.d.sync += [acc.eq(base + s1_dot), s2_last.eq(s1_last)]
        m.d.comb += self.o.payload.eq(acc)
        return m

