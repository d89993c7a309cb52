"""The MoE block's fast path (:func:`scoville.sim.cycles.moe.layer`) against its cycle-level
model (:func:`scoville.sim.cycles.moe.timing`, itself checked against the RTL handshake for
handshake): the counts exact, the cycles within :data:`TOLERANCE` wherever the fetch buffer
covers the memory's round trip, on random configurations, batches and memories."""

import random

import pytest

from scoville.rtl.lib.params import build_config
from scoville.rtl.moe import MoeConfig
from scoville.sim.cycles import moe as moe_timed
from scoville.sim.cycles.memory import MemoryAgent

from .script import SCRIPTS, load

#: The fast path's largest relative error in cycles against the cycle-level model, measured
#: over this file's grid and a wider one of 280 draws (2% at the worst point).
TOLERANCE = 0.025
#: Counters the fast path gives exactly.
EXACT = ("weight_words", "experts_run", "rows", "pad_rows", "array.busy")

GPT = {"experts": 16, "top_k": 4, "hidden": 64, "intermediate": 64, "array.rows": 4,
       "array.cols": 8, "weight_port_bits": 64}
DEEPSEEK = {**GPT, "router": "deepseek", "n_group": 4, "topk_group": 2, "shared": 1}
SHAPES = [{}, {"array.cols": 16}, {"array.cols": 4}, {"weight_port_bits": 128},
          {"hidden": 128, "intermediate": 32},
          {"array.rows": 8, "array.cols": 16, "weight_port_bits": 256},
          {"hidden": 96, "intermediate": 160, "array.cols": 32, "weight_port_bits": 512},
          {"fetch_buffer": 128}, {"x_lanes": 32}, {"x_lanes": 4, "hidden": 128},
          {"tile_queue": 2, "fetch_buffer": 128}, {"tile_queue": 1}]


def _draw(seed):
    rng = random.Random(seed)
    base = rng.choice((GPT, DEEPSEEK))
    tokens = rng.choice((1, 2, 8, 16))
    cfg = build_config(MoeConfig, {**base, **rng.choice(SHAPES), "tokens": tokens})
    experts = sorted(rng.sample(range(cfg.experts), rng.randint(1, 6)))
    groups = [(e, rng.randint(1, tokens)) for e in experts]
    return cfg, tokens, groups, rng.choice((1, 20, 40, 100)), rng.choice((1, 2, 4, 8, 64))


def _both(cfg, tokens, groups, latency, bpc):
    memory = MemoryAgent(latency, bpc, cfg.weight_port_bits)
    cycle = moe_timed.timing(cfg, [moe_timed.Batch(tokens, tuple(groups))], memory=memory)
    return {"cycles": cycle.cycles, **cycle.counters}, moe_timed.layer(cfg, tokens, groups,
                                                                        latency, bpc)


@pytest.mark.parametrize("seed", range(24))
def test_fast_path_agrees_with_the_cycle_model(seed):
    cfg, tokens, groups, latency, bpc = _draw(seed)
    cycle, fast = _both(cfg, tokens, groups, latency, bpc)
    assert {k: fast[k] for k in EXACT} == {k: cycle[k] for k in EXACT}
    assert set(fast) == set(cycle)
    if moe_timed.buffer_covers(cfg, latency, bpc):
        assert abs(fast["cycles"] / cycle["cycles"] - 1) <= TOLERANCE, (fast, cycle)
        assert abs(fast["array.stall_b"] - cycle["array.stall_b"]) <= TOLERANCE * cycle["cycles"]


@pytest.mark.parametrize(("base", "lanes"), [(GPT, 4), (DEEPSEEK, 32)])
def test_fast_path_agrees_with_the_cycle_model_with_x_lanes(base, lanes):
    """A beat of x a cycle: the front end's routing shorter by the same cycles in both."""
    cfg = build_config(MoeConfig, {**base, "hidden": 128, "tokens": 8, "x_lanes": lanes})
    one = build_config(MoeConfig, {**base, "hidden": 128, "tokens": 8})
    groups = [(1, 3), (6, 8), (11, 2)]
    cycle, fast = _both(cfg, 8, groups, 20, 8)
    assert {k: fast[k] for k in EXACT} == {k: cycle[k] for k in EXACT}
    assert abs(fast["cycles"] / cycle["cycles"] - 1) <= TOLERANCE
    cycle_one, fast_one = _both(one, 8, groups, 20, 8)
    saved = moe_timed.route_cycles(one, 8) - moe_timed.route_cycles(cfg, 8)
    assert saved == 8 * (128 - 128 // lanes)
    assert cycle_one["cycles"] - cycle["cycles"] == fast_one["cycles"] - fast["cycles"] == saved


def test_a_memory_slower_than_the_array_sets_the_pace_and_latency_without_buffer_is_flagged():
    """At one byte a cycle on a 64-bit port the layer takes about 8 cycles a weight word in
    both models. At 100 cycles of latency the default 32-word buffer does not cover the round
    trip (and is flagged); with 256 words and 128-row tiles it does, and the stream runs at
    the loader's pace again."""
    cfg = build_config(MoeConfig, {**GPT, "tokens": 2})
    cycle, fast = _both(cfg, 2, [(3, 1), (9, 2)], 1, 1)
    assert 7.5 < cycle["cycles"] / cycle["weight_words"] < 8.5
    assert abs(fast["cycles"] / cycle["cycles"] - 1) <= TOLERANCE
    wide = {**GPT, "hidden": 128, "intermediate": 128, "tokens": 2}
    small = build_config(MoeConfig, wide)
    big = build_config(MoeConfig, {**wide, "fetch_buffer": 256})
    assert not moe_timed.buffer_covers(small, 100, 8)
    assert moe_timed.buffer_covers(big, 100, 8)
    slow, _ = _both(small, 2, [(3, 1)], 100, 8)
    cycle, fast = _both(big, 2, [(3, 1)], 100, 8)
    assert cycle["cycles"] < 0.8 * slow["cycles"]
    assert abs(fast["cycles"] / cycle["cycles"] - 1) <= TOLERANCE


def test_fast_path_runs_a_full_size_layer():
    """GPT-OSS-120B's layer (H = I = 2880, 128 experts, top-4) on a 32 x 64 array with a
    1024-bit port and a buffer that covers 500 cycles at 128 bytes a cycle: every expert's
    words streamed once, and the loader's row a cycle (256 of the port's 1024 bits: the
    array's B operand) the bound, with a decode batch's single-row tiles."""
    cfg = build_config(MoeConfig, {"experts": 128, "top_k": 4, "hidden": 2880,
                                   "intermediate": 2880, "array.rows": 32, "array.cols": 64,
                                   "weight_port_bits": 1024, "tokens": 8, "fetch_buffer": 1024})
    assert moe_timed.buffer_covers(cfg, 500, 128)
    fast = moe_timed.layer(cfg, 8, [(e, 1) for e in range(0, 128, 4)], 500, 128)
    assert fast["weight_words"] == 32 * cfg.expert_words
    rows = 32 * (cfg.gate_up_tiles + cfg.down_tiles) * (2880 + 2880 // 32)
    assert 1.0 <= fast["cycles"] / rows < 1.05


def test_docs_state_what_the_router_script_measures(monkeypatch):
    """docs/moe.md's router table is ``scripts/moe_router.py``'s output today."""
    monkeypatch.syspath_prepend(str(SCRIPTS))  # the script imports its neighbours
    doc = (SCRIPTS.parent / "docs" / "moe.md").read_text()
    assert load("moe_router").table(1) in doc, "run python scripts/moe_router.py --out " \
        "docs/moe.md"


def test_a_tile_queue_hides_a_far_memory():
    """The issue's MoE (16 experts of 256 x 256, an 8 x 16 array, a 256-bit port, 512 words of
    fetch buffer) 500 cycles from its memory: descriptors handed over directly keep one tile
    in flight, too few words for the round trip (flagged, and the fast path's domain left);
    queued two deep the weights stream at the memory's rate, within 3% of the words' own
    cycles, in both models."""
    base = {"experts": 16, "top_k": 4, "hidden": 256, "intermediate": 256, "array.rows": 8,
            "array.cols": 16, "weight_port_bits": 256, "fetch_buffer": 512, "tokens": 1}
    direct = build_config(MoeConfig, base)
    queued = build_config(MoeConfig, {**base, "tile_queue": 2})
    groups = [(1, 1), (5, 1), (9, 1), (12, 1)]
    assert not moe_timed.buffer_covers(direct, 500, 8)
    assert moe_timed.buffer_covers(queued, 500, 8)
    slow, _ = _both(direct, 1, groups, 500, 8)
    cycle, fast = _both(queued, 1, groups, 500, 8)
    words_cycles = 4 * queued.expert_words * 256 / 8 / 8       # at 8 bytes a cycle
    assert cycle["cycles"] < 0.75 * slow["cycles"]
    assert cycle["cycles"] < 1.03 * (words_cycles + 500 + moe_timed.route_cycles(queued, 1))
    assert abs(fast["cycles"] / cycle["cycles"] - 1) <= TOLERANCE
