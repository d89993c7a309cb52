"""The tiled GEMM engine: C = A x B on an R x C systolic array, for any M x K x N.

The engine runs one fixed schedule per command (see ``docs/gemm.md`` and the timed model
:mod:`scoville.sim.cycles.gemm`): every schedule step reads at most one A beat and one B beat
from the operand buffers and emits at most one row of C. When a step needs a beat that has not
arrived, or must emit a row while the previous one still waits on ``o.ready``, the whole engine
(array, skew registers, buffers' read side) holds for a cycle, and the cause is counted. So the
cycle count is always the schedule length plus the counted stall cycles.

The engine is made of named components (``docs/gemm.md`` draws them):

``abuf``, ``bbuf`` (:class:`~scoville.rtl.gemm_opbuffer.OperandBuffer`)
    The operand buffers, between the ``a`` and ``b`` streams and the schedule.
``flow``, the dataflow chosen at elaboration, behind one contract
(:func:`~scoville.rtl.gemm_dataflow.dataflow_signature`)
    ``os`` (:class:`~scoville.rtl.gemm_os_dataflow.OutputStationary`: a sequencer and the array) or
    ``ws`` (:class:`~scoville.rtl.gemm_ws_dataflow.WeightStationary`: a sequencer, the array and the
    accumulator SRAM).
the shell (:class:`Gemm` itself)
    Takes commands, holds the engine when a step cannot run, owns the output register of
    ``o``, the status and the counters.

Formats (:mod:`scoville.rtl.gemm_arith`, ``docs/numerics.md``): ``int8`` and ``int4`` multiply
exactly and accumulate in INT32 with wrap-around. ``mxfp4``, ``mxfp8``, ``mxfp8`` x ``mxfp4``
and ``nvfp4`` sum the exact products of each block along K, round the block sum times its two
scales once to binary32 and add it into a binary32 accumulator, blocks in order from +0, as
:class:`~scoville.rtl.mx_dot.MxDot` and :class:`~scoville.rtl.nvfp4_dot.Nvfp4Dot` do (NVFP4
then multiplies by the command's tensor scales). ``bf16`` rounds each product once to binary32
and adds it into binary32 partial sums (``add_latency`` + 1 of them on ``os``, each in K order,
then added as a tree; one in K order on ``ws``).
"""

import functools
from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .gemm_arith import FORMATS, MUL_CUTS, Arith, pair_error
from .gemm_dataflow import CMD, DIM_BITS
from .gemm_opbuffer import OperandBuffer
from .gemm_os_dataflow import (
    MOST_UNIT_LATENCY,
    UNIT_LATENCY,
    OutputStationary,
    combine_stages,
    unit_cuts,
)
from .gemm_ws_dataflow import WeightStationary
from .lib.blockdot import SCALE_CUTS
from .lib.codes import names
from .lib.counters import counter_layout
from .lib.fp32 import fp32_mul
from .lib.params import ParamError, check_choice, check_int, param
from .lib.pipeline import delay, through_cuts

__all__ = ["ADD_LATENCY", "BF16_PE_LATENCY", "COUNTERS", "DIM_BITS", "FORMATS",
           "MOST_ADD_LATENCY", "MOST_BF16_PE_LATENCY", "MOST_PE_LATENCY", "MOST_SCALE_LATENCY",
           "PE_LATENCY", "SCALE_LATENCY", "STATUS", "UNIT_LATENCY", "Gemm", "GemmConfig",
           "Status", "command_layout", "command_members", "operand_layouts"]

#: The most stages of NVFP4's tensor scale products (each cut where
#: :data:`~scoville.rtl.lib.blockdot.SCALE_CUTS` says).
MOST_SCALE_LATENCY = max(SCALE_CUTS)
#: Their stages by default (or the most a config allows, if fewer:
#: :attr:`GemmConfig.most_scale_stages`), each within the levels budget of docs/levels.md.
SCALE_LATENCY = 5
#: The most register stages between an ``os`` PE's operands and its sum: the product
#: registered (and in ``bf16`` cut where :data:`~scoville.rtl.gemm_arith.MUL_CUTS` says).
MOST_PE_LATENCY = 1
MOST_BF16_PE_LATENCY = 1 + max(MUL_CUTS)
#: Their stages by default with MXFP8 elements of A (the 4 x 4 array mapped for delay: 56
#: levels without, 36 with; MXFP8 x MXFP4 40 and 35; docs/levels.md).
PE_LATENCY = 1
#: Their stages by default in ``bf16`` (its product cut twice: 39 levels at 4 x 4 with
#: :data:`ADD_LATENCY`, mapped for delay; docs/levels.md).
BF16_PE_LATENCY = 3
#: The most register stages cut into an ``os`` PE's binary32 adder (``bf16``; each of
#: :data:`~scoville.rtl.lib.blockdot.ADD_CUTS`' counts).
MOST_ADD_LATENCY = 4
#: Their stages by default: the adder's loop in three sections, each within the levels budget
#: of docs/levels.md.
ADD_LATENCY = 2

class Status(enum.IntEnum, shape=1):
    """Status of the latest command."""
    OK = 0
    ZERO_DIM = 1


#: ``{name: Status member}``, the names in lower case.
STATUS = names(Status)

#: The performance counters (the ``counters`` port).
COUNTERS = counter_layout({"busy": 32, "stall_a": 32, "stall_b": 32, "stall_out": 32,
                           "idle": 32, "rejected": 16})

@dataclass(frozen=True)
class GemmConfig:
    """Parameters of :class:`Gemm` (and of its golden and timed models).

    Attributes
    ----------
    rows, cols : int
        The array is ``rows`` x ``cols`` processing elements.
    fmt : str
        The format of A (and of B unless ``b_fmt`` says otherwise): ``int8``, ``int4`` (INT32
        accumulation), ``mxfp4``, ``nvfp4``, ``mxfp8``, ``bf16`` (FP32 accumulation); see
        :mod:`scoville.rtl.gemm_arith`.
    b_fmt : str
        The format of B: ``same`` (as ``fmt``), or ``mxfp4`` with ``fmt=mxfp8``.
    dataflow : str
        ``os`` (output-stationary) or ``ws`` (weight-stationary).
    buffer_depth : int
        Beats each operand buffer holds.
    acc_rows : int
        ``ws`` only: rows of C accumulated on chip per pass (M is split into chunks of this).
    unit_latency : int or None
        Register stages of each column's block units (the block value of a finished block and
        its binary32 addition, cut as :func:`~scoville.rtl.gemm_os_dataflow.unit_cuts` says),
        in the block formats on ``os``; a tile's rows of C leave :attr:`unit_delay` cycles
        later for them. Elsewhere there are no block units and only 0 is allowed. Unset
        (None): :data:`UNIT_LATENCY` in the block formats on ``os``, else 0
        (:attr:`unit_stages`, resolved from the other parameters each time, so that a
        config derived with other formats follows them).
    scale_latency : int or None
        ``nvfp4`` only: register stages of the tensor scale's two products (the command's two
        scales, and each value of a row of C by theirs;
        :class:`~scoville.rtl.gemm_dataflow.TensorScale`): the rows leave that many cycles
        later. The scales' product must be ready by the first row: at most
        :attr:`most_scale_stages` (``cols`` + 1 + the PEs' and block units' delay on ``os``,
        ``rows + cols + 1`` on ``ws``). Unset (None): :data:`SCALE_LATENCY`, or that most if
        fewer, in ``nvfp4``; else 0 (:attr:`scale_stages`).
    pe_latency : int or None
        ``os`` only: register stages between each PE's operands and its sum (0 or 1; 0..4 in
        ``bf16``): the product is registered, and the PE adds it that many cycles later (in
        ``bf16`` past 1 the product is cut where :data:`~scoville.rtl.gemm_arith.MUL_CUTS`
        says); a tile's rows of C leave that many cycles later. Unset (None):
        :data:`PE_LATENCY` with ``fmt=mxfp8`` on ``os`` (an E4M3 element's exact product and
        its block sum in one cycle are over the levels budget of docs/levels.md, or at it),
        :data:`BF16_PE_LATENCY` with ``bf16`` on ``os``, else 0 (:attr:`pe_stages`).
    add_latency : int or None
        ``bf16`` on ``os`` only: register stages cut into each PE's binary32 adder, whose loop
        then holds ``L = add_latency + 1`` partial sums in flight: the product of step k goes
        into sum ``k mod L`` (each in K order from +0), and the L sums are added
        as the row leaves, by a tree of adders per column (:mod:`scoville.rtl.gemm_arith`
        states the order; the golden model follows it). A tile's rows leave
        :attr:`sum_delay` cycles later, and tiles are at least ``cols + add_latency`` steps
        apart (:meth:`tile_steps`). Unset (None): :data:`ADD_LATENCY` with ``bf16`` on ``os``
        (a binary32 addition in one cycle is over the levels budget of docs/levels.md), else
        0 (:attr:`add_stages`).
    """

    rows: int = param(8, "1..64", "array rows")
    cols: int = param(8, "1..64", "array columns")
    fmt: str = param("int8", ", ".join(FORMATS), "element format (of A, and of B by default)")
    b_fmt: str = param("same", "same, " + ", ".join(FORMATS),
                       "B's element format: same (as fmt), or mxfp4 with fmt=mxfp8")
    dataflow: str = param("os", "os, ws", "output- or weight-stationary")
    buffer_depth: int = param(64, "2..4096", "beats per operand buffer")
    acc_rows: int = param(256, "2..4096", "ws: accumulator rows")
    unit_latency: int = param(None, f"0..{MOST_UNIT_LATENCY} with a block format on os, else 0; "
                                    f"unset: {UNIT_LATENCY} there, else 0",
                              "os block formats: register stages of a column's block units")
    scale_latency: int = param(None, f"0..{MOST_SCALE_LATENCY} with nvfp4 (at most cols + 1 + "
                                     f"the PEs' and units' delay on os, rows + cols + 1 on ws), "
                                     f"else 0; unset: {SCALE_LATENCY} there or that most if "
                                     f"fewer, else 0",
                               "nvfp4: register stages of the tensor scale's products")
    pe_latency: int = param(None, f"0..{MOST_PE_LATENCY} on os (0..{MOST_BF16_PE_LATENCY} with "
                                  f"bf16), else 0; unset: {PE_LATENCY} with fmt=mxfp8 on os, "
                                  f"{BF16_PE_LATENCY} with bf16 on os, else 0",
                            "os: register stages between a PE's product and its sum")
    add_latency: int = param(None, f"0..{MOST_ADD_LATENCY} with bf16 on os, else 0; unset: "
                                   f"{ADD_LATENCY} there, else 0",
                             "os bf16: register stages cut into a PE's binary32 adder")

    def __post_init__(self):
        check_int("rows", self.rows, 1, 64)
        check_int("cols", self.cols, 1, 64)
        check_choice("fmt", self.fmt, FORMATS)
        check_choice("b_fmt", self.b_fmt, ("same", *FORMATS))
        error = pair_error(self.fmt, self.b_format)
        if error:
            raise ParamError(error)
        check_choice("dataflow", self.dataflow, ("os", "ws"))
        check_int("buffer_depth", self.buffer_depth, 2, 4096)
        check_int("acc_rows", self.acc_rows, 2, 4096)
        block = self.arith.block
        self._check_stages("unit_latency", MOST_UNIT_LATENCY, self._staged,
                           f"fmt={self.fmt} and dataflow={self.dataflow} (only the block "
                           f"formats on os have block units)")
        self._check_stages("pe_latency", MOST_BF16_PE_LATENCY if self.arith.kind == "float"
                           else MOST_PE_LATENCY, self.dataflow == "os",
                           f"dataflow={self.dataflow} (only os registers its PEs' products)")
        self._check_stages("add_latency", MOST_ADD_LATENCY, self._interleaved,
                           f"fmt={self.fmt} and dataflow={self.dataflow} (only bf16 on os "
                           f"cuts its PEs' adders)")
        self._check_scale_latency()
        if self.mx and self.dataflow == "ws" and block % self.rows:
            allowed = ", ".join(str(r) for r in range(1, block + 1) if block % r == 0)
            raise ParamError(
                f"parameter 'rows' = {self.rows} is not allowed with fmt={self.fmt} and "
                f"dataflow=ws (a K tile must not straddle a block of {block}); "
                f"allowed: {allowed}"
            )

    @property
    def b_format(self) -> str:
        """B's element format (``b_fmt``, with ``same`` resolved)."""
        return self.fmt if self.b_fmt == "same" else self.b_fmt

    @functools.cached_property
    def arith(self) -> Arith:
        """What a PE computes (:class:`~scoville.rtl.gemm_arith.Arith`)."""
        return Arith(self)

    @property
    def _staged(self) -> bool:
        """The array has block units (a block format on ``os``)."""
        return self.mx and self.dataflow == "os"

    @property
    def unit_stages(self) -> int:
        """:attr:`unit_latency`, or where unset its default for the formats and dataflow."""
        if self.unit_latency is not None:
            return self.unit_latency
        return UNIT_LATENCY if self._staged else 0

    @property
    def unit_delay(self) -> int:
        """Cycles a tile's rows of C leave later for the block units' stages
        (:attr:`unit_stages`, :func:`~scoville.rtl.gemm_os_dataflow.unit_cuts`)."""
        return unit_cuts(self.unit_stages).delay

    @property
    def pe_stages(self) -> int:
        """:attr:`pe_latency`, or where unset its default for the formats and dataflow."""
        if self.pe_latency is not None:
            return self.pe_latency
        if self._interleaved:
            return BF16_PE_LATENCY
        return PE_LATENCY if self._staged and self.fmt == "mxfp8" else 0

    @property
    def _interleaved(self) -> bool:
        """The PEs' adders may be cut (``bf16`` on ``os``)."""
        return self.arith.kind == "float" and self.dataflow == "os"

    @property
    def add_stages(self) -> int:
        """:attr:`add_latency`, or where unset its default for the format and dataflow."""
        if self.add_latency is not None:
            return self.add_latency
        return ADD_LATENCY if self._interleaved else 0

    @property
    def sums(self) -> int:
        """Partial sums each PE keeps (:attr:`add_stages` + 1; 1: one sum in K order)."""
        return self.add_stages + 1

    @property
    def sum_delay(self) -> int:
        """Cycles a tile's rows of C leave later for the PEs' partial sums: the last of them
        is written :attr:`add_stages` cycles later than an uncut adder's sum, and the tree of
        adders that adds them takes
        :func:`~scoville.rtl.gemm_os_dataflow.combine_stages`."""
        return self.add_stages + combine_stages(self.sums)

    @property
    def array_delay(self) -> int:
        """Cycles a tile's rows of C leave the array later for its PEs' and block units'
        stages (:attr:`pe_stages` + :attr:`unit_delay` + :attr:`sum_delay`)."""
        return self.pe_stages + self.unit_delay + self.sum_delay

    def tile_steps(self, k: int) -> int:
        """``os``: steps from one output tile's first step to the next's at reduction length
        ``k``: ``max(k, rows, cols + add_stages)`` (a PE's partial sums, written in the
        :attr:`add_stages` + 1 steps after its tile's last, are read as its row leaves, up to
        ``cols`` steps later; the next tile's must not overwrite them first)."""
        return max(k, self.rows, self.cols + self.add_stages)

    @property
    def most_scale_stages(self) -> int:
        """The most stages of the tensor scale's products: its two scales, taken with the
        command, are multiplied ``stages + 1`` cycles after the accept, and must be when the
        first row enters (``os``: ``K + C + 1 +`` :attr:`array_delay` cycles after the accept
        at the soonest, K at least 1; ``ws``: ``R + C + 2``); at most
        :data:`MOST_SCALE_LATENCY`."""
        if not self.arith.tensor_scale:
            return 0
        soonest = (self.cols + 1 + self.array_delay if self.dataflow == "os"
                   else self.rows + self.cols + 1)
        return min(MOST_SCALE_LATENCY, soonest)

    @property
    def scale_stages(self) -> int:
        """:attr:`scale_latency`, or where unset its default (:attr:`most_scale_stages` caps
        it)."""
        if self.scale_latency is not None:
            return self.scale_latency
        return min(SCALE_LATENCY, self.most_scale_stages)

    @property
    def result_delay(self) -> int:
        """Cycles the rows of C leave later for the PEs', the block units' and the tensor
        scale's stages (:attr:`array_delay` + :attr:`scale_stages`)."""
        return self.array_delay + self.scale_stages

    def _check_stages(self, name: str, most: int, applies: bool, without: str) -> None:
        """Parameter ``name``, register stages: unset, or 0..``most`` where the config has
        what they cut (``applies``), else only 0 (the error says ``with {without}``)."""
        value = getattr(self, name)
        if value is not None and applies:
            check_int(name, value, 0, most)
        elif value not in (None, 0):
            raise ParamError(f"parameter '{name}' = {value!r} is not allowed with {without}; "
                             f"allowed: 0")

    def _check_scale_latency(self) -> None:
        self._check_stages("scale_latency", MOST_SCALE_LATENCY, self.arith.tensor_scale,
                           f"fmt={self.fmt} (only nvfp4 has a tensor scale)")
        if self.scale_latency is None or not self.arith.tensor_scale:
            return
        most = self.most_scale_stages
        if self.scale_latency > most:
            units = (f", cols={self.cols}, unit_latency={self.unit_stages} and "
                     f"pe_latency={self.pe_stages}" if self.dataflow == "os"
                     else f", rows={self.rows} and cols={self.cols}")
            raise ParamError(f"parameter 'scale_latency' = {self.scale_latency} is not allowed "
                             f"with dataflow={self.dataflow}{units} (the scales' product must "
                             f"be ready by the first row); allowed: 0..{most}")

    @property
    def mx(self) -> bool:
        """The operands are block formats (elements with block scales: MX or NVFP4)."""
        return self.arith.kind == "block"


def _beat(config: GemmConfig, elem, lanes: int, scales: int) -> data.StructLayout:
    fields = {"data": data.ArrayLayout(elem, lanes)}
    if config.mx:
        fields["scale"] = data.ArrayLayout(8, scales) if scales > 1 else unsigned(8)
    return data.StructLayout(fields)


def operand_layouts(config: GemmConfig) -> tuple[data.StructLayout, data.StructLayout]:
    """The payload layouts of the ``a`` and ``b`` streams of :class:`Gemm` with ``config``."""
    rows, cols = config.rows, config.cols
    arith = config.arith
    return (_beat(config, arith.a_shape, rows, rows if config.dataflow == "os" else 1),
            _beat(config, arith.b_shape, cols, cols))


def command_layout(config: GemmConfig) -> data.StructLayout:
    """The payload layout of the ``cmd`` stream: M, K and N (:data:`CMD`), and for ``nvfp4``
    the binary32 tensor scales of A and B (``scale_a``, ``scale_b``)."""
    fields = dict(CMD.members)
    if config.arith.tensor_scale:
        fields.update(scale_a=unsigned(32), scale_b=unsigned(32))
    return data.StructLayout(fields)


def command_members(a_layout, b_layout, out_layout, counters, cmd_layout=CMD, *,
                    status=Status) -> dict:
    """The ports of a block driven like the engine: ``cmd`` (one GEMM per command), the
    operand streams ``a`` and ``b``, the output stream ``o``, ``status`` (of the enum
    ``status``) and ``counters``."""
    return {
        "cmd": In(stream.Signature(cmd_layout)),
        "a": In(stream.Signature(a_layout)),
        "b": In(stream.Signature(b_layout)),
        "o": Out(stream.Signature(out_layout)),
        "status": Out(status),
        "counters": Out(counters),
    }


class Gemm(wiring.Component):
    """C = A x B on a ``rows`` x ``cols`` systolic array, tile by tile.

    A command gives M, K and N; the operands then arrive as beats in the order of
    :func:`scoville.sim.golden.gemm.operand_beats`, and C leaves as rows of ``cols`` values in
    the order of :func:`scoville.sim.golden.gemm.result_rows`. Lanes outside the matrices (rows
    beyond M, columns beyond N) are ignored on input: the engine pads the edge tiles with
    zeros, and a partial block along K is summed over its elements alone (as if padded).

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout(config)))
        One GEMM per command (``m``, ``k``, ``n``; for ``nvfp4`` also ``scale_a``, ``scale_b``,
        the binary32 tensor scales); taken when the previous one has finished. A zero
        dimension is rejected: ``status`` becomes ``zero_dim``, ``rejected`` counts it, and
        nothing else changes.
    a, b : In(stream.Signature(...))
        Operand beats: ``data`` (``rows`` resp. ``cols`` elements, lane 0 lowest) and, for the
        block formats, ``scale`` (E8M0 codes, or E4M3 for ``nvfp4``; read on a block's final
        element).
    o : Out(stream.Signature(ArrayLayout(32, cols)))
        Rows of C: INT32, or binary32 bits.
    status : Out(Status)
        Status of the latest command (:class:`Status`).
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
        super().__init__(command_members(self.a_layout, self.b_layout, self.out_layout,
                                         COUNTERS, command_layout(config)))

    @property
    def config(self) -> GemmConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.abuf = abuf = OperandBuffer(self.a_layout, cfg.buffer_depth)
        m.submodules.bbuf = bbuf = OperandBuffer(self.b_layout, cfg.buffer_depth)
        dataflow = OutputStationary if cfg.dataflow == "os" else WeightStationary
        m.submodules.flow = flow = dataflow(cfg, self.a_layout, self.b_layout)
        wiring.connect(m, wiring.flipped(self.a), abuf.i)
        wiring.connect(m, wiring.flipped(self.b), bbuf.i)

        cmd = self.cmd.payload
        bad = (cmd.m == 0) | (cmd.k == 0) | (cmd.n == 0)
        m.d.comb += [
            self.cmd.ready.eq(~flow.active),
            *(getattr(flow.cmd, d).eq(getattr(cmd, d)) for d in "mkn"),
            flow.start.eq(self.cmd.valid & ~flow.active & ~bad),
            flow.a.eq(abuf.data),
            flow.b.eq(bbuf.data),
        ]
        with m.If(self.cmd.valid & ~flow.active):
            m.d.sync += self.status.eq(Mux(bad, Status.ZERO_DIM, Status.OK))
            with m.If(bad):
                m.d.sync += self.counters.rejected.eq(self.counters.rejected + 1)

        stall_out = flow.collect & self.o.valid & ~self.o.ready
        stall_a = flow.need_a & ~abuf.avail
        stall_b = flow.need_b & ~bbuf.avail
        m.d.comb += [
            flow.en.eq(flow.active & ~stall_out & ~stall_a & ~stall_b),
            abuf.en.eq(flow.en),
            bbuf.en.eq(flow.en),
            abuf.take.eq(flow.need_a),
            bbuf.take.eq(flow.need_b),
        ]
        row = flow.row.as_value()
        if cfg.arith.tensor_scale:
            # NVFP4: the product of the two tensor scales, taken with the command and rounded
            # once, multiplies every result once (in the dataflow: TensorScale). Its stages (the
            # product cut at one fewer than ``scale_stages``, then registered) load every
            # cycle: it is ready ``scale_stages`` cycles after the scales are, before the first
            # row (GemmConfig.most_scale_stages), and holds to the next command.
            scales = [Signal(32, name=f"scale_{x}") for x in "ab"]
            with m.If(flow.start):
                m.d.sync += [scales[0].eq(cmd.scale_a), scales[1].eq(cmd.scale_b)]
            stages = cfg.scale_stages
            product = through_cuts(m, 1, SCALE_CUTS.get(stages - 1, ()), "tensor",
                                   "the tensor scales' product",
                                   lambda cut: fp32_mul(m, *scales, name="tensor", cut=cut))
            m.d.comb += flow.scale.eq(delay(m, product, min(stages, 1), 1, name="tensor"))
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(flow.en & flow.collect):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(row)]

        with m.If(flow.active):
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
