"""cocotb testbench of :class:`scoville.rtl.gemm_quant.GemmQuant` against the composition of its
parts' golden models (:func:`scoville.sim.golden.gemm_quant.gemm_quant`) and of their timed
models (:func:`scoville.sim.cycles.gemm_quant.timing`).

Every test drives the command, A and B streams and takes the MX blocks through the free-running
harness, checks every block's 32 codes and scale, the cycle of every handshake on every stream
and every counter (the array's and the block's own) against the model, fed the same schedules.

Tests: directed edge shapes and values (M = 1, K = 1, one block of N, shapes off the array grid,
extreme values and MX scales, NaN and overflowing sums) and every kind of rejected command
(each zero dimension, N not a multiple of 32); random shapes with streams that keep up; the
workload; and a reset in the middle of a run.
"""

from __future__ import annotations

import cocotb

from scoville.rtl.gemm_quant import Status
from scoville.rtl.lib.formats import MX_BLOCK
from scoville.sim.cycles.gemm_quant import COUNTERS, timing
from scoville.sim.golden.gemm_quant import block_order, gemm_quant

from .failures import Failure, Kind
from .gemm import gemm_bench, random_operands, workload_jobs
from .kit import context, read_int


async def run_gemms(dut, ctx, test: str, jobs: list, *, gaps: bool, interrupt: bool = False):
    """Run ``jobs`` (``(m, k, n, Operands or None)``; None: a command the block rejects) back
    to back and check blocks, handshake cycles and counters. ``interrupt``: first run the
    same jobs partway and reset the block in the middle of them."""
    cfg = ctx.config
    want, block_of = [], []
    for g, (m, k, n, ops) in enumerate(jobs):
        if ops is None:
            continue
        codes, scales = gemm_quant(cfg, ops)
        want += [(c.tolist(), int(s)) for c, s in zip(codes, scales, strict=True)]
        rows, starts = block_order(cfg, m, n)
        block_of += [(g, m, k, n, int(i), int(j)) for i, j in zip(rows, starts, strict=True)]
    shapes = [(m, k, n) for m, k, n, _ in jobs]

    def where(index):
        g, m, k, n, i, j = block_of[index]
        return (f"GEMM {g}, M x K x N = {m} x {k} x {n}, row {i} of C, "
                f"columns {j}..{j + MX_BLOCK - 1}")

    def blocks(out):
        return [(c.tolist(), int(s)) for c, s in zip(out["codes"], out["scale"], strict=True)]

    tb = gemm_bench(dut, ctx, test, cfg.array, jobs, gaps=gaps)
    tb.sink["o"].expect(want, decode=blocks, where=where, label="blocks")
    model = tb.predict(timing, cfg, shapes, tb.valid, tb.ready["o"])
    await tb.run(model, interrupt=interrupt, zero=("counters", "status"))
    tb.check(COUNTERS, blocks=len(want),
             gemms=sum(cfg.status(*s) == Status.OK for s in shapes))
    what = tb.what
    status = read_int(dut.status, "status")
    last = cfg.status(*shapes[-1])
    if status != last:
        raise Failure(Kind.STATUS, f"{what}: status {status}, expected {last}")


def random_shape(cfg, rng) -> tuple[int, int, int]:
    """A shape from 1 to a few tiles of M, up to a few MX blocks of K, 1 to 3 blocks of N."""
    R = cfg.array.rows
    return (int(rng.integers(1, 2 * R + 3)), int(rng.integers(1, 3 * MX_BLOCK + 5)),
            MX_BLOCK * int(rng.integers(1, 4)))


def _jobs(cfg, rng, shapes, extreme=()):
    return [(m, k, n, random_operands(cfg.array, rng, m, k, n, extreme=index in extreme))
            for index, (m, k, n) in enumerate(shapes)]


@cocotb.test()
async def test_edges(dut):
    """Edge shapes (M = 1, K = 1, one and several blocks of N, M off the array grid), extreme
    values and scales (NaN scales, sums that overflow FP32, zero blocks), and every kind of
    rejected command (each zero dimension, N = 16, 33 and 48), each between good commands and
    one last so that the final status must name it; under the workload's gaps and
    back-pressure."""
    ctx = context()
    cfg = ctx.config
    R = cfg.array.rows
    rng = ctx.rng(1)
    shapes = [(1, 1, MX_BLOCK), (R + 1, MX_BLOCK + 3, 2 * MX_BLOCK), (2 * R + 1, 1, MX_BLOCK),
              (R, 2 * MX_BLOCK, 3 * MX_BLOCK), (R + 1, MX_BLOCK + 3, MX_BLOCK),
              (1, 2 * MX_BLOCK + 1, 2 * MX_BLOCK)]
    jobs = _jobs(cfg, rng, shapes, extreme=(4, 5))
    bad = [(0, 3, 32), (3, 0, 32), (3, 2, 0), (2, 2, 16), (2, 2, 33), (0, 0, 0)]
    for index, (m, k, n) in enumerate(bad):
        jobs.insert(1 + 2 * index, (m, k, n, None))
    jobs.append((2, 3, 48, None))
    await run_gemms(dut, ctx, "test_edges", jobs, gaps=True)


@cocotb.test()
async def test_keep_up(dut):
    """Random shapes with streams that keep up (no gaps, no back-pressure)."""
    ctx = context()
    rng = ctx.rng(3)
    shapes = [random_shape(ctx.config, rng) for _ in range(4)]
    await run_gemms(dut, ctx, "test_keep_up", _jobs(ctx.config, rng, shapes), gaps=False)


@cocotb.test()
async def test_workload(dut):
    """The workload: ``count`` GEMMs of the given shape (random shapes by default) under the
    workload's gaps and back-pressure, one in ten with extreme values."""
    ctx = context()
    jobs = workload_jobs(ctx, ctx.config.array, lambda rng: random_shape(ctx.config, rng))
    await run_gemms(dut, ctx, "test_workload", jobs, gaps=True)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of random GEMMs under gaps and back-pressure (rows in the buffer,
    blocks in the quantizer): the block must come back idle with its counters and status at
    0, then run the same GEMMs from the start correctly."""
    ctx = context()
    rng = ctx.rng(6)
    shapes = [random_shape(ctx.config, rng) for _ in range(3)]
    await run_gemms(dut, ctx, "test_reset", _jobs(ctx.config, rng, shapes), gaps=True,
                    interrupt=True)
