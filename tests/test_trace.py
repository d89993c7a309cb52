"""Line traces of the timed models (``scoville sim BLOCK --trace FROM:TO``): a traced model
predicts the same handshakes, records each unit's state for the window, and the trace marks
the cycles where the RTL's handshakes differ from the model's."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from scoville.rtl.attention import AttentionConfig
from scoville.rtl.kvcache import KvCacheConfig
from scoville.rtl.lib.params import build_config
from scoville.rtl.moe import MoeConfig
from scoville.sim.cycles import attention, kvcache, moe
from scoville.sim.cycles.stream import Schedule, Source, divergence
from scoville.sim.cycles.unit import Trace, line, recording, run
from scoville.sim.workload import AttentionWorkload
from scoville.testbenches.attention import workload_script
from scoville.testbenches.bench import trace_lines
from scoville.testbenches.kvcache import random_script

SMALL = {"kv.banks": 2, "kv.word_bits": 64, "kv.bank_words": 1024, "kv.page_tokens": 4,
         "kv.max_seqs": 2, "kv.kv_heads": 2, "kv.head_dim": 16, "array.rows": 2,
         "array.cols": 16, "q_heads": 4, "chunk": 32, "sinks": 1, "window": 20}


MOE = {"experts": 4, "top_k": 2, "hidden": 32, "intermediate": 32, "tokens": 2,
       "array.rows": 2, "array.cols": 8, "weight_port_bits": 64}


def _attention_case():
    cfg = build_config(AttentionConfig, SMALL)
    workload = AttentionWorkload(seqs=2, context=6, steps=2)
    sc = workload_script(cfg, workload, np.random.default_rng(5))
    sources = {name: Source(Schedule([5, k], 0.3)) for k, name in enumerate("cmd q k v".split())}
    ready = {"o": Schedule([6, 0], 0.3), "resp": Schedule([6, 1], 0.3)}
    return cfg, sc.results, sources, ready


def _attention(trace=None):
    with recording(trace):
        return attention.timing(*_attention_case())


def test_a_traced_model_predicts_the_same_and_records_every_cycle_of_its_window():
    plain = _attention()
    trace = Trace(40, 90)
    traced = _attention(trace)
    assert traced.handshakes == plain.handshakes and traced.counters == plain.counters
    assert trace.model == "attention"
    assert sorted(trace.states) == list(range(40, 91))
    units = trace.states[40]
    assert {"ctrl", "cache", "array", "score", "norm"} <= units.keys()
    assert {units["ctrl"]["state"] for units in trace.states.values()} > {"IDLE"}
    # The wires named are the model's internal ones, and some moved a beat in the window.
    moved = {name for names in trace.wires.values() for name in names}
    assert moved and moved <= {"cache.req", "cache.wd", "cache.rd", "cache.resp", "array.cmd",
                               "array.a", "array.b", "array.o", "pv", "ctrl.req", "reader.req"}


def test_only_the_first_run_in_a_recording_is_traced():
    trace = Trace(0, 10)
    with recording(trace):
        attention.timing(build_config(AttentionConfig, SMALL), [])  # a run of no cycles
    assert not trace.states
    trace = Trace(0, 10)
    with recording(trace):
        attention.timing(*_attention_case())
        first = dict(trace.states)
        moe.timing(build_config(MoeConfig, MOE), [moe.Batch(1, ((0, 1),))])
    assert sorted(first) == list(range(11)) and trace.states == first
    assert trace.model == "attention"


def test_a_moe_trace_shows_every_unit_and_its_wires_apart():
    trace = Trace(0, 400)
    with recording(trace):
        moe.timing(build_config(MoeConfig, MOE), [moe.Batch(2, ((1, 2), (3, 1)))])
    units = trace.states[0].keys()
    assert set(units) == {"seq", "split", "router", "dispatch", "xq", "xw", "requests",
                          "fetch", "mem", "tiles", "array", "xfeed", "hfeed", "glu", "pack",
                          "hq", "hw", "combine"}
    moved = {name for names in trace.wires.values() for name in names}
    assert moved and all(name.startswith("w.") for name in moved)
    assert {"w.router", "w.xq", "w.glu"} <= moved


def test_skipped_cycles_start_in_the_state_of_the_next_modelled_cycle():
    class Counter:
        def __init__(self):
            self.n = 0

    unit = Counter()

    def cycle(t):  # models cycle t, then skips two cycles where nothing changes
        unit.n += 1
        return t + 3

    trace = Trace(2, 8)
    with recording(trace):
        run("toy", cycle, lambda: unit.n == 4, 100, lambda: {"u": unit})
    # cycles 0, 3, 6, 9 modelled: n is 1 from cycle 1, 2 from 4, 3 from 7
    assert {t: trace.states[t]["u"]["n"] for t in range(2, 9)} == {
        2: "1", 3: "1", 4: "2", 5: "2", 6: "2", 7: "3", 8: "3"}


def test_kvcache_traced_steps_its_unit_models_and_predicts_the_same():
    cfg = build_config(KvCacheConfig, {"page_tokens": 4, "kv_heads": 2, "head_dim": 16})
    outcomes = random_script(cfg, np.random.default_rng(3), 60).outcomes
    plain = kvcache.timing(cfg, outcomes)
    trace = Trace(0, 30)
    with recording(trace):
        traced = kvcache.timing(cfg, outcomes)
    assert traced.handshakes == plain.handshakes and traced.counters == plain.counters
    assert list(trace.states[0]) == ["engine", "walk", "append", "reader"]
    assert {trace.states[t]["engine"].split()[0] for t in trace.states} > {"idle"}


def test_the_trace_marks_where_the_rtl_differs_and_shows_what_moves():
    trace = Trace(3, 5)
    trace.model = "toy"
    trace.states = {t: {"fixed": {"width": "8", "n": str(t)}, "ctl": {"state": "RUN"},
                        "own": "custom line"} for t in range(3, 6)}
    trace.wires = {4: ["w"]}
    model = {"cmd": [3, 5], "o": [4]}
    rtl = {"cmd": [3, 5], "o": [5]}
    lines = trace_lines(trace, rtl, model, "toy test:")
    assert len(lines) == 3 + 3
    assert lines[2].split() == ["cycle", "cmd", "o", "cmd", "o", "|", "units", "|", "wires"]
    body = lines[3:]
    assert ["*" in line.split("|")[0] for line in body] == [False, True, True]
    assert "width" not in "".join(body) and "n=4" in body[1]
    assert "ctl: state=RUN" in body[0] and "own: custom line" in body[0]
    assert body[1].rstrip().endswith("| w")


def test_a_run_that_did_not_end_shows_the_model_alone():
    trace = Trace(0, 1)
    trace.model = "toy"
    trace.states = {0: {"u": "a"}, 1: {"u": "b"}}
    lines = trace_lines(trace, None, {"cmd": [0], "o": [1]}, "toy:")
    assert "not known" in lines[0]
    assert [line.split("|")[0].split() for line in lines[3:]] == [["0", "cmd", "."],
                                                                   ["1", "...", "o"]]


@pytest.mark.parametrize("window", ["5", "9:3", "a:b", "-1:4"])
def test_a_bad_window_is_one_line_naming_trace(window):
    proc = subprocess.run([sys.executable, "-m", "scoville.cli", "sim", "gemm", "--sim",
                           "icarus", f"--trace={window}"], capture_output=True, text=True,
                          timeout=120, env=os.environ)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert "'trace'" in lines[-1] and "FROM:TO" in lines[-1]


@pytest.mark.sim
def test_sim_prints_the_trace_beside_the_rtl():
    proc = subprocess.run(
        [sys.executable, "-m", "scoville.cli", "sim", "gemm", "--sim", "icarus", "--seed", "4",
         "--param", "rows=2", "--param", "cols=2", "--param", "count=3", "--trace", "10:30",
         "--json"], capture_output=True, text=True, timeout=600, env=os.environ)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    lines = report["traces"]["test_workload"].splitlines()
    assert len(lines) == 3 + 21
    assert [line.split()[0] for line in lines[3:]] == [str(t) for t in range(10, 31)]
    # RTL and model agree in every cycle (the run passed), and the array's engine is shown.
    assert not any("*" in line.split("|")[0] for line in lines[3:])
    assert all("engine:" in line for line in lines[3:])


def test_a_unit_shows_its_line_trace_or_its_plain_attributes():
    class Plain:
        def __init__(self):
            self.line = object()  # a port named like a method: not called
            self._left, self.busy, self.queue, self.name = 3, True, [1, 2], "GATE"

    class Own:
        def line_trace(self):
            return "custom"

    assert line(Plain()) == {"left": "3", "busy": "1", "queue": "#2", "name": "GATE"}
    assert line(Own()) == "custom"


def test_the_divergence_is_the_earliest_cycle_where_rtl_and_model_part():
    model = {"cmd": [1, 4, 9], "o": [6, 7]}
    assert divergence(model, {"cmd": [1, 4, 9], "o": [6, 7]}) is None
    assert divergence(model, {"cmd": [1, 5, 9], "o": [6, 8]}) == (4, "cmd", 1, 4, 5)
    assert divergence(model, {"cmd": [1, 4, 9], "o": [6]}) == (7, "o", 1, 7, None)
    assert divergence(model, {"cmd": [1, 4, 9, 12], "o": [6, 7]}) == (12, "cmd", 3, None, 12)


def test_a_units_line_holds_its_base_classes_state():
    """A unit model built on another (the decoder's argmax on the stalling pipeline) shows the
    base's state beside its own."""
    from scoville.sim.cycles.decoder import Reducer
    from scoville.sim.cycles.unit import Wire, line

    unit = Reducer(4, 2, Wire(), Wire())
    assert set(line(unit)) >= {"stages", "held", "beats", "k"}
