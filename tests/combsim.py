"""Evaluating a combinational function in Amaranth's own simulator, vector by vector."""

import numpy as np
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator


def evaluate(build, shapes, *columns) -> np.ndarray:
    """Outputs of ``build(m, *inputs)`` (which adds its logic to ``m`` and returns the output
    signal) for each row of ``columns``; the inputs have the given Amaranth ``shapes``.
    Returns the output's bits, one per row: uint32, or Python integers (an object array) for
    an output wider than 32 bits."""
    m = Module()
    inputs = [Signal(shape) for shape in shapes]
    out = build(m, *inputs)
    got = np.zeros(len(columns[0]), dtype=np.uint32 if len(out) <= 32 else object)

    async def bench(ctx):
        for k, row in enumerate(zip(*columns, strict=True)):
            for sig, value in zip(inputs, row, strict=True):
                ctx.set(sig, int(value))
            got[k] = ctx.get(out)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return got
