"""cocotb testbench of :class:`scoville.rtl.nvfp4_dot.Nvfp4Dot` against
:func:`scoville.sim.golden.nvfp4_dot.nvfp4_dot`.

Tests: every E2M1 code against every code at edge block scales (zero, smallest subnormal, 1,
448, negative, NaN) and edge tensor scales; extreme dot products; and a random workload of
multi-block dot products under random valid gaps and ready back-pressure.
"""

import cocotb
import numpy as np

from scoville.rtl.lib.formats import NVFP4_BLOCK
from scoville.sim.golden.nvfp4_dot import nvfp4_dot

from .blockdot import by_length, check_block_dot
from .kit import context

EDGE_SCALES = (0x00, 0x01, 0x38, 0x7E, 0x7F, 0xB8)
F32 = {"one": 0x3F800000, "tiny": 0x00000001, "max": 0x7F7FFFFF, "inf": 0x7F800000,
       "nan": 0x7FC00000, "zero": 0x00000000, "neg": 0xC0490FDB, "min_normal": 0x00800000}


def _tensor_scale_bits(row):
    return {"scale": row[4]}


async def _check(dut, test, rows, *, gaps, interrupt=False):
    """``rows``: list of ``(a, b, sa, sb, scale_bits)``."""
    want = by_length(rows, lambda a, b, sa, sb, scale: nvfp4_dot(
        a, b, sa, sb, scale.astype(np.uint32).view(np.float32)))
    await check_block_dot(dut, test, rows, want, block=NVFP4_BLOCK,
                          gaps=gaps, tail=_tensor_scale_bits, interrupt=interrupt)


@cocotb.test()
async def test_codes_at_edge_scales(dut):
    """Every E2M1 code times every code (one pair per block), at every pair of edge block
    scales; the tensor scale cycles through the edge values."""
    tensor = list(F32.values())
    rows = []
    for sa in EDGE_SCALES:
        for sb in EDGE_SCALES:
            for p in range(256):
                x, y = divmod(p, 16)
                a = np.zeros(NVFP4_BLOCK, np.uint8)
                b = np.zeros(NVFP4_BLOCK, np.uint8)
                a[p % NVFP4_BLOCK], b[p % NVFP4_BLOCK] = x, y
                rows.append((a, b, [sa], [sb], tensor[p % len(tensor)] if p % 4 == 0
                             else F32["one"]))
    await _check(dut, "test_codes_at_edge_scales", rows, gaps=False)


@cocotb.test()
async def test_extremes(dut):
    """Overflow through the tensor scale, Inf - Inf, subnormal results, cancellation."""
    await _check(dut, "test_extremes", _extremes(), gaps=True)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of the extreme dot products under gaps and back-pressure (beats
    in the pipeline, an output waiting): the unit must come back empty, then run the same
    stimulus from the start correctly."""
    await _check(dut, "test_reset", _extremes(), gaps=True, interrupt=True)


def _extremes() -> list:
    six = np.full(NVFP4_BLOCK, 0x7, np.uint8)
    msix = np.full(NVFP4_BLOCK, 0xF, np.uint8)
    half = np.full(NVFP4_BLOCK, 0x1, np.uint8)
    two = np.concatenate
    rows = [
        (six, six, [0x7E], [0x7E], F32["max"]),
        (six, six, [0x7E], [0x7E], 0x7E000000),
        (two([six, six]), two([six, msix]), [0x7E, 0x7E], [0x7E, 0x7E], F32["one"]),
        (half, half, [0x01], [0x01], F32["tiny"]),
        (half, half, [0x01], [0x01], 0x1A000000),
        (half, msix, [0x01], [0x01], 0x0C000000),
        (two([six, six, half]), two([six, msix, half]), [0x38, 0x38, 0x01], [0x38, 0x38, 0x01],
         F32["neg"]),
        (six, six, [0x7E], [0x7E], F32["inf"]),
        (six, np.zeros(NVFP4_BLOCK, np.uint8), [0x7E], [0x7E], F32["inf"]),
    ]
    return rows


@cocotb.test()
async def test_workload(dut):
    """Random dot products of 1..8 blocks with random codes, block scales and tensor
    scales, under random valid gaps and ready back-pressure."""
    ctx = context()
    rng = ctx.rng(1)
    count = ctx.workload.count
    # Drawn for all dot products at once, then cut into rows.
    blocks = rng.integers(1, 9, count)
    total = int(blocks.sum())
    a = rng.integers(0, 16, (total, NVFP4_BLOCK), dtype=np.uint8)
    b = rng.integers(0, 16, (total, NVFP4_BLOCK), dtype=np.uint8)
    sa, sb = rng.integers(0, 256, total), rng.integers(0, 256, total)
    plain = np.repeat(rng.random(count) < 0.9, blocks)  # mostly positive, non-NaN scales,
    sa, sb = np.where(plain, sa % 0x7F, sa), np.where(plain, sb % 0x7F, sb)  # as quantizers make
    exp = np.where(rng.random(count) < 0.3, rng.integers(1, 255, count),
                   rng.integers(100, 150, count))
    scales = (exp << 23) | rng.integers(0, 1 << 23, count) | ((rng.random(count) < 0.1) << 31)
    cuts = np.cumsum(blocks)[:-1]
    rows = [(x.reshape(-1), y.reshape(-1), s.tolist(), u.tolist(), int(scale))
            for x, y, s, u, scale in zip(*(np.split(v, cuts) for v in (a, b, sa, sb)), scales,
                                         strict=True)]
    await _check(dut, "test_workload", rows, gaps=True)
