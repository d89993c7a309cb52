"""cocotb testbench of :class:`scoville.rtl.mx_quant.MxQuant` against
:func:`scoville.sim.golden.mx_quant.mx_quant`.

Tests: directed blocks (all zero, -0, NaN, +-Inf, subnormal amax, E8M0 clamping at both ends,
every rounding tie of the E2M1 grid and, for MXFP8, of the E4M3 grid, saturation) and random
blocks over the whole FP32 range under random valid gaps and ready back-pressure.
"""

import cocotb
import numpy as np

from scoville.rtl.lib.formats import ELEMENT_BITS, MX_BLOCK
from scoville.sim.golden.mx import E4M3_VALUES
from scoville.sim.golden.mx_quant import mx_quant

from .bench import check_stream
from .kit import context


def _to_input(blocks: np.ndarray, in_fmt: str) -> np.ndarray:
    """Blocks as float32 values representable in the input format."""
    bits = blocks.astype(np.float32).view(np.uint32)
    if in_fmt == "bf16":
        bits = bits & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


async def _check(dut, test, blocks, *, gaps, interrupt=False):
    ctx = context()
    in_fmt = ctx.config.in_fmt
    width = ELEMENT_BITS[in_fmt]
    x = _to_input(np.asarray(blocks, dtype=np.float32).reshape(-1, MX_BLOCK), in_fmt)
    raw = x.view(np.uint32) >> np.uint32(32 - width)
    codes, scales = mx_quant(ctx.config, x)
    want = [(tuple(int(v) for v in c), int(s)) for c, s in zip(codes, scales, strict=True)]
    await check_stream(
        dut, ctx, test, {"_": raw}, want,
        decode=lambda out: [(tuple(int(v) for v in c), int(s))
                            for c, s in zip(out["codes"], out["scale"], strict=True)],
        latency=ctx.component.latency, gaps=gaps, interrupt=interrupt,
        describe=lambda k: f"block={x[k].tolist()}",
        blocks=len(raw),
    )


def _e4m3_ties() -> list[np.ndarray]:
    """Blocks of amax 256 (shared exponent 0 in MXFP8) holding every midpoint of the E4M3
    grid, subnormals included, and its neighbours one float32 ulp away, with both signs."""
    grid = np.unique(np.abs(E4M3_VALUES[np.isfinite(E4M3_VALUES)]))
    mids = ((grid[1:] + grid[:-1]) / 2).astype(np.float32)
    values = np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)),
                             np.nextafter(mids, np.float32(0)), [464.0, 479.0, 500.0]])
    values = values[values < 512].astype(np.float32)
    out = []
    for j in range(0, len(values), MX_BLOCK - 1):
        block = np.zeros(MX_BLOCK, np.float32)
        block[0] = 256.0
        part = values[j : j + MX_BLOCK - 1]
        block[1 : 1 + len(part)] = part * np.where(np.arange(len(part)) % 2, -1, 1)
        out.append(block)
    return out


def _directed(out_fmt: str) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = [np.zeros(MX_BLOCK), -np.zeros(MX_BLOCK), np.full(MX_BLOCK, 6.0), np.full(MX_BLOCK, -7.9)]
    base = rng.uniform(-1, 1, MX_BLOCK)
    for special in (np.nan, np.inf, -np.inf):
        b = base.copy()
        b[5] = special
        out.append(b)
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    out.append(np.arange(MX_BLOCK) * tiny)  # subnormal amax, exponent clamped to -127
    out.append(np.full(MX_BLOCK, np.finfo(np.float32).max) * rng.choice([-1, 1], MX_BLOCK))
    out.append(np.float32(2.0**-125) * rng.uniform(-1, 1, MX_BLOCK))
    # Every tie of the E2M1 grid, and its neighbours one ulp away, at a few scales.
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 6.5, 5.5, 4.5, 0.5, 1.0])
    for scale in (2.0**-100, 1.0, 2.0**90):
        for nudge in (0.0, 1.0, -1.0):
            v = ties.astype(np.float32)
            if nudge:
                v = np.nextafter(v, np.float32(nudge * np.inf)).astype(np.float32)
            block = np.zeros(MX_BLOCK)
            block[0] = 4.0  # amax 4 (or just above): shared exponent 0
            block[1 : 1 + len(v)] = v
            block[16 : 16 + len(v)] = -v
            out.append(block * scale)
    if out_fmt == "mxfp8":
        out += [block * scale for block in _e4m3_ties() for scale in (2.0**-100, 1.0, 2.0**100)]
    return out


@cocotb.test()
async def test_directed(dut):
    """Zero, NaN, Inf, subnormal and clamped blocks, and every rounding tie."""
    blocks = np.stack(_directed(context().config.out_fmt))
    await _check(dut, "test_directed", blocks, gaps=False)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of the directed blocks under gaps and back-pressure (beats in
    the pipeline, an output waiting): the unit must come back empty, then run the same
    stimulus from the start correctly."""
    blocks = np.stack(_directed(context().config.out_fmt))
    await _check(dut, "test_reset", blocks, gaps=True, interrupt=True)


@cocotb.test()
async def test_workload(dut):
    """Random blocks over the whole FP32 range under gaps and back-pressure."""
    ctx = context()
    rng = ctx.rng(1)
    n = ctx.workload.count
    exps = rng.integers(-140, 120, (n, 1))
    spread = rng.integers(0, 30, (n, 1))
    mant = rng.uniform(-2, 2, (n, MX_BLOCK))
    blocks = mant * np.exp2(exps - rng.integers(0, spread + 1, (n, MX_BLOCK)))
    special = rng.random(n) < 0.02
    blocks[special, rng.integers(0, MX_BLOCK, special.sum())] = rng.choice(
        [np.nan, np.inf, -np.inf], special.sum())
    blocks[rng.random((n, MX_BLOCK)) < 0.05] = 0.0
    with np.errstate(over="ignore"):
        await _check(dut, "test_workload", blocks.astype(np.float32), gaps=True)
