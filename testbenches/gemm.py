"""cocotb testbench of :class:`scoville.rtl.gemm.Gemm` against
:func:`scoville.sim.golden.gemm.gemm` and the cycle model :mod:`scoville.sim.cycles.gemm`.

Every test drives the command, A and B streams and takes the C stream in lockstep, checks every
row of C bit for bit, and checks the cycle count: ``cycles == run_cycles + stall cycles`` (the
engine's counters), with no stall at all when the streams keep up. Lanes outside the matrices
carry random values, which the engine must ignore.

Tests: directed edge shapes and values (M = 1, K = 1, K < rows, N < cols, shapes off the array
grid, extreme values, NaN and extreme MX scales, a rejected command); random shapes with
streams that keep up (zero stalls: the closed form exactly); and the workload.
"""

from __future__ import annotations

import cocotb

from scoville.rtl.gemm import DIM_BITS, MX_BLOCK, STATUS, Gemm
from scoville.sim.cycles.gemm import ideal_cycles, run_cycles, useful_macs, utilization
from scoville.sim.cycles.stream import Schedule
from scoville.sim.golden.gemm import Operands, gemm, operand_beats, result_rows
from scoville.sim.harness import stream_names

from .kit import Lockstep, context, pack_rows, read_int, record, reset, scoreboard, unpack

COUNTERS = ("busy", "stall_a", "stall_b", "stall_out", "idle", "rejected")


def _limits(cfg) -> tuple[int, int]:
    if cfg.mx:
        return 0, 15
    return -(1 << (cfg.bits - 1)), (1 << (cfg.bits - 1)) - 1


def random_operands(cfg, rng, m: int, k: int, n: int, *, extreme: bool = False) -> Operands:
    """Operands over the whole range of the format; ``extreme``: only its end values (INT: the
    most negative and the largest; MXFP4: +-6 and +-0) and, for MX, edge scales."""
    lo, hi = _limits(cfg)
    if extreme:
        values = [0x7, 0xF, 0x0, 0x8] if cfg.mx else [lo, hi]
        a, b = rng.choice(values, (m, k)), rng.choice(values, (k, n))
    else:
        a, b = rng.integers(lo, hi + 1, (m, k)), rng.integers(lo, hi + 1, (k, n))
    if not cfg.mx:
        return Operands(a, b)
    q = -(-k // MX_BLOCK)
    if extreme:
        scales = [0x00, 0x01, 0x7F, 0xFE, 0xFF]
        sa, sb = rng.choice(scales, (m, q)), rng.choice(scales, (q, n))
    else:
        sa, sb = rng.integers(110, 145, (m, q)), rng.integers(110, 145, (q, n))
    return Operands(a, b, sa, sb)


def _pack_beats(beats: dict, lanes: int, bits: int) -> list[int]:
    words = pack_rows(beats["data"], bits)
    if "scale" in beats:
        scales = pack_rows(beats["scale"].reshape(len(words), -1), 8)
        words = [w | s << (lanes * bits) for w, s in zip(words, scales, strict=True)]
    return words


async def run_gemms(dut, ctx, test: str, jobs: list, *, gaps: bool) -> None:
    """Run ``jobs`` (``(m, k, n, Operands or None)``; None: a command that must be rejected)
    back to back and check results, cycles and counters."""
    cfg = ctx.config
    R, C = cfg.rows, cfg.cols
    fill = ctx.rng(9)
    cmds, a_items, b_items, want, rows_of = [], [], [], [], []
    for g, (m, k, n, ops) in enumerate(jobs):
        cmds.append(m | k << DIM_BITS | n << (2 * DIM_BITS))
        if ops is None:
            continue
        a_beats, b_beats = operand_beats(cfg, ops, fill)
        a_items += _pack_beats(a_beats, R, cfg.bits)
        b_items += _pack_beats(b_beats, C, cfg.bits)
        rows = result_rows(cfg, gemm(cfg, ops))
        want += [r.tolist() for r in rows]
        rows_of += [(g, m, k, n, i) for i in range(len(rows))]

    a_width, b_width = len(dut.a__payload), len(dut.b__payload)
    await reset(dut, {"cmd__valid": 1, "cmd__payload": 3 * DIM_BITS, "a__valid": 1,
                      "a__payload": a_width, "b__valid": 1, "b__payload": b_width,
                      "o__ready": 1}, seed=ctx.seed)
    gap = ctx.workload.gap if gaps else 0.0
    bp = ctx.workload.backpressure if gaps else 0.0
    shapes = [(m, k, n) for m, k, n, _ in jobs]
    model = run_cycles(cfg, shapes)
    bench = Lockstep(
        dut,
        stream_names(Gemm(cfg)),
        sources={
            "cmd": (cmds, Schedule([ctx.seed, 2, 0], gap)),
            "a": (a_items, Schedule([ctx.seed, 2, 1], gap)),
            "b": (b_items, Schedule([ctx.seed, 2, 2], gap)),
        },
        sinks={"o": (len(want), Schedule([ctx.seed, 3], bp))},
        watch=COUNTERS,
    )
    outs, cycles, counters = await bench.run(timeout=30 * model + 2000)
    got = [unpack(w, 32, C) for w in outs["o"]]
    mismatches, first, why = scoreboard(f"{ctx.describe()}: {test}", want, got)
    if first is not None:
        g, m, k, n, i = rows_of[first]
        why += f" (GEMM {g}, M x K x N = {m} x {k} x {n}, output row {i})"
    # The engine counts the last row's handshake cycle as idle; the model has it as its "+ 1".
    stalls = sum(counters[c] for c in ("stall_a", "stall_b", "stall_out", "idle")) - 1
    good = [s for s in shapes if min(s)]
    macs = sum(useful_macs(*s) for s in good)
    record(test, mismatches=mismatches, cycles=cycles, model_cycles=model + stalls,
           schedule_cycles=model, ideal_cycles=sum(ideal_cycles(cfg, *s) for s in good),
           utilization=utilization(cfg, macs, cycles), macs=macs, gemms=len(good),
           **{c: counters[c] for c in COUNTERS})
    assert mismatches == 0, why
    assert cycles == model + stalls, (
        f"{ctx.describe()}: {test}: cycles {cycles} != model {model} + stalls {stalls} "
        f"(counters {counters})"
    )
    if gap == 0 and bp == 0:
        assert stalls == 0, f"{ctx.describe()}: {test}: stalls although streams keep up: {counters}"
    rejected = len(jobs) - len(good)
    assert counters["rejected"] == rejected, (
        f"{ctx.describe()}: {test}: rejected {counters['rejected']} commands, expected {rejected}"
    )
    status = read_int(dut.status, "status")
    last_ok = STATUS["ok"] if min(shapes[-1]) else STATUS["zero_dim"]
    assert status == last_ok, f"{ctx.describe()}: {test}: status {status}, expected {last_ok}"


def random_shape(cfg, rng) -> tuple[int, int, int]:
    """A shape from 1 to a few tiles in each dimension (K up to a few MX blocks)."""
    R, C = cfg.rows, cfg.cols
    k_hi = 3 * MX_BLOCK + 5 if cfg.mx else 3 * max(R, C) + 3
    return (int(rng.integers(1, 2 * R + 3)), int(rng.integers(1, k_hi)),
            int(rng.integers(1, 2 * C + 3)))


@cocotb.test()
async def test_edges(dut):
    """Edge shapes (M = 1, K = 1, K < rows, N < cols, every dimension off the array grid),
    extreme values and scales, and a zero-dimension command that must be rejected without
    disturbing its neighbours; under the workload's gaps and back-pressure."""
    ctx = context()
    cfg = ctx.config
    R, C = cfg.rows, cfg.cols
    rng = ctx.rng(1)
    k_long = MX_BLOCK + 3 if cfg.mx else 2 * R + 1
    shapes = [
        (1, 1, 1),
        (1, k_long, 2 * C + 1),
        (R + 1, 1, C + 1),
        (2 * R + 1, max(R - 1, 1), max(C - 1, 1)),
        (R, k_long, C),
    ]
    jobs = [(m, k, n, random_operands(cfg, rng, m, k, n)) for m, k, n in shapes]
    jobs.insert(2, (0, 3, 2, None))
    for m, k, n in [(R + 1, k_long, C + 1), (1, 2 * k_long, C)]:
        jobs.append((m, k, n, random_operands(cfg, rng, m, k, n, extreme=True)))
    await run_gemms(dut, ctx, "test_edges", jobs, gaps=True)


@cocotb.test()
async def test_keep_up(dut):
    """Random shapes with streams that keep up (no gaps, no back-pressure): no stall cycle,
    so the cycle count is the closed form of the cycle model exactly."""
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
    cfg, w = ctx.config, ctx.workload
    rng = ctx.rng(2)
    jobs = []
    for _ in range(w.count):
        m, k, n = (given or drawn for given, drawn in zip((w.m, w.k, w.n),
                                                            random_shape(cfg, rng), strict=True))
        jobs.append((m, k, n, random_operands(cfg, rng, m, k, n, extreme=rng.random() < 0.1)))
    await run_gemms(dut, ctx, "test_workload", jobs, gaps=True)
