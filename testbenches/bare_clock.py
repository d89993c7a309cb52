"""The speed baseline: a cocotb clock and one ``await`` per cycle on a design, nothing else.

``scripts/simspeed.py`` runs it on the same build as a block's testbench, so the block's
simulated cycles per second can be set beside what cocotb alone costs on that design.
"""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from .kit import context, record


@cocotb.test()
async def test_bare_clock(dut):
    """``count`` clock cycles with nothing driven or sampled."""
    ctx = context()
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 0
    for _ in range(ctx.workload.count):
        await FallingEdge(dut.clk)
    record("test_bare_clock", mismatches=0, cycles=ctx.workload.count,
           model_cycles=ctx.workload.count)
