"""The ``linear`` block: its golden model against float64 and against the sum written out
product by product, its memory layout read back independently, the refusal rules, the config's
one-line errors, and the RTL on both simulators (``test_linear_rtl``)."""

import numpy as np
import pytest

from scoville.rtl.gemm import GemmConfig
from scoville.rtl.lib.params import ParamError, build_config
from scoville.rtl.linear import LinearConfig, Status
from scoville.sim.cycles.linear_parts import check
from scoville.sim.golden.linear import (
    Command,
    apply,
    memory_image,
    read_weight,
    reference,
    tile_words,
)

from .simcheck import assert_passed, simulate

CFG = LinearConfig(array=GemmConfig(rows=2, cols=8, fmt="bf16"), tokens=4, k_max=64,
                   n_max=32, weight_port_bits=64)


def _grid(rng, shape, exp):
    """Integers of at most 4 bits times ``2**exp``: BF16 holds them, and every product and
    sum of a few hundred stays exact in FP32."""
    return (rng.integers(-15, 16, shape) * 2.0 ** exp).astype(np.float32)


def test_golden_equals_float64_where_nothing_rounds():
    """x and W on the BF16 grid with few bits, so every product and partial sum is exact in
    FP32: the golden model equals float64 bit for bit."""
    rng = np.random.default_rng(1)
    x, w, b = _grid(rng, (5, 64), -4), _grid(rng, (24, 64), -6), _grid(rng, 24, -4)
    assert np.array_equal(apply(x, w, b), reference(x, w, b).astype(np.float32))
    assert np.array_equal(apply(x, w), reference(x, w).astype(np.float32))


@pytest.mark.parametrize("sums", [1, 3])
def test_golden_is_the_sum_product_by_product(sums):
    """Written out independently: BF16 operands (ml_dtypes' rounding of FP32), each product
    rounded to FP32, summed in FP32 from +0 in K order into ``sums`` partial sums (step k into
    sum ``k mod sums``), those added ``(s0 + s1) + s2``, then the bias in FP32; by
    default the block's array's sums (3)."""
    import ml_dtypes

    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 97)) * 3).astype(np.float32)
    w = rng.standard_normal((16, 97)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    xb = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    wb = w.astype(ml_dtypes.bfloat16).astype(np.float32)
    part = np.zeros((3, 3, 16), np.float32)
    for k in range(97):
        d = k % sums
        part[d] = (part[d] + (xb[:, k:k + 1] * wb[:, k][None]).astype(np.float32))
    want = (part[0] + part[1]) + part[2] if sums == 3 else part[0]
    want = (want + b).astype(np.float32)
    got = apply(x, w, b, sums=sums)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    if sums == LinearConfig().array.sums:
        assert np.array_equal(apply(x, w, b).view(np.uint32), want.view(np.uint32))


def test_golden_against_float64_on_random_values():
    """BF16 rounding of x and W: within a few BF16 ulps of the largest output."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 256)).astype(np.float32)
    w = (rng.standard_normal((64, 256)) / 16).astype(np.float32)
    ref = reference(x, w)
    assert np.abs(apply(x, w) - ref).max() <= 2e-2 * np.abs(ref).max()


@pytest.mark.parametrize("port", [64, 128, 256])
@pytest.mark.parametrize("bias", [False, True])
def test_tile_words_read_back(port, bias):
    """The memory layout decoded by hand: each tile's bits are its K rows of ``cols`` BF16
    codes (row-major, column 0 lowest), then its biases, padded to whole words."""
    cfg = LinearConfig(array=GemmConfig(rows=2, cols=8, fmt="bf16"), k_max=64,
                       weight_port_bits=port)
    rng = np.random.default_rng(4)
    w = rng.standard_normal((16, 64)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32) if bias else None
    words = tile_words(cfg, w, b)
    per = cfg.tile_words(64, bias)
    assert len(words) == 2 * per
    for j in range(2):
        value = sum(int(v) << (port * i) for i, v in enumerate(words[j * per:(j + 1) * per]))
        for k in range(64):
            for c in range(8):
                code = (value >> (16 * (8 * k + c))) & 0xFFFF
                want = np.float32(w[8 * j + c, k])
                got = np.array([code << 16], np.uint32).view(np.float32)[0]
                assert abs(got - want) <= abs(want) * 2 ** -8
        if bias:
            for c in range(8):
                bits = (value >> (16 * 8 * 64 + 32 * c)) & 0xFFFFFFFF
                assert bits == int(b[8 * j + c:8 * j + c + 1].view(np.uint32)[0])
        assert value >> cfg.tile_bits(64, bias) == 0


def test_memory_image_places_each_weight_at_its_address():
    rng = np.random.default_rng(5)
    w1, w2 = rng.standard_normal((8, 32)), rng.standard_normal((16, 64))
    x = np.zeros((1, 32), np.float32)
    image = memory_image(CFG, [Command(x, w1, None, 3), Command(x, w2, None, 100)])
    assert image[:3] == [0, 0, 0]
    end = 3 + CFG.weight_words(32, 8, False)
    assert image[3:end] == tile_words(CFG, w1)
    assert image[end:100] == [0] * (100 - end)
    assert image[100:] == tile_words(CFG, w2)
    with pytest.raises(ValueError, match="overlap"):
        memory_image(CFG, [Command(x, w1, None, 0), Command(x, w2, None, 1)])


@pytest.mark.parametrize(("fields", "status"), [
    ({"tokens": 0}, Status.BAD_TOKENS), ({"tokens": 5}, Status.BAD_TOKENS),
    ({"k": 0}, Status.BAD_K), ({"k": 48}, Status.BAD_K), ({"k": 96}, Status.BAD_K),
    ({"n": 0}, Status.BAD_N), ({"n": 12}, Status.BAD_N), ({"n": 40}, Status.BAD_N),
    ({"addr": (1 << 20) - 1}, Status.BAD_ADDR), ({"tokens": 4, "k": 64, "n": 32}, Status.OK),
    ({"tokens": 0, "k": 0, "n": 0}, Status.BAD_TOKENS), ({"k": 0, "n": 0}, Status.BAD_K),
])
def test_refusals(fields, status):
    """The first field out of range names the status, in the order tokens, k, n, address."""
    assert check(CFG, {"tokens": 1, "k": 32, "n": 8, "addr": 0, "bias": 1, **fields}) == status


@pytest.mark.parametrize("bias", [0, 1])
def test_refusal_at_the_end_of_memory(bias):
    """A weight whose last word is the memory's last runs; one a word further is refused."""
    cmd = {"tokens": 1, "k": 64, "n": 16, "bias": bias}
    last = (1 << CFG.addr_bits) - CFG.weight_words(64, 16, bool(bias))
    assert check(CFG, {**cmd, "addr": last}) == Status.OK
    assert check(CFG, {**cmd, "addr": last + 1}) == Status.BAD_ADDR


@pytest.mark.parametrize(("params", "match"), [
    ({"array.cols": 12}, "'array.cols' = 12 is not allowed; allowed: 1, 2, 4"),
    ({"array.fmt": "int8"}, "array.fmt"),
    ({"k_max": 48}, "'k_max' = 48 is not allowed; allowed: a multiple of 32"),
    ({"n_max": 20}, "'n_max' = 20 is not allowed; allowed: a multiple of array.cols"),
    ({"weight_port_bits": 96}, "weight_port_bits"),
    ({"tokens": 0}, "tokens"),
])
def test_config_errors_are_one_line(params, match):
    with pytest.raises(ParamError, match=match) as err:
        build_config(LinearConfig, params)
    assert "\n" not in str(err.value)


SMALL = {"array.rows": 2, "array.cols": 8, "tokens": 4, "k_max": 64, "n_max": 32,
         "weight_port_bits": 64}


@pytest.mark.sim
@pytest.mark.parametrize("params", [
    SMALL,
    # a port wider than a row of the tile (two rows a word), heavy gaps and back-pressure
    {**SMALL, "weight_port_bits": 256, "gap": 0.9, "backpressure": 0.9},
    # one token a row tile, a slow memory far away, more commands
    {**SMALL, "array.rows": 1, "array.cols": 4, "weight_port_bits": 128, "mem_latency": 200,
     "mem_bytes_per_cycle": 2, "commands": 6},
], ids=["small", "wide-port-heavy", "rows1-slow-memory"])
def test_linear_rtl(simulator, seed, params):
    assert_passed(simulate("linear", simulator, seed, **params))


def _fast_cases():
    rng = np.random.default_rng(6)
    for _ in range(12):
        rows, cols = int(rng.choice([1, 2, 4, 8])), int(rng.choice([4, 8, 16]))
        port = int(rng.choice([64, 128, 256]))
        latency, bpc = int(rng.choice([1, 20, 200])), int(rng.choice([2, 8, 32]))
        buffer = int(max(32, latency * min(1.0, bpc / (port // 8)) + 24))
        cfg = LinearConfig(array=GemmConfig(rows=rows, cols=cols, fmt="bf16"), tokens=16,
                           k_max=256, n_max=256, weight_port_bits=port, fetch_buffer=buffer)
        cmds = [(int(rng.integers(1, 17)), 32 * int(rng.integers(1, 9)),
                 cols * int(rng.integers(1, 256 // cols + 1)), bool(rng.integers(0, 2)))
                for _ in range(int(rng.integers(1, 4)))]
        yield cfg, cmds, latency, bpc


@pytest.mark.parametrize("case", list(_fast_cases()), ids=lambda c: f"{c[0].array.rows}x"
                         f"{c[0].array.cols}-p{c[0].weight_port_bits}-L{c[2]}-b{c[3]}")
def test_fast_path_within_2_percent_of_the_cycle_model(case):
    """Commands back to back, streams that keep up, the fetch buffer covering the memory's
    round trip: the fast path's cycles within 2% of the cycle model's, its weight words and
    the array's busy cycles exact."""
    from scoville.sim.cycles.linear import fast, timing
    from scoville.sim.cycles.memory import MemoryAgent

    cfg, cmds, latency, bpc = case
    fields = [{"tokens": t, "k": k, "n": n, "addr": 0, "bias": int(b)} for t, k, n, b in cmds]
    model = timing(cfg, fields, memory=MemoryAgent(latency, bpc, cfg.weight_port_bits))
    got = fast(cfg, cmds, latency, bpc)
    want = model.cycles - model.handshakes["cmd"][0]
    assert abs(got["cycles"] / want - 1) <= 0.02, (got["cycles"], want)
    assert got["weight_words"] == model.counters["weight_words"]
    assert got["array_busy"] == model.counters["array.busy"]


def test_read_weight_inverts_tile_words():
    rng = np.random.default_rng(8)
    w = rng.standard_normal((16, 64)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    image = [7, 7] + tile_words(CFG, w, b)
    got_w, got_b = read_weight(CFG, image, 2, 64, 16, True)
    assert np.array_equal(apply(np.eye(64, dtype=np.float32), got_w), apply(np.eye(64), w))
    assert np.array_equal(got_b.view(np.uint32), b.view(np.uint32))
    assert read_weight(CFG, image, 2, 64, 16, False)[1] is None
