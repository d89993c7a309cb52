"""cocotb testbench of :class:`scoville.rtl.attention.Attention` against its golden model
(:class:`scoville.sim.golden.attention.AttentionModel`: the cache's reference model and
:func:`~scoville.sim.golden.attention.decode`) and its timed model
(:func:`scoville.sim.cycles.attention.timing`, built from the cache's and the array's).

Every test builds a command script (sink logits, sequences, context appends, decode steps,
bad commands), runs it through the golden model for every answer and every output vector,
drives ``cmd``, ``q``, ``k`` and ``v`` and takes ``o`` and ``resp`` through the free-running
harness, and checks every answer and every output value bit for bit, the cycle of every
handshake on the six streams and every counter (the cache's, the array's, the block's own)
against the timed model fed the same schedules, and the cycle count against the closed form
when the streams keep up.

Tests: directed edges (a step over one token, steps whose context crosses a chunk and the
window, a step for a freed sequence, a sink for a head that does not exist, an unknown
command); the workload (``seqs`` sequences with ``context`` tokens, ``steps`` steps each,
under gaps and back-pressure); the same with streams that keep up; and a reset in the middle
of a step.
"""

from __future__ import annotations

import cocotb
import numpy as np

from scoville.rtl.attention import OPS, STATUS, Op, Status
from scoville.sim.cycles.attention import COUNTERS, macs, timing
from scoville.sim.golden.attention import (
    AttentionModel,
    Command,
    beat_order,
    query_values,
    reference,
)
from scoville.sim.golden.kvcache import stored_values

from .bench import BlockBench
from .coverage import command_bins
from .failures import Kind
from .kit import context

_NAMES = {v: k for k, v in STATUS.items()}
#: test_edges fills a cache of at most this many tokens (the suite's small configs hold 128).
FILL_TOKENS = 160
_OPS = {v: k for k, v in OPS.items()}
SOURCES = ("cmd", "q", "k", "v")

#: Coverage bins (:mod:`scoville.testbenches.coverage`), hit from each command and its result.
BINS = {
    **command_bins("command", OPS, STATUS),
    "step:one_token": "a step over a context of one token",
    "step:prefill": "a step of more than one new token",
    "step:window_full": "a step whose context is longer than the window (the window slides)",
    "step:window_not_full": "a step with a window whose context is not longer than it",
    "step:window_starts_mid_chunk": "a step whose window's first token is not at a chunk's start",
    "step:own_window": "a step with a sliding window of its own (its command's value)",
    "step:several_chunks": "a step that attends more than one chunk of a KV head",
    "step:sinks": "a step of a config with sink logits (`sinks`)",
}


def _cover(cov, cfg, cmds, results) -> None:
    for c, r in zip(cmds, results, strict=True):
        cov.hit(f"op:{_OPS.get(c.op, 'undefined')}")
        cov.hit(f"status:{_NAMES[r.status]}")
        if r.out is None:
            continue
        cov.hit_if("step:one_token", r.length == 1)
        cov.hit_if("step:prefill", r.tokens > 1)
        cov.hit_if("step:sinks", cfg.sinks)
        window = c.window or cfg.window
        cov.hit_if("step:own_window", c.window)
        if window:
            cov.hit("step:window_full" if r.length > window else "step:window_not_full")
            cov.hit_if("step:window_starts_mid_chunk",
                       r.length > window and (r.length - window) % cfg.chunk)
        units = [unit for unit, *_ in r.chunks]
        cov.hit_if("step:several_chunks", len(units) > len(set(units)))
SINKS = ("o", "resp")


def sources_of(cfg) -> tuple[str, ...]:
    """The block's input streams: no ``v`` with MLA."""
    return tuple(name for name in SOURCES if not (cfg.mla and name == "v"))


class Script:
    """A command sequence and the golden model's result of each."""

    def __init__(self, cfg, rng):
        self.cfg, self.rng = cfg, rng
        self.model = AttentionModel(cfg)
        self.commands: list[Command] = []
        self.results = []
        self.history: dict[int, tuple] = {}

    def __call__(self, op: str | int, **fields):
        cmd = Command(OPS[op] if isinstance(op, str) else op, **fields)
        self.commands.append(cmd)
        result = self.model.apply(cmd)
        if result.out is not None:
            keys, vals = self.model.values[result.seq]
            self.history[len(self.results)] = (np.stack(keys, axis=1),
                                               None if self.cfg.mla else np.stack(vals, axis=1))
        self.results.append(result)
        return result

    def vectors(self, *shape: int) -> np.ndarray:
        d = self.cfg.kv.head_dim
        scale = 2.0 ** self.rng.integers(-2, 3, (*shape, 1))
        return (self.rng.standard_normal((*shape, d)) * scale).astype(np.float32)

    def values(self, *shape: int) -> np.ndarray | None:
        """V vectors (none with MLA: the latent vector on ``k`` holds them)."""
        return None if self.cfg.mla else self.vectors(*shape)

    def append(self, seq: int):
        kv = self.cfg.kv.kv_heads
        return self("append", seq=seq, k=self.vectors(kv), v=self.values(kv))

    def step(self, seq: int, tokens: int | None = None, window: int = 0):
        """A decode step, or (``tokens``, or in prefill the config's ``q_tokens``) a step of
        that many new tokens; ``window`` its own sliding window (0: the config's)."""
        cfg, kv = self.cfg, self.cfg.kv.kv_heads
        if tokens is None and cfg.mode == "decode":
            return self("step", seq=seq, q=self.vectors(cfg.q_heads) * 2,
                        k=self.vectors(kv), v=self.values(kv), window=window)
        t = cfg.q_tokens if tokens is None else tokens
        return self("step", seq=seq, q=self.vectors(t, cfg.q_heads) * 2,
                    k=self.vectors(t, kv), v=self.values(t, kv), window=window)

    def sinks(self) -> None:
        if self.cfg.sinks:
            for h in range(self.cfg.q_heads):
                self("sink", head=h, value=float(self.rng.standard_normal() * 2))


def workload_script(cfg, w, rng) -> Script:
    """``seqs`` sequences, ``context`` appends each (interleaved), ``steps`` steps each."""
    sc = Script(cfg, rng)
    sc.sinks()
    seqs = [sc("alloc").seq for _ in range(w.seqs)]
    for _ in range(w.context):
        for s in seqs:
            sc.append(s)
    tokens = w.tokens if cfg.mode == "prefill" else None
    for _ in range(w.steps):
        for s in seqs:
            # Now and then a window of the step's own (a layer of sliding attention).
            own = int(rng.integers(1, w.context + 4)) if rng.random() < 0.25 else 0
            sc.step(s, tokens, window=own)
    for s in seqs:
        sc("free", seq=s)
    return sc


def _bits(x) -> list[int]:
    return np.asarray(x, np.float32).view(np.uint32).astype(np.int64).tolist()


async def run_script(dut, ctx, test: str, sc: Script, *, gaps: bool,
                     interrupt: bool = False) -> dict:
    """Run ``sc`` through the RTL and check answers, outputs, handshake cycles and counters.
    ``interrupt``: first run it partway and reset the block in the middle."""
    cfg = ctx.config
    codec = ctx.codecs
    cmds, results = sc.commands, sc.results
    d = cfg.kv.head_dim
    sources = sources_of(cfg)
    vectors = [name for name in ("q", "k", "v") if name in sources]
    feed = {name: [] for name in sources}
    for c in cmds:
        feed["cmd"].append(codec["cmd"].pack(op=[c.op], seq=[c.seq], head=[c.head],
                                             tokens=[c.tokens - 1],
                                             value=[c.window] if c.op == Op.STEP
                                             else _bits([c.value]))[0])
        if c.op == Op.STEP:
            feed["q"] += [_bits(row) for row in np.reshape(c.q, (-1, d))]
        if c.op in (Op.STEP, Op.APPEND):
            feed["k"] += [_bits(row) for row in np.reshape(c.k, (-1, d))]
            if "v" in feed:
                feed["v"] += [_bits(row) for row in np.reshape(c.v, (-1, d))]
    rows = {name: codec[name].pack(_=np.array(feed[name], np.int64).reshape(-1, d))
            if feed[name] else [] for name in vectors}
    want_o, where = [], []
    for i, r in enumerate(results):
        if r.out is not None:
            for b, vec in enumerate(r.out):
                want_o.append(_bits(vec))
                where.append((i, b))
    want_resp = [r.word() for r in results]

    tb = BlockBench(dut, ctx, test, sources=sources, sinks=SINKS, gaps=gaps)
    tb.source["cmd"].send(feed["cmd"])
    for name in vectors:
        tb.source[name].send(rows[name])

    def where_o(k):
        i, b = where[k]
        return f"command {i}: step of sequence {cmds[i].seq}, output {b}"

    def where_resp(k):
        return f"command {k}: op {cmds[k].op}, expected {_NAMES[results[k].status]}"

    tb.sink["o"].expect(want_o, decode=lambda f: f[""].tolist(), where=where_o, label="outputs")
    tb.sink["resp"].expect(want_resp, where=where_resp, label="answers", kind=Kind.STATUS)
    model = tb.predict(timing, cfg, results, tb.valid, tb.ready)
    seen = await tb.run(model, interrupt=interrupt, slack=5000)
    _cover(ctx.coverage, cfg, cmds, results)
    counters = seen.change
    steps = [r for r in results if r.out is not None]
    err = 0.0
    for i, (c, r) in enumerate(zip(cmds, results, strict=True)):
        if r.out is not None:
            ref = _reference(sc, c, sc.history[i])
            err = max(err, float(np.max(np.abs(r.out - ref)) / max(np.max(np.abs(ref)), 1e-30)))
    return tb.check(
        COUNTERS, steps=len(steps), commands=len(cmds), max_rel_err_vs_f64=err,
        kv_bandwidth_utilization=(counters["kv.reads"] / counters["attend_cycles"]
                                  if counters["attend_cycles"] else 0.0),
        array_utilization=(macs(cfg, results) / (cfg.array.rows * cfg.array.cols
                                                  * counters["attend_cycles"])
                           if counters["attend_cycles"] else 0.0),
        statuses={name: sum(r.status == code for r in results) for name, code in STATUS.items()},
    )


def _reference(sc: Script, cmd: Command, history) -> np.ndarray:
    """Float64 attention of a step on the values the block stores, in ``o``'s order."""
    cfg = sc.cfg
    keys, vals = history
    q = query_values(np.reshape(cmd.q, (cmd.tokens, cfg.q_heads, -1)), cfg.array.fmt)
    k = stored_values(cfg.kv.kv_fmt, keys)
    v = k[..., :cfg.v_dim] if vals is None else stored_values(cfg.kv.kv_fmt, vals)
    out = reference(q, k, v, sinks=sc.model.sinks.astype(np.float64) if cfg.sinks else None,
                    window=cmd.window or cfg.window, scale=cfg.score_scale)
    return beat_order(cfg, keys.shape[1], out)


@cocotb.test()
async def test_edges(dut):
    """Directed: a step over one token (no context); steps whose context crosses two chunk
    boundaries and the window; steps with windows of their own (one starting mid chunk, one of the
    token alone); in prefill, steps of one token and of a few; a step of one
    token more than the block takes (``bad_range``: drained, nothing stored); a step for a
    freed sequence (``no_seq``: Q, K and V drained, nothing stored); sinks for a head beyond
    ``q_heads`` (``bad_head``); an unknown command (``bad_op``); an alloc past ``max_seqs``
    (``too_many``); on a cache of at most :data:`FILL_TOKENS` tokens, appends until it is full
    (``full``) and a step then; everything freed."""
    ctx = context()
    cfg = ctx.config
    sc = Script(cfg, ctx.rng(1))
    sc.sinks()
    a = sc("alloc").seq
    sc.step(a)
    b = sc("alloc").seq
    more = [sc("alloc") for _ in range(cfg.kv.max_seqs - 1)]  # the last past max_seqs
    for r in more:
        if r.status == Status.OK:
            sc("free", seq=r.seq)
    # Past two chunks: with a window, the first chunk starts past 0.
    for _ in range(2 * cfg.chunk + 3):
        sc.append(b)
    sc.step(b)
    sc.step(a)
    # Windows of their own: one starting mid chunk, one of the token alone.
    sc.step(b, window=cfg.chunk + 5)
    sc.step(a, window=1)
    if cfg.mode == "prefill":
        # One token, and a step of tokens that straddle two row tiles' chunks.
        sc.step(b, 1)
        sc.step(a, min(cfg.q_tokens, 3))
    # T past the step's limit: bad_range, its vectors drained, nothing stored.
    sc.step(b, cfg.max_step_tokens + 1)
    sc("free", seq=a)
    sc.step(a)
    sc("sink", head=cfg.q_heads, value=1.0)
    sc(7, seq=b)
    sc.step(b)
    if cfg.kv.pages * cfg.kv.page_tokens <= FILL_TOKENS:
        while sc.append(b).status == Status.OK:
            pass  # until full
        sc.step(b)
    sc("free", seq=b)
    await run_script(dut, ctx, "test_edges", sc, gaps=True)


@cocotb.test()
async def test_keep_up(dut):
    """The workload's commands with streams that keep up (no gaps, no back-pressure): every
    output, answer, handshake and counter as the other tests check them. (No closed form of
    the whole script is checked here: a decode step's is, :func:`~scoville.sim.cycles
    .attention.decode_step`, against the timed model in ``tests/test_attention.py``.)"""
    ctx = context()
    sc = workload_script(ctx.config, ctx.workload, ctx.rng(3))
    await run_script(dut, ctx, "test_keep_up", sc, gaps=False)


@cocotb.test()
async def test_workload(dut):
    """The workload: ``seqs`` sequences, ``context`` tokens each, ``steps`` decode steps each,
    under the workload's gaps and back-pressure."""
    ctx = context()
    sc = workload_script(ctx.config, ctx.workload, ctx.rng(2))
    await run_script(dut, ctx, "test_workload", sc, gaps=True)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of the workload's steps: the block comes back empty (counters
    0, no beat offered) and runs the same commands from the start correctly."""
    ctx = context()
    sc = workload_script(ctx.config, ctx.workload, ctx.rng(6))
    await run_script(dut, ctx, "test_reset", sc, gaps=True, interrupt=True)
