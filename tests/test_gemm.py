"""GEMM engine: configuration errors, the golden model against plain arithmetic, the stream
order, the cycle model's closed forms, and the RTL on both simulators."""

import dataclasses
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoville.blocks import get_block, parse_params
from scoville.rtl.gemm import (
    ADD_LATENCY,
    BF16_PE_LATENCY,
    MOST_ADD_LATENCY,
    PE_LATENCY,
    SCALE_LATENCY,
    UNIT_LATENCY,
    GemmConfig,
)
from scoville.rtl.lib.params import ParamError
from scoville.sim import flow
from scoville.sim.cycles.gemm import (
    command_cycles,
    ideal_cycles,
    run_cycles,
    scalesim_cycles,
    utilization,
)
from scoville.sim.golden import E2M1_VALUES
from scoville.sim.golden.fp32_add import canonical_bits
from scoville.sim.golden.gemm import Operands, gemm, matmul, operand_beats, result_rows
from scoville.sim.golden.mx import quantize_bf16, quantize_mxfp4, quantize_mxfp8
from scoville.sim.golden.mx_dot import mx_dot
from scoville.sim.golden.nvfp4 import quantize_nvfp4
from scoville.sim.golden.nvfp4_dot import nvfp4_dot
from scoville.testbenches.gemm import random_operands

from .simcheck import assert_passed, simulate


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"rows": 0}, "parameter 'rows' = 0 is out of range; allowed: 1..64"),
        ({"cols": 65}, "parameter 'cols' = 65 is out of range; allowed: 1..64"),
        ({"fmt": "fp8"}, "parameter 'fmt' = 'fp8' is not allowed; allowed: int8, int4, mxfp4, "
                         "nvfp4, mxfp8, bf16"),
        ({"b_fmt": "fp8"}, "parameter 'b_fmt' = 'fp8' is not allowed; allowed: same, int8"),
        ({"fmt": "bf16", "b_fmt": "mxfp4"},
         "parameter 'b_fmt' = 'mxfp4' is not allowed with parameter 'fmt' = 'bf16'; allowed "
         "pairs: b_fmt=same (each format with itself), or fmt=mxfp8 with b_fmt=mxfp4"),
        ({"fmt": "mxfp4", "b_fmt": "mxfp8"}, "'b_fmt' = 'mxfp8' is not allowed with parameter "
                                             "'fmt' = 'mxfp4'"),
        ({"fmt": "nvfp4", "dataflow": "ws", "rows": 32}, "allowed: 1, 2, 4, 8, 16"),
        ({"fmt": "mxfp8", "b_fmt": "mxfp4", "dataflow": "ws", "rows": 3},
         "parameter 'rows' = 3 is not allowed with fmt=mxfp8 and dataflow=ws"),
        ({"dataflow": "is"}, "parameter 'dataflow' = 'is' is not allowed; allowed: os, ws"),
        ({"fmt": "mxfp4", "dataflow": "ws", "rows": 12}, "allowed: 1, 2, 4, 8, 16, 32"),
        ({"fmt": "mxfp4", "unit_latency": 12}, "parameter 'unit_latency' = 12 is out of range; "
                                               "allowed: 0..11"),
        ({"fmt": "nvfp4", "scale_latency": 6}, "parameter 'scale_latency' = 6 is out of range; "
                                               "allowed: 0..5"),
        ({"fmt": "nvfp4", "cols": 1, "unit_latency": 0, "pe_latency": 0, "scale_latency": 3},
         "parameter 'scale_latency' = 3 is not allowed with dataflow=os, cols=1, unit_latency=0 "
         "and pe_latency=0 (the scales' product must be ready by the first row); "
         "allowed: 0..2"),
        ({"fmt": "nvfp4", "cols": 2, "unit_latency": 0, "pe_latency": 1, "scale_latency": 5},
         "cols=2, unit_latency=0 and pe_latency=1 (the scales' product must be ready by the "
         "first row); allowed: 0..4"),
        ({"fmt": "nvfp4", "dataflow": "ws", "rows": 1, "cols": 2, "scale_latency": 5},
         "with dataflow=ws, rows=1 and cols=2 (the scales' product must be ready by the first "
         "row); allowed: 0..4"),
        ({"fmt": "int8", "scale_latency": 1}, "parameter 'scale_latency' = 1 is not allowed with "
                                              "fmt=int8 (only nvfp4 has a tensor scale); "
                                              "allowed: 0"),
        ({"fmt": "int8", "unit_latency": 2},
         "parameter 'unit_latency' = 2 is not allowed with fmt=int8 and dataflow=os (only the "
         "block formats on os have block units); allowed: 0"),
        ({"fmt": "mxfp4", "dataflow": "ws", "unit_latency": 1}, "with fmt=mxfp4 and dataflow=ws"),
        ({"pe_latency": 2}, "parameter 'pe_latency' = 2 is out of range; allowed: 0..1"),
        ({"fmt": "mxfp8", "dataflow": "ws", "pe_latency": 1},
         "parameter 'pe_latency' = 1 is not allowed with dataflow=ws (only os registers its "
         "PEs' products); allowed: 0"),
        ({"fmt": "bf16", "pe_latency": 5}, "parameter 'pe_latency' = 5 is out of range; "
                                            "allowed: 0..4"),
        ({"fmt": "bf16", "add_latency": 5}, "parameter 'add_latency' = 5 is out of range; "
                                             "allowed: 0..4"),
        ({"fmt": "bf16", "dataflow": "ws", "add_latency": 1},
         "parameter 'add_latency' = 1 is not allowed with fmt=bf16 and dataflow=ws (only bf16 "
         "on os cuts its PEs' adders); allowed: 0"),
        ({"fmt": "mxfp8", "add_latency": 2}, "'add_latency' = 2 is not allowed with fmt=mxfp8 "
                                             "and dataflow=os"),
        ({"acc_rows": 1}, "parameter 'acc_rows' = 1 is out of range; allowed: 2..4096"),
    ],
)
def test_bad_config_is_one_line_naming_the_parameter(params, text):
    with pytest.raises(ParamError) as err:
        GemmConfig(**params)
    assert text in str(err.value)
    assert "\n" not in str(err.value)


def _mx_operands(rng, m, k, n, lo=100, hi=155):
    q = math.ceil(k / 32)
    return Operands(rng.integers(0, 16, (m, k)), rng.integers(0, 16, (k, n)),
                    rng.integers(lo, hi, (m, q)), rng.integers(lo, hi, (q, n)))


def test_int_golden_is_the_exact_product_wrapped_to_int32():
    rng = np.random.default_rng(1)
    cfg = GemmConfig(fmt="int8")
    a = rng.integers(-128, 128, (7, 300))
    b = rng.integers(-128, 128, (300, 5))
    got = gemm(cfg, Operands(a, b))
    assert got.dtype == np.int32
    # Small enough for float64 to be exact, and within INT32: no wrap.
    assert np.array_equal(got, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64))
    # All -128: 2^14 per product, so K = 2^17 + 3 products wrap past 2^31.
    k = (1 << 17) + 3
    big = gemm(cfg, Operands(np.full((1, k), -128), np.full((k, 1), -128)))
    assert big[0, 0] == np.int32(((k << 14) + (1 << 31)) % (1 << 32) - (1 << 31))


def test_mx_golden_is_mx_dot_of_every_row_and_column():
    rng = np.random.default_rng(2)
    cfg = GemmConfig(fmt="mxfp4")
    ops = _mx_operands(rng, 3, 70, 4, 0, 256)
    got = gemm(cfg, ops)
    pad = 96 - 70
    a = np.pad(ops.a, ((0, 0), (0, pad)))
    b = np.pad(ops.b, ((0, pad), (0, 0)))
    for i in range(3):
        for j in range(4):
            want = mx_dot(a[i][None], b[:, j][None], ops.sa[i][None], ops.sb[:, j][None])[0]
            assert got[i, j] == want


def test_mx_golden_is_within_fp32_accumulation_error_of_float64():
    rng = np.random.default_rng(3)
    cfg = GemmConfig(fmt="mxfp4")
    m, k, n = 20, 256, 30
    ops = _mx_operands(rng, m, k, n)
    got = gemm(cfg, ops).view(np.float32).astype(np.float64)
    va = E2M1_VALUES[ops.a] * np.repeat(np.exp2(ops.sa - 127.0), 32, axis=1)
    vb = E2M1_VALUES[ops.b] * np.repeat(np.exp2(ops.sb - 127.0), 32, axis=0)
    exact = va @ vb
    magnitude = np.abs(va) @ np.abs(vb)
    blocks = k // 32
    assert np.all(np.abs(got - exact) <= 2 * blocks * 2.0**-24 * magnitude)


@pytest.mark.parametrize("dataflow", ["os", "ws"])
def test_stream_order_counts_match_the_schedule(dataflow):
    cfg = GemmConfig(rows=4, cols=3, dataflow=dataflow, acc_rows=4)
    m, k, n = 9, 10, 7
    rng = np.random.default_rng(4)
    ops = Operands(rng.integers(-128, 128, (m, k)), rng.integers(-128, 128, (k, n)))
    a, b = operand_beats(cfg, ops, rng)
    rows = result_rows(cfg, gemm(cfg, ops))
    if dataflow == "os":
        tiles = 3 * 3
        assert len(a["data"]) == len(b["data"]) == tiles * k
        assert len(rows) == 3 * m
    else:
        assert len(a["data"]) == 3 * 3 * m  # column tiles x K tiles x rows of A
        assert len(b["data"]) == 3 * 3 * k  # column tiles x chunks x rows of B
        assert len(rows) == 3 * m
    # Columns beyond N come out as zeros.
    assert not rows[:, n % 3 :][-1].any()


def test_scalesim_reference_example_from_the_issue():
    """16x16, M, N, K = 256, 128, 512: SCALE-Sim os 69,375 against an ideal of 65,536; ours is
    the ideal plus fill and drain once."""
    cfg = GemmConfig(rows=16, cols=16)
    assert scalesim_cycles(cfg, 256, 512, 128) == 69_375
    assert ideal_cycles(cfg, 256, 512, 128) == 65_536
    assert run_cycles(cfg, [(256, 512, 128)]) == 65_536 + 16 + 16 + 2


@settings(max_examples=300, deadline=None)
@given(
    rows=st.integers(1, 32), cols=st.integers(1, 32),
    m=st.integers(1, 600), k=st.integers(1, 600), n=st.integers(1, 600),
    unit_latency=st.sampled_from([None, 0, 10]),
)
def test_os_meets_its_target_when_streams_keep_up(rows, cols, m, k, n, unit_latency):
    """``os`` total cycles <= ceil(M/R) * ceil(N/C) * K + R + C + D + 2 whenever K >= max(R,
    C) (below that, one row of C per cycle bounds a tile to max(K, R, C) steps; D the block
    units' added stages, 0 in int8), and at most 5 + D cycles above SCALE-Sim's estimate
    (which counts no accept or handshake cycle) on a single tile, far below it on many."""
    cfg = (GemmConfig(rows=rows, cols=cols) if unit_latency is None
           else GemmConfig(rows=rows, cols=cols, fmt="mxfp4", unit_latency=unit_latency))
    total = run_cycles(cfg, [(m, k, n)])
    span = max(k, rows, cols)
    tiles = math.ceil(m / rows) * math.ceil(n / cols)
    late = cfg.result_delay + 2
    assert total <= tiles * span + rows + cols + late
    if k >= max(rows, cols):
        assert total <= ideal_cycles(cfg, m, k, n) + rows + cols + late
    assert total <= scalesim_cycles(cfg, m, k, n) + 3 + late


@settings(max_examples=300, deadline=None)
@given(
    rows=st.integers(1, 32), cols=st.integers(1, 32),
    m=st.integers(1, 600), k=st.integers(1, 600), n=st.integers(1, 600),
)
def test_ws_meets_its_target_when_streams_keep_up(rows, cols, m, k, n):
    """``ws`` total cycles <= ceil(K/R) * ceil(N/C) * max(M, R) + R + C + 3 (one chunk of A),
    and at most 6 cycles above SCALE-Sim's estimate (on a single tile: our accept, prologue and
    handshake cycles), far below it on many tiles, which SCALE-Sim fills one by one."""
    cfg = GemmConfig(rows=rows, cols=cols, dataflow="ws", acc_rows=1024)
    total = run_cycles(cfg, [(m, k, n)])
    tiles = math.ceil(k / rows) * math.ceil(n / cols)
    assert total <= tiles * max(m, rows) + rows + cols + 3
    if m >= rows:
        assert total <= ideal_cycles(cfg, m, k, n) + rows + cols + 3
    assert total <= scalesim_cycles(cfg, m, k, n) + 6


def test_run_cycles_adds_commands_and_rejects_cost_one_cycle():
    cfg = GemmConfig(rows=4, cols=4)
    shapes = [(5, 9, 3), (0, 2, 2), (1, 1, 1)]
    assert run_cycles(cfg, shapes) == sum(command_cycles(cfg, *s) for s in shapes) + 1
    assert command_cycles(cfg, 0, 2, 2) == 1
    assert utilization(cfg, 16 * 10, 10) == 1.0


def _elements(fmt, codes):
    """Exact float64 values of element codes, from ml_dtypes' tables and NumPy's float32 (not
    the golden model's)."""
    if fmt == "bf16":
        with np.errstate(invalid="ignore"):  # signalling NaNs
            return (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    dtype = ml_dtypes.float8_e4m3fn if fmt == "mxfp8" else ml_dtypes.float4_e2m1fn
    return codes.astype(np.uint8).view(dtype).astype(np.float64)


def _dequantized(fmt, codes, scales, axis, tensor=None):
    """Exact float64 values of quantized operands: element times block scale (times the
    tensor scale)."""
    values = _elements(fmt, codes)
    if fmt == "bf16":
        return values
    block = 16 if fmt == "nvfp4" else 32
    if fmt == "nvfp4":
        factor = scales.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
        factor = factor * float(tensor)
    else:
        factor = np.exp2(scales.astype(np.float64) - 127)
        factor[scales == 0xFF] = np.nan
    return values * np.repeat(factor, block, axis=axis)


def _quantized(fmt, x, axis):
    """``x`` quantized along ``axis`` as :func:`matmul` does: (codes, scales, tensor)."""
    if fmt == "bf16":
        return quantize_bf16(x), None, None
    if fmt == "nvfp4":
        return quantize_nvfp4(x, axis=axis)
    quantize = quantize_mxfp8 if fmt == "mxfp8" else quantize_mxfp4
    return (*quantize(x, axis=axis), None)


# (fmt, b_fmt, the number of blocks' roundings the bound allows per unit of K)
BOUNDS = [("bf16", "bf16", 1), ("mxfp4", "mxfp4", 32), ("mxfp8", "mxfp8", 32),
          ("mxfp8", "mxfp4", 32), ("nvfp4", "nvfp4", 16)]


@pytest.mark.parametrize(("fmt", "b_fmt", "block"), BOUNDS)
@pytest.mark.parametrize("k", [1, 37, 96, 512])
def test_matmul_is_within_the_stated_bound_of_float64(fmt, b_fmt, block, k):
    """``matmul`` against the float64 product of the dequantized operands: within
    (K + 2) * 2^-24 * |A||B| for bf16 (a rounding per product and per addition), and
    (K/block + 2) * 2^-23 * |A||B| for the block formats (a rounding per block value and per
    addition; NVFP4's tensor scales two more)."""
    rng = np.random.default_rng(k)
    m, n = 5, 7
    a = rng.normal(size=(m, k)) * np.exp2(rng.integers(-8, 8, (m, 1)))
    b = rng.normal(size=(k, n)) * np.exp2(rng.integers(-8, 8, (1, n)))
    got = matmul(a, b, fmt, b_fmt if b_fmt != fmt else None).astype(np.float64)
    assert got.dtype == np.float64 and got.shape == (m, n)
    pad = -k % (16 if fmt == "nvfp4" else 32) if fmt != "bf16" else 0
    qa = _quantized(fmt, np.pad(a, ((0, 0), (0, pad))), 1)
    qb = _quantized(b_fmt, np.pad(b, ((0, pad), (0, 0))), 0)
    va = _dequantized(fmt, qa[0], qa[1], 1, qa[2])
    vb = _dequantized(b_fmt, qb[0], qb[1], 0, qb[2])
    exact = va @ vb
    magnitude = np.abs(va) @ np.abs(vb)
    if fmt == "bf16":
        bound = (k + 2) * 2.0**-24 * magnitude
    else:
        bound = (math.ceil(k / block) + 2) * 2.0**-23 * magnitude
    assert np.all(np.abs(got - exact) <= bound), np.max(np.abs(got - exact) / magnitude)
    # The quantization itself is close: the operands are the data, not noise.
    assert np.all(np.abs(exact - a @ b) <= 0.5 * np.abs(a) @ np.abs(b))


def _tree(values):
    """float32 ``values`` added as a tree: the first half's sum (the larger half, rounded up
    to a power of two) plus the rest's."""
    if len(values) == 1:
        return values[0]
    half = 1 << (len(values) - 1).bit_length() - 1
    return np.float32(_tree(values[:half]) + _tree(values[half:]))


def _scalar_gemm(fmt, b_fmt, ops, sums=1):
    """An independent model of the engine's arithmetic: a loop per output over Python floats
    and ``np.float32`` scalars (exact block sums in Fractions); ``bf16`` in ``sums`` partial
    sums (step k's into sum k mod sums, added in the order 0, 1, ...)."""
    m, k, n = ops.shape
    va, vb = _elements(fmt, ops.a), _elements(b_fmt, ops.b)
    out = np.zeros((m, n), np.float32)
    with np.errstate(all="ignore"):
        for i in range(m):
            for j in range(n):
                acc = np.float32(0.0)
                if fmt == "bf16":
                    # From the first step, the sums take turns.
                    part = [np.float32(0.0)] * sums
                    for q in range(k):
                        part[q % sums] = np.float32(part[q % sums]
                                                    + np.float32(va[i, q] * vb[q, j]))
                    out[i, j] = _tree(part)
                    continue
                block = 16 if fmt == "nvfp4" else 32
                for q0 in range(0, k, block):
                    terms = [(va[i, q], vb[q, j]) for q in range(q0, min(q0 + block, k))]
                    if any(math.isnan(x) or math.isnan(y) for x, y in terms):
                        acc = np.float32(np.nan)
                        continue
                    total = sum(Fraction(x) * Fraction(y) for x, y in terms)
                    sa, sb = int(ops.sa[i, q0 // block]), int(ops.sb[q0 // block, j])
                    if fmt == "nvfp4":
                        e4m3 = np.array([sa, sb], np.uint8).view(ml_dtypes.float8_e4m3fn)
                        value = float(total) * float(e4m3[0]) * float(e4m3[1])
                    elif 0xFF in (sa, sb):
                        value = math.nan
                    else:
                        value = math.ldexp(float(total), sa + sb - 254)
                    acc = np.float32(acc + np.float32(value))
                if fmt == "nvfp4":
                    acc = np.float32(acc * np.float32(np.float32(ops.scale_a) *
                                                      np.float32(ops.scale_b)))
                out[i, j] = acc
    return canonical_bits(out)


@pytest.mark.parametrize(("fmt", "b_fmt"), [(f, g) for f, g, _ in BOUNDS])
@pytest.mark.parametrize("extreme", [False, True])
def test_float_golden_is_a_scalar_loop_over_every_output(fmt, b_fmt, extreme):
    """The golden model's vectorized arithmetic against a plain loop per output, bit for
    bit, on operands over each format's whole range (``extreme``: its special values, NaN and
    Inf, and edge scales) with K off the block grid; ``bf16`` at each count of partial sums,
    K also below it."""
    rng = np.random.default_rng(7)
    adds = range(MOST_ADD_LATENCY + 1) if fmt == "bf16" else [None]
    for cfg in [GemmConfig(fmt=fmt, b_fmt=b_fmt, add_latency=a) for a in adds]:
        for m, k, n in [(3, 70, 4), (2, 1, 3), (1, 33, 2), (2, 3, 2)]:
            ops = random_operands(cfg, rng, m, k, n, extreme=extreme)
            got = gemm(cfg, ops)
            want = _scalar_gemm(fmt, cfg.b_format, ops, cfg.sums)
            assert np.array_equal(got, want), (fmt, cfg.sums, m, k, n, np.nonzero(got != want))


def test_nvfp4_golden_is_nvfp4_dot_of_every_row_and_column():
    rng = np.random.default_rng(4)
    cfg = GemmConfig(fmt="nvfp4")
    ops = random_operands(cfg, rng, 3, 48, 4)
    got = gemm(cfg, ops)
    tensor = np.float32(np.float32(ops.scale_a) * np.float32(ops.scale_b))
    for i in range(3):
        for j in range(4):
            want = nvfp4_dot(ops.a[i][None], ops.b[:, j][None], ops.sa[i][None],
                             ops.sb[:, j][None], tensor)[0]
            assert got[i, j] == want


def test_matmul_rejects_bad_pairs_shapes_and_integers():
    with pytest.raises(ValueError, match="'b_fmt' = 'mxfp8' is not allowed with"):
        matmul(np.ones((2, 32)), np.ones((32, 2)), "bf16", "mxfp8")
    with pytest.raises(ValueError, match=r"A is \(2, 32\) and B is \(31, 2\)"):
        matmul(np.ones((2, 32)), np.ones((31, 2)), "bf16")
    with pytest.raises(ValueError, match="integers in -8..7 for int4"):
        matmul(np.full((2, 3), 8), np.ones((3, 2), int), "int4")
    got = matmul(np.full((2, 3), -128), np.full((3, 2), -128), "int8")
    assert got.dtype == np.int32 and (got == 3 * 128 * 128).all()


# (rows, cols, fmt, dataflow): 4x4, 8x8, 16x16, non-square arrays and the degenerate 1x1, 1xC
# and Rx1, every format and pair in both dataflows at 4x4; each on one simulator (a format's
# two dataflows on different ones; ``--both-sims`` for all: tests/conftest.py), with 30%
# gaps and back-pressure (and the edge, keep-up, long-K and reset tests). ``mxfp8/mxfp4`` is
# fmt=mxfp8 with b_fmt=mxfp4. A block format's ``os`` column shares its block units: 1 x 3
# has one a column; 18 x 1 has two for the blocks that do not end a tile (18 rows > 16).
CONFIGS = [
    (4, 4, "int8", "os"),
    (4, 4, "int8", "ws"),
    (4, 3, "int4", "os"),
    (2, 5, "int4", "ws"),
    (4, 4, "mxfp4", "os"),
    (4, 4, "mxfp4", "ws"),
    (4, 4, "mxfp8", "os"),
    (4, 4, "mxfp8", "ws"),
    (4, 4, "mxfp8/mxfp4", "os"),
    (4, 4, "mxfp8/mxfp4", "ws"),
    (4, 4, "nvfp4", "os"),
    (4, 4, "nvfp4", "ws"),
    (4, 4, "bf16", "os"),
    (4, 4, "bf16", "ws"),
    (8, 8, "int8", "os"),
    (8, 8, "int8", "ws"),
    (16, 16, "int8", "os"),
    (16, 16, "int8", "ws"),
    (1, 1, "mxfp4", "ws"),
    (1, 5, "int8", "os"),
    (6, 1, "int8", "ws"),
    (1, 3, "mxfp4", "os"),
    (18, 1, "nvfp4", "os"),
]


#: The formats the array gained with b_fmt: 4 random GEMMs each keep the suite short.
NEW = ("mxfp8", "mxfp8/mxfp4", "nvfp4", "bf16")


def _formats(fmt: str) -> dict:
    """``fmt`` and ``b_fmt`` of a CONFIGS entry."""
    a, _, b = fmt.partition("/")
    return {"fmt": a, "b_fmt": b or "same"}


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize(("rows", "cols", "fmt", "dataflow"), CONFIGS)
def test_gemm_rtl(simulator, seed, rows, cols, fmt, dataflow):
    big = rows * cols >= 256
    # The long-K test (2**15 steps: past the 16-bit step counters, INT32 sums that wrap) on
    # the small arrays, and on Verilator for the integer formats (the block formats share the
    # schedule and its counters; their sums are checked in the other tests).
    long_k = 32773 if (simulator == "verilator" and fmt in ("int8", "int4")) \
        or rows * cols <= 16 else 0
    result = simulate(
        "gemm", simulator, seed, rows=rows, cols=cols, **_formats(fmt), dataflow=dataflow,
        acc_rows=8, count=2 if big else 4 if fmt in NEW else 6, gap=0.3, backpressure=0.3,
        long_k=long_k,
    )
    assert_passed(result)
    names = {"test_edges", "test_keep_up", "test_long_k", "test_reset", "test_workload"}
    assert {t.name for t in result.tests} == names
    workload = result.metrics["test_workload"]
    assert sum(workload[f"counter_{c}"] for c in ("stall_a", "stall_b", "stall_out")) > 0
    assert result.metrics["test_edges"]["counter_rejected"] == 7
    if fmt == "int8" and long_k:
        assert result.metrics["test_long_k"]["macs"] >= 32773 * cols


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize(("rows", "cols", "fmt", "dataflow", "depth"),
                         [(4, 4, "int8", "os", 64), (2, 3, "mxfp4", "ws", 64),
                          (3, 2, "int4", "ws", 2), (3, 3, "int8", "os", 2),
                          (2, 3, "bf16", "ws", 2), (3, 2, "nvfp4", "os", 2)])
def test_gemm_rtl_heavy_gaps_and_back_pressure(simulator, seed, rows, cols, fmt, dataflow,
                                               depth):
    """90% of cycles without a beat offered and 90% without ``ready``, and operand buffers of
    2 beats that fill while the output waits: every handshake still where the timed model
    puts it."""
    result = simulate("gemm", simulator, seed, rows=rows, cols=cols, **_formats(fmt),
                      dataflow=dataflow, acc_rows=4, buffer_depth=depth, count=3, gap=0.9,
                      backpressure=0.9, long_k=0)
    assert_passed(result)


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize(("rows", "cols", "fmt", "latency"),
                         [(4, 3, "mxfp8/mxfp4", 0), (3, 2, "mxfp4", 1), (1, 3, "mxfp4", 2),
                          (1, 2, "mxfp8", 0), (1, 2, "mxfp8", 1), (2, 2, "mxfp4", 4),
                          (18, 1, "nvfp4", 8), (3, 3, "nvfp4", 11)])
def test_gemm_rtl_at_each_kind_of_unit_latency(simulator, seed, rows, cols, fmt, latency):
    """The block units uncut, cut once (the pick's register), at the read of the PE's binary32
    sum (a tile's last block then read later than the others are written), in the adder, and
    at the most stages: every row of C and every handshake still where the models put them (a
    single row keeps one unit until the read or the adder is cut; 18 rows share two units for
    blocks that do not end a tile)."""
    result = simulate("gemm", simulator, seed, rows=rows, cols=cols, **_formats(fmt),
                      unit_latency=latency, count=3, gap=0.3, backpressure=0.3, long_k=0)
    assert_passed(result)


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize(("rows", "cols", "fmt", "pe"),
                         [(3, 2, "int8", 1), (2, 3, "bf16", 1), (2, 2, "mxfp8", 0),
                          (1, 2, "nvfp4", 1)])
def test_gemm_rtl_at_each_pe_latency(simulator, seed, rows, cols, fmt, pe):
    """The PEs' products registered where the format's default does not (the PE adds each a
    cycle later, with the flags and scales of its step), and not where it does: every row of
    C and every handshake still where the models put them."""
    result = simulate("gemm", simulator, seed, rows=rows, cols=cols, fmt=fmt, pe_latency=pe,
                      count=3, gap=0.3, backpressure=0.3, long_k=0)
    assert_passed(result)


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize(("rows", "cols", "add", "pe"),
                         [(2, 3, 0, 3), (3, 2, 1, 0), (1, 1, 4, 1), (2, 5, 3, 4), (1, 3, 2, 2)])
def test_bf16_rtl_at_each_add_latency(simulator, seed, rows, cols, add, pe):
    """``bf16``'s adders uncut (one sum in K order), and cut once to four times (two to five
    partial sums, the loop's register cleared for a tile's first steps, added as the row
    leaves), with the product registered or cut (and, at ``pe_latency`` 0, a mux in the
    loop instead): every row of C bit for bit against the golden model at the config's sums,
    and every handshake where the timed model puts it (tiles ``cols + add_latency`` steps
    apart at small K: edge shapes with K = 1 and K around the sums)."""
    result = simulate("gemm", simulator, seed, rows=rows, cols=cols, fmt="bf16",
                      add_latency=add, pe_latency=pe, count=3, gap=0.3, backpressure=0.3,
                      long_k=0)
    assert_passed(result)


def test_bf16_partial_sums_delay_the_rows_and_space_the_tiles():
    """The partial sums: the last written ``add_latency`` cycles later, then a register and
    three stages a level of the tree that adds them; tiles ``cols + add_latency`` steps apart
    where K is below; elsewhere none."""
    assert [GemmConfig(fmt="bf16", add_latency=a, pe_latency=0).result_delay
            for a in range(5)] == [0, 1 + 4, 2 + 7, 3 + 7, 4 + 10]
    assert GemmConfig(fmt="bf16").sums == ADD_LATENCY + 1 == 3
    assert GemmConfig(fmt="bf16").pe_stages == BF16_PE_LATENCY
    cfg = GemmConfig(fmt="bf16", rows=2, cols=5, add_latency=3, pe_latency=0)
    assert [cfg.tile_steps(k) for k in (1, 7, 8, 9)] == [8, 8, 8, 9]
    base = dataclasses.replace(cfg, add_latency=0)
    # 2 x 3 tiles at K = 4: 8 steps apart, not 5; the rows 10 cycles later.
    assert command_cycles(cfg, 3, 4, 11) == command_cycles(base, 3, 4, 11) + 5 * 3 + 10
    assert GemmConfig(fmt="int8").tile_steps(1) == GemmConfig(fmt="int8").cols


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize(("rows", "cols", "dataflow", "latency", "scale", "pe"),
                         [(1, 1, "os", 0, 2, 0), (1, 1, "os", 0, 3, 1), (2, 3, "os", 0, 0, 0),
                          (1, 1, "ws", 0, 3, 0), (2, 2, "ws", 0, 1, 0), (1, 2, "ws", 0, 4, 0),
                          (3, 2, "os", 1, 4, 0), (1, 2, "os", None, 5, 0)])
def test_nvfp4_rtl_at_each_scale_latency(simulator, seed, rows, cols, dataflow, latency, scale,
                                         pe):
    """NVFP4's tensor scale cut at each count of stages, up to the most each config allows (a
    K = 1 command reaches its first row soonest; the most grows with the columns and the
    array's delay on os, with the rows and columns on ws): the scales' product ready by the
    first row, and every row of C where the models put it."""
    result = simulate("gemm", simulator, seed, rows=rows, cols=cols, fmt="nvfp4",
                      dataflow=dataflow, scale_latency=scale, pe_latency=pe,
                      **({} if latency is None else {"unit_latency": latency}),
                      count=3, gap=0.3, backpressure=0.3, long_k=0)
    assert_passed(result)


def test_scale_latency_delays_the_rows_and_has_its_bound():
    """The tensor scale's stages delay the rows of C on both dataflows; the most allowed
    follows the columns and the PEs' and block units' delay on os, the rows and columns on ws
    (the product must be ready by the first row); unset, the default or that most."""
    os0 = GemmConfig(fmt="nvfp4", cols=2, unit_latency=0, pe_latency=0, scale_latency=0)
    for s in range(4):
        cfg = dataclasses.replace(os0, scale_latency=s)
        assert command_cycles(cfg, 5, 17, 9) == command_cycles(os0, 5, 17, 9) + s
    ws0 = GemmConfig(fmt="nvfp4", dataflow="ws", rows=1, cols=1, scale_latency=0)
    assert command_cycles(dataclasses.replace(ws0, scale_latency=3), 5, 17, 9) \
        == command_cycles(ws0, 5, 17, 9) + 3
    assert [GemmConfig(fmt="nvfp4", cols=1, unit_latency=n, pe_latency=0).most_scale_stages
            for n in range(4)] == [2, 3, 4, 5]
    assert [GemmConfig(fmt="nvfp4", cols=1, unit_latency=n, pe_latency=1).most_scale_stages
            for n in range(3)] == [3, 4, 5]
    assert [GemmConfig(fmt="nvfp4", cols=c, unit_latency=0, pe_latency=0).most_scale_stages
            for c in (1, 2, 3, 4)] == [2, 3, 4, 5]
    assert ws0.most_scale_stages == 3
    assert dataclasses.replace(ws0, cols=2).most_scale_stages == 4
    assert dataclasses.replace(ws0, rows=2, cols=2).most_scale_stages == 5
    assert dataclasses.replace(ws0, scale_latency=None).scale_stages == 3
    assert GemmConfig(fmt="nvfp4").scale_stages == SCALE_LATENCY
    assert GemmConfig(fmt="mxfp4").scale_stages == GemmConfig().most_scale_stages == 0


def test_unit_latency_delays_a_tiles_rows_by_its_result_delay():
    """Each stage of the block units that write a tile's result is one cycle more per
    command; the adder's cuts and the read's count twice (the unit of a tile's last block reads
    the PE's sum after the others have written it); formats without block units take none."""
    delays = [GemmConfig(fmt="mxfp4", unit_latency=n, pe_latency=0).result_delay
              for n in range(12)]
    assert delays == [0, 1, 2, 3, 5, 6, 8, 9, 10, 12, 14, 16]
    base = command_cycles(GemmConfig(fmt="mxfp4", unit_latency=0, pe_latency=0), 9, 40, 17)
    for n, d in enumerate(delays):
        for pe in (0, 1):
            cfg = GemmConfig(fmt="mxfp4", unit_latency=n, pe_latency=pe)
            assert command_cycles(cfg, 9, 40, 17) == base + d + pe
    assert GemmConfig(fmt="int8").result_delay == 0
    assert GemmConfig(fmt="bf16", dataflow="ws").result_delay == 0
    assert GemmConfig(fmt="int8", pe_latency=1).result_delay == 1
    assert GemmConfig(fmt="mxfp8").pe_stages == PE_LATENCY == 1
    assert GemmConfig(fmt="mxfp8", b_fmt="mxfp4").pe_stages == 1
    assert GemmConfig(fmt="mxfp4").pe_stages == GemmConfig(fmt="nvfp4").pe_stages == 0
    assert GemmConfig(fmt="mxfp8", dataflow="ws", rows=4).pe_stages == 0
    assert GemmConfig(fmt="nvfp4", dataflow="ws").unit_stages == 0
    # Unset, it follows a config derived with other formats or dataflow.
    derived = dataclasses.replace(GemmConfig(fmt="mxfp4"), fmt="int8")
    assert derived.unit_stages == 0
    assert dataclasses.replace(derived, fmt="mxfp8").unit_stages == UNIT_LATENCY


@pytest.mark.sim
def test_gemm_rtl_documented_16x16_case():
    """The README's and docs/gemm.md's example: 16x16 int8 ``os``, one 256 x 512 x 128 GEMM
    with streams that keep up, 65,570 cycles, as the timed model and the closed form say."""
    block = get_block("gemm")
    config, workload = parse_params(block, {"rows": 16, "cols": 16, "m": 256, "k": 512,
                                            "n": 128, "count": 1})
    result = flow.run(block, config, workload, "verilator", seed=1, tests=["test_workload"])
    assert_passed(result)
    work = result.metrics["test_workload"]
    assert work["cycles"] == work["model_cycles"] == run_cycles(config, [(256, 512, 128)])
    assert work["cycles"] == 65570
    assert work["utilization"] == pytest.approx(256 * 512 * 128 / (256 * 65570))
