"""Functional coverage (:mod:`scoville.testbenches.coverage`): the declared bins, the docs'
list of them, the suite's check that none stays empty, and the harness's stall counts."""

import importlib
import json

import pytest

from scoville.blocks import BLOCKS, get_block, parse_params
from scoville.sim.harness import stream_names
from scoville.testbenches.coverage import STALL, Coverage, declared, fp32_classes

from .conftest import empty_bins
from .script import load
from .simcheck import simulate


def test_docs_list_every_declared_bin():
    assert load("coverage_bins").main(["--check"]) == 0, "run python scripts/coverage_bins.py"


@pytest.mark.parametrize("name", list(BLOCKS))
def test_every_block_has_a_stall_bin_per_stream(name):
    block = get_block(name)
    bins = declared(block)
    config, _ = parse_params(block, {})
    streams = stream_names(block.component(config))
    never = getattr(importlib.import_module(block.testbench), "NEVER_WAITS", {})
    assert set(never) <= set(streams), "NEVER_WAITS names a stream the block does not have"
    assert {f"{STALL}{s}" for s in streams if s not in never} <= set(bins)
    assert not {f"{STALL}{s}" for s in never} & set(bins)
    assert all(text for text in bins.values())


def test_a_config_leaves_out_only_the_bins_it_cannot_reach():
    """The decoder whose attention takes one token a step (decode) cannot reach a step of
    more or a partial row tile: its runs leave those two bins out, and only those; in
    prefill steps of four tokens it reaches both (nothing left out)."""
    from scoville.testbenches.coverage import bins_of

    from .test_decoder import ENGINE
    block = get_block("decoder")
    one, _ = parse_params(block, {**ENGINE, "attn.mode": "decode"})
    four, _ = parse_params(block, ENGINE)
    streams = stream_names(block.component(four))
    every = bins_of(block.testbench, streams)
    assert set(every) - set(bins_of(block.testbench, streams, one)) == {
        "op:attn_tokens", "op:attn_partial_tile"}
    assert bins_of(block.testbench, streams, four) == every


def test_an_undeclared_bin_is_an_error_naming_the_declared():
    cov = Coverage({"a": "x", "b": "y"})
    cov.hit("a", 2)
    with pytest.raises(KeyError, match="'c' is not declared; declared: a, b"):
        cov.hit("c")
    assert cov.take() == {"a": 2, "b": 0}
    assert cov.take() == {"a": 0, "b": 0}


def test_fp32_classes():
    bits = [0x7FC00000, 0xFF800000, 0x80000000, 0x00000001, 0x3F800000, 0x00800000]
    assert fp32_classes(bits) == {"result:nan": 1, "result:inf": 1, "result:zero": 1,
                                  "result:subnormal": 1}


def test_empty_bins_sums_every_run_of_a_block(tmp_path):
    runs = [("gemm", {"a": 0, "b": 1}), ("gemm", {"a": 2, "b": 0}), ("kvcache", {"c": 0}),
            ("fetch", {"d": 1})]
    for k, (block, coverage) in enumerate(runs):
        (tmp_path / f"{k}.json").write_text(json.dumps({"block": block, "coverage": coverage}))
    assert empty_bins(tmp_path) == {"kvcache": ["c"]}


@pytest.mark.sim
def test_the_harness_counts_stalls_only_under_back_pressure(simulator, seed):
    """``stall:o`` counts the cycles ``o`` waited: none when the testbench is always ready and
    the stream never stalls, some under back-pressure."""
    free = simulate("fp4_mul", simulator, seed, count=50, gap=0.0, backpressure=0.0).coverage
    held = simulate("fp4_mul", simulator, seed, count=50, gap=0.0, backpressure=0.7).coverage
    assert free[f"{STALL}o"] == 0 and free[f"{STALL}i"] == 0, free
    assert held[f"{STALL}o"] > 0 and held[f"{STALL}i"] > 0, held
