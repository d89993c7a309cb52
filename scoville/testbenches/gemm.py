"""cocotb testbench of :class:`scoville.rtl.gemm.Gemm` against
:func:`scoville.sim.golden.gemm.gemm` and the timed model :mod:`scoville.sim.cycles.gemm`.

Every test drives the command, A and B streams and takes the C stream through the free-running
harness, checks every
row of C bit for bit, checks the cycle of every handshake on every stream against the timed
model :func:`~scoville.sim.cycles.gemm.timing` (fed the same schedules), each counter against
the model's count of its kind, and, when the streams keep up, the cycle count against the
closed form. Lanes outside the matrices carry random values, which the engine must ignore.

Tests: directed edge shapes and values (M = 1, K = 1, K < rows, N < cols, shapes off the array
grid, extreme values, NaN and extreme MX scales, a rejected command); random shapes with
streams that keep up (zero stalls: the closed form exactly); and the workload.
"""

from __future__ import annotations

import cocotb
import numpy as np

from scoville.rtl.gemm import Status
from scoville.rtl.lib.formats import ELEMENT_BITS
from scoville.sim.cycles.gemm import (
    COUNTERS,
    ideal_cycles,
    run_cycles,
    timing,
    useful_macs,
    utilization,
)
from scoville.sim.golden.gemm import Operands, gemm, operand_beats, result_rows

from .bench import BlockBench
from .coverage import FP32_CLASSES, fp32_classes
from .failures import Failure, Kind
from .kit import context, read_int

#: Element codes of the extreme-value draws: the ends of each format's range, its zeros, its
#: smallest subnormal and normal, and its NaN and Inf.
_EXTREME = {
    "mxfp4": [0x7, 0xF, 0x0, 0x8, 0x1, 0x9],
    "nvfp4": [0x7, 0xF, 0x0, 0x8, 0x1, 0x9],
    # +-448, +-0, +-2^-9 (smallest subnormal), 2^-6 (smallest normal), NaN
    "mxfp8": [0x7E, 0xFE, 0x00, 0x80, 0x01, 0x81, 0x08, 0x7F, 0xFF],
    # +-max, +-0, smallest subnormal, smallest normal, 1, +-Inf, NaN, a signalling NaN
    "bf16": [0x7F7F, 0xFF7F, 0x0000, 0x8000, 0x0001, 0x8080, 0x3F80, 0x7F80, 0xFF80, 0x7FC0,
             0xFF81],
}
#: Block scale codes of the extreme draws: E8M0 2^-127, 2^-126, 1, 2^127 and NaN; E4M3 +-0,
#: its smallest subnormal, smallest normal, +-448 and both NaNs.
_EXTREME_SCALES = {"e8m0": [0x00, 0x01, 0x7F, 0xFE, 0xFF],
                   "e4m3": [0x00, 0x80, 0x01, 0x08, 0x7E, 0xFE, 0x7F, 0xFF]}


#: Coverage bins (:mod:`scoville.testbenches.coverage`), hit from each command and its result.
BINS = {
    "command:rejected": "a command with a zero dimension (rejected)",
    "command:one_tile": "a GEMM within one tile of the array (M <= rows, N <= cols)",
    "command:partial_tiles": "a GEMM whose M or N is not a multiple of the array's side",
    "command:k_one": "a GEMM with K = 1",
    **{name: f"{text} in C (float formats; a zero in either)"
       for name, text in FP32_CLASSES.items()},
    "result:int_extreme": "an integer C beyond 2^20 in magnitude (int formats)",
}


def _cover(cov, cfg, jobs, results) -> None:
    for (m, k, n, ops), c in zip(jobs, results, strict=True):
        cov.hit_if("command:rejected", ops is None)
        if ops is None:
            continue
        cov.hit_if("command:one_tile", m <= cfg.rows and n <= cfg.cols)
        cov.hit_if("command:partial_tiles", m % cfg.rows or n % cfg.cols)
        cov.hit_if("command:k_one", k == 1)
        if cfg.arith.kind == "int":
            cov.hit("result:zero", int(np.sum(c == 0)))
            cov.hit("result:int_extreme", int(np.sum(np.abs(c.astype(np.int64)) > 1 << 20)))
            continue
        cov.hits(fp32_classes(c))


def _elements(fmt: str, rng, shape, extreme: bool) -> np.ndarray:
    """Element codes (or integers) of ``fmt`` over its whole range; ``extreme``: its special
    values mixed with codes from anywhere."""
    if fmt in ("int8", "int4"):
        hi = 1 << (ELEMENT_BITS[fmt] - 1)
        return rng.choice([-hi, hi - 1], shape) if extreme else rng.integers(-hi, hi, shape)
    if extreme:
        special = rng.choice(_EXTREME[fmt], shape)
        pick = rng.random(shape) < 0.7  # drawn before the codes: seeds replay as before
        return np.where(pick, special, rng.integers(0, 1 << ELEMENT_BITS[fmt], shape))
    if fmt == "bf16":
        # Any sign and significand, exponents within 2^+-12 of 1: products and sums stay in
        # range and cancel often; the whole range comes in the extreme draws.
        exp = rng.integers(115, 140, shape)
        return (rng.integers(0, 2, shape) << 15) | (exp << 7) | rng.integers(0, 128, shape)
    if fmt == "mxfp8":
        codes = rng.integers(0, 256, shape)
        return np.where((codes & 0x7F) == 0x7F, codes ^ 0x01, codes)  # no NaN
    return rng.integers(0, 16, shape)


def random_operands(cfg, rng, m: int, k: int, n: int, *, extreme: bool = False) -> Operands:
    """Operands over the whole range of the format; ``extreme``: its special values (the ends
    of its range, zeros, subnormals, NaN and Inf where it has them) and edge block scales and
    tensor scales."""
    a = _elements(cfg.fmt, rng, (m, k), extreme)
    b = _elements(cfg.b_format, rng, (k, n), extreme)
    arith = cfg.arith
    if arith.kind != "block":
        return Operands(a, b)
    q = -(-k // arith.block)
    if arith.tensor_scale:
        if extreme:
            sa, sb = (rng.choice(_EXTREME_SCALES["e4m3"], s) for s in ((m, q), (q, n)))
            # Mostly finite, so that the edge elements and block scales stay visible; a
            # quarter of the draws Inf, NaN, 0 or the smallest subnormal.
            finite = np.array([2.0**-20, 2.0**-126, 1.0, 2.0**20])
            special = np.array([2.0**-149, 3.0e38, np.inf, np.nan, 0.0])
            ta, tb = (rng.choice(special) if rng.random() < 0.25 else rng.choice(finite)
                      for _ in range(2))
        else:
            # Any E4M3 scale but NaN, either sign; tensor scales 2^-20..2^20.
            sa, sb = (rng.integers(0, 0x7F, s) | (rng.integers(0, 2, s) << 7)
                      for s in ((m, q), (q, n)))
            ta, tb = np.ldexp(rng.uniform(1, 2, 2), rng.integers(-20, 21, 2))
        return Operands(a, b, sa, sb, float(np.float32(ta)), float(np.float32(tb)))
    if extreme:
        sa, sb = (rng.choice(_EXTREME_SCALES["e8m0"], s) for s in ((m, q), (q, n)))
    else:
        sa, sb = rng.integers(110, 145, (m, q)), rng.integers(110, 145, (q, n))
    return Operands(a, b, sa, sb)


def _command_fields(cfg, jobs: list) -> dict:
    """The ``cmd`` stream's fields of ``jobs``: M, K, N and, for ``nvfp4``, the binary32 bits
    of the tensor scales (0 for a command that must be rejected)."""
    fields = {name: [job[d] for job in jobs] for d, name in enumerate("mkn")}
    if cfg.arith.tensor_scale:
        for name in ("scale_a", "scale_b"):
            values = [0.0 if ops is None else getattr(ops, name) for *_, ops in jobs]
            fields[name] = np.array(values, np.float32).view(np.uint32)
    return fields


def gemm_bench(dut, ctx, test: str, array, jobs: list, *, gaps: bool) -> BlockBench:
    """The bench of a block with the array's ``cmd``, ``a`` and ``b`` streams and one output
    stream ``o``, its sources loaded with the commands of ``jobs`` (``(m, k, n, Operands or
    None)``) and the operands of those that run (``array``: the array's config), under the
    workload's schedules (or none). The caller says what ``o`` carries."""
    fill = ctx.rng(9)
    codec = ctx.codecs
    a_items, b_items = [], []
    for _, _, _, ops in jobs:
        if ops is not None:
            a_beats, b_beats = operand_beats(array, ops, fill)
            a_items.append(codec["a"].pack_bytes(**a_beats))
            b_items.append(codec["b"].pack_bytes(**b_beats))
    tb = BlockBench(dut, ctx, test, sources=("cmd", "a", "b"), sinks=("o",), gaps=gaps)
    tb.source["cmd"].send(codec["cmd"].pack(**_command_fields(array, jobs)))
    tb.source["a"].send(np.concatenate(a_items) if a_items else [])
    tb.source["b"].send(np.concatenate(b_items) if b_items else [])
    return tb


async def run_gemms(dut, ctx, test: str, jobs: list, *, gaps: bool, interrupt: bool = False):
    """Run ``jobs`` (``(m, k, n, Operands or None)``; None: a command that must be rejected)
    back to back and check results, handshake cycles and counters. ``interrupt``: first run
    the same jobs halfway and reset the engine in the middle of them."""
    cfg = ctx.config
    want, rows_of, results = [], [], []
    for g, (m, k, n, ops) in enumerate(jobs):
        results.append(None if ops is None else gemm(cfg, ops))
        if ops is not None:
            rows = result_rows(cfg, results[-1])
            want += [r.tolist() for r in rows]
            rows_of += [(g, m, k, n, i) for i in range(len(rows))]
    shapes = [(m, k, n) for m, k, n, _ in jobs]

    def where(row):
        g, m, k, n, i = rows_of[row]
        return f"GEMM {g}, M x K x N = {m} x {k} x {n}, output row {i}"

    tb = gemm_bench(dut, ctx, test, cfg, jobs, gaps=gaps)
    tb.sink["o"].expect(want, decode=lambda f: f[""].tolist(), where=where, label="rows of C")
    model = tb.predict(timing, cfg, shapes, tb.valid, tb.ready["o"])
    seen = await tb.run(model, interrupt=interrupt, zero=("counters", "status"))
    _cover(ctx.coverage, cfg, jobs, results)
    good = [s for s in shapes if min(s)]
    macs = sum(useful_macs(*s) for s in good)
    tb.check(COUNTERS, closed_form_cycles=run_cycles(cfg, shapes),
             ideal_cycles=sum(ideal_cycles(cfg, *s) for s in good),
             utilization=utilization(cfg, macs, seen.cycles), macs=macs, gemms=len(good))
    what = tb.what
    status = read_int(dut.status, "status")
    last_ok = Status.OK if min(shapes[-1]) else Status.ZERO_DIM
    if status != last_ok:
        raise Failure(Kind.STATUS, f"{what}: status {status}, expected {last_ok}")
    if not gaps and seen.cycles != run_cycles(cfg, shapes):
        raise Failure(Kind.TIMING, f"{what}: cycles {seen.cycles} != closed form "
                                   f"{run_cycles(cfg, shapes)}")


def workload_jobs(ctx, array, shape) -> list:
    """The workload's ``count`` GEMMs for an array of config ``array``: the workload's shape,
    each dimension it leaves 0 drawn by ``shape(rng)``, values over the whole range of the
    format, one in ten with extreme values only."""
    w = ctx.workload
    rng = ctx.rng(2)
    jobs = []
    for _ in range(w.count):
        m, k, n = (given or drawn for given, drawn in zip((w.m, w.k, w.n), shape(rng),
                                                            strict=True))
        jobs.append((m, k, n, random_operands(array, rng, m, k, n, extreme=rng.random() < 0.1)))
    return jobs


def random_shape(cfg, rng) -> tuple[int, int, int]:
    """A shape from 1 to a few tiles in each dimension (K up to a few MX blocks)."""
    R, C = cfg.rows, cfg.cols
    k_hi = 3 * cfg.arith.block + 5 if cfg.mx else 3 * max(R, C) + 3
    return (int(rng.integers(1, 2 * R + 3)), int(rng.integers(1, k_hi)),
            int(rng.integers(1, 2 * C + 3)))


def _subnormal_job(cfg, rng) -> list:
    """For a float format, a 1 x 1 x 1 GEMM of extreme operands whose C is subnormal (the
    first of up to 2,000 draws; the golden model says which): the array's subnormal results,
    every run. None for the integer formats."""
    if cfg.arith.kind == "int":
        return []
    for _ in range(2000):
        ops = random_operands(cfg, rng, 1, 1, 1, extreme=True)
        if fp32_classes(gemm(cfg, ops))["result:subnormal"]:
            return [(1, 1, 1, ops)]
    raise AssertionError(f"no subnormal C in 2,000 draws for {cfg.fmt} x {cfg.b_format}")


@cocotb.test()
async def test_edges(dut):
    """Edge shapes (M = 1, K = 1, K < rows, N < cols, every dimension off the array grid; in
    a block format, K one past a block over 3 x 2 tiles, and with more rows than a block, K
    past two blocks on every row; with partial sums, K around their count),
    extreme values and scales, a subnormal C (float formats), and every combination of zero
    dimensions, each a command that must be rejected without disturbing its neighbours; under
    the workload's gaps and back-pressure."""
    ctx = context()
    cfg = ctx.config
    R, C = cfg.rows, cfg.cols
    rng = ctx.rng(1)
    k_long = cfg.arith.block + 3 if cfg.mx else 2 * R + 1
    shapes = [
        (1, 1, 1),
        (1, k_long, 2 * C + 1),
        (R + 1, 1, C + 1),
        (2 * R + 1, max(R - 1, 1), max(C - 1, 1)),
        (R, k_long, C),
    ]
    if cfg.mx:
        # A tile's last block one element long, a step after a block that does not end it,
        # over 3 x 2 tiles: the block units' tightest pair, and the sums they leave between
        # tiles.
        shapes.append((2 * R + 1, cfg.arith.block + 1, C + 1))
    if cfg.mx and R > cfg.arith.block:
        # K past two blocks with more rows than a block: rows a block apart end a block in
        # the same cycle (row 0 its second, row ``block`` its first).
        shapes.append((R, 2 * cfg.arith.block + 1, C))
    if cfg.sums > 1:
        # Partial sums (bf16 on os): K one and two past them over 2 x 3 tiles, tiles as close
        # as the sums allow, and K below them (above: K = 1).
        shapes += [(R + 1, cfg.sums + 1, 2 * C + 1), (R + 1, cfg.sums + 2, 2 * C + 1),
                   (2, cfg.sums - 1, C)]
    jobs = [(m, k, n, random_operands(cfg, rng, m, k, n)) for m, k, n in shapes]
    for m, k, n in [(R + 1, k_long, C + 1), (1, 2 * k_long, C)]:
        jobs.append((m, k, n, random_operands(cfg, rng, m, k, n, extreme=True)))
    jobs += _subnormal_job(cfg, ctx.rng(11))
    # Every combination of zero dimensions, each between two good commands, and one last, so
    # that the final status must say it was rejected.
    zeros = [(0, 3, 2), (3, 0, 2), (3, 2, 0), (0, 0, 2), (0, 2, 0), (2, 0, 0), (0, 0, 0)]
    for index, (m, k, n) in enumerate(zeros[:-1]):
        jobs.insert(1 + 2 * index, (m, k, n, None))
    jobs.append((*zeros[-1], None))
    await run_gemms(dut, ctx, "test_edges", jobs, gaps=True)


@cocotb.test()
async def test_keep_up(dut):
    """Random shapes with streams that keep up (no gaps, no back-pressure): no stall cycle,
    so the cycle count is the timed model's closed form exactly."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(3)
    jobs = []
    for _ in range(4):
        m, k, n = random_shape(cfg, rng)
        jobs.append((m, k, n, random_operands(cfg, rng, m, k, n)))
    await run_gemms(dut, ctx, "test_keep_up", jobs, gaps=False)


@cocotb.test()
async def test_workload(dut):
    """The workload: ``count`` GEMMs of the given shape (random shapes by default), values
    over the whole range of the format, under the workload's gaps and back-pressure."""
    ctx = context()
    jobs = workload_jobs(ctx, ctx.config, lambda rng: random_shape(ctx.config, rng))
    await run_gemms(dut, ctx, "test_workload", jobs, gaps=True)


@cocotb.test()
async def test_long_k(dut):
    """A GEMM with a long K (``long_k``; 0 skips). ``int8``: K = ``long_k`` of extreme values,
    so the array's sums reach 2**29 and beyond (K = 32773 of (-128) * (-128) is 2**29 +
    81920): an accumulator narrower than 32 bits fails. Other formats cannot get there within
    16-bit K (INT4 at most 65535 * 64 < 2**22): K = ``min(long_k, LONG_K_OTHERS)`` random
    operands, every output bit for bit, so a long sum's order and rounding (FP32 accumulation
    over hundreds of blocks) are the golden model's."""
    ctx = context()
    cfg, k = ctx.config, ctx.workload.long_k
    if not k:
        return
    R, C = cfg.rows, cfg.cols
    m, n = min(R, 2), C
    rng = ctx.rng(5)
    if cfg.fmt != "int8":
        k = min(k, LONG_K_OTHERS)
        await run_gemms(dut, ctx, "test_long_k",
                        [(m, k, n, random_operands(cfg, rng, m, k, n))], gaps=False)
        return
    a = np.full((m, k), -128)
    a[1:] = 127
    b = rng.choice([-128, 127], (k, n))
    b[:, 0] = -128
    await run_gemms(dut, ctx, "test_long_k", [(m, k, n, Operands(a, b))], gaps=False)


#: ``test_long_k``'s K in the formats whose sums cannot overflow: long enough for hundreds of
#: blocks of 32 (or 16) in one sum, short enough for Icarus.
LONG_K_OTHERS = 4099


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of random GEMMs under gaps and back-pressure (commands running,
    rows waiting, operands buffered): the engine must come back idle with its counters and
    status at 0, then run the same GEMMs from the start correctly."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(6)
    jobs = []
    for _ in range(3):
        m, k, n = random_shape(cfg, rng)
        jobs.append((m, k, n, random_operands(cfg, rng, m, k, n)))
    await run_gemms(dut, ctx, "test_reset", jobs, gaps=True, interrupt=True)
