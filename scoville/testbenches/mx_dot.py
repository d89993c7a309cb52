"""cocotb testbench of :class:`scoville.rtl.mx_dot.MxDot` against
:func:`scoville.sim.golden.mx_dot.mx_dot`.

Tests: every E2M1 code against every code at the edge scales (0x00, 0x7F, 0xFE, 0xFF), extreme
dot products (overflow to Inf, Inf - Inf, subnormal results, cancellation), and a random
workload of multi-block dot products under random valid gaps and ready back-pressure.
"""

import cocotb
import numpy as np

from scoville.rtl.lib.formats import MX_BLOCK
from scoville.sim.golden.mx_dot import mx_dot

from .blockdot import by_length, check_block_dot
from .kit import context

EDGE_SCALES = (0x00, 0x7F, 0xFE, 0xFF)


async def _check(dut, test, rows, *, gaps, interrupt=False):
    """``rows``: list of ``(a, b, sa, sb)``: codes of length 32 * blocks, scales per block."""
    want = by_length(rows, mx_dot)
    await check_block_dot(dut, test, rows, want, block=MX_BLOCK,
                          gaps=gaps, interrupt=interrupt)


@cocotb.test()
async def test_codes_at_edge_scales(dut):
    """Every E2M1 code times every code (one pair per block, in every position), at every
    pair of edge scales."""
    rows = []
    for sa in EDGE_SCALES:
        for sb in EDGE_SCALES:
            for x in range(16):
                a = np.zeros(MX_BLOCK, np.uint8)
                b = np.zeros(MX_BLOCK, np.uint8)
                for y in range(16):
                    a[:], b[:] = 0, 0
                    pos = (x * 16 + y) % MX_BLOCK
                    a[pos], b[pos] = x, y
                    rows.append((a.copy(), b.copy(), [sa], [sb]))
    await _check(dut, "test_codes_at_edge_scales", rows, gaps=False)


@cocotb.test()
async def test_extremes(dut):
    """Blocks of +-6 at the largest scales (overflow, Inf - Inf), the smallest scales
    (subnormal and zero results), and cancelling blocks."""
    await _check(dut, "test_extremes", _extremes(), gaps=True)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of the extreme dot products under gaps and back-pressure (beats
    in the pipeline, an output waiting): the unit must come back empty, then run the same
    stimulus from the start correctly."""
    await _check(dut, "test_reset", _extremes(), gaps=True, interrupt=True)


def _extremes() -> list:
    six, msix = 0x7, 0xF
    full = np.full(MX_BLOCK, six, np.uint8)
    neg = np.full(MX_BLOCK, msix, np.uint8)
    half = np.full(MX_BLOCK, 0x1, np.uint8)
    rows = [
        (np.concatenate([full, full]), np.concatenate([full, neg]), [0xFE, 0xFE], [0xFE, 0xFE]),
        (np.concatenate([full, full]), np.concatenate([full, full]), [0xFE, 0xFE], [0xB0, 0x90]),
        (np.concatenate([full, half]), np.concatenate([neg, half]), [0x00, 0x00], [0x00, 0x10]),
        (np.concatenate([half, half]), np.concatenate([half, neg]), [0x01, 0x7F], [0x01, 0x01]),
        (np.concatenate([full, full, full]), np.concatenate([full, neg, full]),
         [0x90, 0x90, 0x10], [0x7F, 0x7F, 0x00]),
        (np.concatenate([full, full]), np.concatenate([full, full]), [0x7F, 0xFF], [0x7F, 0x7F]),
        (half, half, [0x11], [0x10]),
        (half, half, [0x38], [0x37]),
        (half, np.full(MX_BLOCK, 0x9, np.uint8), [0x38], [0x36]),
        (np.concatenate([half, half]), np.concatenate([half, half]), [0x38, 0x39], [0x37, 0x37]),
    ]
    return rows


@cocotb.test()
async def test_workload(dut):
    """Random dot products of 1..6 blocks: random codes, scales mostly near 127 with some
    anywhere in 0..255, under random valid gaps and ready back-pressure."""
    ctx = context()
    rng = ctx.rng(1)
    count = ctx.workload.count
    # Drawn for all dot products at once, then cut into rows.
    blocks = rng.integers(1, 7, count)
    total = int(blocks.sum())
    a = rng.integers(0, 16, (total, MX_BLOCK), dtype=np.uint8)
    b = rng.integers(0, 16, (total, MX_BLOCK), dtype=np.uint8)
    anywhere = np.repeat(rng.random(count) < 0.2, blocks)
    sa, sb = (np.where(anywhere, rng.integers(0, 256, total), rng.integers(117, 138, total))
              for _ in range(2))
    cuts = np.cumsum(blocks)[:-1]
    rows = [(x.reshape(-1), y.reshape(-1), s.tolist(), u.tolist())
            for x, y, s, u in zip(*(np.split(v, cuts) for v in (a, b, sa, sb)), strict=True)]
    await _check(dut, "test_workload", rows, gaps=True)
