"""Timed model of :class:`scoville.rtl.attention.Attention`: the block's picture in unit models
(:mod:`scoville.sim.cycles.unit`), one per RTL unit, joined by wires as the RTL connects them and
stepped together cycle by cycle: the cache's :class:`~scoville.sim.cycles.kvcache.Engine`, the
array's :class:`~scoville.sim.cycles.gemm.Engine`, and the block's own units, each written from
its RTL unit's docstring (``docs/attention.md`` draws them):

- the :class:`~scoville.sim.cycles.attention_control.Controller` takes a command, hands an
  alloc, free or append (a step's appends) to the cache, waits for its answer and (a step) for
  all ``q_heads`` Q vectors, starts the walking units, and answers once the last output has
  left;
- the :class:`~scoville.sim.cycles.attention_feeder.AppendFeeder` turns each K and V vector
  into ``token_lines`` cache lines, the :class:`~scoville.sim.cycles.attention_query
  .QueryBuffer` takes the Q vectors;
- the :class:`~scoville.sim.cycles.attention_walk.ReadIssuer` and the
  :class:`~scoville.sim.cycles.attention_walk.CommandIssuer` walk the step's chunks, asking the
  cache for each chunk's K, then V, and the array for its ``Q K^T``, then ``P V``;
- :class:`~scoville.sim.cycles.attention_transpose.LinesToBeats` turns the cache's lines into
  the array's B beats (K through the transposer, V through the token queue);
- the :class:`~scoville.sim.cycles.attention_sequencer.ASequencer` feeds the array's A stream:
  Q's columns, then, once the chunk's max is ready, P's;
- the :class:`~scoville.sim.cycles.attention_score.ScoreUnit` takes the array's rows: ``Q
  K^T``'s give the chunk's max, ``P V``'s pass on to the
  :class:`~scoville.sim.cycles.attention_normalizer.Normalizer`, which puts a head's outputs on
  ``o``.

:func:`timing` predicts every handshake on ``cmd``, ``q``, ``k``, ``v``, ``o`` and ``resp``
and every counter (the cache's as ``kv.*``, the array's as ``array.*``, the block's own).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from types import SimpleNamespace

from scoville.rtl.attention import OWN_COUNTERS, Op, Status
from scoville.rtl.gemm import COUNTERS as GEMM_COUNTER_LAYOUT
from scoville.rtl.kvcache import COUNTERS as CACHE_COUNTERS
from scoville.rtl.kvcache import Op as CacheOp

from . import gemm as gemm_timed
from . import kvcache as kvcache_timed
from .attention_control import Controller
from .attention_feeder import AppendFeeder
from .attention_normalizer import Normalizer
from .attention_query import QueryBuffer
from .attention_score import ScoreUnit
from .attention_sequencer import ASequencer
from .attention_transpose import LinesToBeats
from .attention_walk import CommandIssuer, ReadIssuer
from .stream import ALWAYS, Consumer, Producer, Schedule, Source, Timing
from .unit import Wire, run

__all__ = ["COUNTERS", "Parts", "decode_step", "macs", "prefill_step", "synthetic_step",
           "timing"]

#: Every counter of the block, by its dotted name.
COUNTERS = (*(f"kv.{c}" for c in CACHE_COUNTERS),
            *(f"array.{c}" for c, _ in GEMM_COUNTER_LAYOUT), *OWN_COUNTERS)


def macs(config, results) -> int:
    """The array's multiply-accumulates of the steps' chunks (``Q K^T`` and ``P V``)."""
    d = config.kv.head_dim + config.v_dim
    return sum(rows * d * n for r in results for _, _, n, rows in r.chunks)


def timing(config, results, sources: dict[str, Source] | None = None,
           ready: dict[str, Schedule] | None = None) -> Timing:
    """Timed model of a command sequence: ``results`` are the golden model's
    (:class:`~scoville.sim.golden.attention.Result`, which carry the cache requests and the
    chunks); ``sources`` the :class:`Source` of ``cmd``, ``q``, ``k`` and ``v``; ``ready`` the
    schedules of ``o`` and ``resp``. Returns the handshake cycles of the six streams and every
    counter (:data:`COUNTERS`)."""
    cfg = config
    error = cfg.rtl_error()
    if error:       # the model is the RTL's: what it cannot build, the model does not time
        raise ValueError(error)
    block = _Block(cfg, list(results), sources or {}, ready or {})
    run("attention", block.cycle, block.done, 10_000_000, block.parts)
    return block.timing()


class Parts:
    """The block's unit models and the wires between them, as the RTL connects them, with the
    block's streams as ports (``cmd``, ``q``, ``k``, ``v``, ``o``, ``resp``: a
    :class:`~scoville.sim.cycles.stream.Producer` or
    :class:`~scoville.sim.cycles.stream.Consumer` at the block's boundary, a
    :class:`~scoville.sim.cycles.unit.Wire` inside a block that composes this one; ``k`` and
    ``v`` may be one wire: the feeder takes K and V in its order). A cycle is :meth:`wires`
    (the inner wires from the units' state), then the composer's wires to the ports (from
    :attr:`cmd_ready`, :attr:`q_ready`, :meth:`kv_ready`, :attr:`o_valid`,
    :attr:`resp_valid`), then :meth:`step`. ``cmd``'s payloads are the golden model's
    results (:class:`~scoville.sim.golden.attention.Result`)."""

    def __init__(self, cfg, cmd, q, k, v, o, resp):
        kv = cfg.kv
        H, D, C, TL, SEC = kv.kv_heads, kv.head_dim, cfg.array.cols, kv.token_lines, kv.sections
        self.cmd, self.q, self.k, self.v, self.o, self.resp = cmd, q, k, v, o, resp
        self.c_req, self.c_wd, self.c_rd, self.c_resp = Wire(), Wire(), Wire(), Wire()
        self.cache = kvcache_timed.Engine(kv, self.c_req, self.c_wd, self.c_rd, self.c_resp)
        self.g_cmd, self.g_a, self.g_b, self.g_o = Wire(), Wire(), Wire(), Wire()
        self.array = gemm_timed.Engine(cfg.array, self.g_cmd, self.g_a, self.g_b, self.g_o)
        self.ctrl_req, self.read_req, self.pv = Wire(), Wire(), Wire()
        self.ctrl = Controller(cfg.max_step_tokens, cfg.q_heads, cmd, resp, self.ctrl_req,
                               self.c_resp)
        self.feeder = AppendFeeder(kv_heads=H, sections=SEC, token_lines=TL, k=k, v=v,
                                   wd=self.c_wd)
        self.query = QueryBuffer(q)
        self.beats = LinesToBeats(dim=D, cols=C, token_lines=TL, v_lines=cfg.v_lines,
                                  v_tiles=cfg.v_tiles, v_queue=cfg.v_queue, i=self.c_rd,
                                  o=self.g_b)

        @functools.cache
        def program(m, k, n):
            return gemm_timed.programs(cfg.array, [(m, k, n)])[0]

        self.issuer = CommandIssuer(program, D, cfg.v_dim, self.g_cmd)
        self.reader = ReadIssuer(cfg.v_tiles, self.read_req)
        self.aseq = ASequencer(D, C, cfg.v_tiles, self.g_a)
        self.score = ScoreUnit(C, cfg.v_tiles, self.g_o, self.pv)
        self.norm = Normalizer(cfg.v_tiles, self.pv, o)
        self.own = dict.fromkeys(OWN_COUNTERS, 0)

    @property
    def cmd_ready(self) -> bool:
        return self.ctrl.state == "IDLE"

    @property
    def q_ready(self) -> bool:
        return not self.query.idle

    def kv_ready(self, t: int) -> bool:
        """The feeder takes a K or V vector in cycle ``t`` (whichever is next; from the
        cache's state at the cycle's start, as the other ports' readiness)."""
        return self.feeder.in_ready(self.cache.wd_ready)

    @property
    def o_valid(self) -> bool:
        return self.norm.o_valid

    @property
    def resp_valid(self) -> bool:
        return self.ctrl.resp_valid

    def parts(self) -> dict:
        """The unit models, then the wires between them, by name (a trace's columns)."""
        units = ("ctrl", "feeder", "query", "reader", "issuer", "cache", "beats", "array",
                 "aseq", "score", "norm")
        wires = {"cache.req": self.c_req, "cache.wd": self.c_wd, "cache.rd": self.c_rd,
                 "cache.resp": self.c_resp, "array.cmd": self.g_cmd, "array.a": self.g_a,
                 "array.b": self.g_b, "array.o": self.g_o, "pv": self.pv,
                 "ctrl.req": self.ctrl_req, "reader.req": self.read_req}
        return {**{name: getattr(self, name) for name in units}, **wires}

    def wires(self, t: int) -> None:
        """Cycle ``t``'s inner wires and the units' inputs, from their state at its start."""
        ctrl, cache, array, reader, score, aseq, norm = (
            self.ctrl, self.cache, self.array, self.reader, self.score, self.aseq, self.norm)
        # The controller's outputs to the units.
        ctrl.feed_idle, ctrl.q_idle = self.feeder.idle, self.query.idle
        ctrl.finished = score.done and norm.idle and not norm.o_valid
        if ctrl.start:
            res = ctrl.res
            for unit in (self.issuer, aseq, score):
                unit.start(res.chunks)
            reader.start(res.chunks, res.cache[res.tokens:])
        self.feeder.start, self.query.start = ctrl.feed_start, ctrl.q_start
        self.feeder.drop = ctrl.drop
        aseq.attending = score.attending = ctrl.attending
        # The cache: the read issuer's requests while the step attends, else the controller's.
        self.read_req.set(reader.valid, cache.req_ready)
        self.ctrl_req.set(ctrl.req_valid, cache.req_ready)
        payload = reader.payload if reader.valid else ctrl.req_payload if ctrl.req_valid \
            else None
        self.c_req.set(payload is not None, cache.req_ready, payload)
        self.c_wd.set(self.feeder.wd_valid, cache.wd_ready)
        self.c_rd.set(cache.rd_valid, self.beats.i_ready(t), cache.rd_last)
        self.c_resp.set(cache.resp_valid, ctrl.cache_resp_ready)
        # The array: commands, A, B; its rows to the score unit and on to the normalizer.
        self.g_cmd.set(self.issuer.valid, array.ready, self.issuer.payload)
        self.g_a.set(aseq.a_valid, array.a_ready)
        self.g_b.set(self.beats.o_valid, array.b_ready)
        self.pv.set(False, norm.idle)
        self.g_o.set(array.o_valid, score.rows_ready(t))
        self.pv.set(score.pv_valid(t), norm.idle, score.pv_payload)
        aseq.max_ready = score.max_ready
        score.max_done = aseq.max_done(t)

    def step(self, t: int) -> None:
        """Counts cycle ``t`` and steps every unit (the ports set)."""
        own, ctrl, norm = self.own, self.ctrl, self.norm
        own["steps"] += ctrl.stepped
        own["append_cycles"] += ctrl.appending
        own["attend_cycles"] += ctrl.attending
        own["softmax_waits"] += self.aseq.waiting
        own["out_stalls"] += norm.o_valid and not self.o.accepts(t)
        for unit in (self.cache, self.array, ctrl, self.feeder, self.query, self.reader,
                     self.issuer, self.beats, self.aseq, norm, self.score):
            unit.step(t)

    def counters(self) -> dict[str, int]:
        counters = {f"kv.{k}": v for k, v in self.cache.counters.items()}
        counters.update({f"array.{k}": v for k, v in self.array.counters.items()})
        counters.update(self.own)
        return counters


class _Block:
    """The block alone: :class:`Parts` between the testbench's streams."""

    def __init__(self, cfg, results, sources, ready):
        kv = cfg.kv
        H, SEC = kv.kv_heads, kv.sections
        vec = {"q": 0, "k": 0, "v": 0}
        for r in results:
            if r.op == Op.STEP:
                vec["q"] += cfg.q_heads * r.tokens
            if r.op in (Op.STEP, Op.APPEND):
                vec["k"] += H * r.tokens
                vec["v"] += H * r.tokens * (SEC - 1)
        self.results = results
        self.n_out = sum(len(r.out) for r in results if r.out is not None)
        self.ins = {name: Producer(sources.get(name, Source()), vec[name]) for name in vec}
        self.cmd = Producer(sources.get("cmd", Source()), len(results), results)
        self.o, self.resp = Consumer(ready.get("o", ALWAYS)), Consumer(ready.get("resp", ALWAYS))
        self.p = Parts(cfg, self.cmd, self.ins["q"], self.ins["k"], self.ins["v"], self.o,
                       self.resp)

    def done(self) -> bool:
        return len(self.resp.cycles) == len(self.results) and len(self.o.cycles) == self.n_out

    def parts(self) -> dict:
        return self.p.parts()

    def cycle(self, t: int) -> int:
        """Cycle ``t``: every wire and input from the units' state at its start, then every
        unit steps."""
        self.p.wires(t)
        self.p.step(t)
        return t + 1

    def timing(self) -> Timing:
        ins = self.ins
        return Timing({"cmd": self.cmd.cycles, "q": ins["q"].cycles, "k": ins["k"].cycles,
                       "v": ins["v"].cycles, "o": self.o.cycles, "resp": self.resp.cycles},
                      self.p.counters())


def synthetic_step(config, length: int, plan: list[int] | None = None, window: int = 0,
                   tokens: int = 1):
    """A step as :func:`timing` reads it, without values (the timing does not depend on them):
    the appends of the step's ``tokens`` new tokens (the sequence then holds ``length``) and,
    for each row tile (:meth:`~scoville.rtl.attention.AttentionConfig.tiles`) and KV head,
    reads of its chunks (K, then V's column tiles), as the golden model's
    :class:`~scoville.sim.golden.attention.Result` carries them. ``plan``: the chunk sizes of
    a step of one row tile of ``tokens`` tokens (None: its own; ``window`` then unused);
    ``window`` the step's own sliding window (0: the config's)."""
    _check_tokens(config, tokens)
    kv, H = config.kv, config.kv.kv_heads
    cache = [SimpleNamespace(op=CacheOp.APPEND, status=Status.OK, reached="done",
                             new_page=(p - 1) % kv.page_tokens == 0, copied=False, data=(),
                             walked=0)
             for p in range(length - tokens + 1, length + 1)]
    if plan is not None:
        assert tokens <= config.row_tokens, "a plan is a step of one row tile's"
        tiles = [(tokens, [(None, n) for n in plan])]
    else:
        tiles = [(count, config.chunk_plan(lo, hi))
                 for _, count, lo, hi in config.tiles(length, tokens, window)]
    chunks = []
    for i, (count, plan_i) in enumerate(tiles):
        rows = count * config.group if count else config.group
        for h in range(H):
            a0 = 0
            for start, n in plan_i:
                a0 = a0 if start is None else start
                chunks.append((i * H + h, a0, n, rows))
                a0 += n
                k_read = SimpleNamespace(op=CacheOp.READ, status=Status.OK,
                                         data=range(n * kv.token_lines), walked=0)
                v_read = SimpleNamespace(op=CacheOp.READ, status=Status.OK,
                                         data=range(n * config.v_lines), walked=0)
                cache += [k_read] + [v_read] * config.v_tiles
    return SimpleNamespace(op=Op.STEP, status=Status.OK, out=range(config.q_heads * tokens),
                           length=length, cache=cache, chunks=chunks, tokens=tokens,
                           window=window)


def _check_tokens(config, tokens: int) -> None:
    """A step the block refuses (more tokens than its mode takes) has no time: say so."""
    most = config.max_step_tokens
    if not 1 <= tokens <= most:
        raise ValueError(f"a step of {tokens} tokens: the attention block in {config.mode} "
                         f"mode takes 1..{most}")


def _with_heads(config, heads: int):
    """``config`` with ``heads`` KV heads (the same group)."""
    kv = dataclasses.replace(config.kv, kv_heads=heads)
    return dataclasses.replace(config, kv=kv, q_heads=config.group * heads)


@functools.cache
def _step_counts(config, length: int, heads: int, plan: tuple[int, ...],
                 tokens: int = 1) -> dict[str, int]:
    """:func:`timing` of one step of one row tile of ``tokens`` tokens (streams that keep up)
    on ``config`` with ``heads`` KV heads, its command offered from cycle 0: ``cycles`` to its
    answer, and every counter."""
    cfg = _with_heads(config, heads)
    return _run(cfg, synthetic_step(cfg, length, list(plan), tokens=tokens))


def _run(config, step) -> dict[str, int]:
    """:func:`timing` of ``step`` alone: ``cycles`` to its answer, and every counter."""
    t = timing(config, [step])
    return {"cycles": t.cycles, **t.counters}


#: Full chunks the fast path runs before it takes a step's counts as affine in the chunks: the
#: pipeline settles into a chunk-periodic state within them.
_WARM = 4
#: KV heads likewise (the first head's start differs from the next ones').
_WARM_HEADS = 2


def decode_step(config, length: int, window: int = 0) -> dict[str, int]:
    """The fast path: one decode step of a sequence that holds ``length`` tokens once the
    step's own token is appended, with streams that keep up, at any size: ``cycles`` from
    the command's handshake to the answer's, plus every counter (:data:`COUNTERS`;
    ``attend_cycles`` is the attention itself).

    Each KV head walks the same chunks (:meth:`~scoville.rtl.attention.AttentionConfig
    .chunk_plan`): a first and a last chunk and ``M`` full chunks between them, the heads one
    after another. Once the pipeline has settled (``_WARM`` full chunks, ``_WARM_HEADS``
    heads), each further full chunk adds the same counts, and each further head the same
    counts plus its chunks': every count is ``a + b M + c H + d H M``. The coefficients come
    from :func:`timing` itself on four small steps (the settled sizes and one more of each), so
    the fast path agrees with the cycle-level model wherever both run
    (``tests/test_attention.py`` checks every count). In the steady state a chunk of n tokens
    costs ``2 (n token_lines + 2)`` cycles when the cache's reads are the bottleneck (two reads
    of n lines, each 2 cycles apart: the default hardware), the array's two commands and the
    softmax between them otherwise."""
    return _tile(config, length, config.attended(length, window), 1)


def _tile(config, length: int, span: tuple[int, int], tokens: int) -> dict[str, int]:
    """Every count of a step of one row tile of ``tokens`` tokens attending positions ``span``
    (its sequence then holding ``length``), from :func:`timing` on small steps (see
    :func:`decode_step`)."""
    plan = [n for _, n in config.chunk_plan(*span)]
    # The steps' timing sees the length only in which appends open a page: any length with
    # the same place in a page gives the same counts (and the same cached run).
    canon = tokens + (length - tokens) % config.kv.page_tokens
    H = config.kv.kv_heads
    middle = len(plan) - 2
    # The points to run: the step itself where it is small, else two settled sizes.
    hs = (H,) if H <= _WARM_HEADS + 1 else (_WARM_HEADS, _WARM_HEADS + 1)
    ms = (middle,) if middle <= _WARM + 1 else (_WARM, _WARM + 1)

    def counts(h, mm):
        chunks = plan if mm == middle else (plan[0], *[plan[1]] * mm, plan[-1])
        return _step_counts(config, canon, h, tuple(chunks), tokens)

    t = {(h, mm): counts(h, mm) for h in hs for mm in ms}
    h0, m0 = hs[0], ms[0]
    # Steps of one head and of one chunk from the first point (0 where there is one point).
    dh, dm = H - h0, middle - m0
    out = {}
    for k, base in t[h0, m0].items():
        per_h = t[hs[-1], m0][k] - base
        per_m = t[h0, ms[-1]][k] - base
        cross = t[hs[-1], ms[-1]][k] - t[hs[-1], m0][k] - per_m
        out[k] = base + per_h * dh + per_m * dm + cross * dh * dm
    return out


def prefill_step(config, length: int, tokens: int, window: int = 0) -> dict[str, int]:
    """The fast path of a prefill step: ``tokens`` new tokens (at most ``q_tokens``), the
    sequence then holding ``length`` (``window`` the step's own, 0: the config's), with
    streams that keep up, at any size: ``cycles`` from the command's handshake to the
    answer's, plus every counter.

    The step's row tiles (:meth:`~scoville.rtl.attention.AttentionConfig.tiles`) run one after
    another, each its tokens' appends and then its KV heads' chunks: a step costs what its
    tiles cost as steps of their own (each as :func:`decode_step` computes one, from small
    steps of that tile's tokens), less what each pair of consecutive tiles shares (the second
    starts while the first drains; the overlap depends on the tile sizes and on the size of
    the first's last chunk, and is measured by :func:`timing` on a two-tile step against its
    tiles alone). Below :data:`_SETTLED` chunks of context, and where a window starts a tile
    past position 0 (its time then bounded by the window), the cycle model runs itself. Each
    size of a tile's last chunk costs a few small runs of the cycle model (cached): at a few
    thousand tokens the fast path takes about as long as the cycle model, and it pays off on
    longer sequences, where the cycle model's time grows with the context.
    ``tests/test_attention.py`` holds ``cycles`` and every count of work to the cycle model;
    the cache's idle, wait and stall counters (``kv.idle``, ``kv.read_waits``,
    ``kv.read_cycles``, ``kv.read_stalls``) are the tiles' sums less the overlaps', near the
    cycle model's but not equal to them."""
    _check_tokens(config, tokens)
    base = length - tokens
    tiles = config.tiles(length, tokens, window)
    if base < _SETTLED * config.chunk or tiles[-1][2] > 0:
        # a short sequence, or a window (each tile attends at most its window): the cycle
        # model itself, whose time does not grow with the context there
        return _run(config, synthetic_step(config, length, window=window, tokens=tokens))
    out = dict.fromkeys(("cycles", *COUNTERS), 0)
    for first, count, lo, hi in tiles:
        for k, v in _tile(config, base + first + count, (lo, hi), count).items():
            out[k] += v
    for (_, a, _, hi), (_, b, _, _) in itertools.pairwise(tiles):
        # the first tile's last chunk: every tile attends from position 0, in chunks aligned
        # to multiples of ``chunk``
        for k, v in _overlap(config, a, b, hi % config.chunk + 1).items():
            out[k] -= v
    return out


#: Chunks of context before a prefill step's tiles overlap as they do at any longer context.
_SETTLED = 2


@functools.cache
def _overlap(config, a: int, b: int, last: int) -> dict[str, int]:
    """What consecutive row tiles of ``a`` and ``b`` tokens share, the first's last chunk of
    ``last`` tokens (the shorter it is, the more of the first's end the second's start
    hides): their counts as steps of their own less a two-tile step's, on a sequence of
    :data:`_SETTLED` chunks before that chunk."""
    base = _SETTLED * config.chunk + last - a
    first = _run(config, synthetic_step(config, base + a, tokens=a))
    second = _run(config, synthetic_step(config, base + a + b, tokens=b))
    two = _run(config, synthetic_step(config, base + a + b, tokens=a + b))
    return {k: first[k] + second[k] - two[k] for k in two}
