"""Attention's units alone: each RTL unit in Amaranth's simulator against its unit model
(``scoville.sim.cycles.attention_*``: lines to beats, the append feeder, the query buffer,
the read and command issuers, the A sequencer, the score unit, the normalizer), handshake for
handshake, on random schedules (gaps on the inputs, back-pressure on the outputs, light and
heavy), each case seeded from its name."""

import zlib
from types import SimpleNamespace

import numpy as np
import pytest

from scoville.blocks import BLOCKS, parse_params
from scoville.rtl.attention_control import Controller as ControllerRtl
from scoville.rtl.attention_control import Op, command_layout
from scoville.rtl.attention_feeder import AppendFeeder as AppendFeederRtl
from scoville.rtl.attention_normalizer import Normalizer as NormalizerRtl
from scoville.rtl.attention_query import QueryBuffer as QueryBufferRtl
from scoville.rtl.attention_score import ScoreUnit as ScoreUnitRtl
from scoville.rtl.attention_score import score_rows
from scoville.rtl.attention_sequencer import ASequencer as ASequencerRtl
from scoville.rtl.attention_transpose import LinesToBeats as LinesToBeatsRtl
from scoville.rtl.attention_walk import CommandIssuer as CommandIssuerRtl
from scoville.rtl.attention_walk import ReadIssuer as ReadIssuerRtl
from scoville.rtl.kvcache import Status
from scoville.sim.cycles.attention_control import Controller
from scoville.sim.cycles.attention_feeder import AppendFeeder
from scoville.sim.cycles.attention_normalizer import Normalizer
from scoville.sim.cycles.attention_query import QueryBuffer
from scoville.sim.cycles.attention_score import ScoreUnit
from scoville.sim.cycles.attention_sequencer import ASequencer
from scoville.sim.cycles.attention_transpose import LinesToBeats
from scoville.sim.cycles.attention_walk import CommandIssuer, ReadIssuer
from scoville.sim.cycles.stream import Consumer, Producer, Schedule, Source
from scoville.sim.cycles.unit import Wire, run

from .amsim import handshakes, step_alone


def _seed(*case) -> int:
    """A case's seed, the same in every run (``hash`` of a string is not)."""
    return zlib.crc32(repr(case).encode())


#: (dim, cols, token_lines, v_lines, v_tiles, v_queue): K in one line or two, V whole or in
#: two column tiles, a queue of one or three tokens.
SHAPES = [(4, 2, 2, 1, 2, 2), (4, 4, 1, 2, 1, 3), (8, 4, 2, 1, 2, 1)]


def _reads(rng, shape, chunks: int) -> tuple[list[int], int]:
    """The lasts of a run's lines (per chunk: a K read of n tokens, then a V read per column
    tile) and the beats it makes."""
    dim, cols, tl, vl, vt, _ = shape
    lasts, beats = [], 0
    for _ in range(chunks):
        n = int(rng.integers(1, 3 * cols + 1))
        for lines in [n * tl] + [n * vl] * vt:
            lasts += [0] * (lines - 1) + [1]
        beats += -(-n // cols) * dim + n * vt
    return lasts, beats


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.8])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_lines_to_beats_unit_model_is_its_rtl(shape, gap):
    dim, cols, tl, vl, vt, vq = shape
    seed = _seed("lines", shape, gap)
    rng = np.random.default_rng(seed)
    lasts, beats = _reads(rng, shape, 4)
    line_bits = dim * 16 // tl
    dut = LinesToBeatsRtl(line_bits=line_bits, token_lines=tl, v_lines=vl, dim=dim,
                          v_width=cols if vt > 1 else dim, v_tiles=vt, cols=cols,
                          kv_fmt="bf16", v_queue=vq)
    payloads = [{"data": int(rng.integers(0, 2**min(line_bits, 62))), "last": last}
                for last in lasts]
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    got = handshakes(dut, {"i": (payloads, valid)}, {"o": (beats, ready)})
    i, o = Producer(Source(valid), len(lasts), lasts), Consumer(ready)
    unit = LinesToBeats(dim=dim, cols=cols, token_lines=tl, v_lines=vl, v_tiles=vt,
                        v_queue=vq, i=i, o=o)

    step_alone("lines_to_beats", unit, lambda: len(o.cycles) == beats)
    assert {"i": i.cycles, "o": o.cycles} == got


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.8])
@pytest.mark.parametrize(("heads", "mla", "token_lines"), [(2, False, 2), (1, False, 1),
                                                           (2, True, 2)])
def test_append_feeder_unit_model_is_its_rtl(heads, mla, token_lines, gap):
    """Commands of 1 to 3 tokens, one dropped (a refused step's vectors are taken and
    dropped), each started when the feeder is idle, as the controller does."""
    dim = 4
    seed = _seed("feeder", heads, mla, token_lines, gap)
    rng = np.random.default_rng(seed)
    sections = 1 if mla else 2
    commands = [(int(rng.integers(0, 3)), drop) for drop in (0, 0, 1, 0)]
    k_beats = sum(heads * (n + 1) for n, _ in commands)
    v_beats = 0 if mla else k_beats
    lines = sum(heads * sections * (n + 1) * token_lines for n, drop in commands if not drop)
    dut = AppendFeederRtl(kv_heads=heads, dim=dim, token_lines=token_lines,
                          line_bits=dim * 16 // token_lines, kv_fmt="bf16", mla=mla)
    vec = [[int(x) for x in rng.integers(0, 2**32, dim)] for _ in range(k_beats)]
    valid = {"k": Schedule([seed, 1], gap), "v": Schedule([seed, 2], gap)}
    ready = Schedule([seed, 3], gap)
    starts = []  # (cycle, tokens, drop) of each command, as the RTL run saw them

    async def control(ctx, t):
        """The controller's side, each cycle before the edge: start the next command once
        the feeder is idle and the previous command's lines have gone."""
        if control.at < len(commands) and ctx.get(dut.idle) and not ctx.get(dut.wd.valid) \
                and t >= control.ready_at:
            n, drop = commands[control.at]
            ctx.set(dut.start, 1)
            ctx.set(dut.tokens, n)
            ctx.set(dut.drop, drop)
            starts.append((t, n, drop))
            control.at += 1
            control.ready_at = t + 2
        else:
            ctx.set(dut.start, 0)

    control.at, control.ready_at = 0, 0
    sources = {"k": (vec, valid["k"])}
    if not mla:
        sources["v"] = (vec, valid["v"])
    got = handshakes(dut, sources, {"wd": (lines, ready)}, each_cycle=control)
    assert len(starts) == len(commands)

    k, v = Producer(Source(valid["k"]), k_beats), Producer(Source(valid["v"]), v_beats)
    wd = Consumer(ready)
    unit = AppendFeeder(kv_heads=heads, sections=sections, token_lines=token_lines, k=k, v=v,
                        wd=wd)
    plan = {t: (n, drop) for t, n, drop in starts}
    drop_now = False

    def cycle(t):
        nonlocal drop_now
        if t in plan:
            assert unit.idle, f"the model's feeder is busy at the RTL's start in cycle {t}"
        n, drop_now = plan.get(t, (None, drop_now))
        unit.start, unit.drop = n, drop_now
        unit.step(t)
        return t + 1

    run("append_feeder", cycle, lambda: k.sent == k_beats and v.sent == v_beats
        and len(wd.cycles) == lines, 100_000)
    want = {"k": k.cycles, "wd": wd.cycles, **({} if mla else {"v": v.cycles})}
    assert want == got


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.8])
def test_query_buffer_unit_model_is_its_rtl(gap):
    """Steps of 1 to 4 tokens (one dropped), each started once the buffer is idle."""
    seed = _seed("query", gap)
    rng = np.random.default_rng(seed)
    heads, group, dim = 2, 2, 4
    counts = [(int(rng.integers(1, 5)) * heads * group, drop) for drop in (0, 1, 0, 0)]
    total = sum(n for n, _ in counts)
    dut = QueryBufferRtl(dim=dim, kv_heads=heads, group=group, tile_tokens=2, tiles=2,
                         max_vectors=16)
    vec = [[int(x) for x in rng.integers(0, 2**32, dim)] for _ in range(total)]
    valid = Schedule([seed, 1], gap)
    starts = []

    async def control(ctx, t):
        go = len(starts) < len(counts) and ctx.get(dut.idle) and (
            not starts or t >= starts[-1][0] + 2 + int(rng.integers(0, 4)))
        ctx.set(dut.start, go)
        if go:
            n, drop = counts[len(starts)]
            ctx.set(dut.count, n)
            ctx.set(dut.drop, drop)
            starts.append((t, n))

    got = handshakes(dut, {"q": (vec, valid)}, {}, each_cycle=control)
    q = Producer(Source(valid), total)
    unit = QueryBuffer(q)
    plan = dict(starts)

    def cycle(t):
        if t in plan:
            assert unit.idle, f"the model's buffer is busy at the RTL's start in cycle {t}"
        unit.start = plan.get(t)
        unit.step(t)
        return t + 1

    run("query_buffer", cycle, lambda: q.sent == total, 100_000)
    assert q.cycles == got["q"]


def _chunks(cfg, length: int, tokens: int) -> list:
    """A step's chunks as the golden model lists them (row tile and head, a0, n, rows)."""
    return [(i * cfg.kv.kv_heads + h, a0, n, count * cfg.group)
            for i, (_, count, lo, hi) in enumerate(cfg.tiles(length, tokens))
            for h in range(cfg.kv.kv_heads) for a0, n in cfg.chunk_plan(lo, hi)]


def _steps(cfg, rng) -> list[tuple[int, int]]:
    """Two steps at random lengths: ``(length after the step, tokens)`` each."""
    steps = []
    for _ in range(2):
        tokens = int(rng.integers(1, cfg.max_step_tokens + 1))
        steps.append((int(rng.integers(tokens, 120)), tokens))
    return steps


def _run_walker(dut, cfg, steps, port: str, fields, beats: int, ready):
    """A walking unit in Amaranth's simulator, each step started as the controller starts it
    (``lo``, ``base``, ``tokens``) once the previous one's last beat has gone: the start
    cycles, the handshake cycles on ``port`` and each beat's ``fields``."""
    starts, seen = [], []
    out = getattr(dut, port)

    async def control(ctx, t):
        if ctx.get(out.valid) and ctx.get(out.ready):
            p = ctx.get(out.payload)
            seen.append(tuple(getattr(p, f) for f in fields))
        go = len(starts) < len(steps) and not ctx.get(out.valid) and (
            not starts or t >= starts[-1] + 3)
        ctx.set(dut.start, go)
        if go:
            length, tokens = steps[len(starts)]
            base = length - tokens
            ctx.set(dut.lo, base - (cfg.window - 1) if cfg.window and base >= cfg.window
                    else 0)
            ctx.set(dut.base, base)
            ctx.set(dut.window, cfg.window)
            ctx.set(dut.tokens, tokens)
            starts.append(t)

    got = handshakes(dut, {}, {port: (beats, ready)}, each_cycle=control)
    return starts, got[port], seen


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.8])
@pytest.mark.parametrize("look", BLOCKS["attention"].first_look, ids=lambda lk: lk.label)
def test_command_issuer_unit_model_is_its_rtl(look, gap):
    """Two steps at random lengths, each started when the previous one's commands are all
    taken: the commands' cycles and their (M, K, N) as the unit model gives them."""
    cfg, _ = parse_params(BLOCKS["attention"], dict(look.params))
    seed = _seed("cmd", look.label, gap)
    steps = _steps(cfg, np.random.default_rng(seed))
    plans = [_chunks(cfg, length, tokens) for length, tokens in steps]
    commands = sum(2 * len(p) for p in plans)
    ready = Schedule([seed, 1], gap)
    starts, got, seen = _run_walker(CommandIssuerRtl(cfg), cfg, steps, "cmd", "mkn", commands,
                                    ready)
    cmd = Consumer(ready)
    unit = CommandIssuer(lambda m, k, n: (m, k, n), cfg.kv.head_dim, cfg.v_dim, cmd)
    plan = dict(zip(starts, plans, strict=True))
    want = []

    def cycle(t):
        if t in plan:
            unit.start(plan[t])
        if unit.valid and cmd.accepts(t):
            want.append(unit.payload)
        unit.step(t)
        return t + 1

    run("command_issuer", cycle, lambda: len(cmd.cycles) == commands, 100_000)
    assert cmd.cycles == got
    assert want == seen


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.8])
@pytest.mark.parametrize("look", BLOCKS["attention"].first_look, ids=lambda lk: lk.label)
def test_read_issuer_unit_model_is_its_rtl(look, gap):
    """Two steps at random lengths: the reads' cycles and fields (K's, then each V tile's
    window) as the golden model lists them."""
    cfg, _ = parse_params(BLOCKS["attention"], dict(look.params))
    seed = _seed("rd", look.label, gap)
    steps = _steps(cfg, np.random.default_rng(seed))
    plans = [_chunks(cfg, length, tokens) for length, tokens in steps]
    windows = [(0, (0, 0))] + [(1, w) for w in cfg.v_reads()]
    reads = [[(half, c[0] % cfg.kv.kv_heads, c[1], c[2], line0, nlines)
              for c in plan for half, (line0, nlines) in windows] for plan in plans]
    total = sum(map(len, reads))
    ready = Schedule([seed, 1], gap)
    starts, got, seen = _run_walker(ReadIssuerRtl(cfg), cfg, steps, "req",
                                    ("kv", "head", "start", "count", "line0", "nlines"),
                                    total, ready)
    req = Consumer(ready)
    unit = ReadIssuer(cfg.v_tiles, req)
    plan = dict(zip(starts, zip(plans, reads, strict=True), strict=True))
    want = []

    def cycle(t):
        if t in plan:
            unit.start(*plan[t])
        if unit.valid and req.accepts(t):
            want.append(unit.payload)
        unit.step(t)
        return t + 1

    run("read_issuer", cycle, lambda: len(req.cycles) == total, 100_000)
    assert req.cycles == got
    assert want == seen


def _one_step(cfg, rng) -> tuple[int, int, int, list]:
    """A step at a random length: its ``lo``, ``base``, ``tokens`` and chunks."""
    (length, tokens), = _steps(cfg, rng)[:1]
    base = length - tokens
    lo = base - (cfg.window - 1) if cfg.window and base >= cfg.window else 0
    return lo, base, tokens, _chunks(cfg, length, tokens)


def _start_once(dut, lo, base, tokens, window: int, at: int = 1):
    """Drive a walking unit's start in cycle ``at`` (the step's ``window``) and ``attending``
    from the cycle after."""
    async def start(ctx, t):
        ctx.set(dut.start, t == at)
        ctx.set(dut.lo, lo)
        ctx.set(dut.base, base)
        ctx.set(dut.window, window)
        ctx.set(dut.tokens, tokens)
        ctx.set(dut.attending, t > at)
    return start


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.8])
@pytest.mark.parametrize("look", BLOCKS["attention"].first_look, ids=lambda lk: lk.label)
def test_score_unit_unit_model_is_its_rtl(look, gap):
    """A step's rows (``Q K^T``'s tiles, then ``P V``'s column tiles, chunk by chunk) under
    gaps, ``pv`` under back-pressure, the A sequencer's ``max_done`` at random once the max
    is ready: every handshake and the cycles ``max_ready`` rises."""
    cfg, _ = parse_params(BLOCKS["attention"], dict(look.params))
    seed = _seed("score", look.label, gap)
    rng = np.random.default_rng(seed)
    lo, base, tokens, chunks = _one_step(cfg, rng)
    C, VT = cfg.array.cols, cfg.v_tiles
    rows = sum((-(-n // C) + VT) * r for _, _, n, r in chunks)
    pvs = sum(VT * r for *_, r in chunks)
    dut = ScoreUnitRtl(cfg)
    data = [[int(x) for x in rng.integers(0, 2**32, C)] for _ in range(rows)]
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    done_at = Schedule([seed, 3], 0.5)
    start = _start_once(dut, lo, base, tokens, cfg.window)
    rises = []

    async def control(ctx, t):
        await start(ctx, t)
        ready_now = ctx.get(dut.max_ready)
        if ready_now and (not rises or rises[-1][1] is not None):
            rises.append([t, None])
        ctx.set(dut.max_done, ready_now and done_at[t])
        if ready_now and done_at[t]:
            rises[-1][1] = t

    arrive = Source(valid, [3] * rows)
    got = handshakes(dut, {"rows": (data, arrive)}, {"pv": (pvs, ready)},
                     each_cycle=control)
    i, pv = Producer(arrive, rows), Consumer(ready)
    unit = ScoreUnit(C, VT, i, pv)
    seen = []

    def cycle(t):
        unit.attending = t > 1
        if unit.max_ready and (not seen or seen[-1][1] is not None):
            seen.append([t, None])
        unit.max_done = unit.max_ready and done_at[t]
        if unit.max_done:
            seen[-1][1] = t
        if t == 1:
            unit.start(chunks)
        unit.step(t)
        return t + 1

    run("score_unit", cycle, lambda: i.sent == rows and len(pv.cycles) == pvs, 100_000)
    assert {"rows": i.cycles, "pv": pv.cycles} == got
    assert seen == rises and len(rises) == len(chunks)


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.8])
@pytest.mark.parametrize("look", BLOCKS["attention"].first_look, ids=lambda lk: lk.label)
def test_a_sequencer_unit_model_is_its_rtl(look, gap):
    """A step's A beats under back-pressure, the chunk's max made ready at random and held
    until the sequencer's ``max_done``."""
    cfg, _ = parse_params(BLOCKS["attention"], dict(look.params))
    seed = _seed("aseq", look.label, gap)
    rng = np.random.default_rng(seed)
    lo, base, tokens, chunks = _one_step(cfg, rng)
    D, C, VT = cfg.kv.head_dim, cfg.array.cols, cfg.v_tiles
    beats = sum(-(-n // C) * D + VT * n for _, _, n, _ in chunks)
    dut = ASequencerRtl(cfg)
    ready, rise = Schedule([seed, 1], gap), Schedule([seed, 2], 0.7)
    start = _start_once(dut, lo, base, tokens, cfg.window)
    mr = [False]

    async def control(ctx, t):
        await start(ctx, t)
        ctx.set(dut.max_ready, mr[0])
        mr[0] = (mr[0] and not ctx.get(dut.max_done)) or (not mr[0] and rise[t])

    got = handshakes(dut, {}, {"a": (beats, ready)}, each_cycle=control)
    a = Consumer(ready)
    unit = ASequencer(D, C, VT, a)
    ready_now = False

    def cycle(t):
        nonlocal ready_now
        unit.attending, unit.max_ready = t > 1, ready_now
        done = unit.max_done(t)
        if t == 1:
            unit.start(chunks)
        unit.step(t)
        ready_now = (ready_now and not done) or (not ready_now and rise[t])
        return t + 1

    run("a_sequencer", cycle, lambda: len(a.cycles) == beats, 100_000)
    assert a.cycles == got["a"]


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.8])
@pytest.mark.parametrize("look", BLOCKS["attention"].first_look, ids=lambda lk: lk.label)
def test_normalizer_unit_model_is_its_rtl(look, gap):
    """Three heads of one to three chunks, each a row tile of a random height: ``P V``'s rows
    under gaps, the outputs under back-pressure."""
    cfg, _ = parse_params(BLOCKS["attention"], dict(look.params))
    seed = _seed("norm", look.label, gap)
    rng = np.random.default_rng(seed)
    VT, C = cfg.v_tiles, cfg.array.cols
    payloads, lasts, outs = [], [], 0
    for _ in range(3):
        rows, chunks = int(rng.integers(1, score_rows(cfg) + 1)), int(rng.integers(1, 4))
        outs += rows
        for c in range(chunks):
            for vt in range(VT):
                for r in range(rows):
                    last = c == chunks - 1 and vt == VT - 1 and r == rows - 1
                    payloads.append({"data": [int(x) for x in rng.integers(0, 2**32, C)],
                                     "row": r, "tile": vt, "first": c == 0, "last": last,
                                     "alpha": 0x3F80_0000})
                    lasts.append(rows if last else 0)
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    got = handshakes(NormalizerRtl(cfg), {"pv": (payloads, valid)}, {"o": (outs, ready)})
    pv, o = Producer(Source(valid), len(lasts), lasts), Consumer(ready)
    unit = Normalizer(VT, pv, o)

    step_alone("normalizer", unit, lambda: len(o.cycles) == outs)
    assert {"pv": pv.cycles, "o": o.cycles} == got



class _ControllerEnv:
    """The controller's neighbours, one rule for the RTL run and the model's: the cache answers
    each request (``statuses`` in order) some cycles after taking it, held until taken; the
    feeder and the query buffer are idle some cycles after their start; the step's units
    finish some cycles after its start. Each delay is drawn in turn from ``seed``."""

    def __init__(self, seed, statuses):
        self._rng = np.random.default_rng(seed)
        self._statuses = statuses
        self.resp_at = self.finished_at = None
        self.feed_at = self.q_at = 0
        self.answered = 0
        self.seen = []  # (cycle, what, value): the unit starts

    def signals(self, t):
        return {"resp_valid": self.resp_at is not None and t >= self.resp_at,
                "status": self._statuses[min(self.answered, len(self._statuses) - 1)],
                "feed_idle": t >= self.feed_at, "q_idle": t >= self.q_at,
                "finished": self.finished_at is not None and t >= self.finished_at}

    def _delay(self) -> int:
        return int(self._rng.integers(1, 6))

    def after(self, t, *, req, resp, feed, q, start):
        if req:
            self.resp_at = t + self._delay()
        if resp:
            self.resp_at = None
            self.answered += 1
        for what, value in (("feed", feed), ("q", q)):
            if value is not None:
                setattr(self, f"{what}_at", t + self._delay())
                self.seen.append((t, what, value))
        if start:
            self.finished_at = t + self._delay()
            self.seen.append((t, "start", 0))


def _control_script(cfg, rng):
    """Random commands: the model's (op, tokens, status, cache requests), the RTL's payloads
    and the statuses the cache answers in turn."""
    commands, payloads, statuses = [], [], []
    layout = command_layout()
    for _ in range(14):
        op = Op(int(rng.choice([0, 1, 2, 3, 3, 3, 4]))) if rng.random() < 0.9 else 6
        tokens = int(rng.integers(1, cfg.max_step_tokens + 2)) if op == Op.STEP else 1
        failing = op == Op.STEP and rng.random() < 0.25
        status = Status.FULL if failing else Status.OK
        if op in (Op.ALLOC, Op.FREE, Op.APPEND):
            statuses.append(Status.OK)
        elif op == Op.STEP and tokens <= cfg.max_step_tokens:
            statuses += [status] * tokens
        commands.append(SimpleNamespace(op=op, tokens=tokens, status=status,
                                        cache=[None] * tokens, chunks=[]))
        fields = {"op": int(op), "seq": 1, "tokens": tokens - 1,
                  "head": int(rng.integers(0, cfg.q_heads + 2)), "value": 0}
        # As bits: an unknown code is no member of the enum.
        payloads.append(sum(v << layout[k].offset for k, v in fields.items()))
    return commands, payloads, statuses


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.8])
@pytest.mark.parametrize("look", BLOCKS["attention"].first_look, ids=lambda lk: lk.label)
def test_controller_unit_model_is_its_rtl(look, gap):
    """Random commands (alloc, free, append, steps of 1 to one more than the most tokens,
    steps whose appends fail, sinks of good and bad heads, an unknown code) against a cache,
    feeder, query buffer and walking units that answer after random delays: every handshake,
    and the cycle and value of every unit start."""
    cfg, _ = parse_params(BLOCKS["attention"], dict(look.params))
    seed = _seed("control", look.label, gap)
    commands, payloads, statuses = _control_script(cfg, np.random.default_rng(seed))
    valid, ready = Schedule([seed, 1], gap), Schedule([seed, 2], gap)
    req_ready = Schedule([seed, 3], gap)
    dut = ControllerRtl(cfg)
    env, req_cycles, answer_cycles = _ControllerEnv(seed, statuses), [], []

    async def control(ctx, t):
        s = env.signals(t)
        ctx.set(dut.cache_resp.valid, s["resp_valid"])
        ctx.set(dut.cache_resp.payload.status, s["status"])
        ctx.set(dut.feed_idle, s["feed_idle"])
        ctx.set(dut.q_idle, s["q_idle"])
        ctx.set(dut.finished, s["finished"])
        ctx.set(dut.cache_req.ready, req_ready[t])
        req = ctx.get(dut.cache_req.valid) and req_ready[t]
        answer = s["resp_valid"] and ctx.get(dut.cache_resp.ready)
        req_cycles.extend([t] * req)
        answer_cycles.extend([t] * answer)
        env.after(t, req=req, resp=answer,
                  feed=ctx.get(dut.feed_tokens) if ctx.get(dut.feed_start) else None,
                  q=ctx.get(dut.q_count) if ctx.get(dut.q_start) else None,
                  start=ctx.get(dut.start))

    got = handshakes(dut, {"cmd": (payloads, valid)}, {"resp": (len(commands), ready)},
                     each_cycle=control)
    rtl_seen = env.seen

    cmd, resp = Producer(Source(valid), len(commands), commands), Consumer(ready)
    req, answers = Wire(), Wire()
    unit = Controller(cfg.max_step_tokens, cfg.q_heads, cmd, resp, req, answers)
    env = _ControllerEnv(seed, statuses)

    def cycle(t):
        s = env.signals(t)
        unit.feed_idle, unit.q_idle, unit.finished = s["feed_idle"], s["q_idle"], s["finished"]
        req.set(unit.req_valid, req_ready[t])
        answers.set(s["resp_valid"], unit.cache_resp_ready)
        feed, q, start = unit.feed_start, unit.q_start, unit.start
        unit.step(t)
        env.after(t, req=req.taken, resp=answers.taken, feed=feed, q=q, start=start)
        return t + 1

    run("controller", cycle, lambda: len(resp.cycles) == len(commands), 100_000)
    assert {"cmd": cmd.cycles, "resp": resp.cycles} == got
    assert (req.cycles, answers.cycles) == (req_cycles, answer_cycles)
    assert env.seen == rtl_seen
