"""cocotb testbench of :class:`scoville.rtl.int_mac.IntMac` against
:func:`scoville.sim.golden.int_mac.int_mac`.

Tests: every INT4 x INT4 (or a full INT8 row sweep) pair, INT32 wrap-around in both directions,
and a random workload of dot products of random lengths under gaps and back-pressure.
"""

import cocotb
import numpy as np

from scoville.sim.golden.int_mac import int_mac

from .bench import check_stream
from .kit import context


async def _check(dut, test, rows, *, gaps, interrupt=False):
    """``rows``: list of ``(a, b, acc)`` dot products; a and b have a multiple of lanes."""
    ctx = context()
    lanes, bits = ctx.config.lanes, ctx.config.bits
    # ``acc`` counts on a dot product's first beat only: the other beats carry random values.
    noise = ctx.rng(97)
    cols = {"a": [], "b": [], "acc": [], "last": []}
    for a, b, acc in rows:
        beats = len(a) // lanes
        cols["a"].append(np.asarray(a).reshape(beats, lanes))
        cols["b"].append(np.asarray(b).reshape(beats, lanes))
        accs = noise.integers(-(1 << 31), 1 << 31, beats, dtype=np.int64)
        accs[0] = int(acc)
        cols["acc"].append(accs)
        cols["last"].append(np.arange(beats) == beats - 1)
    inputs = {name: np.concatenate(parts) for name, parts in cols.items()}
    emits = [bool(x) for x in inputs["last"]]
    want = [int(int_mac(a, b, acc, bits)) for a, b, acc in rows]
    await check_stream(
        dut, ctx, test, inputs, want,
        decode=lambda out: [int(v) for v in out[""]],
        latency=ctx.component.latency, gaps=gaps, emits=emits,
        interrupt=interrupt,
        describe=lambda k: f"a={rows[k][0].tolist()} b={rows[k][1].tolist()} acc={rows[k][2]}",
        macs=sum(len(r[0]) for r in rows),
    )


def _lo_hi(bits):
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


@cocotb.test()
async def test_exhaustive_pairs(dut):
    """Every pair of elements of the format. INT4: each pair is its own one-beat dot product,
    in lane ``p % lanes`` for pair ``p``, other lanes zero. INT8: each row multiplies one value
    of a by all 256 values of b, ``lanes`` at a time."""
    ctx = context()
    lanes, bits = ctx.config.lanes, ctx.config.bits
    lo, hi = _lo_hi(bits)
    values = np.arange(lo, hi + 1)
    rows = []
    if bits == 4:
        for p, (x, y) in enumerate((x, y) for x in values for y in values):
            a = np.zeros(lanes, np.int64)
            b = np.zeros(lanes, np.int64)
            a[p % lanes], b[p % lanes] = x, y
            rows.append((a, b, 0))
    else:
        for x in values:
            a = np.full(256, x, np.int64)
            b = values.copy()
            pad = (-256) % lanes
            rows.append((np.concatenate([a, np.zeros(pad, np.int64)]),
                         np.concatenate([b, np.zeros(pad, np.int64)]), 0))
    await _check(dut, "test_exhaustive_pairs", rows, gaps=False)


@cocotb.test()
async def test_wraparound(dut):
    """INT32 accumulation wraps: sums that cross 2^31 - 1 and -2^31 in both directions."""
    await _check(dut, "test_wraparound", _wrap_rows(context()), gaps=True)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of the wrap-around dot products under gaps and back-pressure
    (beats in the pipeline, an output waiting): the unit must come back empty, then run the
    same stimulus from the start correctly."""
    await _check(dut, "test_reset", _wrap_rows(context()), gaps=True, interrupt=True)


def _wrap_rows(ctx) -> list:
    lanes, bits = ctx.config.lanes, ctx.config.bits
    lo, hi = _lo_hi(bits)
    big = lo * lo * lanes
    rows = []
    for acc in (2**31 - 1, 2**31 - big, -(2**31), -(2**31) + 1, 0, -1):
        for x, y in ((lo, lo), (lo, hi), (hi, hi), (1, -1)):
            rows.append((np.full(lanes * 2, x, np.int64), np.full(lanes * 2, y, np.int64), acc))
    return rows


@cocotb.test()
async def test_workload(dut):
    """Random dot products (1..8 beats, full-range elements, random starting sums) under random
    valid gaps and ready back-pressure."""
    ctx = context()
    lanes, bits = ctx.config.lanes, ctx.config.bits
    lo, hi = _lo_hi(bits)
    rng = ctx.rng(1)
    rows = []
    for _ in range(ctx.workload.count):
        n = lanes * int(rng.integers(1, 9))
        if rng.random() < 0.1:
            a, b = rng.choice([lo, hi], n), rng.choice([lo, hi], n)
        else:
            a, b = rng.integers(lo, hi + 1, n), rng.integers(lo, hi + 1, n)
        acc = int(rng.integers(-(2**31), 2**31)) if rng.random() < 0.5 else 0
        rows.append((a, b, acc))
    await _check(dut, "test_workload", rows, gaps=True)
