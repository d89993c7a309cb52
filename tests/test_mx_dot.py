"""MX dot unit: golden model against float64, config errors, RTL on both simulators."""

import re

import numpy as np
import pytest

from scoville.rtl.lib.params import ParamError
from scoville.rtl.mx_dot import MxDotConfig
from scoville.sim.golden import E2M1_VALUES
from scoville.sim.golden.fp32_add import FP32_QNAN
from scoville.sim.golden.mx_dot import mx_dot

from .simcheck import assert_passed, simulate


def _float64_dot(a, b, sa, sb):
    va = E2M1_VALUES[a].astype(np.float64) * np.repeat(np.exp2(sa - 127.0), 32, axis=-1)
    vb = E2M1_VALUES[b].astype(np.float64) * np.repeat(np.exp2(sb - 127.0), 32, axis=-1)
    blocks = (va * vb).reshape(a.shape[0], -1, 32).sum(axis=-1)
    return blocks.sum(axis=-1), np.abs(blocks).sum(axis=-1)


def test_golden_is_within_fp32_accumulation_error_of_float64():
    rng = np.random.default_rng(3)
    n, blocks = 2000, 8
    a = rng.integers(0, 16, (n, 32 * blocks))
    b = rng.integers(0, 16, (n, 32 * blocks))
    sa = rng.integers(100, 155, (n, blocks))
    sb = rng.integers(100, 155, (n, blocks))
    got = mx_dot(a, b, sa, sb).view(np.float32).astype(np.float64)
    exact, magnitude = _float64_dot(a, b, sa, sb)
    # One rounding per block conversion and one per addition, each at most 2^-24 relative.
    bound = (2 * blocks) * 2.0**-24 * magnitude
    assert np.all(np.abs(got - exact) <= bound)


def test_single_block_is_the_exact_value_rounded_once():
    a = np.full((1, 32), 0x7)  # 6
    b = np.full((1, 32), 0x5)  # 3
    assert mx_dot(a, b, [[127]], [[127]]).view(np.float32)[0] == 32 * 18
    assert mx_dot(a, b, [[127]], [[117]]).view(np.float32)[0] == np.float32(32 * 18 / 1024)


def test_nan_scale_gives_canonical_nan_and_inf_minus_inf_is_nan():
    a = np.full((1, 64), 0x7)
    assert mx_dot(a, a, [[0xFF, 127]], [[127, 127]])[0] == FP32_QNAN
    b = np.concatenate([np.full(32, 0x7), np.full(32, 0xF)])[None]
    assert mx_dot(a, b, [[0xFE, 0xFE]], [[0xFE, 0xFE]])[0] == FP32_QNAN
    assert mx_dot(a[:, :32], a[:, :32], [[0xFE]], [[0xFE]])[0] == 0x7F80_0000


def test_tiny_scales_give_subnormals_and_signed_zero():
    half = np.full((1, 32), 0x1)
    got = mx_dot(half, half, [[0x01]], [[0x01]]).view(np.float32)[0]
    assert got == np.float32(32 * 0.25 * 2.0**-252) == 0
    got = mx_dot(half, half, [[0x38]], [[0x37]]).view(np.float32)[0]
    assert got == np.float32(8 * 2.0**-143) == np.float32(2.0**-140)
    assert 0 < got < np.finfo(np.float32).smallest_normal
    neg = np.full((1, 32), 0x9)
    assert mx_dot(half, neg, [[0x01]], [[0x01]])[0] == 0  # -tiny + (+0) is +0


def test_length_must_be_whole_blocks():
    with pytest.raises(ValueError, match="multiple of 32"):
        mx_dot(np.zeros((1, 40)), np.zeros((1, 40)), [[127]], [[127]])


@pytest.mark.parametrize("bad", [{"lanes": 3}, {"lanes": 64}, {"lanes": 0}])
def test_config_rejects_lanes_that_do_not_divide_a_block(bad):
    with pytest.raises(ParamError, match="'lanes'.*allowed: 1, 2, 4, 8, 16, 32"):
        MxDotConfig(**bad)


@pytest.mark.parametrize(("lanes", "latency", "allowed"),
                         [(8, 10, "3..9"), (16, 8, "3..7"), (32, 7, "3..6"), (8, 2, "3..9")])
def test_config_rejects_a_latency_its_lanes_cannot_cut(lanes, latency, allowed):
    """The accumulator's adder takes one cut fewer than a block's beats: the latency's
    range depends on the lanes, and the error says so."""
    with pytest.raises(ParamError, match=f"'latency' = {latency} .*allowed: {re.escape(allowed)} "):
        MxDotConfig(lanes=lanes, latency=latency)


@pytest.mark.sim
@pytest.mark.parametrize(("lanes", "latency"),
                         [(4, 3), (16, 7), (32, 6), (8, 9), (1, 11), (8, 8)])
def test_mx_dot_rtl(simulator, seed, lanes, latency):
    """Every cut of the block value and the accumulator the latency holds (none, the most at
    each lanes, and the default), under gaps and back-pressure, against the golden model and
    the stalling pipeline's timed model at the config's latency."""
    # lanes=32 carries the >= 10,000 random blocks (one beat per block).
    count = 3000 if lanes == 32 else 40 if lanes == 1 else 150
    assert_passed(simulate("mx_dot", simulator, seed, lanes=lanes, latency=latency,
                           count=count))


@pytest.mark.parametrize("kind", ["mx", "nvfp4"])
@pytest.mark.parametrize("beats", [1, 2, 4, 32])
def test_each_added_stage_is_one_more_cut_and_the_adder_never_outruns_a_block(kind, beats):
    """``dot_cuts``: ``extra`` stages are ``extra`` cuts, each kind's points the count its
    table gives; the accumulator's adder takes at most ``beats - 1`` cuts (its sum must be
    back before the next block's value comes); past the most, a ValueError."""
    from scoville.rtl.lib.blockdot import ADD_CUTS, CONVERT_CUTS, dot_cuts, most_cuts

    most = most_cuts(kind, beats)
    assert most == 3 + min(beats - 1, 5) + (4 if kind == "nvfp4" else 0)
    for extra in range(most + 1):
        cuts = dot_cuts(kind, extra, beats)
        assert cuts.stages == extra
        assert len(cuts.add) <= beats - 1
        assert cuts.add in ((), *ADD_CUTS.values())
        assert cuts.convert in ((), *CONVERT_CUTS[kind].values())
        assert len(cuts.convert) == len(set(cuts.convert))
        assert kind == "nvfp4" or cuts.scale == ()
    with pytest.raises(ValueError, match="at most"):
        dot_cuts(kind, most + 1, beats)


def test_the_latency_comes_from_the_command_line_as_text():
    """``--param latency=4`` (text, as the CLI gives it) builds the config; unset, the
    default follows the lanes."""
    from scoville.blocks import get_block, parse_params

    config, _ = parse_params(get_block("mx_dot"), ["latency=4", "lanes=16"])
    assert (config.lanes, config.latency) == (16, 4)
    config, _ = parse_params(get_block("nvfp4_dot"), ["lanes=16"])
    assert config.latency == 11
