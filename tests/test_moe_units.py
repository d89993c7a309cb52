"""MoE's units alone: each RTL unit in Amaranth's simulator against its unit model
(``scoville.sim.cycles.moe_*``), handshake for handshake, on random schedules (gaps on the
inputs, back-pressure on the outputs, light and heavy), each case seeded from its name."""

import functools
import zlib

import numpy as np
import pytest

from scoville.rtl.lib.params import build_config
from scoville.rtl.moe import MoeConfig
from scoville.rtl.moe_acts import ActStore as ActStoreRtl
from scoville.rtl.moe_acts import LinePacker as LinePackerRtl
from scoville.rtl.moe_acts import StoreWriter as StoreWriterRtl
from scoville.rtl.moe_combine import Combine as CombineRtl
from scoville.rtl.moe_dispatch import Dispatch as DispatchRtl
from scoville.rtl.moe_input import XSplit as XSplitRtl
from scoville.rtl.moe_requests import WeightRequests as WeightRequestsRtl
from scoville.rtl.moe_router import Router as RouterRtl
from scoville.rtl.moe_sequencer import Sequencer as SequencerRtl
from scoville.rtl.moe_weights import WeightTiles as WeightTilesRtl
from scoville.sim.cycles.moe import Batch, dispatch_latency, route_latency
from scoville.sim.cycles.moe_acts import LinePacker, StoreFeeder, StoreWriter
from scoville.sim.cycles.moe_combine import Combine
from scoville.sim.cycles.moe_input import XSplit
from scoville.sim.cycles.moe_requests import WeightRequests
from scoville.sim.cycles.moe_router import Dispatch, Router
from scoville.sim.cycles.moe_sequencer import Sequencer
from scoville.sim.cycles.moe_weights import WeightTiles
from scoville.sim.cycles.stream import Consumer, Producer, Schedule, Source
from scoville.sim.cycles.unit import Wire, run

from .amsim import handshakes, step_alone

#: Small configurations: GPT-OSS in FP32 x (64 elements a token, two lines), DeepSeek in
#: BF16 x with 16 columns (8 lanes of SwiGLU: four tiles fill a line).
CONFIGS = {
    "gpt-oss-fp32": {"experts": 4, "top_k": 2, "hidden": 64, "intermediate": 32, "tokens": 3,
                     "array.rows": 2, "array.cols": 8, "weight_port_bits": 64},
    "deepseek-bf16": {"router": "deepseek", "experts": 4, "top_k": 2, "hidden": 32,
                      "intermediate": 64, "tokens": 4, "array.rows": 2, "array.cols": 16,
                      "weight_port_bits": 64, "x_fmt": "bf16", "act_fmt": "mxfp4"},
    # x in beats of 8 (BF16): four beats a line, the router a beat a cycle.
    "gpt-oss-lanes-8": {"experts": 4, "top_k": 2, "hidden": 64, "intermediate": 32,
                        "tokens": 3, "array.rows": 2, "array.cols": 8, "weight_port_bits": 64,
                        "x_fmt": "bf16", "x_lanes": 8},
}
GAPS = [0.0, 0.3, 0.8]


def _seed(*case) -> int:
    """A case's seed, the same in every run (``hash`` of a string is not)."""
    return zlib.crc32(repr(case).encode())


def _config(name):
    return build_config(MoeConfig, CONFIGS[name])


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("name", CONFIGS)
def test_x_split_unit_model_is_its_rtl(name, gap):
    """Two batches of random sizes, each started once the last one's elements are in: x under
    gaps, the router and the quantizer's lines under back-pressure."""
    cfg = _config(name)
    seed = _seed("split", name, gap)
    rng = np.random.default_rng(seed)
    batches = [int(rng.integers(1, cfg.tokens + 1)) for _ in range(2)]
    n = sum(batches) * cfg.hidden // cfg.x_lanes  # beats
    xs = [int(v) for v in rng.integers(0, 2**16, n)]
    valid, r_ready, l_ready = (Schedule([seed, k], gap) for k in (1, 2, 3))
    dut = XSplitRtl(cfg)
    starts = []

    async def control(ctx, t):
        done = sum(batches[:len(starts)]) * cfg.hidden // cfg.x_lanes
        go = len(starts) < len(batches) and control.taken >= done and (
            not starts or t >= starts[-1] + 3)
        ctx.set(dut.start, go)
        if go:
            ctx.set(dut.tokens, batches[len(starts)])
            starts.append(t)
        control.taken += ctx.get(dut.x.valid) and ctx.get(dut.x.ready)

    control.taken = 0
    got = handshakes(dut, {"x": (xs, valid)},
                     {"router": (n, r_ready), "line": (n * cfg.x_lanes // 32, l_ready)},
                     each_cycle=control)
    x, router, line = Producer(Source(valid), n), Consumer(r_ready), Consumer(l_ready)
    unit = XSplit(cfg.hidden, x, router, line, cfg.x_lanes)
    plan = dict(zip(starts, batches, strict=True))

    def cycle(t):
        unit.start = plan.get(t)
        unit.step(t)
        return t + 1

    run("x_split", cycle, lambda: x.sent == n, 100_000)
    assert {"x": x.cycles, "router": router.cycles, "line": line.cycles} == got


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("name", CONFIGS)
def test_line_packer_unit_model_is_its_rtl(name, gap):
    """Two experts of random sizes, each the SwiGLU's rows of every gate-up tile: the rows
    under gaps, the quantizer under back-pressure."""
    cfg = _config(name)
    seed = _seed("pack", name, gap)
    rng = np.random.default_rng(seed)
    lanes, tiles = cfg.array.cols // 2, cfg.gate_up_tiles
    experts = [int(rng.integers(1, cfg.tokens + 1)) for _ in range(2)]
    beats = sum(experts) * tiles
    lines = beats * lanes // 32
    rows = [[int(v) for v in rng.integers(0, 2**32, lanes)] for _ in range(beats)]
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    dut = LinePackerRtl(cfg.tokens, lanes, tiles)
    starts = []

    # The second expert's rows come long after the first's (as an expert's rows come only
    # after its tiles start): its start never meets a row.
    first = experts[0] * tiles
    arrivals = [1] * first + [5_000] * (beats - first)

    async def control(ctx, t):
        done = sum(experts[:len(starts)]) * tiles
        go = len(starts) < len(experts) and control.taken >= done
        ctx.set(dut.clear, go)
        if go:
            starts.append(t)
        if starts:
            ctx.set(dut.n, experts[len(starts) - 1])
        control.taken += ctx.get(dut.i.valid) and ctx.get(dut.i.ready)

    control.taken = 0
    got = handshakes(dut, {"i": (rows, Source(valid, arrivals))}, {"o": (lines, ready)},
                     each_cycle=control)
    i, o = Producer(Source(valid, arrivals), beats), Consumer(ready)
    unit = LinePacker(lanes, tiles, i, o)
    plan = dict(zip(starts, experts, strict=True))

    def cycle(t):
        if t in plan:
            unit.clear()
            unit.n = plan[t]
        unit.step(t)
        return t + 1

    run("line_packer", cycle, lambda: i.sent == beats, 100_000)
    assert {"i": i.cycles, "o": o.cycles} == got


@pytest.mark.parametrize("gap", GAPS)
def test_store_writer_unit_model_is_its_rtl(gap):
    """A quantizer's blocks under gaps into a store under back-pressure, the count cleared in
    a random cycle."""
    cfg = _config("gpt-oss-fp32")
    seed = _seed("writer", gap)
    rng = np.random.default_rng(seed)
    blocks = cfg.tokens * cfg.hidden // 32
    dut = StoreWriterRtl(cfg.tokens, cfg.hidden, cfg.act_fmt, by_lane=True)
    payloads = [{"codes": [int(c) for c in rng.integers(0, 16, 32)],
                 "scale": int(rng.integers(0, 256))} for _ in range(blocks)]
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    clear_at = int(rng.integers(0, 3 * blocks))
    counts = []

    async def control(ctx, t):
        ctx.set(dut.clear, t == clear_at)
        counts.append(ctx.get(dut.count))

    got = handshakes(dut, {"i": (payloads, valid)}, {"w": (blocks, ready)}, each_cycle=control)
    i, w = Producer(Source(valid), blocks), Consumer(ready)
    unit = StoreWriter(i, w)
    seen = []

    def cycle(t):
        seen.append(unit.count)
        if t == clear_at:
            unit.clear()
        unit.step(t)
        return t + 1

    run("store_writer", cycle, lambda: len(seen) == len(counts), 100_000)
    assert {"i": i.cycles, "w": w.cycles} == got
    assert seen == counts


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("name", CONFIGS)
def test_weight_requests_unit_model_is_its_rtl(name, gap):
    """Two batches, each armed, then sorting from a random cycle on with a random set of
    experts chosen (and the shared one with DeepSeek's): the fetch commands and the loader's
    descriptors, their cycles and fields, under back-pressure on each."""
    cfg = build_config(MoeConfig, {**CONFIGS[name], "shared": int(name.startswith("deep"))})
    seed = _seed("requests", name, gap)
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(2):
        chosen = sorted(int(e) for e in rng.choice(cfg.experts, int(rng.integers(1, 4)),
                                                   replace=False))
        batches.append(chosen + ([cfg.experts] if cfg.shared else []))
    tiles = cfg.gate_up_tiles + cfg.down_tiles
    beats = sum(len(b) for b in batches) * tiles
    f_ready, t_ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    dut = WeightRequestsRtl(cfg)
    plan, seen = [], []  # (arm cycle, sorting from) per batch; the RTL's payloads

    async def control(ctx, t):
        done = sum(len(b) for b in batches[:len(plan)]) * tiles
        if len(plan) < len(batches) and control.beats >= done:
            plan.append((t, t + 1 + int(rng.integers(0, 6))))
        at = plan[-1] if plan else (None, None)
        ctx.set(dut.arm, at[0] == t)
        ctx.set(dut.sorting, at[1] is not None and t >= at[1])
        chosen = batches[len(plan) - 1][:cfg.experts] if plan else []
        ctx.set(dut.experts, sum(1 << e for e in chosen if e < cfg.experts))
        if ctx.get(dut.fetch.valid) and ctx.get(dut.fetch.ready):
            p = ctx.get(dut.fetch.payload)
            seen.append(("f", p.addr, p.len))
        if ctx.get(dut.tile.valid) and ctx.get(dut.tile.ready):
            seen.append(("t", ctx.get(dut.tile.payload).k))
            control.beats += 1

    control.beats = 0
    got = handshakes(dut, {}, {"fetch": (beats, f_ready), "tile": (beats, t_ready)},
                     each_cycle=control)
    fetch, tile = Consumer(f_ready), Consumer(t_ready)
    unit = WeightRequests(cfg, fetch, tile)
    arms = {a: (s, b) for (a, s), b in zip(plan, batches, strict=True)}
    sorting_from = None
    want = []

    def cycle(t):
        nonlocal sorting_from
        if t in arms:
            sorting_from, experts = arms[t]
            unit.arm(experts)
        unit.sorting = sorting_from is not None and t >= sorting_from
        if unit.fetch_valid and fetch.accepts(t):
            want.append(("f", *unit.fetch_payload))
        if unit.tile_valid and tile.accepts(t):
            want.append(("t", unit.tile_payload[0]))
        unit.step(t)
        return t + 1

    run("weight_requests", cycle, lambda: len(tile.cycles) == beats
        and len(fetch.cycles) == beats, 100_000)
    assert {"fetch": fetch.cycles, "tile": tile.cycles} == got
    assert want == seen


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("name", CONFIGS)
def test_combine_unit_model_is_its_rtl(name, gap):
    """A batch of random size: an expert's down rows under gaps, then the output (``first``,
    then ``out`` until its last word) under back-pressure: every handshake, ``busy`` in every
    cycle and the cycle of ``o_last``."""
    cfg = _config(name)
    seed = _seed("combine", name, gap)
    rng = np.random.default_rng(seed)
    tokens = int(rng.integers(1, cfg.tokens + 1))
    DT, C = cfg.down_tiles, cfg.array.cols
    n_rows, words = tokens * DT, tokens * DT
    rows = [[int(v) for v in rng.integers(0, 2**32, C)] for _ in range(n_rows)]
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    dut = CombineRtl(cfg)
    seen = {"busy": [], "last": [], "out_from": None}

    async def control(ctx, t):
        ctx.set(dut.clear, t == 0)
        ctx.set(dut.restart, t == 0)
        ctx.set(dut.tokens, tokens)
        ctx.set(dut.n, tokens)
        for i in range(cfg.tokens):
            ctx.set(dut.tok[i], min(i, tokens - 1))
            ctx.set(dut.w[i], 0x3F80_0000)
        busy = ctx.get(dut.busy)
        seen["busy"].append(busy)
        first = seen["out_from"] is None and control.rows == n_rows and not busy
        if first:
            seen["out_from"] = t + 1
        out = seen["out_from"] is not None and t >= seen["out_from"] and not control.ended
        ctx.set(dut.first, first)
        ctx.set(dut.out, out)
        if ctx.get(dut.o_last):
            seen["last"].append(t)
            control.ended = True
        control.rows += ctx.get(dut.rows.valid) and ctx.get(dut.rows.ready)

    control.rows, control.ended = 0, False
    got = handshakes(dut, {"rows": (rows, Source(valid, [1] * n_rows))},
                     {"o": (words, ready)}, each_cycle=control)
    i, o = Producer(Source(valid, [1] * n_rows), n_rows), Consumer(ready)
    unit = Combine(DT, i, o)
    unit.tokens = tokens
    busy, last = [], []
    out_from, ended = None, False

    def cycle(t):
        nonlocal out_from, ended
        busy.append(unit.busy)
        unit.first = out_from is None and i.sent == n_rows and not unit.busy
        if unit.first:
            out_from = t + 1
        unit.out = out_from is not None and t >= out_from and not ended
        if unit.o_last(t):
            last.append(t)
            ended = True
        unit.step(t)
        return t + 1

    run("combine", cycle, lambda: len(busy) == len(seen["busy"]), 100_000)
    assert {"rows": i.cycles, "o": o.cycles} == got
    assert (busy, last) == (seen["busy"], seen["last"])


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("name", CONFIGS)
def test_router_unit_model_is_its_rtl(name, gap):
    """Three tokens' elements under gaps, the answers under back-pressure (the weights left
    at their reset values: the timing does not depend on them)."""
    cfg = _config(name)
    seed = _seed("router", name, gap)
    rng = np.random.default_rng(seed)
    tokens = 3
    xs = [int(v) for v in rng.integers(0, 2**32, tokens * cfg.hidden // cfg.x_lanes)]
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    got = handshakes(RouterRtl(cfg), {"x": (xs, valid)}, {"o": (tokens, ready)})
    x, o = Producer(Source(valid), len(xs)), Consumer(ready)
    unit = Router(cfg.hidden // cfg.x_lanes, route_latency(cfg), x, o)

    step_alone("router", unit, lambda: len(o.cycles) == tokens)
    assert {"x": x.cycles, "o": o.cycles} == got


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("name", CONFIGS)
def test_dispatch_unit_model_is_its_rtl(name, gap):
    """Two batches of random choices under gaps, the sorted entries under back-pressure:
    every handshake and every entry's expert, count and group ends."""
    cfg = _config(name)
    seed = _seed("dispatch", name, gap)
    rng = np.random.default_rng(seed)
    K, beats, model_beats, entries = cfg.top_k, [], [], 0
    for _ in range(2):
        tokens = int(rng.integers(1, cfg.tokens + 1))
        choices = [sorted(int(e) for e in rng.choice(cfg.experts, K, replace=False))
                   for _ in range(tokens)]
        counts = {}
        for row in choices:
            for e in row:
                counts[e] = counts.get(e, 0) + 1
        groups = tuple(sorted(counts.items()))
        for i, row in enumerate(choices):
            beats.append({"index": row, "weight": [0] * K, "last": i == tokens - 1})
            model_beats.append(groups if i == tokens - 1 else None)
        entries += tokens * K
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    dut = DispatchRtl(cfg)
    seen = []

    async def watch(ctx, t):
        if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
            p = ctx.get(dut.o.payload)
            seen.append((p.expert, p.count, p.last, p.end))

    got = handshakes(dut, {"c": (beats, valid)}, {"o": (entries, ready)}, each_cycle=watch)
    c, o = Producer(Source(valid), len(beats), model_beats), Consumer(ready)
    unit = Dispatch(functools.partial(dispatch_latency, cfg), c, o)
    want = []

    def cycle(t):
        if unit.o_valid(t) and o.accepts(t):
            want.append(unit.o_payload)
        unit.step(t)
        return t + 1

    run("dispatch", cycle, lambda: len(o.cycles) == entries, 100_000)
    assert {"c": c.cycles, "o": o.cycles} == got
    assert want == seen


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("name", CONFIGS)
def test_store_feeder_unit_model_is_its_rtl(name, gap):
    """Commands of 1 to ``tokens`` rows under gaps, the A beats under back-pressure."""
    cfg = _config(name)
    seed = _seed("feeder", name, gap)
    rng = np.random.default_rng(seed)
    ns = [int(rng.integers(1, cfg.tokens + 1)) for _ in range(3)]
    R, D = cfg.array.rows, cfg.hidden
    beats = sum(-(-n // R) * D for n in ns)
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    dut = ActStoreRtl(cfg.tokens, D, cfg.act_fmt, cfg.array)
    got = handshakes(dut, {"cmd": (ns, valid)}, {"a": (beats, ready)})
    cmd, a = Producer(Source(valid), len(ns), ns), Consumer(ready)
    unit = StoreFeeder(D, R, cmd, a)

    step_alone("store_feeder", unit, lambda: len(a.cycles) == beats)
    assert {"cmd": cmd.cycles, "a": a.cycles} == got


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("name", CONFIGS)
def test_weight_tiles_unit_model_is_its_rtl(name, gap):
    """Four column tiles (gate-up and down sizes at random), their words under gaps, a feed
    command of 1 to 3 row tiles each, the B beats under back-pressure."""
    cfg = _config(name)
    seed = _seed("tiles", name, gap)
    rng = np.random.default_rng(seed)
    ks = [int(rng.choice((cfg.hidden, cfg.intermediate))) for _ in range(4)]
    m_tiles = [int(rng.integers(1, 4)) for _ in ks]
    P = cfg.weight_port_bits
    n_words = sum(-(-cfg.tile_bits(k) // P) for k in ks)
    words = [int(v) for v in rng.integers(0, 2**62, n_words)]
    beats = sum(k * m for k, m in zip(ks, m_tiles, strict=True))
    valid = {s: Schedule([seed, i], gap) for i, s in enumerate(("tile", "words", "cmd"))}
    ready = Schedule([seed, 9], gap)
    got = handshakes(WeightTilesRtl(cfg.tile_format), {
        "tile": ([{"k": k, "bias": int(cfg.biases)} for k in ks], valid["tile"]),
        "words": (words, valid["words"]),
        "cmd": ([{"m_tiles": m} for m in m_tiles], valid["cmd"])}, {"b": (beats, ready)})
    tile = Producer(Source(valid["tile"]), len(ks), [(k, cfg.biases) for k in ks])
    wd = Producer(Source(valid["words"]), n_words)
    cmd, b = Producer(Source(valid["cmd"]), len(m_tiles), m_tiles), Consumer(ready)
    unit = WeightTiles(cfg.tile_format, tile, wd, cmd, b)

    step_alone("weight_tiles", unit, lambda: len(b.cycles) == beats)
    assert {"tile": tile.cycles, "words": wd.cycles, "cmd": cmd.cycles, "b": b.cycles} == got



class _SequencerEnv:
    """The sequencer's neighbours, one rule for the RTL run and the model's, driven by what
    the sequencer shows (its batch and expert starts, the tile commands taken, ``gu``, the
    output asked): the dispatch sorts a while after a batch starts and offers the batch's
    entries until the last is taken; x is stored a while after the start; a tile's rows come,
    one in each cycle a schedule allows, from the cycle after its three commands are taken;
    the expert's activations are stored a while after its gate-up phase's last row; the
    combine is busy the cycle after each down row; the output's words are taken by a
    schedule."""

    def __init__(self, cfg, batches, seed):
        self.cfg, self.batches = cfg, [b for b in batches if b.groups is not None]
        self._rng = np.random.default_rng(seed)
        self._rows_ok, self._o_ready = Schedule([seed, 7], 0.3), Schedule([seed, 8], 0.3)
        self.at = -1                 # the batch running (index into the good ones)
        self.sort_at = self.x_at = self.h_at = None
        self.entries: list = []
        self.taken = [0, 0, 0]       # this tile's commands taken: array, feed, store
        self.tiles = self.rows_owed = self.n = self.words = 0
        self.busy = False

    def _delay(self) -> int:
        return int(self._rng.integers(1, 6))

    def inputs(self, t, out: bool) -> dict:
        cfg = self.cfg
        batch = self.batches[self.at] if self.at >= 0 else None
        sorting = self.sort_at is not None and t >= self.sort_at and bool(self.entries)
        total = batch.tokens * cfg.down_tiles if batch else 0
        return {
            "sorting": sorting, "entry_valid": sorting,
            "entry": self.entries[0] if self.entries else (0, 1, False, False),
            "x_blocks": batch.tokens * (cfg.hidden // 32)
            if self.x_at is not None and t >= self.x_at else 0,
            "h_blocks": self.n * (cfg.intermediate // 32)
            if self.h_at is not None and t >= self.h_at else 0,
            "row": self.rows_owed > 0 and self._rows_ok[t],
            "busy": self.busy,
            "o_take": out and self._o_ready[t],
            "o_last": out and self._o_ready[t] and self.words == total - 1,
        }

    def after(self, t, s, *, gu, start, expert, entry_taken, taken, first):
        """Cycle ``t``'s events: ``s`` its inputs; ``expert`` the tokens of an expert that
        starts (None: none); ``taken`` the tile commands taken."""
        self.busy = s["row"] and not gu
        if s["row"]:
            self.rows_owed -= 1
            if self.rows_owed == 0 and gu and self.tiles == self.cfg.gate_up_tiles:
                self.h_at = t + self._delay()
        if start:
            self.at += 1
            groups = self.batches[self.at].groups
            self.sort_at, self.x_at = t + self._delay(), t + self._delay()
            self.entries = [(e, cnt, j == cnt - 1, g == len(groups) - 1 and j == cnt - 1)
                            for g, (e, cnt) in enumerate(groups) for j in range(cnt)]
        if entry_taken:
            self.entries.pop(0)
        if expert is not None:
            self.n, self.tiles, self.h_at = expert, 0, None
        self.taken = [k + got for k, got in zip(self.taken, taken, strict=True)]
        if min(self.taken) == 1:
            self.taken, self.tiles, self.rows_owed = [0, 0, 0], self.tiles + 1, self.n
        self.words = 0 if first else self.words + s["o_take"]


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("name", CONFIGS)
def test_sequencer_unit_model_is_its_rtl(name, gap):
    """Three batches (one refused, one whose weights are bad) against neighbours that answer
    after random delays, the commands under back-pressure: every cmd handshake, every tile
    command's, and the cycle of every batch start, expert start and output word."""
    cfg = build_config(MoeConfig, {**CONFIGS[name], "shared": int(name.startswith("deep"))})
    seed = _seed("sequencer", name, gap)
    rng = np.random.default_rng(seed)
    batches = []
    for fault in (False, None, True, False):
        if fault is None:
            batches.append(Batch(cfg.tokens + 1, None))
            continue
        tokens = int(rng.integers(1, cfg.tokens + 1))
        experts = sorted(int(e) for e in rng.choice(cfg.experts, int(rng.integers(1, 4)),
                                                    replace=False))
        batches.append(Batch(tokens, tuple((e, int(rng.integers(1, tokens + 1)))
                                           for e in experts), fault))
    valid = Schedule([seed, 1], gap)
    readies = [Schedule([seed, 2 + k], gap) for k in range(4)]
    ports = ("array_cmd", "feed", "x_cmd", "h_cmd")
    dut = SequencerRtl(cfg)
    env, events = _SequencerEnv(cfg, batches, seed), []

    async def control(ctx, t):
        s = env.inputs(t, ctx.get(dut.out))
        for port, value in (("sorting", s["sorting"]), ("x_blocks", s["x_blocks"]),
                            ("h_blocks", s["h_blocks"]), ("row", s["row"]),
                            ("busy", s["busy"]), ("o_last", s["o_last"]), ("n", env.n),
                            ("weights_bad", env.at >= 0 and env.batches[env.at].fault)):
            ctx.set(getattr(dut, port), value)
        ctx.set(dut.entry.valid, s["entry_valid"])
        e, cnt, last, end = s["entry"]
        ctx.set(dut.entry.payload, {"expert": e, "count": cnt, "last": last, "end": end})
        control.end = t
        taken = [ctx.get(getattr(dut, p).valid) and readies[k][t] for k, p in enumerate(ports)]
        taken = [taken[0], taken[1], taken[2] or taken[3]]
        start, expert = ctx.get(dut.start), None
        if ctx.get(dut.expert_start):
            expert = ctx.get(dut.run_n)
        entry_taken = s["entry_valid"] and ctx.get(dut.entry.ready)
        for what, happened in (("batch", start), ("expert", expert is not None),
                               ("word", s["o_take"])):
            if happened:
                events.append((t, what))
        env.after(t, s, gu=ctx.get(dut.gu), start=start, expert=expert,
                  entry_taken=entry_taken, taken=taken, first=ctx.get(dut.first))

    experts = sum(len(b.groups) + cfg.shared for b in batches if b.groups is not None)
    tiles = experts * (cfg.gate_up_tiles + cfg.down_tiles)
    beats = (tiles, tiles, experts * cfg.gate_up_tiles, experts * cfg.down_tiles)
    # After the last tile command the run goes on for the last expert's rows and the output.
    got = handshakes(dut, {"cmd": ([{"tokens": b.tokens} for b in batches], valid)},
                     {p: (n, r) for p, n, r in zip(ports, beats, readies, strict=True)},
                     each_cycle=control, extra=3_000)
    end = control.end
    rtl_events = events
    cmd = Producer(Source(valid), len(batches), batches)
    wires = [Wire() for _ in ports]
    entry = Wire()
    unit = Sequencer(cfg, cmd, entry, *wires)
    env, events = _SequencerEnv(cfg, batches, seed), []

    clock = [0]  # the next cycle to model

    def cycle(t):
        clock[0] = t + 1
        s = env.inputs(t, unit.out)
        unit.sorting, unit.x_blocks, unit.h_blocks = s["sorting"], s["x_blocks"], s["h_blocks"]
        unit.row, unit.busy, unit.o_last, unit.n = s["row"], s["busy"], s["o_last"], env.n
        entry.set(s["entry_valid"], unit.entry_ready, s["entry"])
        for w, valid_now, ready in zip(wires, unit.tile_valid(), readies, strict=True):
            w.set(valid_now, ready[t])
        gu, first = unit.gu, unit.first
        event = unit.step(t)
        taken = [w.taken for w in wires]
        taken = [taken[0], taken[1], taken[2] or taken[3]]
        expert = None
        if event == "expert":
            expert = s["entry"][1]
        elif event == "shared":
            expert = unit.batch.tokens
        for what, happened in (("batch", event == "batch"), ("expert", expert is not None),
                               ("word", s["o_take"])):
            if happened:
                events.append((t, what))
        env.after(t, s, gu=gu, start=event == "batch", expert=expert,
                  entry_taken=entry.taken, taken=taken, first=first)
        return t + 1

    run("sequencer", cycle, lambda: len(events) > 0 and clock[0] > end, end + 2)
    assert {"cmd": cmd.cycles, **{p: w.cycles for p, w in zip(ports, wires, strict=True)}} \
        == got
    assert events == rtl_events and unit.state == "IDLE"
    words = sum(b.tokens * cfg.down_tiles for b in batches if b.groups and not b.fault)
    assert sum(what == "word" for _, what in events) == words


@pytest.mark.parametrize("depth", [1, 2, 5])
@pytest.mark.parametrize("gap", GAPS)
def test_queue_unit_model_is_its_rtl(depth, gap):
    """The column tiles' descriptor queue (``tile_queue``, :class:`scoville.rtl.lib.queue
    .Queue`) against :class:`scoville.sim.cycles.stream.Queue`: gaps in, back-pressure out,
    the queue filling and draining (a write refused while full, a read and a write in one
    cycle), handshake for handshake and beat for beat."""
    from scoville.rtl.lib.queue import Queue as QueueRtl
    from scoville.sim.cycles.stream import Queue

    seed = _seed("queue", depth, gap)
    rng = np.random.default_rng(seed)
    beats = [int(v) for v in rng.integers(0, 256, 80)]
    dut = QueueRtl(8, depth)
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], 1 - (1 - gap) / 2)
    got = handshakes(dut, {"i": (beats, valid)}, {"o": (len(beats), ready)})
    i, o = Producer(Source(valid), len(beats), beats), Consumer(ready)
    unit = Queue(depth, i, o)
    out = []

    def cycle(t):
        if unit.o_valid and o.accepts(t):
            out.append(unit.o_payload)
        unit.step(t)
        return t + 1

    run("queue", cycle, lambda: len(o.cycles) == len(beats), 100_000)
    assert {"i": i.cycles, "o": o.cycles} == got
    assert out == beats
    assert depth == 1 or any(a == b for a in i.cycles for b in o.cycles)   # both in a cycle
