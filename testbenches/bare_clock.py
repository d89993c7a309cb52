"""The speed baseline: a cocotb clock and one ``await`` per cycle on a design, nothing else.

``scripts/simspeed.py`` runs it on the same build as a block's testbench, so the block's
simulated cycles per second can be set beside what cocotb alone costs on that design. It reads
only ``count`` (the cycles to run) from the run's parameters, unchecked, so any block's build
can be clocked for any number of cycles.
"""

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from scoville.sim.flow import ENV_PARAMS

from .kit import record


@cocotb.test()
async def test_bare_clock(dut):
    """``count`` clock cycles with nothing driven or sampled."""
    count = int(json.loads(os.environ[ENV_PARAMS])["count"])
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 0
    for _ in range(count):
        await FallingEdge(dut.clk)
    record("test_bare_clock", mismatches=0, cycles=count, model_cycles=count)
