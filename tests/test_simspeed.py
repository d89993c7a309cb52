"""The speed baseline of scripts/simspeed.py: a bare cocotb clock on a block's build."""

import dataclasses

import pytest

from scoville.blocks import get_block

from .simcheck import simulate


@pytest.mark.sim
def test_bare_clock_counts_its_cycles_and_reports_wall_time(seed):
    block = get_block("fp4_mul")
    bare = dataclasses.replace(block, testbench="scoville.testbenches.bare_clock")
    result = simulate("fp4_mul", "icarus", seed, block=bare, count=500)
    assert result.passed
    assert result.metrics["test_bare_clock"]["cycles"] == 500
    assert result.tests[0].wall_s > 0
    assert result.tests[0].sim_time_ns >= 499 * 10  # 10 ns clock
