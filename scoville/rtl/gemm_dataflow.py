"""The contract between the GEMM engine's shell (:class:`scoville.rtl.gemm.Gemm`) and a dataflow
(:class:`~scoville.rtl.gemm_os_dataflow.OutputStationary`,
:class:`~scoville.rtl.gemm_ws_dataflow.WeightStationary`), and what the dataflows share.

A dataflow runs one fixed schedule per command. Each cycle the shell says whether the schedule
may advance (``en``); the dataflow says which beats its next step takes and whether it emits a
row of C. The shell holds the whole engine (``en`` low) when a needed beat has not arrived or the
row cannot leave, so every part of a dataflow advances together or not at all.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["CMD", "DIM_BITS", "at_least", "at_most", "block_bits", "command_dims",
           "dataflow_signature", "sequencer_members"]

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
    ``cols``
        ``nvfp4`` only (the shell scales the row): which columns of ``row`` lie inside N.
    """
    mask = {"cols": Out(config.cols)} if config.arith.tensor_scale else {}
    return wiring.Signature({
        **mask,
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
