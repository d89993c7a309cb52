"""The tiled GEMM engine: C = A x B on an R x C systolic array, for any M x K x N.

The engine runs one fixed schedule per command (see ``docs/gemm.md`` and the timed model
:mod:`scoville.sim.cycles.gemm`): every schedule step reads at most one A beat and one B beat
from the operand buffers and emits at most one row of C. When a step needs a beat that has not
arrived, or must emit a row while the previous one still waits on ``o.ready``, the whole engine
(array, skew registers, buffers' read side) holds for a cycle, and the cause is counted. So the
cycle count is always the schedule length plus the counted stall cycles.

The engine is made of named components (``docs/gemm.md`` draws them):

``abuf``, ``bbuf`` (:class:`~scoville.rtl.opbuffer.OperandBuffer`)
    The operand buffers, between the ``a`` and ``b`` streams and the schedule.
``flow``, the dataflow chosen at elaboration, behind one contract
(:func:`~scoville.rtl.dataflow.dataflow_signature`)
    ``os`` (:class:`~scoville.rtl.os_dataflow.OutputStationary`: a sequencer and the array) or
    ``ws`` (:class:`~scoville.rtl.ws_dataflow.WeightStationary`: a sequencer, the array and the
    accumulator SRAM).
the shell (:class:`Gemm` itself)
    Takes commands, holds the engine when a step cannot run, owns the output register of
    ``o``, the status and the counters.

Formats: ``int8`` and ``int4`` multiply exactly and accumulate in INT32 with wrap-around;
``mxfp4`` sums the exact E2M1 products of each 32-element block along K (in quarters), and at
the block's end rounds ``sum * 2**(sa + sb - 254)`` once to binary32 and adds it into a binary32
accumulator, blocks in order from +0, as :class:`~scoville.rtl.mx_dot.MxDot` does.
"""

from dataclasses import dataclass

from amaranth.hdl import Module, Mux, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .counters import counter_layout
from .dataflow import CMD, DIM_BITS
from .formats import ELEMENT_BITS, MX_BLOCK
from .opbuffer import OperandBuffer
from .os_dataflow import OutputStationary
from .params import ParamError, check_choice, check_int, param
from .ws_dataflow import WeightStationary

__all__ = ["COUNTERS", "DIM_BITS", "FORMATS", "STATUS", "Gemm", "GemmConfig", "command_members",
           "operand_layouts"]

#: The element formats (their widths: :data:`~scoville.rtl.formats.ELEMENT_BITS`).
FORMATS = ("int8", "int4", "mxfp4")

#: Status codes of the last command.
STATUS = {"ok": 0, "zero_dim": 1}

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


def command_members(a_layout, b_layout, out_layout, counters) -> dict:
    """The ports of a block driven like the engine: ``cmd`` (one GEMM per command), the
    operand streams ``a`` and ``b``, the output stream ``o``, ``status`` and ``counters``."""
    return {
        "cmd": In(stream.Signature(CMD)),
        "a": In(stream.Signature(a_layout)),
        "b": In(stream.Signature(b_layout)),
        "o": Out(stream.Signature(out_layout)),
        "status": Out(2),
        "counters": Out(counters),
    }


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
        super().__init__(command_members(self.a_layout, self.b_layout, self.out_layout,
                                         COUNTERS))

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
            flow.cmd.eq(cmd),
            flow.start.eq(self.cmd.valid & ~flow.active & ~bad),
            flow.a.eq(abuf.data),
            flow.b.eq(bbuf.data),
        ]
        with m.If(self.cmd.valid & ~flow.active):
            m.d.sync += self.status.eq(Mux(bad, STATUS["zero_dim"], STATUS["ok"]))
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
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(flow.en & flow.collect):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(flow.row)]

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
