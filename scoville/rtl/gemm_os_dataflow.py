"""The output-stationary dataflow of the GEMM engine: its schedule and its array.

Output tile (ti, tj) of R x C values stays in the array while K steps stream column k of the A
tile in from the left (row r delayed r cycles) and row k of the B tile in from the top (column c
delayed c cycles). Tiles follow each other with no gap (``max(K, R, C)`` steps apart, ``bf16``'s
partial sums ``max(K, R, C + add_latency)``); each PE keeps a finished result (``bf16``: its
partial sums) in registers of its own while the next tile accumulates, and the rows of a
finished tile leave one per step.
"""

import functools
import operator
from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .gemm_arith import MUL_CUTS
from .gemm_dataflow import (
    DIM_BITS,
    at_least,
    at_most,
    block_bits,
    command_dims,
    dataflow_signature,
    scaled_rows,
    sequencer_members,
)
from .lib.blockdot import ADD_CUTS, DotCuts, dot_cuts, most_cuts
from .lib.comb import wire
from .lib.fp32 import fp32_add
from .lib.pipeline import delay, through_cuts

__all__ = ["COMBINE_CUTS", "MOST_UNIT_LATENCY", "UNIT_LATENCY", "OsArray", "OsSequencer",
           "OutputStationary", "UnitCuts", "combine_stages", "step_layout", "unit_cuts"]

#: The fewest beats between two blocks of a PE that one unit adds (NVFP4's block; MX's is 32):
#: they bound the cuts of the units' adder (:func:`~scoville.rtl.lib.blockdot.most_cuts`).
_BLOCK_STEPS = 16
#: The most register stages of a column's block units: one after the pick of the PE whose
#: block ends, one after the pick of its binary32 sum, and the cuts of a block dot unit's value
#: and adder.
MOST_UNIT_LATENCY = 2 + most_cuts("unit", _BLOCK_STEPS)
#: The stages by default: all of them (the two picks, the block value's conversion cut three
#: times, its register and the adder cut five times), each within the levels budget of
#: docs/levels.md (at 4 x 4, mapped for delay: MXFP4 35 levels, NVFP4 38; at 10 and 9 stages
#: 35 and 41, the adder's sections the longest).
UNIT_LATENCY = MOST_UNIT_LATENCY


@dataclass(frozen=True)
class UnitCuts:
    """Where a column's block units (:meth:`OsArray._block_units`) are cut: ``picked``, a
    register after the pick of the PE whose block ends; ``acc``, a register after the pick of
    that PE's binary32 sum, before the adder; ``value``, the cuts of the block's value and of
    the adder that adds it into the PE's binary32 sum
    (:class:`~scoville.rtl.lib.blockdot.DotCuts`)."""

    picked: bool
    acc: bool
    value: DotCuts

    @property
    def ahead(self) -> int:
        """Stages from a block's end to the adder's input."""
        return self.picked + len(self.value.convert) + self.value.block

    @property
    def stages(self) -> int:
        """Stages from a block's end to the sum's write (a unit of blocks that do not end a
        tile, which reads the PE's sum ``acc`` stages before the adder's input)."""
        return self.ahead + len(self.value.add)

    @property
    def later(self) -> int:
        """Stages by which the unit of a tile's last blocks reads the PE's sum later than the
        others: after the write of a block that ended one step before its own."""
        return len(self.value.add) + self.acc

    @property
    def delay(self) -> int:
        """Stages from a tile's last block's end to its result's write (the config's
        :attr:`~scoville.rtl.gemm.GemmConfig.unit_delay`)."""
        return self.stages + self.later


def unit_cuts(latency: int) -> UnitCuts:
    """The cuts of ``latency`` register stages of the block units (0..
    :data:`MOST_UNIT_LATENCY`): the picks' registers first (the PE's block, then its binary32
    sum), then as a block dot unit's stages past its fixed ones
    (:func:`~scoville.rtl.lib.blockdot.dot_cuts`)."""
    return UnitCuts(latency > 0, latency > 1,
                    dot_cuts("unit", max(latency - 2, 0), _BLOCK_STEPS))


#: Where each adder that adds a PE's partial sums as its row leaves is cut
#: (:meth:`OsArray._add_sums`; :func:`~scoville.rtl.lib.fp32.fp32_add`'s points; a register
#: after it).
COMBINE_CUTS = ADD_CUTS[2]


def combine_stages(sums: int) -> int:
    """Stages of the adders that add ``sums`` partial sums as a tree (:meth:`OsArray._add_sums`):
    one for the row's sums as they are picked, ``len(COMBINE_CUTS) + 1`` for each level of the
    tree (none for one sum)."""
    return 0 if sums == 1 else 1 + (len(COMBINE_CUTS) + 1) * (sums - 1).bit_length()


def step_layout(config) -> data.StructLayout:
    """What the schedule tells the array about the step whose beats arrive this cycle:
    ``valid`` (it took beats), ``first``/``last`` (its k is 0 / K - 1), ``bstart``/``bend``
    (the first / final element of a block along K), ``rows``/``cols`` (which lanes of the
    tile lie inside M / N); with partial sums (:attr:`~scoville.rtl.gemm.GemmConfig.sums`
    above 1) ``head`` (k is below the sums: its sum starts at +0), ``slot`` (k mod the
    sums: the sum it adds into) and ``empty`` (how many of the sums no step of the command
    adds into: ``sums - K`` where K is fewer)."""
    L = config.sums
    sums = {"head": 1, "slot": range(L), "empty": range(L)} if L > 1 else {}
    return data.StructLayout({"valid": 1, "first": 1, "last": 1, "bstart": 1, "bend": 1,
                              "rows": config.rows, "cols": config.cols, **sums})


class OsSequencer(wiring.Component):
    """The ``os`` schedule: tiles (ti, tj), tj fastest, K steps each,
    :meth:`~scoville.rtl.gemm.GemmConfig.tile_steps` apart; it counts the rows of C still to
    emit, so ``active`` stays high until the last one.

    Attributes
    ----------
    cmd, start, en, collect, active, need_a, need_b
        As :func:`~scoville.rtl.gemm_dataflow.sequencer_members` (``collect`` from the array;
        every step takes one A and one B beat).
    step : Out(step_layout)
        Registered when ``en``: the flags of the step that took the beats arriving now.
    """

    def __init__(self, config):
        self._config = config
        super().__init__(sequencer_members(step=Out(step_layout(config))))

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        R, C = cfg.rows, cfg.cols
        en = self.en
        M, K, N = command_dims(m, self)

        i0 = Signal(DIM_BITS)
        j0 = Signal(DIM_BITS)
        k = Signal(DIM_BITS)
        # k mod the partial sums (counted beside k: no division).
        slot = Signal(range(max(cfg.sums, 2)))
        span = Signal(DIM_BITS)
        issuing = Signal()
        pending = Signal(DIM_BITS)
        stepping = wire(m, "stepping", issuing & (k < K))
        k_last = wire(m, "k_last", k == K - 1)
        last_tile = wire(m, "last_tile", (i0 + R >= M) & (j0 + C >= N))
        tile_rows = wire(m, "tile_rows", at_most(M - i0, R), unsigned(DIM_BITS))
        m.d.comb += [
            self.active.eq(issuing | (pending != 0)),
            self.need_a.eq(stepping),
            self.need_b.eq(stepping),
        ]
        with m.If(self.start):
            m.d.sync += [i0.eq(0), j0.eq(0), k.eq(0), issuing.eq(1),
                         span.eq(at_least(self.cmd.k, R, C + cfg.add_stages))]
            if cfg.sums > 1:
                m.d.sync += slot.eq(0)
        with m.Elif(en & issuing):
            with m.If(k_last & last_tile):
                m.d.sync += issuing.eq(0)
            with m.Elif(k == span - 1):
                m.d.sync += k.eq(0)
                if cfg.sums > 1:
                    m.d.sync += slot.eq(0)
                with m.If(j0 + C >= N):
                    m.d.sync += [j0.eq(0), i0.eq(i0 + R)]
                with m.Else():
                    m.d.sync += j0.eq(j0 + C)
            with m.Else():
                m.d.sync += k.eq(k + 1)
                if cfg.sums > 1:
                    m.d.sync += slot.eq(Mux(slot == cfg.sums - 1, 0, slot + 1))

        s1 = self.step
        bits = block_bits(cfg)
        with m.If(en):
            m.d.sync += [
                s1.valid.eq(stepping),
                s1.first.eq(k == 0),
                s1.last.eq(k_last),
                s1.bstart.eq(k[:bits] == 0),
                s1.bend.eq((k[:bits] == (1 << bits) - 1) | k_last),
                s1.rows.eq(Cat(r < M - i0 for r in range(R))),
                s1.cols.eq(Cat(c < N - j0 for c in range(C))),
            ]
            if cfg.sums > 1:
                L = cfg.sums
                m.d.sync += [s1.head.eq(k < L), s1.slot.eq(slot),
                             s1.empty.eq(Mux(K < L, L - K, 0))]

        with m.If(self.start):
            m.d.sync += pending.eq(0)
        with m.Elif(en):
            m.d.sync += pending.eq(
                pending + Mux(stepping & k_last, tile_rows, 0) - self.collect
            )
        return m


class OsArray(wiring.Component):
    """The ``os`` systolic array: A lanes skewed in from the left, B lanes from the top, each
    PE accumulating its output of the tile; the rows of a finished tile leave one per step.

    In each PE (:class:`~scoville.rtl.gemm_arith.Arith`), ``int``: the exact product added to a
    wrapping INT32 sum; ``float``: the product rounded to FP32 and added to the PE's FP32 sum;
    ``block``: the exact product added to the block's sum; at a block's last element the sum
    times the block scales rounded once to FP32 and added to the PE's FP32 sum, by one of the
    few units its column shares (:meth:`_block_units`). With ``pe_latency`` 1 each PE's
    product is registered and added a cycle later, with the flags of its step. A finished
    output moves to the PE's result register with the tile's last step (its last addition,
    or its last block's unit). The PEs are
    built flat into this module (no module per PE: Verilator's build time grows with modules).

    Attributes
    ----------
    en : In(1)
        The engine advances (every register loads only then).
    step : In(step_layout)
        The sequencer's flags of the step whose beats are on ``a`` and ``b``.
    a, b : In(...)
        The operand beats taken by that step.
    collect : Out(1)
        A PE row's finished results reach the end of the row this step (at most one row).
    row : Out(ArrayLayout(32, cols))
        That row of C.
    cols : Out(cols)
        ``nvfp4`` only: which columns of ``row`` lie inside N.
    """

    def __init__(self, config, a_layout, b_layout):
        self._config = config
        mask = {"cols": Out(config.cols)} if config.arith.tensor_scale else {}
        super().__init__({
            "en": In(1), "step": In(step_layout(config)),
            "a": In(a_layout), "b": In(b_layout),
            "collect": Out(1), "row": Out(data.ArrayLayout(32, config.cols)), **mask,
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        R, C = cfg.rows, cfg.cols
        en, s1 = self.en, self.step
        # What travels with each A element (and, below, each B element); the block fields only
        # in block formats, so that other PEs carry nothing they do not use.
        mx_fields = {"bstart": 1, "bend": 1, "sa": 8} if cfg.mx else {}
        head = {"head": 1} if cfg.sums > 1 else {}
        flow = data.StructLayout({
            "valid": 1, "first": 1, "last": 1, "row": 1, "a": self.a.data[0].shape(),
            **mx_fields, **head,
        })
        adata, bdata = self.a, self.b
        left = []
        for r in range(R):
            lane = Signal(flow, name=f"a_lane{r}")
            m.d.comb += [
                lane.valid.eq(s1.valid), lane.first.eq(s1.first), lane.last.eq(s1.last),
                lane.row.eq(s1.rows[r]), lane.a.eq(adata.data[r]),
            ]
            if head:
                m.d.comb += lane.head.eq(s1.head)
            if cfg.mx:
                m.d.comb += [lane.bstart.eq(s1.bstart), lane.bend.eq(s1.bend),
                             lane.sa.eq(adata.scale[r] if R > 1 else adata.scale)]
            left.append(delay(m, lane, r, en, name=f"a_skew{r}"))
        # ``on``: the column lies inside N (a column beyond it must give +0, also where a
        # NaN scale or an Inf element would make its sum NaN).
        on = {"on": 1} if cfg.mx or cfg.arith.specials else {}
        btype = data.StructLayout({"b": bdata.data[0].shape(), **on,
                                   **({"sb": 8} if cfg.mx else {})})
        top = []
        for c in range(C):
            lane = Signal(btype, name=f"b_lane{c}")
            m.d.comb += lane.b.eq(Mux(s1.cols[c], bdata.data[c], 0))
            if on:
                m.d.comb += lane.on.eq(s1.cols[c])
            if cfg.mx:
                scale = bdata.scale[c] if C > 1 else bdata.scale
                # Beyond N the scale is a placeholder (0x7F: 1 in E8M0, NaN in E4M3); ``on``
                # masks the value.
                m.d.comb += lane.sb.eq(Mux(s1.cols[c], scale, 127))
            top.append(delay(m, lane, c, en, name=f"b_skew{c}"))

        # Each PE's registers of finished results (its partial sums, or its result).
        res = [[None] * C for _ in range(R)]
        self._ends = [[] for _ in range(C)]
        collect = []
        staged = cfg.pe_stages
        for r in range(R):
            a_in = left[r]
            for c in range(C):
                b_in = top[c]
                # What PE (r, c) passes on: its inputs a cycle later (with a registered
                # product, also what it adds its product with).
                a_out = Signal(flow, name=f"pe{r}_{c}_a")
                with m.If(en):
                    m.d.sync += a_out.eq(a_in)
                b_out = b_in
                if r < R - 1 or staged:
                    b_out = Signal(btype, name=f"pe{r}_{c}_b")
                    with m.If(en):
                        m.d.sync += b_out.eq(b_in)
                res[r][c] = self._pe(m, r, c, a_in, b_in,
                                     (a_out, b_out) if staged else (a_in, b_in))
                a_in, top[c] = a_out, b_out
            # A row of results leaves the row's last PE as its last step does, ``array_delay``
            # cycles later where the PEs' products, the block units and the partial sums are
            # cut (the row's partial sums are read ``combine`` cycles before it leaves).
            collect.append(delay(m, wire(m, f"collect{r}", a_in.valid & a_in.last & a_in.row),
                                 cfg.array_delay - combine_stages(cfg.sums), en,
                                 name=f"collect{r}"))
        if cfg.arith.kind == "block":
            for c in range(C):
                self._block_units(m, c)

        # At most one row collects in a step (tiles are at least R steps apart): an AND-OR mux.
        row = functools.reduce(operator.or_, (Mux(collect[r], Cat(v for pe in res[r] for v in pe),
                                                  0) for r in range(R)))
        collect = Cat(collect).any()
        if cfg.sums > 1:
            collect, row = self._add_sums(m, collect, row)
        m.d.comb += [self.row.eq(row), self.collect.eq(collect)]
        if cfg.arith.tensor_scale:
            m.d.comb += self.cols.eq(self._last_step(m, s1.cols, 0, "cols"))
        return m

    def _last_step(self, m: Module, value, early: int, name: str):
        """``value`` of the step flags, taken at each tile's last step and delayed until its
        row 0 leaves the array ``early`` cycles before the array's delay ends (row r leaves
        ``cols + r + array_delay`` steps after that step; the next tile's last step comes at
        least ``rows`` steps after it, so it holds for the tile's rows)."""
        cfg, en, s1 = self._config, self.en, self.step
        taken = Signal(len(Value.cast(value)), name=f"last_{name}")
        with m.If(en & s1.valid & s1.last):
            m.d.sync += taken.eq(value)
        return delay(m, taken, cfg.cols - 1 + cfg.array_delay - early, en, name=name)

    def _add_sums(self, m: Module, collect, row) -> tuple:
        """The partial sums of the row that collects (``row``: each column's, in the order
        they were written) put in the order of their slots (sum j holds the steps k with
        k mod L = j, whatever K), masked and added: a sum that no step of the command added
        into (j not below K), or a column beyond N, is +0 (registered); then sums 0 and 1,
        2 and 3, ..., then neighbouring sums, an odd one out passed on to the next level, by
        adders cut at :data:`COMBINE_CUTS` and registered after (:func:`combine_stages`).
        Returns the collect flag and the row as they leave."""
        cfg, en, s1 = self._config, self.en, self.step
        C, L = cfg.cols, cfg.sums
        stages = combine_stages(L)
        # The tile's columns, empty sums and last step's slot, as its rows' sums are picked.
        tile = data.StructLayout({"cols": C, "empty": range(L), "slot": range(L)})
        last = data.View(tile, self._last_step(
            m, Cat(s1.cols, s1.empty, s1.slot), stages, "tile"))
        out = []
        for c in range(C):
            written = [row[(c * L + i) * 32:][:32] for i in range(L)]
            level = []
            for j in range(L):
                # The sum written i-th holds slot (last + 1 + i) mod L (the last step's
                # slot written last); slot 0 always has a step (K is at least 1).
                ordered = written[(j - 1) % L]
                for s in range(1, L):
                    ordered = Mux(last.slot == s, written[(j - 1 - s) % L], ordered)
                kept = last.cols[c] & (last.empty <= L - 1 - j) if j else last.cols[c]
                picked = wire(m, f"col{c}_sum{j}", Mux(kept, ordered, 0), 32)
                level.append(delay(m, picked, 1, en, name=f"col{c}_sum{j}"))
            depth = 0
            while len(level) > 1:
                depth += 1
                pairs = [self._combine_add(m, level[j], level[j + 1], f"col{c}_add{depth}_{j}")
                         for j in range(0, len(level) - 1, 2)]
                odd = [delay(m, level[-1], len(COMBINE_CUTS) + 1, en,
                             name=f"col{c}_add{depth}_odd")]
                level = pairs + (odd if len(level) % 2 else [])
            out.append(level[0])
        return delay(m, collect, stages, en, name="collect_sums"), Cat(out)

    def _combine_add(self, m: Module, x, y, name: str):
        """``x + y`` (binary32) cut at :data:`COMBINE_CUTS` and registered."""
        total = wire(m, name, through_cuts(m, self.en, COMBINE_CUTS, name, name,
                                           lambda cut: fp32_add(m, x, y, name=name, cut=cut)),
                     32)
        return delay(m, total, 1, self.en, name=name)

    def _sums_pe(self, m: Module, name: str, prod, a_in, a_next) -> list:
        """A PE's binary32 adder cut into ``L = sums`` stages (``add_stages`` cuts and the
        register after it): the sum of each step goes round the loop and meets the product of
        the step L later (+0 instead for the first L steps of a tile: ``head``; where the
        flags of the next step are at hand, ``a_next``, the loop's register is cleared for it,
        no mux in the loop). The sum of the tile's step ``K - L + i`` leaves the adder in the
        cycle of its last step + i, into the PE's register ``i`` of partial sums, which the
        tile's row reads as it leaves (:meth:`_add_sums`). Returns those L registers."""
        cfg, en = self._config, self.en
        L = cfg.sums
        loop = Signal(32, name=f"{name}_loop")
        base = loop if a_next is not None else wire(m, f"{name}_base",
                                                    Mux(a_in.head, 0, loop), 32)
        total = wire(m, f"{name}_total", through_cuts(
            m, en, ADD_CUTS[L - 1], f"{name}_add", f"{name}'s adder",
            lambda cut: fp32_add(m, base, prod, name=f"{name}_add", cut=cut)), 32)
        with m.If(en):
            m.d.sync += loop.eq(total if a_next is None else Mux(a_next.head, 0, total))
        ends = wire(m, f"{name}_ends", a_in.valid & a_in.last)
        sums = []
        for i in range(L):
            if i:
                ends = delay(m, ends, 1, en, name=f"{name}_ends{i}")
            s = Signal(32, name=f"{name}_sum{i}")
            with m.If(en & ends):
                m.d.sync += s.eq(total)
            sums.append(s)
        return sums

    def _pe(self, m: Module, r: int, c: int, a_in, b_in, late):
        """PE (r, c): accumulates its output while its inputs are valid; returns the registers
        holding its latest finished result (one; ``bf16`` with partial sums: theirs,
        :meth:`_sums_pe`). In block formats the PE keeps its block sum and its
        binary32 sum; a unit of its column (:meth:`_block_units`) adds its finished blocks.

        It multiplies the elements of ``a_in`` and ``b_in``; ``late``: its inputs a cycle later
        (the registers that pass them on) where the product is registered; the PE adds the
        product with its step's flags and scales ``pe_stages`` cycles later (the product
        registered, in ``bf16`` cut, that many times)."""
        cfg, en = self._config, self.en
        ar = cfg.arith
        name = f"pe{r}_{c}"
        stages = cfg.pe_stages
        cuts = MUL_CUTS.get(stages - 1, ()) if ar.kind == "float" else ()
        prod = through_cuts(m, en, cuts, f"{name}_prod", f"{name}'s product",
                            lambda cut: ar.product(m, a_in.a, b_in.b, f"{name}_prod", cut=cut))
        prod = delay(m, prod, stages - len(cuts), en, name=f"{name}_prod")
        # The flags and scales of the step, as the product comes (past the registers that
        # pass them on: more of them); ``chain[stages - 1]``: the next step's.
        chain = [a_in, *([late[0]] if stages else [])]
        for i in range(stages - 1):
            chain.append(delay(m, chain[-1], 1, en, name=f"{name}_late{i + 1}"))
        a_in = chain[-1]
        b_in = delay(m, late[1], max(stages - 1, 0), en, name=f"{name}_lateb")
        if cfg.sums > 1:
            return self._sums_pe(m, name, prod, a_in, chain[-2] if stages else None)
        sums = Signal(ar.psum_shape, name=f"{name}_sum")
        res = Signal(32, name=f"{name}_res")
        if ar.kind == "block":
            fresh = ar.add(m, ar.cleared(m, sums, a_in.bstart, f"{name}_bs0"), prod,
                           f"{name}_bs")
            fp = Signal(32, name=f"{name}_fp")
            with m.If(en & a_in.valid):
                m.d.sync += sums.eq(fresh)
            self._ends[c].append(_BlockEnd(fresh, fp, res, a_in, b_in))
            return [res]
        base = ar.cleared(m, sums, a_in.first, f"{name}_base")
        total = ar.add(m, base, prod, f"{name}_total")
        with m.If(en & a_in.valid):
            m.d.sync += sums.eq(total)
        if ar.kind == "float":
            total = Mux(b_in.on, total, 0)
        with m.If(en & a_in.valid & a_in.last):
            m.d.sync += res.eq(total)
        return [res]

    def _block_units(self, m: Module, c: int) -> None:
        """The units of column ``c`` that add the PEs' finished blocks (block formats).

        The PE of row r ends the block at step k in cycle ``k + r`` (plus a constant), so at
        most one PE of a column ends a block in a cycle except where a block that is not a
        tile's last (k + 1 a multiple of the block) meets a tile's last block (k = K - 1) of
        another row: a short last block, or a new tile. So one unit takes the blocks that end
        a tile, and one unit per ``block`` rows takes the others (their row distances are
        below the block, their steps a multiple of it apart; tiles are ``max(K, R, C)`` steps
        apart). A single row needs one unit, unless the units' adder or their read of the PE's
        binary32 sum is cut (the unit of a tile's last block must then read the PE's sum later
        than the others write it: :attr:`UnitCuts.later`). Rows beyond M take no unit: the
        next command may start while the last tile's rows beyond M are still in the array
        (their results are never collected), and its rows' blocks would meet theirs.

        Each unit is :meth:`Arith.block_value` and one binary32 adder, fed through AND-OR
        muxes from the PE whose block ends, and cut by ``unit_latency`` register stages
        (:func:`unit_cuts`); it writes that PE's binary32 sum (the unit of a tile's last
        block: the PE's result, and its sum back to +0, ready for the next tile).
        """
        cfg = self._config
        plan = unit_cuts(cfg.unit_stages)
        ends = self._ends[c]
        R = len(ends)
        if R == 1 and not plan.later:
            units = [("u", ends, lambda e: e.a.bend, None)]
        else:
            B = cfg.arith.block
            units = [(f"mid{g}", ends[g * B:(g + 1) * B], lambda e: e.a.bend & ~e.a.last, False)
                     for g in range((R + B - 1) // B)]
            units.append(("end", ends, lambda e: e.a.last, True))
        # ``last``: the unit's blocks end tiles (True), never do (False), or may (None).
        for uname, members, event, last in units:
            self._unit(m, f"col{c}_{uname}", members, event, last, plan)

    def _unit(self, m: Module, name: str, members: list, event, last, plan: UnitCuts) -> None:
        """One block unit of :meth:`_block_units`: it takes the block of the member whose
        ``event`` comes (at most one a cycle) and writes what it adds back to that member.

        Times from the block's end: the adder's input at :attr:`UnitCuts.ahead` (the unit of
        a tile's last blocks: :attr:`UnitCuts.later` stages later), the PE's binary32 sum
        read ``acc`` stages before it, the sum (or result) written ``len(add)`` after it."""
        en, ar = self.en, self._config.arith
        sel = wire(m, f"{name}_sel", Cat(e.a.valid & e.a.row & event(e) for e in members),
                   len(members))

        def pick(field, values, shape, sel):
            return wire(m, f"{name}_{field}", functools.reduce(operator.or_, (
                Mux(sel[k], v, 0) for k, v in enumerate(values))), shape)

        took = {
            "sum": pick("sum", [_bits(e.fresh) for e in members], ar.psum_shape, sel),
            "sa": pick("sa", [e.a.sa for e in members], 8, sel),
            "sb": pick("sb", [e.b.sb for e in members], 8, sel),
            "on": pick("on", [e.b.on for e in members], 1, sel),
        }
        took = {k: delay(m, v, plan.picked, en, name=f"{name}_took_{k}") for k, v in took.items()}
        value = through_cuts(m, en, plan.value.convert, f"{name}_blk", f"{name}'s block value",
                             lambda cut: ar.block_value(m, took["sum"], took["sa"], took["sb"],
                                                        f"{name}_blk", cut=cut))
        later = plan.later if last else 0
        # Which member's sum is read, and (a unit that may take either) whether its block ends
        # the tile: at the read, ``ahead - acc + later`` stages after the block's end.
        flags = {"sel": sel}
        if last is None:
            flags["last"] = pick("last", [e.a.last for e in members], 1, sel)
        at = plan.ahead - plan.acc + later
        flags = {k: delay(m, v, at, en, name=f"{name}_{k}") for k, v in flags.items()}
        on = delay(m, took["on"], len(plan.value.convert), en, name=f"{name}_on")
        value = delay(m, wire(m, f"{name}_value", Mux(on, value, 0), 32),
                      plan.value.block + later, en, name=f"{name}_value")
        acc = delay(m, pick("acc", [e.fp for e in members], 32, flags["sel"]), plan.acc, en,
                    name=f"{name}_acc")
        result = wire(m, f"{name}_total", through_cuts(
            m, en, plan.value.add, f"{name}_add", f"{name}'s adder",
            lambda cut: fp32_add(m, acc, value, name=f"{name}_add", cut=cut)))
        wrote = delay(m, flags["sel"], plan.acc + len(plan.value.add), en, name=f"{name}_wrote")
        for k, e in enumerate(members):
            if last is None:
                # One unit for every block: unit_latency 0 or 1 (``later`` 0), so the read is
                # the write.
                with m.If(en & wrote[k]):
                    m.d.sync += e.fp.eq(Mux(flags["last"], 0, result))
                    with m.If(flags["last"]):
                        m.d.sync += e.res.eq(result)
            elif last:
                with m.If(en & flags["sel"][k]):
                    m.d.sync += e.fp.eq(0)
                with m.If(en & wrote[k]):
                    m.d.sync += e.res.eq(result)
            else:
                with m.If(en & wrote[k]):
                    m.d.sync += e.fp.eq(result)


def _bits(value):
    """The bits of ``value`` (a view's underlying value)."""
    return value.as_value() if isinstance(value, data.View) else value


@dataclass(frozen=True)
class _BlockEnd:
    """What a column's block units (:meth:`OsArray._block_units`) take from one PE of it: its
    block sum with this step's product (``fresh``), its binary32 sum and result registers, and
    its A and B inputs (flags and scales)."""

    fresh: object
    fp: Signal
    res: Signal
    a: object
    b: object


class OutputStationary(wiring.Component):
    """The ``os`` dataflow: :class:`OsSequencer` and :class:`OsArray` joined, ``nvfp4``'s rows
    through a :class:`~scoville.rtl.gemm_dataflow.TensorScale` (ports:
    :func:`~scoville.rtl.gemm_dataflow.dataflow_signature`)."""

    def __init__(self, config, a_layout, b_layout):
        self._config = config
        self._layouts = (a_layout, b_layout)
        super().__init__(dataflow_signature(config, a_layout, b_layout))

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.seq = seq = OsSequencer(cfg)
        m.submodules.array = array = OsArray(cfg, *self._layouts)
        collect, row = scaled_rows(m, cfg, self.en, getattr(self, "scale", None), array)
        m.d.comb += [
            seq.cmd.eq(self.cmd), seq.start.eq(self.start), seq.en.eq(self.en),
            seq.collect.eq(collect),
            array.en.eq(self.en), array.step.eq(seq.step),
            array.a.eq(self.a), array.b.eq(self.b),
            self.active.eq(seq.active), self.need_a.eq(seq.need_a),
            self.need_b.eq(seq.need_b), self.collect.eq(collect), self.row.eq(row),
        ]
        return m
