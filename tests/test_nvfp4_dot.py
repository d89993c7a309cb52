"""NVFP4 dot unit: golden model against float64, config errors, RTL on both simulators."""

import numpy as np
import pytest

from scoville.rtl.lib.params import ParamError
from scoville.rtl.nvfp4_dot import Nvfp4DotConfig
from scoville.sim.golden import E2M1_VALUES
from scoville.sim.golden.nvfp4_dot import E4M3_VALUES, nvfp4_dot

from .simcheck import assert_passed, simulate


def test_e4m3_table():
    assert E4M3_VALUES[0x38] == 1.0 and E4M3_VALUES[0x7E] == 448.0
    assert E4M3_VALUES[0x01] == 2.0**-9 and E4M3_VALUES[0xB8] == -1.0
    assert np.isnan(E4M3_VALUES[0x7F]) and np.isnan(E4M3_VALUES[0xFF])


def test_golden_is_within_fp32_accumulation_error_of_float64():
    rng = np.random.default_rng(5)
    n, blocks = 2000, 8
    a = rng.integers(0, 16, (n, 16 * blocks))
    b = rng.integers(0, 16, (n, 16 * blocks))
    sa = rng.integers(0, 0x7F, (n, blocks))
    sb = rng.integers(0, 0x7F, (n, blocks))
    scale = rng.uniform(0.5, 2, n).astype(np.float32)
    got = nvfp4_dot(a, b, sa, sb, scale).view(np.float32).astype(np.float64)
    va = E2M1_VALUES[a] * np.repeat(E4M3_VALUES[sa], 16, axis=-1)
    vb = E2M1_VALUES[b] * np.repeat(E4M3_VALUES[sb], 16, axis=-1)
    per_block = (va * vb).reshape(n, blocks, 16).sum(-1)
    exact = per_block.sum(-1) * scale
    # Block values are exact; one rounding per addition and one for the tensor scale.
    bound = (blocks + 1) * 2.0**-24 * np.abs(per_block).sum(-1) * scale
    assert np.all(np.abs(got - exact) <= bound)


def test_nan_block_scale_and_inf_tensor_scale():
    six = np.full((1, 16), 0x7)
    assert nvfp4_dot(six, six, [[0x7F]], [[0x38]], np.float32([1]))[0] == 0x7FC00000
    assert nvfp4_dot(six, six, [[0x38]], [[0x38]], np.float32([np.inf]))[0] == 0x7F800000
    zero = np.zeros((1, 16))
    assert nvfp4_dot(zero, six, [[0x38]], [[0x38]], np.float32([np.inf]))[0] == 0x7FC00000


@pytest.mark.parametrize("bad", [{"lanes": 32}, {"lanes": 3}])
def test_config_rejects_lanes_that_do_not_divide_a_block(bad):
    with pytest.raises(ParamError, match="'lanes'.*allowed: 1, 2, 4, 8, 16"):
        Nvfp4DotConfig(**bad)


@pytest.mark.parametrize(("lanes", "latency", "allowed"),
                         [(4, 15, "4..14"), (8, 13, "4..12"), (16, 12, "4..11"), (8, 3, "4")])
def test_config_rejects_a_latency_its_lanes_cannot_cut(lanes, latency, allowed):
    with pytest.raises(ParamError, match=f"'latency' = {latency} .*allowed: {allowed}"):
        Nvfp4DotConfig(lanes=lanes, latency=latency)


@pytest.mark.sim
@pytest.mark.parametrize(("lanes", "latency"),
                         [(4, 14), (16, 11), (8, 4), (2, 16), (4, 12), (8, 6)])
def test_nvfp4_dot_rtl(simulator, seed, lanes, latency):
    """Every cut the latency holds (the most at each lanes, none, the default, and the
    scale product cut once), under gaps and back-pressure, against the golden model and the
    timed model at the config's latency."""
    # lanes=16 carries the >= 10,000 random blocks (one beat per block).
    count = 2300 if lanes == 16 else 40 if lanes == 2 else 60 if latency in (6, 12) else 100
    assert_passed(simulate("nvfp4_dot", simulator, seed, lanes=lanes, latency=latency,
                           count=count))
