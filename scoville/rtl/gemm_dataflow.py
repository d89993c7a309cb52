"""The contract between the GEMM engine's shell (:class:`scoville.rtl.gemm.Gemm`) and a dataflow
(:class:`~scoville.rtl.gemm_os_dataflow.OutputStationary`,
:class:`~scoville.rtl.gemm_ws_dataflow.WeightStationary`), and what the dataflows share.

A dataflow runs one fixed schedule per command. Each cycle the shell says whether the schedule
may advance (``en``); the dataflow says which beats its next step takes and whether it emits a
row of C. The shell holds the whole engine (``en`` low) when a needed beat has not arrived or the
row cannot leave, so every part of a dataflow advances together or not at all.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .lib.blockdot import SCALE_CUTS
from .lib.fp32 import fp32_mul
from .lib.pipeline import delay, through_cuts

__all__ = ["CMD", "DIM_BITS", "TensorScale", "at_least", "at_most", "block_bits",
           "command_dims", "dataflow_signature", "scaled_rows", "sequencer_members"]

#: Width of the M, K and N fields of a command (1..65535).
DIM_BITS = 16

#: A command: the GEMM's shape.
CMD = data.StructLayout({"m": unsigned(DIM_BITS), "k": unsigned(DIM_BITS),
                         "n": unsigned(DIM_BITS)})


def dataflow_signature(config, a_layout, b_layout) -> wiring.Signature:
    """The ports of a dataflow, as the dataflow sees them.

    ``cmd``, ``start``
        The command, taken in a cycle where ``start`` is high (a good one: no zero dimension).
    ``en``
        The schedule advances this cycle (every register of the dataflow loads only then).
    ``a``, ``b``
        The beats the operand buffers hand over: the one taken by the latest step that took
        one, from the cycle after (:class:`~scoville.rtl.gemm_opbuffer.OperandBuffer`).
    ``active``
        A command is running (its steps, or rows of C still to emit).
    ``need_a``, ``need_b``
        The next step takes an A beat, a B beat.
    ``collect``, ``row``
        The next step emits ``row``, a row of C (``cols`` 32-bit values).
    ``scale``
        ``nvfp4`` only: the running command's tensor scale (the product of its two), ready
        ``scale_stages + 1`` cycles after the ``start`` cycle, before the first row enters
        the :class:`TensorScale`.
    """
    scale = {"scale": In(32)} if config.arith.tensor_scale else {}
    return wiring.Signature({
        **scale,
        "cmd": In(CMD),
        "start": In(1),
        "en": In(1),
        "a": In(a_layout),
        "b": In(b_layout),
        "active": Out(1),
        "need_a": Out(1),
        "need_b": Out(1),
        "collect": Out(1),
        "row": Out(data.ArrayLayout(32, config.cols)),
    })


def sequencer_members(**outputs) -> dict:
    """The ports of a dataflow's sequencer: the command side of the contract (``cmd``,
    ``start``, ``en`` in; ``active``, ``need_a``, ``need_b`` out), ``collect`` in (the array
    emits a row of C this step: the sequencer counts the rows still to come), and
    ``outputs``, what it tells its array."""
    return {"cmd": In(CMD), "start": In(1), "en": In(1), "collect": In(1),
            "active": Out(1), "need_a": Out(1), "need_b": Out(1), **outputs}


def command_dims(m: Module, sequencer) -> tuple[Signal, Signal, Signal]:
    """The running command's M, K and N: registered from ``cmd`` when ``start``."""
    dims = tuple(Signal(DIM_BITS, name=f"dim_{d}") for d in "mkn")
    with m.If(sequencer.start):
        m.d.sync += [dim.eq(getattr(sequencer.cmd, d)) for dim, d in zip(dims, "mkn",
                                                                          strict=True)]
    return dims


def at_least(*values):
    """The largest of ``values`` (a tree of muxes)."""
    out = values[0]
    for v in values[1:]:
        out = Mux(out > v, out, v)
    return out


def at_most(a, b):
    """The smaller of ``a`` and ``b``."""
    return Mux(a < b, a, b)


def block_bits(config) -> int:
    """The low bits of k that count elements within a block along K (of the format's block
    size; 32 for formats without blocks, whose PEs ignore block boundaries)."""
    block = config.arith.block if config.mx else 32
    return (block - 1).bit_length()


class TensorScale(wiring.Component):
    """NVFP4's tensor scale on the rows of C: each value of a row the array emits (``collect``,
    ``row``) times the command's ``scale``, rounded once
    (:func:`~scoville.rtl.lib.fp32.fp32_mul`), and a column beyond N (``cols`` clear) +0, also
    where the scale is Inf or NaN. The product is cut by ``config.scale_stages`` register stages
    (:data:`~scoville.rtl.lib.blockdot.SCALE_CUTS`) that load with ``en``, so the row leaves
    (``o_collect``, ``o_row``) that many enabled cycles later; ``scale`` is read as the row
    enters.
    """

    def __init__(self, config):
        self._config = config
        C = config.cols
        super().__init__({
            "en": In(1), "scale": In(32),
            "collect": In(1), "row": In(data.ArrayLayout(32, C)), "cols": In(C),
            "o_collect": Out(1), "o_row": Out(data.ArrayLayout(32, C)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, en = self._config, self.en
        stages = cfg.scale_stages
        cols = delay(m, self.cols, stages, en, name="cols")
        out = []
        for c in range(cfg.cols):
            product = through_cuts(
                m, en, SCALE_CUTS.get(stages, ()), f"out{c}", f"column {c}'s tensor scale",
                lambda cut, c=c: fp32_mul(m, self.row[c], self.scale, name=f"out{c}", cut=cut))
            out.append(Mux(cols[c], product, 0))
        m.d.comb += [
            self.o_collect.eq(delay(m, self.collect, stages, en, name="collect")),
            self.o_row.eq(Cat(*out)),
        ]
        return m


def scaled_rows(m: Module, config, en, scale, array):
    """The rows of C that ``array`` emits (its ``collect``, ``row`` and, in ``nvfp4``, ``cols``)
    as they leave the dataflow: ``nvfp4``'s through a :class:`TensorScale` (a submodule of
    ``m``, reading ``scale``), others as they are. Returns ``(collect, row)``."""
    if not config.arith.tensor_scale:
        return array.collect, array.row
    m.submodules.tensor_scale = ts = TensorScale(config)
    m.d.comb += [ts.en.eq(en), ts.scale.eq(scale), ts.collect.eq(array.collect),
                 ts.row.eq(array.row), ts.cols.eq(array.cols)]
    return ts.o_collect, ts.o_row
