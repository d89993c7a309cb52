"""The tiled GEMM engine: C = A x B on an R x C systolic array, for any M x K x N.

The engine runs one fixed schedule per command (see ``docs/gemm.md`` and the timed model
:mod:`scoville.sim.cycles.gemm`): every schedule step reads at most one A beat and one B beat
from the operand buffers and emits at most one row of C. When a step needs a beat that has not
arrived, or must emit a row while the previous one still waits on ``o.ready``, the whole engine
(array, skew registers, buffers' read side) holds for a cycle, and the cause is counted. So the
cycle count is always the schedule length plus the counted stall cycles.

Dataflows (chosen at elaboration):

``os`` (output-stationary)
    Output tile (ti, tj) of R x C values stays in the array while K steps stream column k of
    the A tile in from the left (row r delayed r cycles) and row k of the B tile in from the top
    (column c delayed c cycles). Tiles follow each other with no gap (``max(K, R, C)`` steps
    apart); each PE keeps a finished result in a second register while the next tile
    accumulates, and the rows of a finished tile leave one per step.
``ws`` (weight-stationary)
    A weight tile of R x C values of B stays in the array while the rows of A stream through
    (row i enters array row r delayed r cycles); partial sums flow down the columns and are
    added, per row of C, into an accumulator SRAM of ``acc_rows`` rows. The next weight tile is
    written into shadow registers while the current one computes and takes effect, PE by PE,
    with the first A row of its tile.

Formats: ``int8`` and ``int4`` multiply exactly and accumulate in INT32 with wrap-around;
``mxfp4`` sums the exact E2M1 products of each 32-element block along K (in quarters), and at
the block's end rounds ``sum * 2**(sa + sb - 254)`` once to binary32 and adds it into a binary32
accumulator, blocks in order from +0, as :class:`~scoville.rtl.mx_dot.MxDot` does.
"""

import functools
import operator
from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .blockdot import mx_block_value, mx_scale_terms
from .comb import wire
from .counters import counter_layout
from .formats import ELEMENT_BITS, MX_BLOCK
from .fp4_mul import e2m1_product
from .fp32_add import fp32_add
from .opbuffer import OperandBuffer
from .params import ParamError, check_choice, check_int, param
from .pipeline import delay

__all__ = ["COUNTERS", "DIM_BITS", "FORMATS", "STATUS", "Gemm", "GemmConfig", "operand_layouts"]

#: The element formats (their widths: :data:`~scoville.rtl.formats.ELEMENT_BITS`).
FORMATS = ("int8", "int4", "mxfp4")

#: Width of the M, K and N fields of a command (1..65535).
DIM_BITS = 16

#: The low bits of K that count elements within an MX block.
_BLOCK_BITS = (MX_BLOCK - 1).bit_length()

#: Status codes of the last command.
STATUS = {"ok": 0, "zero_dim": 1}

#: The performance counters (the ``counters`` port).
COUNTERS = counter_layout({"busy": 32, "stall_a": 32, "stall_b": 32, "stall_out": 32,
                           "idle": 32, "rejected": 16})

_CMD = data.StructLayout({"m": unsigned(DIM_BITS), "k": unsigned(DIM_BITS),
                          "n": unsigned(DIM_BITS)})


@dataclass(frozen=True)
class GemmConfig:
    """Parameters of :class:`Gemm` (and of its golden and timed models).

    Attributes
    ----------
    rows, cols : int
        The array is ``rows`` x ``cols`` processing elements.
    fmt : str
        ``int8``, ``int4`` (INT32 accumulation) or ``mxfp4`` (FP32 accumulation).
    dataflow : str
        ``os`` (output-stationary) or ``ws`` (weight-stationary).
    buffer_depth : int
        Beats each operand buffer holds.
    acc_rows : int
        ``ws`` only: rows of C accumulated on chip per pass (M is split into chunks of this).
    """

    rows: int = param(8, "1..64", "array rows")
    cols: int = param(8, "1..64", "array columns")
    fmt: str = param("int8", "int8, int4, mxfp4", "element format")
    dataflow: str = param("os", "os, ws", "output- or weight-stationary")
    buffer_depth: int = param(64, "2..4096", "beats per operand buffer")
    acc_rows: int = param(256, "2..4096", "ws: accumulator rows")

    def __post_init__(self):
        check_int("rows", self.rows, 1, 64)
        check_int("cols", self.cols, 1, 64)
        check_choice("fmt", self.fmt, FORMATS)
        check_choice("dataflow", self.dataflow, ("os", "ws"))
        check_int("buffer_depth", self.buffer_depth, 2, 4096)
        check_int("acc_rows", self.acc_rows, 2, 4096)
        if self.mx and self.dataflow == "ws" and MX_BLOCK % self.rows:
            raise ParamError(
                f"parameter 'rows' = {self.rows} is not allowed with fmt=mxfp4 and "
                f"dataflow=ws (a K tile must not straddle an MX block); allowed: 1, 2, 4, 8, 16, 32"
            )

    @property
    def bits(self) -> int:
        return ELEMENT_BITS[self.fmt]

    @property
    def mx(self) -> bool:
        return self.fmt == "mxfp4"


def _beat(config: GemmConfig, lanes: int, scales: int) -> data.StructLayout:
    elem = unsigned(4) if config.mx else signed(config.bits)
    fields = {"data": data.ArrayLayout(elem, lanes)}
    if config.mx:
        fields["scale"] = data.ArrayLayout(8, scales) if scales > 1 else unsigned(8)
    return data.StructLayout(fields)


def operand_layouts(config: GemmConfig) -> tuple[data.StructLayout, data.StructLayout]:
    """The payload layouts of the ``a`` and ``b`` streams of :class:`Gemm` with ``config``."""
    rows, cols = config.rows, config.cols
    return (_beat(config, rows, rows if config.dataflow == "os" else 1),
            _beat(config, cols, cols))


class Gemm(wiring.Component):
    """C = A x B on a ``rows`` x ``cols`` systolic array, tile by tile.

    A command gives M, K and N; the operands then arrive as beats in the order of
    :func:`scoville.sim.golden.gemm.operand_beats`, and C leaves as rows of ``cols`` values in
    the order of :func:`scoville.sim.golden.gemm.result_rows`. Lanes outside the matrices (rows
    beyond M, columns beyond N) are ignored on input: the engine pads the edge tiles with
    zeros, and a partial MX block along K is summed over its elements alone (as if padded).

    Attributes
    ----------
    cmd : In(stream.Signature(StructLayout(m, k, n)))
        One GEMM per command; taken when the previous one has finished. A zero dimension is
        rejected: ``status`` becomes ``zero_dim``, ``rejected`` counts it, and nothing else
        changes.
    a, b : In(stream.Signature(...))
        Operand beats: ``data`` (``rows`` resp. ``cols`` elements, lane 0 lowest) and, for
        ``mxfp4``, ``scale`` (E8M0 codes; read on a block's final element).
    o : Out(stream.Signature(ArrayLayout(32, cols)))
        Rows of C: INT32, or binary32 bits.
    status : Out(2)
        Status of the latest command (:data:`STATUS`).
    counters : Out(COUNTERS)
        Since reset: ``busy``, ``stall_a``, ``stall_b``, ``stall_out``, ``idle`` (32 bits each:
        cycles of schedule steps and command accepts, of steps held for a missing A beat, for a
        missing B beat or for ``o.ready``, of no command to run) and ``rejected`` (16 bits:
        commands rejected).
    """

    def __init__(self, config: GemmConfig):
        self._config = config
        self.a_layout, self.b_layout = operand_layouts(config)
        self.out_layout = data.ArrayLayout(32, config.cols)
        super().__init__({
            "cmd": In(stream.Signature(_CMD)),
            "a": In(stream.Signature(self.a_layout)),
            "b": In(stream.Signature(self.b_layout)),
            "o": Out(stream.Signature(self.out_layout)),
            "status": Out(2),
            "counters": Out(COUNTERS),
        })

    @property
    def config(self) -> GemmConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.abuf = abuf = OperandBuffer(self.a_layout, cfg.buffer_depth)
        m.submodules.bbuf = bbuf = OperandBuffer(self.b_layout, cfg.buffer_depth)
        wiring.connect(m, wiring.flipped(self.a), abuf.i)
        wiring.connect(m, wiring.flipped(self.b), bbuf.i)

        cmd = self.cmd.payload
        ctl = _Control(cmd)
        bad = (cmd.m == 0) | (cmd.k == 0) | (cmd.n == 0)
        m.d.comb += [
            self.cmd.ready.eq(~ctl.active),
            ctl.start.eq(self.cmd.valid & ~ctl.active & ~bad),
        ]
        with m.If(self.cmd.valid & ~ctl.active):
            m.d.sync += self.status.eq(Mux(bad, STATUS["zero_dim"], STATUS["ok"]))
            with m.If(bad):
                m.d.sync += self.counters.rejected.eq(self.counters.rejected + 1)
            with m.Else():
                m.d.sync += [ctl.dim_m.eq(cmd.m), ctl.dim_k.eq(cmd.k), ctl.dim_n.eq(cmd.n)]

        if cfg.dataflow == "os":
            _OutputStationary(cfg, ctl, abuf, bbuf).build(m)
        else:
            _WeightStationary(cfg, ctl, abuf, bbuf).build(m)

        stall_out = ctl.collect & self.o.valid & ~self.o.ready
        stall_a = ctl.need_a & ~abuf.avail
        stall_b = ctl.need_b & ~bbuf.avail
        m.d.comb += [
            ctl.en.eq(ctl.active & ~stall_out & ~stall_a & ~stall_b),
            abuf.en.eq(ctl.en),
            bbuf.en.eq(ctl.en),
            abuf.take.eq(ctl.need_a),
            bbuf.take.eq(ctl.need_b),
        ]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(ctl.en & ctl.collect):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(ctl.row)]

        with m.If(ctl.active):
            with m.If(stall_out):
                m.d.sync += self.counters.stall_out.eq(self.counters.stall_out + 1)
            with m.Elif(stall_a):
                m.d.sync += self.counters.stall_a.eq(self.counters.stall_a + 1)
            with m.Elif(stall_b):
                m.d.sync += self.counters.stall_b.eq(self.counters.stall_b + 1)
            with m.Else():
                m.d.sync += self.counters.busy.eq(self.counters.busy + 1)
        with m.Elif(self.cmd.valid):
            m.d.sync += self.counters.busy.eq(self.counters.busy + 1)
        with m.Elif(self.o.valid & ~self.o.ready):
            m.d.sync += self.counters.stall_out.eq(self.counters.stall_out + 1)
        with m.Else():
            m.d.sync += self.counters.idle.eq(self.counters.idle + 1)
        return m


class _Control:
    """The signals between the engine's shell and a dataflow's schedule."""

    def __init__(self, cmd):
        self.cmd = cmd  # the command's payload, read when ``start`` is high
        self.start = Signal()  # a good command is taken this cycle
        self.en = Signal()  # the schedule advances this cycle
        self.active = Signal()  # a command is running
        self.need_a = Signal()  # this step takes an A beat
        self.need_b = Signal()  # ... a B beat
        self.collect = Signal()  # ... emits a row of C
        self.row = None  # the row it emits
        self.dim_m = Signal(DIM_BITS)
        self.dim_k = Signal(DIM_BITS)
        self.dim_n = Signal(DIM_BITS)


def _at_least(*values):
    out = values[0]
    for v in values[1:]:
        out = Mux(out > v, out, v)
    return out


def _at_most(a, b):
    return Mux(a < b, a, b)


def _mac_shape(config: GemmConfig):
    """The shape of a PE's running sum: wrapping INT32, or an exact MX block sum (quarters)."""
    return signed(16) if config.mx else signed(32)


def _product(m: Module, config: GemmConfig, a, b, name: str):
    if config.mx:
        return wire(m, name, e2m1_product(a, b))
    return wire(m, name, a * b)


class _Dataflow:
    """A dataflow's schedule and array, built into the engine's module by ``build``."""

    def __init__(self, cfg, ctl, abuf, bbuf):
        self.cfg, self.ctl, self.abuf, self.bbuf = cfg, ctl, abuf, bbuf


class _OutputStationary(_Dataflow):
    def build(self, m: Module):
        cfg, ctl = self.cfg, self.ctl
        R, C = cfg.rows, cfg.cols
        en = ctl.en
        M, K, N = ctl.dim_m, ctl.dim_k, ctl.dim_n

        # Schedule: tiles (ti, tj) with tj fastest, K steps each, max(K, R, C) steps apart.
        i0 = Signal(DIM_BITS)
        j0 = Signal(DIM_BITS)
        k = Signal(DIM_BITS)
        span = Signal(DIM_BITS)
        issuing = Signal()
        pending = Signal(DIM_BITS)
        stepping = wire(m, "stepping", issuing & (k < K))
        k_last = wire(m, "k_last", k == K - 1)
        last_tile = wire(m, "last_tile", (i0 + R >= M) & (j0 + C >= N))
        tile_rows = wire(m, "tile_rows", _at_most(M - i0, R), unsigned(DIM_BITS))
        m.d.comb += [
            ctl.active.eq(issuing | (pending != 0)),
            ctl.need_a.eq(stepping),
            ctl.need_b.eq(stepping),
        ]
        with m.If(ctl.start):
            m.d.sync += [i0.eq(0), j0.eq(0), k.eq(0), issuing.eq(1),
                         span.eq(_at_least(ctl.cmd.k, R, C))]
        with m.Elif(en & issuing):
            with m.If(k_last & last_tile):
                m.d.sync += issuing.eq(0)
            with m.Elif(k == span - 1):
                m.d.sync += k.eq(0)
                with m.If(j0 + C >= N):
                    m.d.sync += [j0.eq(0), i0.eq(i0 + R)]
                with m.Else():
                    m.d.sync += j0.eq(j0 + C)
            with m.Else():
                m.d.sync += k.eq(k + 1)

        # Stage 1 (the buffers' data arrive): flags of the step and the edge masks.
        # What travels with each A element (and, below, each B element); the MX fields only
        # in MX arrays, so that an integer PE carries nothing it does not use.
        mx_fields = {"bstart": 1, "bend": 1, "sa": 8} if cfg.mx else {}
        flow = data.StructLayout({
            "valid": 1, "first": 1, "last": 1, "row": 1, "a": self.abuf.data.data[0].shape(),
            **mx_fields,
        })
        s1 = Signal(data.StructLayout({
            "valid": 1, "first": 1, "last": 1, "bstart": 1, "bend": 1,
            "rows": R, "cols": C,
        }))
        with m.If(en):
            m.d.sync += [
                s1.valid.eq(stepping),
                s1.first.eq(k == 0),
                s1.last.eq(k_last),
                s1.bstart.eq(k[:_BLOCK_BITS] == 0),
                s1.bend.eq((k[:_BLOCK_BITS] == MX_BLOCK - 1) | k_last),
                s1.rows.eq(Cat(r < M - i0 for r in range(R))),
                s1.cols.eq(Cat(c < N - j0 for c in range(C))),
            ]

        adata, bdata = self.abuf.data, self.bbuf.data
        left = []
        for r in range(R):
            lane = Signal(flow, name=f"a_lane{r}")
            m.d.comb += [
                lane.valid.eq(s1.valid), lane.first.eq(s1.first), lane.last.eq(s1.last),
                lane.row.eq(s1.rows[r]), lane.a.eq(adata.data[r]),
            ]
            if cfg.mx:
                m.d.comb += [lane.bstart.eq(s1.bstart), lane.bend.eq(s1.bend),
                             lane.sa.eq(adata.scale[r] if R > 1 else adata.scale)]
            left.append(delay(m, lane, r, en, name=f"a_skew{r}"))
        btype = data.StructLayout({"b": bdata.data[0].shape(),
                                   **({"sb": 8, "on": 1} if cfg.mx else {})})
        top = []
        for c in range(C):
            lane = Signal(btype, name=f"b_lane{c}")
            m.d.comb += lane.b.eq(Mux(s1.cols[c], bdata.data[c], 0))
            if cfg.mx:
                scale = bdata.scale[c] if C > 1 else bdata.scale
                m.d.comb += [lane.sb.eq(Mux(s1.cols[c], scale, 127)), lane.on.eq(s1.cols[c])]
            top.append(delay(m, lane, c, en, name=f"b_skew{c}"))

        res = [[None] * C for _ in range(R)]
        collect = []
        for r in range(R):
            a_in = left[r]
            for c in range(C):
                b_in = top[c]
                res[r][c] = self._pe(m, r, c, a_in, b_in)
                a_out = Signal(flow, name=f"pe{r}_{c}_a")
                with m.If(en):
                    m.d.sync += a_out.eq(a_in)
                a_in = a_out
                if r < R - 1:
                    b_out = Signal(btype, name=f"pe{r}_{c}_b")
                    with m.If(en):
                        m.d.sync += b_out.eq(b_in)
                    top[c] = b_out
            collect.append(wire(m, f"collect{r}", a_in.valid & a_in.last & a_in.row))

        # At most one row collects in a step (tiles are at least R steps apart): an AND-OR mux.
        row = Signal(data.ArrayLayout(32, C))
        m.d.comb += row.eq(functools.reduce(
            operator.or_, (Mux(collect[r], Cat(res[r]), 0) for r in range(R))))
        ctl.row = row
        m.d.comb += ctl.collect.eq(Cat(collect).any())
        with m.If(ctl.start):
            m.d.sync += pending.eq(0)
        with m.Elif(en):
            m.d.sync += pending.eq(
                pending + Mux(stepping & k_last, tile_rows, 0) - ctl.collect
            )

    def _pe(self, m: Module, r: int, c: int, a_in, b_in) -> Signal:
        """PE (r, c): accumulates its output while its inputs are valid; returns the register
        holding its latest finished result."""
        cfg, en = self.cfg, self.ctl.en
        name = f"pe{r}_{c}"
        prod = _product(m, cfg, a_in.a, b_in.b, f"{name}_prod")
        sums = Signal(_mac_shape(cfg), name=f"{name}_sum")
        res = Signal(32, name=f"{name}_res")
        if cfg.mx:
            fresh = wire(m, f"{name}_bs", Mux(a_in.bstart, 0, sums) + prod, _mac_shape(cfg))
            fp = Signal(32, name=f"{name}_fp")
            # A column beyond N gives +0 even when its row's scale is NaN.
            value = Mux(b_in.on, mx_block_value(m, fresh, **mx_scale_terms(a_in.sa, b_in.sb),
                                                    name=f"{name}_blk"), 0)
            total = wire(m, f"{name}_total", fp32_add(m, Mux(a_in.first, 0, fp), value,
                                                      name=f"{name}_add"))
            with m.If(en & a_in.valid):
                m.d.sync += sums.eq(fresh)
                with m.If(a_in.bend):
                    m.d.sync += fp.eq(total)
                with m.Elif(a_in.first):
                    m.d.sync += fp.eq(0)
        else:
            total = wire(m, f"{name}_total", Mux(a_in.first, 0, sums) + prod, _mac_shape(cfg))
            with m.If(en & a_in.valid):
                m.d.sync += sums.eq(total)
        with m.If(en & a_in.valid & a_in.last):
            m.d.sync += res.eq(total)
        return res


class _WeightStationary(_Dataflow):
    def build(self, m: Module):
        cfg, ctl = self.cfg, self.ctl
        R, C, AR = cfg.rows, cfg.cols, cfg.acc_rows
        en = ctl.en
        M, K, N = ctl.dim_m, ctl.dim_k, ctl.dim_n
        dim = unsigned(DIM_BITS)

        # Schedule: weight tiles (tj, chunk, kt) with kt fastest. A tile takes
        # max(chunk rows, R) steps: step s issues A row s of the chunk, and the weight bus
        # writes row s + 1 of this tile's weights, or at the tile's last step row 0 of the
        # next tile's. A prologue step writes row 0 of the first tile.
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
        nmc = wire(m, "next_mc", _at_most(M - nc0, AR), dim)

        tile_end = wire(m, "tile_end", s == span - 1)
        a_step = wire(m, "a_step", issuing & ~pro & (s < mc))
        w_cur = wire(m, "w_cur", issuing & ~pro & (s + 1 < R))
        w_next = wire(m, "w_next", issuing & ~pro & tile_end & ~final)
        w_take = wire(m, "w_take", (w_cur & (s + 1 < kr)) | w_next | (issuing & pro))
        w_j0 = wire(m, "w_j0", Mux(w_next, nj0, j0), dim)
        m.d.comb += [
            ctl.active.eq(issuing | (pending != 0)),
            ctl.need_a.eq(a_step),
            ctl.need_b.eq(w_take),
        ]
        cmd = ctl.cmd
        with m.If(ctl.start):
            first_mc = _at_most(cmd.m, AR)
            m.d.sync += [
                j0.eq(0), c0.eq(0), k0.eq(0), s.eq(0), pro.eq(1), issuing.eq(1),
                mc.eq(first_mc), span.eq(_at_least(first_mc, R)), kr.eq(_at_most(cmd.k, R)),
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
                        span.eq(_at_least(nmc, R)), kr.eq(_at_most(K - nk0, R)),
                    ]
            with m.Else():
                m.d.sync += s.eq(s + 1)

        # Stage 1 (the buffers' data arrive): the A row's metadata and the weight bus.
        meta = data.StructLayout({
            "valid": 1, "i": range(AR), "first_kt": 1, "last_kt": 1, "bstart": 1, "bend": 1,
        })
        m1 = Signal(meta)
        swap = Signal()
        wl = Signal(data.StructLayout({"valid": 1, "row": range(max(R, 2)), "take": 1,
                                       "first": 1, "cols": C}))
        with m.If(en):
            m.d.sync += [
                m1.valid.eq(a_step),
                m1.i.eq(s),
                m1.first_kt.eq(k0 == 0),
                m1.last_kt.eq(last_k),
                m1.bstart.eq(k0[:5] == 0),
                m1.bend.eq(((k0 + R)[:5] == 0) | last_k),
                swap.eq(a_step & (s == 0)),
                wl.valid.eq(w_cur | w_next | pro),
                wl.row.eq(Mux(w_cur, s + 1, 0)),
                wl.take.eq(w_take),
                wl.first.eq(w_next | pro),
                wl.cols.eq(Cat(c < N - w_j0 for c in range(C))),
            ]
        with m.If(ctl.start):
            m.d.sync += [m1.valid.eq(0), swap.eq(0), wl.valid.eq(0)]

        adata, bdata = self.abuf.data, self.bbuf.data
        elem = adata.data[0].shape()
        alane = data.StructLayout({"a": elem, "swap": 1})
        left = []
        for r in range(R):
            lane = Signal(alane, name=f"a_lane{r}")
            m.d.comb += [lane.a.eq(adata.data[r]), lane.swap.eq(swap)]
            left.append(delay(m, lane, r, en, name=f"a_skew{r}"))
        bus_layout = data.StructLayout({"valid": 1, "row": range(max(R, 2)), "w": elem})
        buses = []
        for c in range(C):
            lane = Signal(bus_layout, name=f"w_lane{c}")
            m.d.comb += [
                lane.valid.eq(wl.valid),
                lane.row.eq(wl.row),
                lane.w.eq(Mux(wl.take & wl.cols[c], bdata.data[c], 0)),
            ]
            buses.append(delay(m, lane, c, en, name=f"w_skew{c}"))

        psums = [None] * C
        for r in range(R):
            a_in = left[r]
            for c in range(C):
                psums[c] = self._pe(m, r, c, a_in, buses[c], psums[c])
                if c < C - 1:
                    a_out = Signal(alane, name=f"pe{r}_{c}_a")
                    with m.If(en):
                        m.d.sync += a_out.eq(a_in)
                    a_in = a_out
        psums = [delay(m, p, C - 1 - c, en, name=f"deskew{c}") for c, p in enumerate(psums)]

        # Stage 2 adds the MX scales of the row (A) and of the weight tile (B) to the metadata.
        sb_reg = Signal(data.ArrayLayout(8, C))
        on_reg = Signal(C)
        if cfg.mx:
            with m.If(en & wl.valid & wl.first):
                m.d.sync += on_reg.eq(wl.cols)
                for c in range(C):
                    scale = bdata.scale[c] if C > 1 else bdata.scale
                    m.d.sync += sb_reg[c].eq(Mux(wl.cols[c], scale, 127))
        meta2 = Signal(data.StructLayout({"m": meta, "sa": 8, "sb": data.ArrayLayout(8, C),
                                          "on": C}))
        with m.If(en):
            m.d.sync += [meta2.m.eq(m1), meta2.sb.eq(sb_reg), meta2.on.eq(on_reg)]
            if cfg.mx:
                m.d.sync += meta2.sa.eq(adata.scale)
        addr = m1.i if R + C - 1 < 2 else delay(m, meta2, R + C - 3, en, name="meta").m.i
        mt = delay(m, meta2, R + C - 2, en, name="meta")

        # Stage R + C: add the column sums of row i into the accumulator SRAM.
        if cfg.mx:
            entry = data.StructLayout({"bs": _mac_shape(cfg), "fp": 32})
        else:
            entry = _mac_shape(cfg)
        m.submodules.acc = acc = Memory(shape=data.ArrayLayout(entry, C), depth=AR, init=[])
        wp = acc.write_port()
        rp = acc.read_port(transparent_for=(wp,))
        out = Signal(data.ArrayLayout(32, C))
        m.d.comb += [rp.addr.eq(addr), rp.en.eq(en), wp.addr.eq(mt.m.i),
                     wp.en.eq(en & mt.m.valid)]
        for c in range(C):
            old = rp.data[c]
            if cfg.mx:
                bs = wire(m, f"acc{c}_bs", Mux(mt.m.bstart, 0, old.bs) + psums[c], _mac_shape(cfg))
                value = Mux(mt.on[c], mx_block_value(m, bs, **mx_scale_terms(mt.sa, mt.sb[c]),
                                                      name=f"acc{c}_blk"), 0)
                base = wire(m, f"acc{c}_base", Mux(mt.m.first_kt, 0, old.fp))
                total = wire(m, f"acc{c}_total", fp32_add(m, base, value, name=f"acc{c}_add"))
                m.d.comb += [
                    wp.data[c].bs.eq(bs),
                    wp.data[c].fp.eq(Mux(mt.m.bend, total, base)),
                    out[c].eq(total),
                ]
            else:
                total = wire(m, f"acc{c}_total", Mux(mt.m.first_kt, 0, old) + psums[c], entry)
                m.d.comb += [wp.data[c].eq(total), out[c].eq(total)]
        ctl.row = out
        m.d.comb += ctl.collect.eq(mt.m.valid & mt.m.last_kt)
        with m.If(ctl.start):
            m.d.sync += pending.eq(0)
        with m.Elif(en):
            m.d.sync += pending.eq(pending + (a_step & last_k) - ctl.collect)

    def _pe(self, m: Module, r: int, c: int, a_in, bus, psum_in):
        """PE (r, c): writes its shadow weight from the column's bus, switches to it with the
        first A row of a tile, and adds its product to the partial sum from above."""
        cfg, en = self.cfg, self.ctl.en
        name = f"pe{r}_{c}"
        elem = bus.w.shape()
        shadow = Signal(elem, name=f"{name}_shadow")
        weight = Signal(elem, name=f"{name}_w")
        with m.If(en & bus.valid & (bus.row == r)):
            m.d.sync += shadow.eq(bus.w)
        with m.If(en & a_in.swap):
            m.d.sync += weight.eq(shadow)
        w = wire(m, f"{name}_weff", Mux(a_in.swap, shadow, weight))
        prod = _product(m, cfg, a_in.a, w, f"{name}_prod")
        psum = Signal(_mac_shape(cfg), name=f"{name}_psum")
        with m.If(en):
            m.d.sync += psum.eq(prod if psum_in is None else psum_in + prod)
        return psum
