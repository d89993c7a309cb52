"""FP32 adder: golden model against float64, stimulus coverage, the combinational function in
Amaranth's simulator, config errors, and the RTL on both simulators."""

import numpy as np
import pytest

from scoville.rtl.fp32_add import Fp32AddConfig
from scoville.rtl.lib.formats import FP32_QNAN
from scoville.rtl.lib.fp32 import fp32_add
from scoville.rtl.lib.params import ParamError
from scoville.sim.golden.fp32_add import fp32_add as golden_add
from scoville.testbenches.fp32_add import DIRECTED, directed_pairs, random_pairs

from .combsim import evaluate
from .simcheck import assert_passed, simulate


def _float64_sum(a, b):
    """``a + b`` computed in float64 and rounded once to float32.

    float64 has 53 >= 2 * 24 + 2 significand bits, so this double rounding gives the correctly
    rounded binary32 sum (Figueroa, 1995): an oracle independent of float32 arithmetic.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        wide = a.view(np.float32).astype(np.float64) + b.view(np.float32).astype(np.float64)
        return wide.astype(np.float32)


def _stimulus(seed, n):
    a, b = directed_pairs()
    ra, rb = random_pairs(np.random.default_rng(seed), n)
    return np.concatenate([a, ra]), np.concatenate([b, rb])


def test_golden_is_float64_rounded_to_float32(seed):
    a, b = _stimulus(seed, 200_000)
    got = golden_add(a, b)
    want = _float64_sum(a, b)
    nan = np.isnan(want)
    assert np.array_equal(got[~nan], want[~nan].view(np.uint32))
    assert np.all(got[nan] == FP32_QNAN)


def test_golden_meets_the_directed_table():
    for a, b, total, what in DIRECTED:
        assert int(golden_add(a, b)) == total, what
        assert int(golden_add(b, a)) == total, what


def test_golden_nans_are_canonical():
    nans = [0x7F80_0001, 0x7FC0_0000, 0xFFFF_FFFF, 0xFFC1_2345]
    others = [0x0000_0000, 0x8000_0000, 0x3F80_0000, 0x7F80_0000, 0xFF80_0000] + nans
    a, b = np.meshgrid(nans, others)
    assert np.all(golden_add(a, b) == FP32_QNAN)
    assert np.all(golden_add(b, a) == FP32_QNAN)
    assert golden_add(0x7F80_0000, 0xFF80_0000) == FP32_QNAN


@pytest.mark.parametrize("bad", [[-1], [1 << 32], [1.0]])
def test_golden_rejects_what_is_not_an_encoding(bad):
    with pytest.raises(ValueError, match="a_bits"):
        golden_add(bad, [0])


def test_random_pairs_cover_the_exponent_range():
    a, b = random_pairs(np.random.default_rng(0), 100_000)
    exp_a, exp_b = a >> 23 & 0xFF, b >> 23 & 0xFF
    assert np.all(np.bincount(np.concatenate([exp_a, exp_b]), minlength=256) > 0)
    finite = (exp_a < 0xFF) & (exp_b < 0xFF)
    gap = np.abs(exp_a.astype(int) - exp_b.astype(int))
    assert np.mean(finite & (gap <= 2)) > 0.3
    assert np.mean(finite & (gap > 2) & (gap <= 30)) > 0.1
    cancelling = finite & (gap <= 1) & ((a ^ b) >> 31 == 1)
    assert np.mean(cancelling) > 0.15
    assert np.mean((exp_a == 0) | (exp_b == 0)) > 0.1
    nan = ((a & 0x7FFF_FFFF) > 0x7F80_0000) | ((b & 0x7FFF_FFFF) > 0x7F80_0000)
    assert np.mean(nan) > 0.02
    total = golden_add(a, b)
    scale = np.maximum(np.stack([exp_a, exp_b, total >> 23 & 0xFF]), 1).astype(int)
    lost = np.maximum(scale[0], scale[1]) - scale[2]
    across = cancelling & (gap == 1) & (total != 0)
    assert np.mean(across & (lost >= 8)) > 0.03
    assert np.any(across & (lost == 24))
    inf_minus_inf = ((a & 0x7FFF_FFFF) == 0x7F80_0000) & ((a ^ b) == 0x8000_0000)
    assert np.sum(inf_minus_inf) > 10
    assert np.sum(total == 0x8000_0000) > 10


def test_combinational_adder_in_amaranth_simulator(seed):
    a, b = _stimulus(seed, 3000)
    want = golden_add(a, b)
    got = evaluate(fp32_add, [32, 32], a, b)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (
        f"seed {seed}: {bad.size} mismatches; first at index {bad[0]}: {a[bad[0]]:#010x} + "
        f"{b[bad[0]]:#010x}: expected {want[bad[0]]:#010x}, got {got[bad[0]]:#010x}"
    )


@pytest.mark.parametrize(
    "bad", [{"lanes": 0}, {"lanes": 17}, {"lanes": "4"}, {"latency": 0}, {"latency": 7}]
)
def test_config_rejects_bad_values_naming_the_parameter(bad):
    name = next(iter(bad))
    with pytest.raises(ParamError, match=f"'{name}'.*allowed"):
        Fp32AddConfig(**bad)


@pytest.mark.parametrize("latency", range(1, 7))
def test_every_latency_cuts_the_adder_and_keeps_its_sums_and_cycles(latency):
    """Fp32Add at each latency in Amaranth's simulator, 2 lanes, random valid gaps and ready
    back-pressure (random operands offered between beats, not valid): the sums are the
    golden model's, each handshake at the cycle of the stalling pipeline's timed model
    (``pipeline_timing``), whatever stages cut the adder (:attr:`Fp32Add.CUTS`, latency - 1 of
    them)."""
    from amaranth.sim import Simulator

    from scoville.rtl.fp32_add import Fp32Add
    from scoville.sim.cycles.stream import (
        Consumer,
        Producer,
        Schedule,
        Source,
        pipeline_timing,
    )

    lanes, seed = 2, 1000 + latency
    a, b = _stimulus(seed, 150)
    a, b = a[: len(a) // lanes * lanes], b[: len(b) // lanes * lanes]
    items = len(a) // lanes
    dut = Fp32Add(Fp32AddConfig(lanes=lanes, latency=latency))
    assert len(dut.cuts) == latency - 1
    src, sink = Producer(Source(Schedule([seed, 1], 0.3)), items), Consumer(Schedule([seed, 2],
                                                                                0.3))
    out = []

    noise = np.random.default_rng(seed)

    async def bench(ctx):
        t = 0
        while len(out) < items * lanes:
            assert t < 20 * items + 100, f"no result after {t} cycles"
            offer = src.offers(t)
            ctx.set(dut.i.valid, offer)
            for k in range(lanes):      # between beats, operands that must not be summed
                pick = src.sent * lanes + k
                ctx.set(dut.i.payload.a[k], int(a[pick]) if offer else int(noise.integers(2**32)))
                ctx.set(dut.i.payload.b[k], int(b[pick]) if offer else int(noise.integers(2**32)))
            ctx.set(dut.o.ready, sink.accepts(t))
            fire_i = offer and ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid) and sink.accepts(t):
                out.extend(ctx.get(dut.o.payload[k]) for k in range(lanes))
                sink.take(t)
            if fire_i:
                src.take(t)
            await ctx.tick()
            t += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert np.array_equal(np.array(out, dtype=np.uint32), golden_add(a, b))
    model = pipeline_timing(items, latency, Source(Schedule([seed, 1], 0.3)),
                            Schedule([seed, 2], 0.3))
    assert {"i": src.cycles, "o": sink.cycles} == model.handshakes


def test_a_lane_that_skips_a_registered_cut_does_not_elaborate():
    """The valid chain counts ``latency`` stages; a lane that does not call a cut its latency
    registers (or calls it twice) would put its data a cycle off its valid: elaboration
    refuses it, naming the unit and the cuts; ``CUTS`` of the wrong size refuses the class."""
    from amaranth.back import rtlil

    from scoville.rtl.fp32_add import Fp32Add
    from scoville.rtl.lib.pipeline import LaneUnit

    class Skips(Fp32Add):
        def lane(self, m, k, a, b, cut=None):
            return fp32_add(m, a, b, name=f"add{k}",
                            cut=lambda i, *v: v if i == 2 else cut(i, *v))

    with pytest.raises(RuntimeError, match=r"Skips: lane 0 called its cut points \[0, 1, 3, 4\]"):
        rtlil.convert(Skips(Fp32AddConfig(latency=4)))
    rtlil.convert(Skips(Fp32AddConfig(latency=3)))          # cuts 1 and 3: it calls both
    with pytest.raises(TypeError, match="CUTS"):
        type("Bad", (LaneUnit,), {"CUTS": {2: (1, 1)}})


@pytest.mark.sim
@pytest.mark.parametrize(
    "params",
    [{"lanes": 3, "latency": 6, "count": 3000}, {"lanes": 8, "latency": 2, "count": 100_000}],
    ids=["lanes3-lat6", "lanes8-lat2-100k"],
)
def test_fp32_add_rtl(simulator, seed, params):
    result = simulate("fp32_add", simulator, seed, **params)
    assert_passed(result)
    assert result.metrics["test_workload"]["pairs"] >= params["count"]
