"""INT4 and INT8 multiply-accumulate with INT32 accumulation.

Accumulation wraps modulo 2^32 (two's complement), as NumPy int32 arithmetic and integer tensor
units do; a saturating accumulator would hide overflow in a sum that later cancels.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.formats import ELEMENT_BITS
from .lib.params import check_choice, check_int, param
from .lib.pipeline import delay, stall_chain

__all__ = ["FORMATS", "IntMac", "IntMacConfig"]

#: Bits of each half of the INT32 sum at latencies 3 and 4.
_HALF = 16

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
    latency : int
        Register stages: 2 (the beat's products and their sum, then the INT32 sum); 3 (the
        INT32 sum's adder in halves, the high half a stage after the low half and its carry);
        4 (also the products a stage before their sum): the default, within the levels budget
        of docs/levels.md.
    """

    fmt: str = param("int8", "int4, int8", "element format")
    lanes: int = param(8, "1..64", "products per cycle")
    latency: int = param(4, "2..4", "register stages")

    def __post_init__(self):
        check_choice("fmt", self.fmt, FORMATS)
        check_int("lanes", self.lanes, 1, 64)
        check_int("latency", self.latency, 2, 4)

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
        Cycles from the ``last`` beat's handshake to its result being valid
        (``config.latency``).
    """

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

    @property
    def latency(self) -> int:
        return self._config.latency

    def elaborate(self, platform):
        m = Module()
        lanes = self._config.lanes
        emits = Signal()
        en, valid = stall_chain(m, self.i, self.o, self.latency, emits=emits)

        # A dot product starts after reset and after every ``last`` beat.
        first = Signal(init=1)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += first.eq(self.i.payload.last)

        i = self.i.payload
        beat = {"acc": i.acc, "first": first, "last": i.last}
        prods = [i.a[k] * i.b[k] for k in range(lanes)]
        stage = 0
        if self.latency == 4:
            # Stage 1: the beat's products; their sum follows in stage 2.
            prods = [delay(m, p, 1, en, name=f"prod{k}") for k, p in enumerate(prods)]
            beat = {k: delay(m, v, 1, en, name=f"beat_{k}") for k, v in beat.items()}
            stage = 1
        dot_bits = 2 * self._config.bits + lanes.bit_length()
        dot = delay(m, sum(prods), 1, en, name="dot", shape=signed(dot_bits))
        s = {k: delay(m, v, 1, en, name=f"dot_{k}") for k, v in beat.items()}
        took = en & valid[stage]         # the beat in the sum's stage moves on

        if self.latency == 2:
            acc = Signal(signed(32))
            base = Signal(signed(32))
            m.d.comb += base.eq(Mux(s["first"], s["acc"], acc))
            with m.If(took):
                m.d.sync += [acc.eq(base + dot), emits.eq(s["last"])]
            m.d.comb += self.o.payload.eq(acc)
            return m
        # The low half of the running sum and its carry out, then a stage later the high half,
        # with that carry, of the same beat (each half's sum loops on itself in one cycle).
        wide = Signal(signed(32))
        m.d.comb += wide.eq(dot)
        lo, carry = Signal(_HALF), Signal()
        h_dot, h_acc = Signal(_HALF), Signal(_HALF)
        h_first, h_last = Signal(), Signal()
        lo_base = Mux(s["first"], s["acc"][:_HALF], lo)
        with m.If(took):
            m.d.sync += [
                Cat(lo, carry).eq(lo_base + wide[:_HALF]),
                h_dot.eq(wide[_HALF:]), h_acc.eq(s["acc"][_HALF:]),
                h_first.eq(s["first"]), h_last.eq(s["last"]),
            ]
        hi, out_lo = Signal(_HALF), Signal(_HALF)
        hi_base = Mux(h_first, h_acc, hi)
        with m.If(en & valid[stage + 1]):
            m.d.sync += [hi.eq(hi_base + h_dot + carry), out_lo.eq(lo), emits.eq(h_last)]
        m.d.comb += self.o.payload.eq(Cat(out_lo, hi))
        return m

