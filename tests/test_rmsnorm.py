"""The ``rmsnorm`` block: its golden model (the correctly rounded rsqrt, the sum's order,
against float64), the rsqrt unit alone in Amaranth's simulator (every class of binary32, each
result when the module says), the timed model against its closed form, config errors, and the
RTL on both simulators."""

import math
from fractions import Fraction

import numpy as np
import pytest

from scoville.rtl.lib.params import ParamError
from scoville.rtl.rmsnorm import RmsNormConfig
from scoville.rtl.rmsnorm_rsqrt import Rsqrt, rsqrt_latency
from scoville.sim.cycles.rmsnorm import Norm, ideal_cycles, timing
from scoville.sim.cycles.stream import ALWAYS, Consumer, Producer, Schedule, Source
from scoville.sim.golden import rmsnorm
from scoville.sim.golden.fp32_add import sum_in_order

from .simcheck import assert_passed, simulate


def _nearest_rsqrt(x: float) -> np.float32:
    """The float32 nearest 1/sqrt(x), by exact rational comparisons: the neighbours lo < hi
    with lo^2 x <= 1 < hi^2 x, then the side of their midpoint 1/sqrt(x) lies on."""
    fx, up = Fraction(x), np.float32(np.inf)

    def above(c):  # c > 1/sqrt(x)
        return Fraction(float(c)) ** 2 * fx > 1

    lo = np.float32(1 / math.sqrt(x))
    while above(lo):
        lo = np.nextafter(lo, np.float32(0))
    while not above(hi := np.nextafter(lo, up)):
        lo = hi
    mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
    return hi if mid * mid * fx < 1 else lo


def test_rsqrt_is_correctly_rounded():
    rng = np.random.default_rng(7)
    v = (np.abs(rng.standard_normal(3000)) * 2.0 ** rng.integers(-149, 127, 3000)).astype(
        np.float32)
    v = np.concatenate([v[(v > 0) & np.isfinite(v)], np.float32([
        1e-45, 1.17549435e-38, 0.25, 1, 2, 4, 3, 3.4028235e38, 1e-5, 1 + 2 ** -23])])
    got = rmsnorm.rsqrt(v)
    for x, r in zip(v.tolist(), got.tolist(), strict=True):
        assert r == _nearest_rsqrt(x), x
    assert len(v) > 2000


def test_rsqrt_special_values():
    got = rmsnorm.rsqrt(np.float32([0.0, -0.0, np.inf, -1.0, np.nan, 0.25]))
    assert got[0] == np.inf and got[1] == -np.inf and got[2] == 0
    assert np.isnan(got[3]) and np.isnan(got[4]) and got[5] == 2


def test_sum_of_squares_order():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((5, 64)) * 2.0 ** rng.integers(-20, 20, (5, 64))).astype(np.float32)
    # One lane: the plain sum in order.
    assert np.array_equal(rmsnorm.pairwise_sum(x, 1), sum_in_order(x))
    # Four lanes: ((a+b)+(c+d)) per beat, beats in order.
    beats = ((x[:, 0::4] + x[:, 1::4]).astype(np.float32)
             + (x[:, 2::4] + x[:, 3::4]).astype(np.float32)).astype(np.float32)
    assert np.array_equal(rmsnorm.pairwise_sum(x, 4), sum_in_order(beats))
    with pytest.raises(ValueError, match="'lanes' = 3"):
        rmsnorm.pairwise_sum(x, 3)


@pytest.mark.parametrize("lanes", [1, 8])
def test_rmsnorm_against_float64(lanes):
    rng = np.random.default_rng(lanes)
    x = (rng.standard_normal((20, 64)) * 3).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(64)).astype(np.float32)
    got = rmsnorm.normalize(x, w, 1e-5, lanes=lanes)
    want = rmsnorm.reference(x, w, 1e-5)
    # A sum of 64 rounded squares, a rounded mean, rsqrt and two products: under 20 ulps.
    assert np.max(np.abs(got / want - 1)) < 20 * 2.0 ** -24
    # The steps, spelled out for one token: fp32(fp32(x r) w) with the sum in order.
    ss = sum_in_order((x[:1] * x[:1]).astype(np.float32)) if lanes == 1 else None
    if ss is not None:
        mean = np.float32(ss[0] * np.float32(1 / 64))
        r = rmsnorm.rsqrt(np.float32(mean + np.float32(1e-5)))
        assert np.array_equal(got[0], ((x[0] * r).astype(np.float32) * w).astype(np.float32))


def test_block_golden_takes_its_config():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    w = rng.standard_normal((3, 64)).astype(np.float32)
    cfg = RmsNormConfig(hidden=64, lanes=4, eps=1e-6)
    got = rmsnorm.rmsnorm(cfg, x, w)
    assert np.array_equal(got, rmsnorm.normalize(x, w, 1e-6, lanes=4))
    # A weight row a token: row 1 with its own weights.
    assert np.array_equal(got[1], rmsnorm.normalize(x[1:2], w[1], 1e-6, lanes=4)[0])
    with pytest.raises(ValueError, match="'x' has 32 values a token; allowed: 64"):
        rmsnorm.rmsnorm(cfg, x[:, :32], w[:, :32])


@pytest.mark.parametrize("width", [1, 6, 16])
def test_block_golden_at_a_runtime_width(width):
    """A runtime block's tokens of ``width`` beats of 4: the mean divides by their own 4 width
    values (24 is no power of two: fp32(1/24) is rounded), within FP32 rounding of float64."""
    cfg = RmsNormConfig(hidden=64, lanes=4, eps=1e-6, runtime=1)
    h = 4 * width
    rng = np.random.default_rng(width)
    x = (rng.standard_normal((10, h)) * 3).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
    got = rmsnorm.rmsnorm(cfg, x, w)
    assert got.shape == (10, h)
    assert np.max(np.abs(got / rmsnorm.reference(x, w, 1e-6) - 1)) < 20 * 2.0 ** -24
    # The steps for token 0, the reciprocal the ROM's entry for the width.
    ss = rmsnorm.pairwise_sum((x[:1] * x[:1]).astype(np.float32), 4)
    mean = np.float32(ss[0] * np.float32(1 / h))
    r = rmsnorm.rsqrt(np.float32(mean + np.float32(1e-6)))
    assert np.array_equal(got[0], ((x[0] * r).astype(np.float32) * w).astype(np.float32))
    for bad in (h + 2, 68):
        with pytest.raises(ValueError, match=f"'x' has {bad} values a token; allowed: a "
                                             "multiple of 4 in 4..64"):
            rmsnorm.rmsnorm(cfg, np.zeros((1, bad), np.float32), np.zeros(bad, np.float32))


# ---- the rsqrt unit --------------------------------------------------------------------------

def _rsqrt_inputs():
    rng = np.random.default_rng(11)
    v = (np.abs(rng.standard_normal(150)) * 2.0 ** rng.integers(-149, 127, 150)).astype(
        np.float32)
    v = v[np.isfinite(v)]
    specials = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, -1.5, 1e-45, 3e-39,
                           1.17549435e-38, 3.4028235e38, 0.25, 1.0, 2.0, 1e-5])
    return np.concatenate([specials, v])


@pytest.mark.parametrize("bits", [1, 4, 26])
def test_rsqrt_unit_against_the_golden_model_and_its_latency(bits):
    """Every value's result bit for bit (zeros, Inf, NaN, negatives, subnormals, the ends of
    the range), valid ``latency`` cycles after its handshake, back to back."""
    from amaranth.sim import Simulator

    from scoville.sim.golden.fp32_add import canonical_bits

    values = _rsqrt_inputs()
    want = canonical_bits(rmsnorm.rsqrt(values)).tolist()
    dut = Rsqrt(bits)
    assert dut.latency == rsqrt_latency(bits) == -(-26 // bits) + 1
    got, taken, valid_at = [], [], []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        t, k = 0, 0
        while len(got) < len(values):
            offer = k < len(values)
            ctx.set(dut.i.valid, offer)
            if offer:
                ctx.set(dut.i.payload, int(values[k:k + 1].view(np.uint32)[0]))
            fire_i = offer and ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid):
                got.append(ctx.get(dut.o.payload))
                valid_at.append(t)
            await ctx.tick()
            if fire_i:
                taken.append(t)
                k += 1
            t += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == want
    assert [v - i for v, i in zip(valid_at, taken, strict=True)] == [dut.latency] * len(values)
    # Back to back: the next value is taken the cycle a result is handed on.
    assert all(b - a == dut.latency for a, b in zip(taken, taken[1:], strict=False))


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_rsqrt_unit_rejects_bits_out_of_range():
    with pytest.raises(ValueError, match="'bits' = 27"):
        Rsqrt(27)


# ---- the timed model -------------------------------------------------------------------------

@pytest.mark.parametrize(("hidden", "lanes", "bits"),
                         [(64, 8, 4), (32, 1, 1), (16, 16, 26), (64, 16, 1), (256, 8, 2)])
def test_timed_model_closed_form(hidden, lanes, bits):
    cfg = RmsNormConfig(hidden=hidden, lanes=lanes, rsqrt_bits=bits)
    for tokens in (1, 2, 3, 7):
        assert timing(cfg, tokens).cycles == ideal_cycles(cfg, tokens), tokens


def test_timed_model_closed_form_at_runtime_widths():
    cfg = RmsNormConfig(hidden=64, lanes=4, slots=3, runtime=1)
    for width in (1, 2, 7, 16):
        for tokens in (1, 2, 3, 7, 20):
            assert timing(cfg, tokens, width=width).cycles == ideal_cycles(cfg, tokens, width)
    # One beat a token: the rsqrt (8 cycles a token) bounds it, not the slots.
    assert ideal_cycles(cfg, 101, 1) - ideal_cycles(cfg, 100, 1) == 8


def test_timed_model_at_a_runtime_width_by_hand():
    """4 beats a token at most, width 2 then 4; the rsqrt 2 cycles (26 bits a cycle); two
    slots; streams always ready. The batches run on in one model, the width changed when it is
    empty (as the decoder does between commands)."""
    cfg = RmsNormConfig(hidden=32, lanes=8, rsqrt_bits=26, slots=2, runtime=1)
    # Width 2. token: beats taken (a its last), s = max(a + 3, s before + 2) the rsqrt's take,
    # r from s + 3: beats into the scaler (after the token before), out two cycles later.
    #   0: in 0, 1    s = 4               enter 7, 8    out 9, 10    slot 0 free from 9
    #   1: in 2, 3    s = max(6, 6) = 6   enter 9, 10   out 11, 12   slot 1 free from 11
    #   2: (slot 0) in 9, 10   s = 13     enter 16, 17  out 18, 19
    # Width 4 from cycle 20 (its beats arrive then):
    #   3: (slot 1) in 20..23  s = 26     enter 29..32  out 31..34
    src = Producer(Source(arrivals=[0] * 6 + [20] * 4), 10)
    out = Consumer(ALWAYS)
    unit = Norm(cfg, src, out)
    unit.set_width(2)
    assert unit.width == 2
    t = 0
    while len(out.cycles) < 10:
        if t == 20:
            assert unit.empty
            unit.set_width(4)
        unit.step(t)
        if 0 < len(out.cycles) < 6:
            assert not unit.empty
            with pytest.raises(ValueError, match="'width' = 4 while a token of 2 beats"):
                unit.set_width(4)
        t += 1
    assert src.cycles == [0, 1, 2, 3, 9, 10, 20, 21, 22, 23]
    assert out.cycles == [9, 10, 11, 12, 18, 19, 31, 32, 33, 34]
    # The first batch alone, from timing().
    first = timing(cfg, 3, width=2)
    assert first.handshakes == {"i": [0, 1, 2, 3, 9, 10], "o": [9, 10, 11, 12, 18, 19]}
    assert first.cycles == 20 == ideal_cycles(cfg, 3, 2)


@pytest.mark.parametrize(("params", "width", "match"), [
    ({"runtime": 1}, 0, "'width' = 0 is not allowed; allowed: 1..8"),
    ({"runtime": 1}, 9, "'width' = 9 is not allowed; allowed: 1..8"),
    ({}, 4, r"'width' = 4 is not allowed; allowed: 8 \(runtime = 0\)"),
])
def test_timed_model_refuses_a_width(params, width, match):
    with pytest.raises(ValueError, match=match):
        timing(RmsNormConfig(**params), 1, width=width)


def test_timed_model_throughput_and_back_pressure():
    # Beats bound: 8 beats a token, rsqrt 8 cycles: a token every 8 cycles in steady state.
    cfg = RmsNormConfig(hidden=64, lanes=8, rsqrt_bits=4)
    assert ideal_cycles(cfg, 101) - ideal_cycles(cfg, 100) == 8
    # The rsqrt bound: one beat a token, 27 cycles of rsqrt each.
    slow = RmsNormConfig(hidden=16, lanes=16, rsqrt_bits=1)
    assert ideal_cycles(slow, 101) - ideal_cycles(slow, 100) == 27
    # The first token's latency: its 8 beats, 3 cycles to v, the rsqrt, one to enter the
    # scaler, its 8 beats through two stages.
    assert ideal_cycles(cfg, 1) == 8 + 3 + 8 + 1 + 7 + 2 + 1 - 1
    heavy = timing(cfg, 20, Source(Schedule(1, 0.5)), Schedule(2, 0.8))
    assert heavy.cycles > 2 * timing(cfg, 20).cycles
    assert len(heavy.handshakes["o"]) == len(heavy.handshakes["i"]) == 160


# ---- config and RTL --------------------------------------------------------------------------

@pytest.mark.parametrize(("params", "match"), [
    ({"lanes": 3}, "'lanes' = 3"), ({"hidden": 60}, "'hidden' = 60 is not allowed with lanes"),
    ({"eps": 0.0}, "'eps' = 0.0"), ({"rsqrt_bits": 0}, "'rsqrt_bits' = 0"),
    ({"hidden": 4}, "'hidden' = 4 is out of range"),
    ({"runtime": 2}, "'runtime' = 2 is out of range; allowed: 0, 1$"),
    ({"runtime": True}, "'runtime' must be an integer; allowed: 0, 1; got True$"),
])
def test_config_errors_are_one_line(params, match):
    with pytest.raises(ParamError, match=match):
        RmsNormConfig(**params)


@pytest.mark.sim
@pytest.mark.parametrize("params", [
    {"count": 300},
    # One value a beat, the rsqrt a bit a cycle: the rsqrt bounds throughput.
    {"hidden": 32, "lanes": 1, "rsqrt_bits": 1, "count": 60},
    # A token a beat: the slots fill while the rsqrt runs.
    {"hidden": 16, "lanes": 16, "rsqrt_bits": 26, "count": 300, "eps": 1e-6},
    # A runtime width: tokens of 1 to 16 beats of 4 (test_widths), 3 slots.
    {"hidden": 64, "lanes": 4, "slots": 3, "runtime": 1, "count": 40},
], ids=["default", "slow-rsqrt", "one-beat-tokens", "runtime-width"])
def test_rmsnorm_rtl(simulator, seed, params):
    assert_passed(simulate("rmsnorm", simulator, seed, **params))
