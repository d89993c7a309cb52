"""Timed models: the stream producer's rule, composition, and each block's cycle-level model
against its closed-form fast path where both run (streams that keep up)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoville.rtl.gemm import GemmConfig
from scoville.rtl.kvcache import KvCacheConfig
from scoville.sim.cycles import gemm as gemm_timed
from scoville.sim.cycles import kvcache as kv_timed
from scoville.sim.cycles.stream import (
    Producer,
    Schedule,
    Source,
    Timing,
    first_difference,
    pipeline_timing,
)
from scoville.testbenches.freerun import _segments
from scoville.testbenches.kvcache import random_script


def _Bits(bits: str) -> Schedule:
    """A schedule from a string: '1' true, '0' false; true past its end."""
    return Schedule.pattern(bits)


@pytest.mark.parametrize(
    ("valid", "arrivals", "taken_when_offered", "want"),
    [
        # valid      arrivals    consumer takes   handshakes
        ("1111", None, [True] * 3, [0, 1, 2]),
        ("0101", None, [True] * 3, [1, 3, 4]),
        ("1111", [2, 2, 7], [True] * 3, [2, 3, 7]),
        ("1001", [0, 0, 0], [True] * 3, [0, 3, 4]),
    ],
)
def test_producer_offers_from_arrival_on_its_valid_cycles_and_holds_until_taken(
    valid, arrivals, taken_when_offered, want
):
    src = Producer(Source(_Bits(valid), arrivals), 3)
    t = 0
    while src.sent < 3:
        if src.offers(t):
            src.take(t)
        t += 1
    assert src.cycles == want


def test_producer_holds_an_offered_beat_through_cycles_its_valid_schedule_is_false():
    src = Producer(Source(_Bits("1000000")), 2)
    assert src.offers(0)
    assert src.offers(5)  # not taken yet: still offered though valid[5] is false
    src.take(5)
    assert not src.offers(6)
    assert src.offers(7)


def test_first_difference_names_the_earliest_differing_handshake():
    predicted = {"a": [0, 1, 5], "o": [3, 4, 9]}
    assert first_difference(predicted, {"a": [0, 1, 5], "o": [3, 4, 9]}) == ""
    msg = first_difference(predicted, {"a": [0, 1, 6], "o": [3, 5, 10]})
    assert msg == ("first differing handshake: stream o beat 1: predicted cycle 4, "
                   "observed cycle 5")
    assert "stream a beat 2: predicted cycle 5, observed none" in first_difference(
        predicted, {"a": [0, 1], "o": [3, 4, 9]})


def test_sources_arrive_in_order_and_a_reduction_ends_on_an_emitting_item():
    with pytest.raises(ValueError, match="'arrivals' must not decrease"):
        Source(arrivals=[0, 5, 3])
    with pytest.raises(ValueError, match="the last item must emit"):
        pipeline_timing(3, 1, emits=[True, True, False])


def _plain_pipeline(items, latency, source, ready, emits):
    """The stalling pipeline stepped in the plainest way, every cycle, every stage: the
    reference for :func:`pipeline_timing`'s ring of stages and its skipping of idle cycles."""
    src = Producer(source, items)
    outputs = items if emits is None else sum(emits)
    stages, out, t = [None] * latency, [], 0
    while len(out) < outputs:
        offering = src.offers(t)
        if not stages[-1] or ready[t]:
            if stages[-1]:
                out.append(t)
            entering = None
            if offering:
                entering = True if emits is None else bool(emits[src.sent])
                src.take(t)
            stages = [entering, *stages[:-1]]
        t += 1
    return {"i": src.cycles, "o": out}


@settings(max_examples=150, deadline=None)
@given(items=st.integers(1, 80), latency=st.integers(1, 6), seed=st.integers(0, 2**32 - 1),
       gap=st.sampled_from([0.0, 0.3, 0.9]), bp=st.sampled_from([0.0, 0.3, 0.9]),
       reduce=st.booleans(), late=st.booleans())
def test_pipeline_timing_is_the_plain_cycle_by_cycle_pipeline(items, latency, seed, gap, bp,
                                                              reduce, late):
    """Gaps, back-pressure, reductions (items that emit nothing) and late arrivals: the
    model's handshakes are those of the plain per-cycle stepping."""
    rng = np.random.default_rng(seed)
    emits = None
    if reduce:
        emits = (rng.random(items) < 0.4).tolist()
        emits[-1] = True
    arrivals = np.cumsum(rng.integers(0, 12, items)).tolist() if late else None
    source = Source(Schedule([seed, 1], gap), arrivals)
    ready = Schedule([seed, 2], bp)
    want = _plain_pipeline(items, latency, source, ready, emits)
    assert pipeline_timing(items, latency, source, ready, emits).handshakes == want


def test_ring_segments_split_at_the_wrap():
    assert _segments(0, 0, 8) == []
    assert _segments(3, 8, 8) == [(3, 3, 5)]
    assert _segments(6, 19, 8) == [(6, 6, 2), (8, 0, 8), (16, 0, 3)]
    assert _segments(15, 17, 8) == [(15, 7, 1), (16, 0, 1)]


def test_timing_cycles_run_to_the_last_handshake():
    assert Timing({"i": [0, 4], "o": [7]}).cycles == 8
    assert Timing({"i": [], "o": []}).cycles == 0


@settings(max_examples=40, deadline=None)
@given(items=st.integers(1, 60), l1=st.integers(1, 4), l2=st.integers(1, 4),
       seed=st.integers(0, 2**32 - 1), gap=st.floats(0, 0.9))
def test_pipelines_chain_through_their_handshakes(items, l1, l2, seed, gap):
    """Two pipelines connected directly, the second always ready, are one pipeline of both
    latencies: the first's output handshakes, fed as the second's arrivals, give the same
    output handshakes."""
    source = Source(Schedule([seed, 0], gap))
    first = pipeline_timing(items, l1, source)
    second = pipeline_timing(items, l2, Source.after(first.handshakes["o"], delay=0))
    assert second.handshakes["i"] == first.handshakes["o"]
    assert second.handshakes["o"] == pipeline_timing(items, l1 + l2, source).handshakes["o"]


_ARRAYS = [(1, 1), (1, 5), (4, 1), (4, 4), (4, 3), (2, 5), (8, 8)]


@settings(max_examples=60, deadline=None)
@given(
    array=st.sampled_from(_ARRAYS), dataflow=st.sampled_from(["os", "ws"]),
    acc_rows=st.integers(2, 9), unit_latency=st.sampled_from([None, 0, 2, 4, 11]),
    shapes=st.lists(st.tuples(st.integers(0, 19), st.integers(0, 19), st.integers(0, 19)),
                    min_size=1, max_size=4),
)
def test_gemm_timed_model_keeping_up_is_the_closed_form(array, dataflow, acc_rows, unit_latency,
                                                       shapes):
    # unit_latency None: int8; else mxfp4 with its block units cut so (os only).
    block = {} if unit_latency is None or dataflow == "ws" else {"fmt": "mxfp4",
                                                                 "unit_latency": unit_latency}
    cfg = GemmConfig(rows=array[0], cols=array[1], dataflow=dataflow, acc_rows=acc_rows,
                     **block)
    timed = gemm_timed.timing(cfg, shapes, dict.fromkeys(("cmd", "a", "b"), Source()))
    assert timed.cycles == gemm_timed.run_cycles(cfg, shapes)
    c = timed.counters
    assert c["stall_a"] == c["stall_b"] == c["stall_out"] == 0
    good = [s for s in shapes if min(s)]
    assert c["rejected"] == len(shapes) - len(good)
    assert sum(c[k] for k in ("busy", "idle", "stall_a", "stall_b", "stall_out")) == timed.cycles
    for s in good:
        steps = gemm_timed.command_steps(cfg, *s)
        assert len(steps) + 1 == gemm_timed.command_cycles(cfg, *s)
        assert steps[:, 2].sum() == s[0] * -(-s[2] // cfg.cols)  # M rows per column tile


@settings(max_examples=40, deadline=None)
@given(
    dataflow=st.sampled_from(["os", "ws"]), depth=st.integers(2, 6),
    seed=st.integers(0, 2**32 - 1), gap=st.floats(0, 0.9), bp=st.floats(0, 0.9),
    shapes=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 12), st.integers(1, 12)),
                    min_size=1, max_size=3),
)
def test_gemm_timed_model_under_gaps_counts_every_cycle_once(dataflow, depth, seed, gap, bp,
                                                             shapes):
    cfg = GemmConfig(rows=3, cols=4, dataflow=dataflow, acc_rows=5, buffer_depth=depth)
    sources = {name: Source(Schedule([seed, k], gap)) for k, name in enumerate(("cmd", "a", "b"))}
    timed = gemm_timed.timing(cfg, shapes, sources, Schedule([seed, 9], bp))
    c = timed.counters
    assert sum(c[k] for k in ("busy", "idle", "stall_a", "stall_b", "stall_out")) == timed.cycles
    assert c["busy"] == sum(gemm_timed.command_cycles(cfg, *s) for s in shapes)
    assert timed.cycles >= gemm_timed.run_cycles(cfg, shapes)
    a, b = timed.handshakes["a"], timed.handshakes["b"]
    steps = [gemm_timed.command_steps(cfg, *s) for s in shapes]
    assert len(a) == sum(int(p[:, 0].sum()) for p in steps)
    assert len(b) == sum(int(p[:, 1].sum()) for p in steps)


@pytest.mark.parametrize("depth", [2, 3, 7])
def test_gemm_operand_buffer_depth_bounds_how_far_a_producer_runs_ahead(depth):
    """``o`` not ready for 300 cycles: the engine runs until its second row of C must wait
    (os, 2x2, two row tiles of K = 40: 43 steps, each taking an A beat), then holds; the A
    producer fills the buffer with exactly ``buffer_depth`` more beats and waits."""
    cfg = GemmConfig(rows=2, cols=2, buffer_depth=depth)
    late = _Bits("0" * 300)
    timed = gemm_timed.timing(cfg, [(4, 40, 2)], dict.fromkeys(("cmd", "a", "b"), Source()),
                              late)
    a = timed.handshakes["a"]
    assert sum(c < 300 for c in a) == 43 + depth
    # The first row is in the output register from cycle 44 (the accept in cycle 0, steps
    # from cycle 1); the engine holds from then until ``ready`` rises in cycle 300.
    assert timed.handshakes["o"][:2] == [300, 301]
    assert timed.counters["stall_out"] == 300 - 44


_KV_CONFIGS = [
    {},
    {"banks": 8, "page_tokens": 16},
    {"kv_fmt": "fp8_e4m3", "banks": 2, "word_bits": 64, "page_tokens": 2, "max_seqs": 3,
     "bank_words": 256},
    {"max_seqs": 2, "kv_heads": 1, "page_tokens": 2, "bank_words": 64},
]


@pytest.mark.parametrize("params", _KV_CONFIGS)
@pytest.mark.parametrize("seed", [1, 2])
def test_kvcache_timed_model_keeping_up_is_the_time_line(params, seed):
    cfg = KvCacheConfig(**params)
    sc = random_script(cfg, np.random.default_rng(seed), 400)
    timed = kv_timed.timing(cfg, sc.outcomes)
    assert timed.cycles == kv_timed.run_cycles(cfg, sc.outcomes)
    c = timed.counters
    assert c["stalls"] == c["idle"] == c["read_stalls"] == 0
    assert c["busy"] == sum(kv_timed.request_cycles(cfg, o) for o in sc.outcomes)
    assert c["read_cycles"] == sum(kv_timed.engine_cycles(o) for o in sc.outcomes)


@pytest.mark.parametrize("gap", [0.3, 0.9])
def test_kvcache_timed_model_under_gaps_keeps_the_request_costs(gap):
    cfg = KvCacheConfig(page_tokens=2, max_seqs=3)
    sc = random_script(cfg, np.random.default_rng(5), 300)
    timed = kv_timed.timing(
        cfg, sc.outcomes,
        {"req": Source(Schedule([5, 0], gap)), "wd": Source(Schedule([5, 1], gap))},
        {"rd": Schedule([5, 2], gap), "resp": Schedule([5, 3], gap)})
    c = timed.counters
    assert c["busy"] == sum(kv_timed.request_cycles(cfg, o) for o in sc.outcomes)
    assert c["read_cycles"] - c["read_stalls"] == sum(
        kv_timed.engine_cycles(o) for o in sc.outcomes)
    # The request engine is in exactly one state each cycle.
    assert c["busy"] + c["stalls"] + c["idle"] + c["read_waits"] == timed.cycles
    assert c["stalls"] > 0 and c["read_stalls"] > 0
    assert len(timed.handshakes["resp"]) == len(sc.outcomes)
    assert len(timed.handshakes["rd"]) == c["reads"] == sum(len(o.data) for o in sc.outcomes)
