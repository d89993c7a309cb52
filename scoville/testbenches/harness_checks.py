"""cocotb self-checks of the free-running harness (:mod:`scoville.sim.harness`,
:class:`~scoville.testbenches.freerun.FreeRun`), run on a small lane unit (``fp4_mul``: an
``i`` stream in, an ``o`` stream out) by ``tests/test_flow.py``: each test passes when the
harness reports what it must.

Tests: a testbench that falls behind (it refills the rings once, before the run, and never
again) must be stopped by the harness's ``starved`` flag, not run on with stale schedules.
"""

from __future__ import annotations

import cocotb
import numpy as np

from scoville.sim.cycles.stream import ALWAYS
from scoville.sim.harness import DEPTH, stream_names

from .freerun import FreeRun
from .kit import context, reset


class _Behind(FreeRun):
    """A testbench that loads the rings before the run and never refills them."""

    async def _service(self, cycle: int) -> None:
        if cycle == 0:
            await super()._service(cycle)


@cocotb.test()
async def test_starved(dut):
    """Twice a ring of beats with no refill: the source's ring runs dry a ring in, and the
    run fails with the harness's "ran dry", naming the cycle."""
    ctx = context()
    lanes = ctx.config.lanes
    beats = 2 * DEPTH
    codes = np.zeros((beats, lanes), dtype=np.uint8)
    items = ctx.codecs["i"].pack_bytes(a=codes, b=codes)
    bench = _Behind(dut, ctx.component, sources={"i": (items, ALWAYS)},
                    sinks={"o": (beats, ALWAYS)})
    await reset(dut, stream_names(ctx.component))
    try:
        await bench.run(timeout=4 * beats)
    except AssertionError as err:
        if "ran dry" not in str(err):
            raise
        cycle = int(str(err).split("by cycle ")[1].split(":")[0])
        assert DEPTH <= cycle <= 2 * DEPTH, f"starved reported at cycle {cycle}"
        return
    raise AssertionError("the rings were never refilled and the harness did not report it")
