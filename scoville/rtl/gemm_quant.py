"""GEMM then MX quantization: the GEMM array in an MX format (``mxfp4``, ``mxfp8``, or ``mxfp8``
activations against ``mxfp4`` weights) whose rows of C (FP32) stream into the MX quantizer,
producing the MXFP4 or MXFP8 activations of a next matmul.

One row of C is one token's activations, so MX blocks run along N, 32 columns each. The block
is a composition of three named parts joined by their stream signatures:

``array`` (:class:`~scoville.rtl.gemm.Gemm`, config ``array.*``)
    C = A x B on the ``os`` array; rows of C leave tile by tile.
``reblock`` (:class:`~scoville.rtl.gemm_quant_reblock.Reblock`, sized by ``groups``)
    Turns C's row tiles into whole 32-value lines, one per row of C and block of columns.
``quant`` (:class:`~scoville.rtl.mx_quant.MxQuant`, config ``quant.*``)
    One line in, its 32 E2M1 or E4M3 codes and E8M0 scale out.

A front end checks each command and hands a good one to the array and, in the same cycle, its
(M, N) to the buffer's queue.
"""

from dataclasses import dataclass

from amaranth.hdl import Module, Mux
from amaranth.lib import data, enum, wiring

from .gemm import COUNTERS as GEMM_COUNTERS
from .gemm import Gemm, GemmConfig, command_members, operand_layouts
from .gemm_quant_reblock import Reblock
from .lib.codes import names
from .lib.counters import counter_layout
from .lib.formats import MX_BLOCK
from .lib.params import check_int, check_parts, param, part
from .mx_quant import MxQuant, MxQuantConfig, out_layout

__all__ = ["COUNTERS", "STATUS", "GemmQuant", "GemmQuantConfig", "Status"]

class Status(enum.IntEnum, shape=2):
    """Status of the latest command."""
    OK = 0
    ZERO_DIM = 1
    N_NOT_BLOCKS = 2


#: ``{name: Status member}``, the names in lower case.
STATUS = names(Status)

#: The performance counters: the array's, and the commands this block rejected.
COUNTERS = data.StructLayout({"array": GEMM_COUNTERS,
                              **{name: f.shape for name, f in counter_layout({"rejected": 16})}})

#: ``array.cols`` must divide the MX block, so a block of a row is whole column tiles.
COLS = tuple(c for c in range(1, MX_BLOCK + 1) if MX_BLOCK % c == 0)


@dataclass(frozen=True)
class GemmQuantConfig:
    """Parameters of :class:`GemmQuant`: its parts' configs and the buffer between them.

    Attributes
    ----------
    array : GemmConfig
        The GEMM array (``array.*``): ``fmt`` ``mxfp4`` or ``mxfp8`` (with ``b_fmt`` ``same``
        or, for ``mxfp8``, ``mxfp4``: MX formats, whose commands carry no tensor scale),
        ``dataflow`` ``os`` (``ws`` emits C column tile by column tile over all M rows, so a
        block of 32 columns of a row would wait on every row of C), ``cols`` dividing 32.
    quant : MxQuantConfig
        The quantizer (``quant.*``); ``in_fmt`` ``fp32``, as C is; ``out_fmt`` either.
    groups : int
        The buffer holds ``groups`` groups of ``array.rows`` lines of 32 FP32 values.
    """

    array: GemmConfig = part(GemmConfig(fmt="mxfp4"), "the GEMM array (block gemm)",
                             restrict={"fmt": ("mxfp4", "mxfp8"), "b_fmt": ("same", "mxfp4"),
                                       "dataflow": ("os",), "cols": COLS})
    quant: MxQuantConfig = part(MxQuantConfig(), "the MX quantizer (block mx_quant)",
                                restrict={"in_fmt": ("fp32",)})
    groups: int = param(2, "1..8", "buffer: groups of array.rows lines of 32 values")

    def __post_init__(self):
        check_parts(self)
        check_int("groups", self.groups, 1, 8)

    @staticmethod
    def status(m: int, k: int, n: int) -> Status:
        """What the block does with a command: ``OK`` runs it."""
        if min(m, k, n) == 0:
            return Status.ZERO_DIM
        return Status.N_NOT_BLOCKS if n % MX_BLOCK else Status.OK


class GemmQuant(wiring.Component):
    """C = A x B on the array, each row of C quantized to MXFP4 along N, 32 columns a block.

    Attributes
    ----------
    cmd : In(stream.Signature(StructLayout(m, k, n)))
        One GEMM per command, taken when the array is idle and the buffer's command queue
        has room (a bad command too: it waits behind a running one). Rejected, with nothing else
        changed (``status``, ``rejected`` + 1): a zero dimension (``zero_dim``), N not a
        multiple of 32 (``n_not_blocks``).
    a, b : In(stream.Signature(...))
        The array's operand beats (:class:`~scoville.rtl.gemm.Gemm`).
    o : Out(stream.Signature(StructLayout(codes, scale)))
        MXFP4 blocks of C: for each row tile of ``array.rows`` rows, for each 32 columns,
        the tile's rows in order (:func:`scoville.sim.golden.gemm_quant.block_order`).
    status : Out(Status)
        Status of the latest command (:class:`Status`).
    counters : Out(COUNTERS)
        ``array.*``: the array's counters; ``rejected``: commands this block rejected.
    """

    def __init__(self, config: GemmQuantConfig):
        self._config = config
        self.a_layout, self.b_layout = operand_layouts(config.array)
        self.out_layout = out_layout(config.quant)
        super().__init__(command_members(self.a_layout, self.b_layout, self.out_layout,
                                         COUNTERS, status=Status))

    @property
    def config(self) -> GemmQuantConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.array = array = Gemm(cfg.array)
        m.submodules.reblock = reblock = Reblock(cfg.array.rows, cfg.array.cols, cfg.groups)
        m.submodules.quant = quant = MxQuant(cfg.quant)
        wiring.connect(m, wiring.flipped(self.a), array.a)
        wiring.connect(m, wiring.flipped(self.b), array.b)
        wiring.connect(m, array.o, reblock.i)
        wiring.connect(m, reblock.o, quant.i)
        wiring.connect(m, quant.o, wiring.flipped(self.o))

        cmd = self.cmd.payload
        zero = (cmd.m == 0) | (cmd.k == 0) | (cmd.n == 0)
        partial = cmd.n % MX_BLOCK != 0
        good = self.cmd.valid & ~zero & ~partial
        m.d.comb += [
            self.cmd.ready.eq(array.cmd.ready & reblock.cmd.ready),
            array.cmd.valid.eq(good & reblock.cmd.ready),
            array.cmd.payload.eq(cmd),
            reblock.cmd.valid.eq(good & array.cmd.ready),
            reblock.cmd.payload.m.eq(cmd.m),
            reblock.cmd.payload.n.eq(cmd.n),
            self.counters.array.eq(array.counters),
        ]
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += self.status.eq(Mux(zero, Status.ZERO_DIM,
                                           Mux(partial, Status.N_NOT_BLOCKS, Status.OK)))
            with m.If(zero | partial):
                m.d.sync += self.counters.rejected.eq(self.counters.rejected + 1)
        return m
