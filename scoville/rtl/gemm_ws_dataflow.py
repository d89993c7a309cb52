"""The weight-stationary dataflow of the GEMM engine: its schedule, its array and its accumulator.

A weight tile of R x C values of B stays in the array while the rows of A stream through (row i
enters array row r delayed r cycles); partial sums flow down the columns and are added, per row
of C, into an accumulator SRAM of ``acc_rows`` rows. The next weight tile is written into shadow
registers while the current one computes and takes effect, PE by PE, with the first A row of its
tile.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

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
from .lib.comb import wire
from .lib.fp32 import fp32_add
from .lib.pipeline import delay

__all__ = ["WeightStationary", "WsAccumulator", "WsArray", "WsSequencer", "ahead_layout",
           "bus_layout", "row_layout"]


def row_layout(config) -> data.StructLayout:
    """An A row's metadata, from the step that took it: ``valid``, ``i`` (its row in the chunk
    of ``acc_rows``), ``first_kt``/``last_kt`` (its K tile is the first / last),
    ``bstart``/``bend`` (the K tile starts / ends an MX block)."""
    return data.StructLayout({"valid": 1, "i": range(config.acc_rows), "first_kt": 1,
                              "last_kt": 1, "bstart": 1, "bend": 1})


def ahead_layout(config) -> data.StructLayout:
    """The A row the sequencer issues this step (it arrives at the array the next step):
    ``valid``, ``i`` (its row in the chunk). The ``float`` accumulator reads the row's partial
    sums a step ahead with it."""
    return data.StructLayout({"valid": 1, "i": range(config.acc_rows)})


def bus_layout(config) -> data.StructLayout:
    """The weight bus of the step whose B beat arrives now: ``valid`` (a weight row is
    written), ``row`` (which PE row), ``take`` (a B beat was taken; else the row is zeros: past
    K), ``first`` (row 0 of a tile), ``cols`` (which columns lie inside N)."""
    return data.StructLayout({"valid": 1, "row": range(max(config.rows, 2)), "take": 1,
                              "first": 1, "cols": config.cols})


class WsSequencer(wiring.Component):
    """The ``ws`` schedule: weight tiles (tj, chunk, kt), kt fastest. A tile takes ``max(chunk
    rows, R)`` steps: step s issues A row s of the chunk, and the weight bus writes row s + 1
    of this tile's weights, or at the tile's last step row 0 of the next tile's. A prologue
    step writes row 0 of the first tile. It counts the rows of C still to emit, so ``active``
    stays high until the last one.

    Attributes
    ----------
    cmd, start, en, collect, active, need_a, need_b
        As :func:`~scoville.rtl.gemm_dataflow.sequencer_members` (``collect`` from the
        accumulator).
    meta : Out(row_layout)
        Registered when ``en``: the metadata of the A row arriving now.
    swap : Out(1)
        Registered: the A row arriving now is its tile's first (the PEs switch weights).
    bus : Out(bus_layout)
        Registered: the weight bus of the step whose B beat arrives now.
    ahead : Out(ahead_layout)
        Not registered: the A row this step issues (``meta`` of the next step, when ``en``).
    """

    def __init__(self, config):
        self._config = config
        super().__init__(sequencer_members(meta=Out(row_layout(config)), swap=Out(1),
                                           bus=Out(bus_layout(config)),
                                           ahead=Out(ahead_layout(config))))

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        R, C, AR = cfg.rows, cfg.cols, cfg.acc_rows
        en = self.en
        dim = unsigned(DIM_BITS)
        M, K, N = command_dims(m, self)

        j0, c0, k0, s = (Signal(dim, name=n) for n in ("j0", "c0", "k0", "step"))
        span, mc = Signal(dim), Signal(dim)
        kr = Signal(range(R + 1))
        pro, issuing = Signal(), Signal()
        pending = Signal(dim)
        last_k = wire(m, "last_k", k0 + R >= K)
        last_chunk = wire(m, "last_chunk", c0 + AR >= M)
        final = wire(m, "final_tile", last_k & last_chunk & (j0 + C >= N))
        nk0 = wire(m, "next_k0", Mux(last_k, 0, k0 + R), dim)
        nc0 = wire(m, "next_c0", Mux(last_k, Mux(last_chunk, 0, c0 + AR), c0), dim)
        nj0 = wire(m, "next_j0", Mux(last_k & last_chunk, j0 + C, j0), dim)
        nmc = wire(m, "next_mc", at_most(M - nc0, AR), dim)

        tile_end = wire(m, "tile_end", s == span - 1)
        a_step = wire(m, "a_step", issuing & ~pro & (s < mc))
        w_cur = wire(m, "w_cur", issuing & ~pro & (s + 1 < R))
        w_next = wire(m, "w_next", issuing & ~pro & tile_end & ~final)
        w_take = wire(m, "w_take", (w_cur & (s + 1 < kr)) | w_next | (issuing & pro))
        w_j0 = wire(m, "w_j0", Mux(w_next, nj0, j0), dim)
        m.d.comb += [
            self.active.eq(issuing | (pending != 0)),
            self.need_a.eq(a_step),
            self.need_b.eq(w_take),
        ]
        cmd = self.cmd
        with m.If(self.start):
            first_mc = at_most(cmd.m, AR)
            m.d.sync += [
                j0.eq(0), c0.eq(0), k0.eq(0), s.eq(0), pro.eq(1), issuing.eq(1),
                mc.eq(first_mc), span.eq(at_least(first_mc, R)), kr.eq(at_most(cmd.k, R)),
            ]
        with m.Elif(en & issuing):
            with m.If(pro):
                m.d.sync += pro.eq(0)
            with m.Elif(tile_end):
                with m.If(final):
                    m.d.sync += issuing.eq(0)
                with m.Else():
                    m.d.sync += [
                        s.eq(0), k0.eq(nk0), c0.eq(nc0), j0.eq(nj0), mc.eq(nmc),
                        span.eq(at_least(nmc, R)), kr.eq(at_most(K - nk0, R)),
                    ]
            with m.Else():
                m.d.sync += s.eq(s + 1)

        m1, swap, wl = self.meta, self.swap, self.bus
        bits = block_bits(cfg)
        m.d.comb += [self.ahead.valid.eq(a_step), self.ahead.i.eq(s)]
        with m.If(en):
            m.d.sync += [
                m1.valid.eq(a_step),
                m1.i.eq(s),
                m1.first_kt.eq(k0 == 0),
                m1.last_kt.eq(last_k),
                m1.bstart.eq(k0[:bits] == 0),
                m1.bend.eq(((k0 + R)[:bits] == 0) | last_k),
                swap.eq(a_step & (s == 0)),
                wl.valid.eq(w_cur | w_next | pro),
                wl.row.eq(Mux(w_cur, s + 1, 0)),
                wl.take.eq(w_take),
                wl.first.eq(w_next | pro),
                wl.cols.eq(Cat(c < N - w_j0 for c in range(C))),
            ]
        with m.If(self.start):
            m.d.sync += [m1.valid.eq(0), swap.eq(0), wl.valid.eq(0)]

        with m.If(self.start):
            m.d.sync += pending.eq(0)
        with m.Elif(en):
            m.d.sync += pending.eq(pending + (a_step & last_k) - self.collect)
        return m


class WsArray(wiring.Component):
    """The ``ws`` systolic array: A rows skewed in from the left, weight rows written down each
    column's bus into the PEs' shadow registers, and each column's partial sums flowing down
    and leaving deskewed, one row of C's partial sums per step.

    Each PE adds its product (:class:`~scoville.rtl.gemm_arith.Arith`: exact for ``int`` and
    ``block``, rounded to FP32 for ``float``) to the partial sum from above; the top row adds
    to ``tops`` (the accumulator's partial sum, ``float`` only: FP32 additions stay in K
    order) or to zero. A weight past K (``take`` low) adds nothing. The PEs are built flat into
    this module.

    Attributes
    ----------
    en : In(1)
        The engine advances (every register loads only then).
    swap : In(1)
        The A row on ``a`` is its tile's first: each PE switches to its shadow weight with it.
    bus : In(bus_layout)
        The weight bus; the weight row itself is ``b``.
    a, b : In(...)
        The operand beats taken by the step that ``swap`` and ``bus`` describe.
    psums : Out(ArrayLayout(psum_shape, cols))
        The column sums of the A row that entered ``rows + cols - 1`` steps ago, deskewed.
    tops : In(ArrayLayout(32, cols))
        ``float`` only: the partial sum that column ``c`` starts from, for the row entering
        its top PE this step.
    bottoms : Out(ArrayLayout(32, cols))
        ``float`` only: the column sums of the bottom PEs this step, not registered.
    """

    def __init__(self, config, a_layout, b_layout):
        self._config = config
        ar = config.arith
        C = config.cols
        chain = ({"tops": In(data.ArrayLayout(32, C)), "bottoms": Out(data.ArrayLayout(32, C))}
                 if ar.kind == "float" else {})
        super().__init__({
            "en": In(1), "swap": In(1), "bus": In(bus_layout(config)),
            "a": In(a_layout), "b": In(b_layout),
            "psums": Out(data.ArrayLayout(ar.psum_shape, C)),
            **chain,
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        R, C = cfg.rows, cfg.cols
        en, wl = self.en, self.bus
        adata, bdata = self.a, self.b
        elem = adata.data[0].shape()
        alane = data.StructLayout({"a": elem, "swap": 1})
        left = []
        for r in range(R):
            lane = Signal(alane, name=f"a_lane{r}")
            m.d.comb += [lane.a.eq(adata.data[r]), lane.swap.eq(self.swap)]
            left.append(delay(m, lane, r, en, name=f"a_skew{r}"))
        lane_layout = data.StructLayout({"valid": 1, "row": range(max(R, 2)), "on": 1,
                                         "w": bdata.data[0].shape()})
        buses = []
        for c in range(C):
            lane = Signal(lane_layout, name=f"w_lane{c}")
            on = wl.take & wl.cols[c]
            m.d.comb += [
                lane.valid.eq(wl.valid),
                lane.row.eq(wl.row),
                lane.on.eq(on),
                lane.w.eq(Mux(on, bdata.data[c], 0)),
            ]
            buses.append(delay(m, lane, c, en, name=f"w_skew{c}"))

        psums = [self.tops[c] if cfg.arith.kind == "float" else None for c in range(C)]
        for r in range(R):
            a_in = left[r]
            for c in range(C):
                psums[c], below = self._pe(m, r, c, a_in, buses[c], psums[c])
                if r == R - 1 and cfg.arith.kind == "float":
                    m.d.comb += self.bottoms[c].eq(below)
                if c < C - 1:
                    a_out = Signal(alane, name=f"pe{r}_{c}_a")
                    with m.If(en):
                        m.d.sync += a_out.eq(a_in)
                    a_in = a_out
        for c, p in enumerate(psums):
            m.d.comb += self.psums[c].eq(delay(m, p, C - 1 - c, en, name=f"deskew{c}"))
        return m

    def _pe(self, m: Module, r: int, c: int, a_in, bus, psum_in):
        """PE (r, c): writes its shadow weight from the column's bus, switches to it with the
        first A row of a tile, and adds its product to the partial sum from above. Returns the
        registered partial sum and the sum it registers."""
        cfg, en = self._config, self.en
        ar = cfg.arith
        name = f"pe{r}_{c}"
        # A weight and whether it lies inside K and N; ``on`` only where a zero weight must
        # not multiply an Inf or NaN element of A (beyond K, A holds anything).
        wlayout = data.StructLayout({"w": bus.w.shape(), **({"on": 1} if ar.specials else {})})
        shadow = Signal(wlayout, name=f"{name}_shadow")
        weight = Signal(wlayout, name=f"{name}_w")
        with m.If(en & bus.valid & (bus.row == r)):
            m.d.sync += shadow.w.eq(bus.w)
            if ar.specials:
                m.d.sync += shadow.on.eq(bus.on)
        with m.If(en & a_in.swap):
            m.d.sync += weight.eq(shadow)
        w = wire(m, f"{name}_weff", Mux(a_in.swap, shadow, weight), wlayout)
        prod = ar.product(m, a_in.a, w.w, f"{name}_prod")
        if ar.kind == "float":
            total = ar.add(m, psum_in, prod, f"{name}_add")
            below = wire(m, f"{name}_below", Mux(w.on, total, psum_in), ar.psum_shape)
        else:
            if ar.specials:
                prod = ar.cleared(m, prod, ~w.on, f"{name}_prodon")
            below = prod if psum_in is None else ar.add(m, psum_in, prod, f"{name}_below")
        psum = Signal(ar.psum_shape, name=f"{name}_psum")
        with m.If(en):
            m.d.sync += psum.eq(below)
        return psum, below


class WsAccumulator(wiring.Component):
    """The ``ws`` accumulator: keeps each row's partial sums of C in an SRAM of ``acc_rows``
    rows and emits the row of C with its last K tile.

    The row's metadata is delayed to meet its sums (``rows + cols`` steps). ``int`` and
    ``block`` (:class:`~scoville.rtl.gemm_arith.Arith`): the SRAM row is read a step ahead and the
    array's column sums are added into it: a wrapping INT32 sum per entry; or the block's exact
    sum and the FP32 sum, where at a block's end the block sum times the scales is rounded once
    to FP32 and added (one converter and adder per column). ``float``: the FP32 additions must
    stay in K order, so the partial sum enters the top of its column (``tops``) and the bottom
    PE's sum (``bottoms``) is written back; each column has its own SRAM, read and written
    skewed as the column sees the row.

    Attributes
    ----------
    en : In(1)
        The engine advances.
    meta : In(row_layout)
        The metadata of the A row arriving now (from the sequencer).
    ahead : In(ahead_layout)
        ``float`` only: the A row the sequencer issues now.
    bus : In(bus_layout)
        The weight bus (its first row carries the tile's B scales and columns).
    sa, sb : In
        ``block`` only: the A row's block scale, the weight row's (one per column).
    psums : In(ArrayLayout(psum_shape, cols))
        The array's deskewed column sums.
    tops : Out(ArrayLayout(32, cols)), bottoms : In(ArrayLayout(32, cols))
        ``float`` only: the partial sums into the top of each column and out of its bottom
        (see :class:`WsArray`).
    collect : Out(1)
        A row of C leaves this step.
    row : Out(ArrayLayout(32, cols))
        That row.
    cols : Out(cols)
        ``nvfp4`` only: which columns of ``row`` lie inside N.
    """

    def __init__(self, config):
        self._config = config
        C = config.cols
        ar = config.arith
        extra = {}
        if config.mx:
            extra = {"sa": In(8), "sb": In(data.ArrayLayout(8, C))}
            if ar.tensor_scale:
                extra["cols"] = Out(C)
        if ar.kind == "float":
            extra = {"ahead": In(ahead_layout(config)), "tops": Out(data.ArrayLayout(32, C)),
                     "bottoms": In(data.ArrayLayout(32, C))}
        super().__init__({
            "en": In(1), "meta": In(row_layout(config)), "bus": In(bus_layout(config)),
            **extra,
            "psums": In(data.ArrayLayout(ar.psum_shape, C)),
            "collect": Out(1), "row": Out(data.ArrayLayout(32, C)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        ar = cfg.arith
        R, C, AR = cfg.rows, cfg.cols, cfg.acc_rows
        en, m1, wl = self.en, self.meta, self.bus
        psums = self.psums
        # Stage 2 adds the block scales of the row (A) and of the weight tile (B) to the
        # metadata.
        sb_reg = Signal(data.ArrayLayout(8, C))
        on_reg = Signal(C)
        if cfg.mx:
            with m.If(en & wl.valid & wl.first):
                m.d.sync += on_reg.eq(wl.cols)
                for c in range(C):
                    # Beyond N a placeholder scale; ``on`` masks the value.
                    m.d.sync += sb_reg[c].eq(Mux(wl.cols[c], self.sb[c], 127))
        meta2 = Signal(data.StructLayout({"m": row_layout(cfg), "sa": 8,
                                          "sb": data.ArrayLayout(8, C), "on": C}))
        with m.If(en):
            m.d.sync += [meta2.m.eq(m1), meta2.sb.eq(sb_reg), meta2.on.eq(on_reg)]
            if cfg.mx:
                m.d.sync += meta2.sa.eq(self.sa)
        mt = delay(m, meta2, R + C - 2, en, name="meta")
        m.d.comb += self.collect.eq(mt.m.valid & mt.m.last_kt)
        if ar.tensor_scale:
            m.d.comb += self.cols.eq(mt.on)
        if ar.kind == "float":
            self._columns(m)
            m.d.comb += self.row.eq(psums)
            return m
        addr = m1.i if R + C - 1 < 2 else delay(m, meta2, R + C - 3, en, name="meta").m.i

        # Stage R + C: add the column sums of row i into the accumulator SRAM.
        entry = data.StructLayout({"bs": ar.psum_shape, "fp": 32}) if cfg.mx else ar.psum_shape
        m.submodules.acc = acc = Memory(shape=data.ArrayLayout(entry, C), depth=AR, init=[])
        wp = acc.write_port()
        rp = acc.read_port(transparent_for=(wp,))
        out = self.row
        m.d.comb += [rp.addr.eq(addr), rp.en.eq(en), wp.addr.eq(mt.m.i),
                     wp.en.eq(en & mt.m.valid)]
        for c in range(C):
            old = rp.data[c]
            if cfg.mx:
                bs = ar.add(m, ar.cleared(m, old.bs, mt.m.bstart, f"acc{c}_bs0"), psums[c],
                            f"acc{c}_bs")
                value = Mux(mt.on[c], ar.block_value(m, bs, mt.sa, mt.sb[c], f"acc{c}_blk"), 0)
                base = wire(m, f"acc{c}_base", Mux(mt.m.first_kt, 0, old.fp))
                total = wire(m, f"acc{c}_total", fp32_add(m, base, value, name=f"acc{c}_add"))
                m.d.comb += [
                    wp.data[c].bs.eq(bs),
                    wp.data[c].fp.eq(Mux(mt.m.bend, total, base)),
                    out[c].eq(total),
                ]
            else:
                base = ar.cleared(m, old, mt.m.first_kt, f"acc{c}_base")
                total = ar.add(m, base, psums[c], f"acc{c}_total")
                m.d.comb += [wp.data[c].eq(total), out[c].eq(total)]
        return m

    def _columns(self, m: Module):
        """``float``: one SRAM per column, read for a row when the row reaches the column's top
        PE (+0 in the row's first K tile) and written when it leaves the bottom PE. A row's
        next K tile reaches the top no earlier than the step its sum is written (tiles are at
        least ``rows`` steps apart), and a read sees a write of the same step."""
        cfg = self._config
        R, C, AR = cfg.rows, cfg.cols, cfg.acc_rows
        en = self.en
        ahead = self.ahead
        first = Signal(name="first")
        m.d.comb += first.eq(self.meta.first_kt)
        write = delay(m, self.meta, R - 1, en, name="wmeta")
        for c in range(C):
            mem = Memory(shape=32, depth=AR, init=[])
            m.submodules[f"col{c}"] = mem
            wp = mem.write_port()
            rp = mem.read_port(transparent_for=(wp,))
            m.d.comb += [
                rp.addr.eq(ahead.i), rp.en.eq(en),
                self.tops[c].eq(Mux(first, 0, rp.data)),
                wp.addr.eq(write.i), wp.en.eq(en & write.valid), wp.data.eq(self.bottoms[c]),
            ]
            if c < C - 1:
                ahead = delay(m, ahead, 1, en, name=f"ahead{c + 1}")
                first = delay(m, first, 1, en, name=f"first{c + 1}")
                write = delay(m, write, 1, en, name=f"wmeta{c + 1}")


class WeightStationary(wiring.Component):
    """The ``ws`` dataflow: :class:`WsSequencer`, :class:`WsArray` and :class:`WsAccumulator`
    joined, ``nvfp4``'s rows through a :class:`~scoville.rtl.gemm_dataflow.TensorScale`
    (ports: :func:`~scoville.rtl.gemm_dataflow.dataflow_signature`)."""

    def __init__(self, config, a_layout, b_layout):
        self._config = config
        self._layouts = (a_layout, b_layout)
        super().__init__(dataflow_signature(config, a_layout, b_layout))

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.seq = seq = WsSequencer(cfg)
        m.submodules.array = array = WsArray(cfg, *self._layouts)
        m.submodules.accumulator = accumulator = WsAccumulator(cfg)
        collect, row = scaled_rows(m, cfg, self.en, getattr(self, "scale", None), accumulator)
        m.d.comb += [
            seq.cmd.eq(self.cmd), seq.start.eq(self.start), seq.en.eq(self.en),
            seq.collect.eq(collect),
            array.en.eq(self.en), array.swap.eq(seq.swap), array.bus.eq(seq.bus),
            array.a.eq(self.a), array.b.eq(self.b),
            accumulator.en.eq(self.en), accumulator.meta.eq(seq.meta),
            accumulator.bus.eq(seq.bus), accumulator.psums.eq(array.psums),
            self.active.eq(seq.active), self.need_a.eq(seq.need_a),
            self.need_b.eq(seq.need_b), self.collect.eq(collect), self.row.eq(row),
        ]
        if cfg.mx:
            m.d.comb += [accumulator.sa.eq(self.a.scale), accumulator.sb.eq(self.b.scale)]
        if cfg.arith.kind == "float":
            m.d.comb += [accumulator.ahead.eq(seq.ahead), array.tops.eq(accumulator.tops),
                         accumulator.bottoms.eq(array.bottoms)]
        return m
