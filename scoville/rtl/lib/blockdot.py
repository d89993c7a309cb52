"""What the MX and NVFP4 dot-product units share: exact block sums of E2M1 products, streamed
``lanes`` pairs per beat, and the FP32 accumulation of the block values."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .comb import wire
from .formats import E4M3, FP32_QNAN
from .fp4 import e2m1_product
from .fp32 import fp32_add, scaled_int_to_fp32

__all__ = [
    "BlockDotUnit", "BlockSums", "accumulate", "block_sums", "mx_block_value", "mx_scale_terms",
    "nvfp4_block_value", "nvfp4_scale_terms",
]


class BlockDotUnit(wiring.Component):
    """The interface of a block dot-product unit, built from its ``config`` (which has
    ``lanes``).

    Input beats carry ``a``, ``b`` (``lanes`` E2M1 codes each), the 8-bit block scale codes
    ``sa``, ``sb``, the unit's own ``tail`` fields, and ``last``; the output is the binary32
    bits of each dot product.
    """

    def __init__(self, config, tail: dict):
        self._config = config
        self.in_layout = data.StructLayout({
            "a": data.ArrayLayout(4, config.lanes),
            "b": data.ArrayLayout(4, config.lanes),
            "sa": unsigned(8),
            "sb": unsigned(8),
            **tail,
            "last": unsigned(1),
        })
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(32)),
        })

    @property
    def config(self):
        return self._config


@dataclass
class BlockSums:
    """Stage-2 outputs of :func:`block_sums`.

    Attributes
    ----------
    sum : Signal
        The exact block sum in quarters; complete when ``end`` is high.
    end : Signal
        The item in stage 2 is a block's final beat.
    last : Signal
        ... and ends its dot product.
    carry : dict of str to Signal
        The per-beat values passed in, as they were on that beat.
    """

    sum: Signal
    end: Signal
    last: Signal
    carry: dict


def block_sums(m: Module, i, en, valid, *, lanes: int, block: int, carry: dict) -> BlockSums:
    """Add pipeline stages 1 (this beat's partial sum) and 2 (the running block sum).

    ``i`` is the unit's input stream, with payload fields ``a``, ``b`` (``lanes`` E2M1 codes)
    and ``last``; ``en`` and ``valid`` come from :func:`~scoville.rtl.lib.pipeline.stall_chain`.
    ``carry`` maps names to values computed from the beat (scales, flags) that travel with it.
    """
    beats = block // lanes
    beat = Signal(range(max(beats, 2)))
    with m.If(i.valid & i.ready):
        m.d.sync += beat.eq(Mux(beat == beats - 1, 0, beat + 1))
    p = i.payload
    partial = sum(e2m1_product(p.a[k], p.b[k]) for k in range(lanes))
    end_now = beat == beats - 1

    s1_sum = Signal(signed(9 + lanes.bit_length()))
    s1_first, s1_end, s1_last = Signal(), Signal(), Signal()
    s1 = {name: Signal.like(wire(m, f"{name}_in", value), name=f"s1_{name}")
          for name, value in carry.items()}
    with m.If(en):
        m.d.sync += [
            s1_sum.eq(partial),
            s1_first.eq(beat == 0),
            s1_end.eq(end_now),
            s1_last.eq(p.last & end_now),
        ]
        m.d.sync += [s1[name].eq(value) for name, value in carry.items()]

    s2_sum = Signal(signed((block * 144).bit_length() + 1))  # |sum| <= block * 144 quarters
    s2_end, s2_last = Signal(), Signal()
    s2 = {name: Signal.like(sig, name=f"s2_{name}") for name, sig in s1.items()}
    with m.If(en & valid[0]):
        m.d.sync += [
            s2_sum.eq(Mux(s1_first, 0, s2_sum) + s1_sum),
            s2_end.eq(s1_end),
            s2_last.eq(s1_last),
        ]
        m.d.sync += [s2[name].eq(sig) for name, sig in s1.items()]
    return BlockSums(s2_sum, s2_end, s2_last, s2)


def accumulate(m: Module, step, sums: BlockSums, block_value) -> Signal:
    """Add the FP32 accumulator: on each block's final beat (when ``step`` is high), add
    ``block_value`` (binary32); at the end of a dot product clear it to +0. Returns the
    registered sum as of the latest block (the dot product's result after its last block)."""
    acc = Signal(32)
    total = wire(m, "acc_total", fp32_add(m, acc, block_value))
    result = Signal(32)
    with m.If(step & sums.end):
        m.d.sync += [result.eq(total), acc.eq(Mux(sums.last, 0, total))]
    return result


def mx_scale_terms(sa, sb) -> dict:
    """What an MX block value needs of its two E8M0 scale codes: their sum (``exp``) and
    whether either is NaN (``nan``, code 0xFF); a pipeline may carry both to a later stage."""
    return {"exp": sa + sb, "nan": (sa == 0xFF) | (sb == 0xFF)}


def mx_block_value(m: Module, total, exp, nan, *, units: int = 2, name: str = "blk") -> Signal:
    """The binary32 bits of an MX block value: the exact sum ``total`` (counting
    ``2**-units``: quarters for E2M1 products) times ``2**(exp - 254)`` (``exp`` the sum of
    the two scale codes), rounded once; the canonical NaN when ``nan`` (see
    :func:`mx_scale_terms`)."""
    power = Signal(signed(11), name=f"{name}_exp")
    m.d.comb += power.eq(exp - 254 - units)
    value = scaled_int_to_fp32(m, total, power, name=f"{name}_cvt")
    out = Signal(32, name=f"{name}_fp32")
    m.d.comb += out.eq(Mux(nan, FP32_QNAN, value))
    return out


def nvfp4_scale_terms(sa, sb) -> dict:
    """What an NVFP4 block value needs of its two E4M3 scale codes: ``nan`` (either is NaN,
    S.1111.111), ``neg`` (their signs differ), ``sig`` (the product of their 4-bit
    significands) and ``exp`` (``|sa * sb| = sig * 2**exp``); a pipeline may carry them to a
    later stage. A negative scale is allowed (its sign joins the product's), though quantizers
    only make positive ones."""
    sa = data.View(E4M3, sa)
    sb = data.View(E4M3, sb)
    return {
        "nan": ((sa.exp == 0xF) & (sa.man == 0x7)) | ((sb.exp == 0xF) & (sb.man == 0x7)),
        "neg": sa.sign ^ sb.sign,
        "sig": Cat(sa.man, sa.exp != 0) * Cat(sb.man, sb.exp != 0),
        "exp": (Mux(sa.exp == 0, 1, sa.exp) + Mux(sb.exp == 0, 1, sb.exp) - 20).as_signed(),
    }


def nvfp4_block_value(m: Module, total, nan, neg, sig, exp, *, name: str = "blk") -> Signal:
    """The binary32 bits of an NVFP4 block value: the exact sum ``total`` (quarters) times the
    two E4M3 block scales (:func:`nvfp4_scale_terms`), exact in binary32 (fewer than 21
    significant bits, always inside the normal range); the canonical NaN when ``nan``."""
    width = len(total) + 9
    scaled = Signal(signed(width), name=f"{name}_scaled")
    m.d.comb += scaled.eq(Mux(neg, -(total * sig), total * sig))
    power = Signal(signed(8), name=f"{name}_exp")
    m.d.comb += power.eq(exp - 2)
    out = Signal(32, name=f"{name}_fp32")
    m.d.comb += out.eq(Mux(nan, FP32_QNAN, scaled_int_to_fp32(m, scaled, power,
                                                               name=f"{name}_cvt")))
    return out
