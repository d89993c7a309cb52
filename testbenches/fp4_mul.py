"""cocotb testbench of :class:`scoville.rtl.fp4.Fp4Mul` against :func:`scoville.sim.golden.fp4_mul`.

Tests: every one of the 256 FP4 x FP4 pairs (no gaps, cycles against the closed form), and a
random workload under random valid gaps and ready back-pressure (cycles against the loop model).
"""

import cocotb
import numpy as np

from scoville.sim.cycles.stream import Schedule, pipeline_cycles, pipeline_cycles_ideal
from scoville.sim.golden import fp4_mul

from .kit import StreamLockstep, context, pack, record, reset, scoreboard, unpack


async def _drive(dut, ctx, a, b, valid, ready):
    lanes = ctx.config.lanes
    items = [pack(a[k : k + lanes], 4) | pack(b[k : k + lanes], 4) << (4 * lanes)
             for k in range(0, len(a), lanes)]
    await reset(dut, {"i__valid": 1, "i__payload": 8 * lanes, "o__ready": 1}, seed=ctx.seed)
    bench = StreamLockstep(dut, valid, ready)
    words, cycles = await bench.run(items, len(items), timeout=50 * len(items) + 100)
    got = [p for w in words for p in unpack(w, 9, lanes, signed=True)]
    return got, cycles, len(items)


def _operands(ctx, a, b):
    pad = (-len(a)) % ctx.config.lanes
    return np.concatenate([a, np.zeros(pad, np.uint8)]), np.concatenate([b, np.zeros(pad, np.uint8)])


async def _check(dut, test, a, b, valid, ready, model_cycles):
    ctx = context()
    a, b = _operands(ctx, a, b)
    got, cycles, items = await _drive(dut, ctx, a, b, valid, ready)
    want = fp4_mul(a, b).tolist()
    mismatches, why = scoreboard(f"{ctx.describe()}: fp4_mul", want, got)
    expected_cycles = model_cycles(items)
    record(test, mismatches=mismatches, cycles=cycles, model_cycles=expected_cycles,
           items=items, products=len(a))
    assert mismatches == 0, why
    assert cycles == expected_cycles, (
        f"{ctx.describe()}: cycles {cycles} != model {expected_cycles}"
    )


@cocotb.test()
async def test_exhaustive(dut):
    """All 256 pairs of E2M1 codes, back to back."""
    ctx = context()
    a, b = np.meshgrid(np.arange(16, dtype=np.uint8), np.arange(16, dtype=np.uint8))
    always = Schedule(0, 0.0)
    await _check(dut, "test_exhaustive", a.ravel(), b.ravel(), always, always,
                 lambda n: pipeline_cycles_ideal(n, ctx.config.latency))


@cocotb.test()
async def test_workload(dut):
    """Random codes under random valid gaps and ready back-pressure."""
    ctx = context()
    w = ctx.workload
    rng = ctx.rng(1)
    a = rng.integers(0, 16, w.count, dtype=np.uint8)
    b = rng.integers(0, 16, w.count, dtype=np.uint8)

    def schedules():
        return Schedule([ctx.seed, 2], w.gap), Schedule([ctx.seed, 3], w.backpressure)

    await _check(dut, "test_workload", a, b, *schedules(),
                 lambda n: pipeline_cycles(n, ctx.config.latency, *schedules()))
