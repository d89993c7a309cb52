"""What the MX and NVFP4 dot-product units share: exact block sums of E2M1 products, streamed
``lanes`` pairs per beat, and the FP32 accumulation of the block values."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .comb import wire
from .formats import E4M3, FP32_QNAN
from .fp4 import e2m1_product
from .fp32 import fp32_add, magnitude_to_fp32, scaled_int_to_fp32
from .params import ParamError, check_int
from .pipeline import delay, through_cuts

__all__ = [
    "BlockDotUnit", "BlockSums", "DotCuts", "accumulate", "block_stage", "block_sums",
    "check_latency", "dot_cuts", "latency_range", "most_cuts", "mx_block_value",
    "mx_scale_terms", "nvfp4_block_value", "nvfp4_scale_terms", "settle_latency",
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


@dataclass(frozen=True)
class DotCuts:
    """Where a block dot unit's register stages past its fixed ones cut its logic after the
    block sums (:func:`dot_cuts`): ``convert``, the cut points of the block value's conversion
    to binary32 (:func:`~scoville.rtl.lib.fp32.magnitude_to_fp32`'s); ``block``, a register
    holding the block value before the adder; ``add``, the cut points of the accumulator's
    adder (:func:`~scoville.rtl.lib.fp32.fp32_add`'s); ``scale``, those of the product by the
    tensor scale (NVFP4's, :func:`~scoville.rtl.lib.fp32.fp32_mul`'s)."""

    convert: tuple[int, ...] = ()
    block: bool = False
    add: tuple[int, ...] = ()
    scale: tuple[int, ...] = ()

    @property
    def stages(self) -> int:
        """The register stages it adds."""
        return len(self.convert) + self.block + len(self.add) + len(self.scale)


#: The order in which stages past a block dot unit's fixed ones cut its logic, each taking
#: the next of these that fits: ``block`` the block value's register, ``convert`` one more
#: cut of its conversion (:data:`CONVERT_CUTS`), ``add`` one more of the accumulator's adder
#: (:data:`ADD_CUTS`), which a block's beats bound (:func:`most_cuts`), ``scale`` one more of
#: the tensor scale's product (:data:`SCALE_CUTS`, NVFP4); each kind at most as many times as
#: its order lists. Measured mapped for delay (docs/levels.md): each the fewest levels in the
#: longest stage.
CUT_ORDER = {
    "mx": ("block", "add", "convert", "add", "convert", "add", "add", "add"),
    "nvfp4": ("block", "scale", "add", "scale", "scale", "add", "convert", "add", "scale",
              "convert", "add", "add"),
    # The GEMM array's block units (:func:`~scoville.rtl.gemm_os_dataflow.unit_cuts`): their
    # conversion cut a third time, as the block value's magnitude enters it.
    "unit": ("block", "add", "convert", "add", "convert", "convert", "add", "add", "add"),
}
#: The conversion's cut points at each count of cuts, by kind (point 2 is the first in time,
#: as the block value's magnitude enters the conversion). NVFP4's first cut there: its block
#: value is the block sum times the two scales' significands, deeper than MX's shift, and the
#: conversion's first section after it held the longest stage (docs/levels.md: 45 levels at
#: nvfp4_dot's default with the cut at point 0, 38 at point 2).
CONVERT_CUTS = {
    "mx": {1: (0,), 2: (0, 1)},
    "nvfp4": {1: (2,), 2: (0, 2)},
    "unit": {1: (0,), 2: (0, 1), 3: (0, 1, 2)},
}
#: The accumulator adder's cut points at each count of cuts (``Fp32Add.CUTS``'s choice).
ADD_CUTS = {1: (2,), 2: (1, 3), 3: (0, 2, 3), 4: (0, 1, 2, 3), 5: (0, 1, 2, 3, 4)}
#: The tensor scale product's cut points at each count of cuts (the fifth: the GEMM engine's,
#: :class:`~scoville.rtl.gemm_dataflow.TensorScale`).
SCALE_CUTS = {1: (1,), 2: (0, 1), 3: (0, 1, 2), 4: (0, 1, 2, 3), 5: (0, 1, 2, 3, 4)}


def _most(kind: str, beats: int) -> dict[str, int]:
    """The most cuts of each kind at ``beats`` beats a block: as many as :data:`CUT_ORDER`
    lists, the adder's at most one fewer than the beats (the accumulator is read when a
    block's value enters the adder and written when the sum leaves it: the next block's value
    comes ``beats`` enabled cycles later at the soonest)."""
    order = CUT_ORDER[kind]
    most = {k: order.count(k) for k in dict.fromkeys(order)}
    if "add" in most:
        most["add"] = min(most["add"], beats - 1)
    return most


def most_cuts(kind: str, beats: int) -> int:
    """The most stages past the fixed ones of a ``kind`` unit at ``beats`` beats a block."""
    return sum(_most(kind, beats).values())


def dot_cuts(kind: str, extra: int, beats: int) -> DotCuts:
    """The cuts of ``extra`` stages past the fixed ones of a ``kind`` (``mx``, ``nvfp4``, or
    ``unit``: the GEMM array's block units) unit at ``beats`` beats a block
    (:data:`CUT_ORDER`); at most :func:`most_cuts`."""
    most = _most(kind, beats)
    if not 0 <= extra <= sum(most.values()):
        raise ValueError(f"{extra} stages past the fixed ones; at most {sum(most.values())} "
                         f"at {beats} beats a block")
    took = dict.fromkeys(most, 0)
    for what in CUT_ORDER[kind]:
        if sum(took.values()) == extra:
            break
        if took[what] < most[what]:
            took[what] += 1
    return DotCuts(CONVERT_CUTS[kind].get(took["convert"], ()), bool(took["block"]),
                   ADD_CUTS.get(took["add"], ()), SCALE_CUTS.get(took.get("scale", 0), ()))


def latency_range(kind: str, fixed: int, block: int, lanes) -> str:
    """A ``kind`` block dot unit's allowed latencies in words: ``fixed`` stages and at most
    :func:`most_cuts` more, which depend on the ``lanes`` (a ``block`` of elements)."""
    most = {k: fixed + most_cuts(kind, block // k) for k in lanes}
    top = max(most.values())
    fewer = ", ".join(f"{most[k]} at {k} lanes" for k in lanes if most[k] < top)
    return f"{fixed}..{top}" + (f" (at most {fewer})" if fewer else "")


def settle_latency(config, kind: str, fixed: int, default: int) -> None:
    """Set a ``kind`` block dot unit's ``config.latency`` where it is unset (None) to
    ``default``, or to the most its lanes allow if fewer, then check it
    (:func:`check_latency`); from the frozen config's ``__post_init__``."""
    beats = config.beats_per_block
    if config.latency is None:
        object.__setattr__(config, "latency", min(default, fixed + most_cuts(kind, beats)))
    check_latency(kind, config.latency, fixed, beats, config.lanes)


def check_latency(kind: str, latency, fixed: int, beats: int, lanes: int) -> None:
    """Check a ``kind`` block dot unit's ``latency`` against :func:`latency_range` at its
    lanes."""
    most = fixed + most_cuts(kind, beats)
    if isinstance(latency, bool) or not isinstance(latency, int):
        check_int("latency", latency, fixed, most)      # not an integer: says so
    if not fixed <= latency <= most:
        adds = _most(kind, beats)["add"]
        raise ParamError(f"parameter 'latency' = {latency} is out of range at lanes={lanes}; "
                         f"allowed: {fixed}..{most} (the accumulator's adder takes at most "
                         f"{adds} cut{'' if adds == 1 else 's'} at {beats} beat"
                         f"{'' if beats == 1 else 's'} a block)")


def accumulate(m: Module, en, step, last, block_value, *, add=(), carry=None) -> tuple:
    """Add the FP32 accumulator. When ``step`` is high (a block's final beat is at the adder's
    input; ``last``: it ends its dot product), ``block_value`` (binary32) enters the adder with
    the accumulator; the sum leaves it ``len(add)`` enabled cycles later (the adder cut at its
    cut points ``add``, registers that load with ``en``) into the result register and the
    accumulator, which is cleared to +0 instead after a dot product's last block. The next
    block may enter once the sum has left (at least ``len(add) + 1`` enabled cycles later).

    Returns the result (the sum as of the latest block: the dot product's after its last),
    whether the item beside it, in the stage after the adder, ends a dot product (loaded with
    ``en``: the unit's ``emits`` where that stage is its last), and ``carry`` (a dict of
    values that came with ``step``) as they came with the result's last block."""
    acc = Signal(32)
    total = wire(m, "acc_total", through_cuts(
        m, en, add, "acc", "the accumulator",
        lambda cut: fp32_add(m, acc, block_value, name="acc_add", cut=cut)))
    done = delay(m, step, len(add), en, name="acc_step")
    ends = delay(m, step & last, len(add), en, name="acc_last")
    result, emits = Signal(32), Signal()
    came = {name: delay(m, v, len(add), en, name=f"acc_{name}")
            for name, v in (carry or {}).items()}
    kept = {name: Signal.like(v, name=f"acc_{name}_kept") for name, v in came.items()}
    with m.If(en):
        m.d.sync += emits.eq(ends)
        with m.If(done):
            m.d.sync += [result.eq(total), acc.eq(Mux(ends, 0, total))]
            m.d.sync += [kept[name].eq(v) for name, v in came.items()]
    return result, emits, kept


def block_stage(m: Module, en, plan: DotCuts, sums: BlockSums, valid, block_value,
                carry=None) -> tuple:
    """Stage 3 of a block dot unit after the block sums (stage 2, whose item is valid when
    ``valid``): the block's value by ``block_value(cut)`` (a function of the conversion's
    ``cut``), cut as ``plan`` says, and accumulated (:func:`accumulate`); the step and last
    flags and ``carry`` (values of stage 2's item) delayed alongside. Returns
    :func:`accumulate`'s result, emits flag and carry."""
    value = through_cuts(m, en, plan.convert, "blk", "the block value's conversion",
                         block_value)
    ahead = len(plan.convert) + plan.block
    value = delay(m, value, plan.block, en, name="blk_value")
    step = delay(m, valid & sums.end, ahead, en, name="blk_step")
    last = delay(m, sums.last, ahead, en, name="blk_last")
    carry = {name: delay(m, v, ahead, en, name=f"blk_{name}") for name, v in (carry or {}).items()}
    return accumulate(m, en, step, last, value, add=plan.add, carry=carry)


def mx_scale_terms(sa, sb) -> dict:
    """What an MX block value needs of its two E8M0 scale codes: their sum (``exp``) and
    whether either is NaN (``nan``, code 0xFF); a pipeline may carry both to a later stage."""
    return {"exp": sa + sb, "nan": (sa == 0xFF) | (sb == 0xFF)}


def mx_block_value(m: Module, total, exp, nan, *, units: int = 2, name: str = "blk",
                   cut=None) -> Signal:
    """The binary32 bits of an MX block value: the exact sum ``total`` (counting
    ``2**-units``: quarters for E2M1 products) times ``2**(exp - 254)`` (``exp`` the sum of
    the two scale codes), rounded once; the canonical NaN when ``nan`` (see
    :func:`mx_scale_terms`). ``cut``: the conversion's
    (:func:`~scoville.rtl.lib.fp32.magnitude_to_fp32`'s), ``nan`` carried through it."""
    power = Signal(signed(11), name=f"{name}_exp")
    m.d.comb += power.eq(exp - 254 - units)
    nan_at = _NanThrough(nan, cut)
    value = scaled_int_to_fp32(m, total, power, name=f"{name}_cvt", cut=nan_at)
    nan = nan_at.nan
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


def nvfp4_block_value(m: Module, total, nan, neg, sig, exp, *, name: str = "blk",
                      cut=None) -> Signal:
    """The binary32 bits of an NVFP4 block value: the exact sum ``total`` (quarters) times the
    two E4M3 block scales (:func:`nvfp4_scale_terms`), exact in binary32 (fewer than 21
    significant bits, always inside the normal range); the canonical NaN when ``nan``.
    ``cut``: the conversion's (:func:`~scoville.rtl.lib.fp32.magnitude_to_fp32`'s), ``nan``
    carried through it."""
    sign = wire(m, f"{name}_sign", (total < 0) ^ neg)
    size = wire(m, f"{name}_size", Mux(total < 0, -total, total), unsigned(len(total)))
    mag = wire(m, f"{name}_scaled", size * sig)
    power = Signal(signed(8), name=f"{name}_exp")
    m.d.comb += power.eq(exp - 2)
    nan_at = _NanThrough(nan, cut)
    value = magnitude_to_fp32(m, sign, mag, power, name=f"{name}_cvt", cut=nan_at,
                              product=True)
    out = Signal(32, name=f"{name}_fp32")
    m.d.comb += out.eq(Mux(nan_at.nan, FP32_QNAN, value))
    return out


class _NanThrough:
    """A conversion's ``cut`` that carries a block's NaN flag through the same cut points."""

    def __init__(self, nan, cut):
        self.nan, self._cut = nan, cut

    def __call__(self, i, *values):
        if self._cut is None:
            return values
        *values, self.nan = self._cut(i, *values, self.nan)
        return tuple(values)
