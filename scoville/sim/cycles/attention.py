"""Timed model of :class:`scoville.rtl.attention.Attention`, built from its parts' models: the
cache's :class:`~scoville.sim.cycles.kvcache.Engine`, the array's
:class:`~scoville.sim.cycles.gemm.Engine` and the unit models of the block's components
(:class:`~scoville.sim.cycles.attention_feeder.AppendFeeder`,
:class:`~scoville.sim.cycles.attention_query.QueryBuffer`,
:class:`~scoville.sim.cycles.attention_transpose.LinesToBeats`,
:class:`~scoville.sim.cycles.attention_walk.ReadIssuer`,
:class:`~scoville.sim.cycles.attention_walk.CommandIssuer`), joined by wires
(:mod:`scoville.sim.cycles.unit`) and stepped together with the block's other units, cycle by
cycle, as the RTL connects them.

The block's units (``docs/attention.md`` draws them); those not yet components are a few
registers here:

- the *controller* takes a command, hands an alloc, free or append (a step's append) to the
  cache, waits for its answer and (a step) for all ``q_heads`` Q vectors, then attends until
  the last output has left, and answers;
- the *feeder* (a unit model) turns each K and V vector into ``token_lines`` cache lines (a
  vector is taken when the previous one's last line goes);
- the *read issuer* and the *command issuer* (unit models) walk the step's chunks (head by
  head), asking the cache for each chunk's K, then V (a read per column tile of ``P V`` when
  the value is wider than the array: a window of ``v_lines`` of each token's lines), and the
  array for each chunk's ``Q K^T`` (M = the tile's rows, K = head_dim, N = n), then ``P V``
  (M = the rows, K = n, N = v_dim), as soon as each takes one;
- the cache's lines go, read by read, through *lines to beats* (a unit model): to the *K
  joiner* and the *transposer* (two buffers of ``cols`` tokens, each emptied as ``head_dim``
  beats) or to the *V joiner* and the *token queue* (a beat per token's column tile); their
  beats go to the array's B stream in the same order;
- the *A sequencer* feeds the array's A stream through a two-stage pipeline: Q's columns for
  each tile of ``Q K^T``, then, once the score unit has the chunk's max, one column of P per
  token, once per column tile of ``P V``;
- the *score unit* takes the array's rows: ``Q K^T``'s (always ready), two cycles later the
  chunk's max is ready for the A sequencer; ``P V``'s (ready unless the normalizer is still
  busy with the previous head);
- the *normalizer* puts a head's outputs on ``o`` through a two-stage pipeline, a column tile
  of a row a cycle (a row leaves with its last tile).

:func:`timing` predicts every handshake on ``cmd``, ``q``, ``k``, ``v``, ``o`` and ``resp``
and every counter (the cache's as ``kv.*``, the array's as ``array.*``, the block's own).
"""

from __future__ import annotations

import dataclasses
import functools
from types import SimpleNamespace

from scoville.rtl.attention import OWN_COUNTERS, Op, Status
from scoville.rtl.gemm import COUNTERS as GEMM_COUNTER_LAYOUT
from scoville.rtl.kvcache import COUNTERS as CACHE_COUNTERS
from scoville.rtl.kvcache import Op as CacheOp

from . import gemm as gemm_timed
from . import kvcache as kvcache_timed
from .attention_feeder import AppendFeeder
from .attention_query import QueryBuffer
from .attention_transpose import LinesToBeats
from .attention_walk import ChunkWalk, CommandIssuer, ReadIssuer
from .stream import ALWAYS, Producer, Schedule, Source, Timing
from .unit import Wire

__all__ = ["COUNTERS", "decode_step", "macs", "timing"]

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
    sources, ready = sources or {}, ready or {}
    cfg = config
    kv = cfg.kv
    if cfg.mode == "decode" and cfg.group > cfg.array.rows:
        # The RTL refuses it (rtl_error): a decode group is the array's M.
        raise ValueError(f"parameter 'q_heads' = {cfg.q_heads} is not allowed with "
                         f"array.rows = {cfg.array.rows} in the timed model; allowed: at most "
                         f"array.rows * kv.kv_heads = {cfg.array.rows * kv.kv_heads}")
    H, D, C, TL = kv.kv_heads, kv.head_dim, cfg.array.cols, kv.token_lines
    QH = cfg.q_heads
    VD, VT, VL, SEC = cfg.v_dim, cfg.v_tiles, cfg.v_lines, kv.sections
    results = list(results)
    vec = {"q": 0, "k": 0, "v": 0}
    for r in results:
        if r.op == Op.STEP:
            vec["q"] += QH * r.tokens
        if r.op in (Op.STEP, Op.APPEND):
            vec["k"] += H * r.tokens
            vec["v"] += H * r.tokens * (SEC - 1)
    cmd = Producer(sources.get("cmd", Source()), len(results))
    ins = {name: Producer(sources.get(name, Source()), vec[name]) for name in vec}
    o_ready, resp_ready = ready.get("o", ALWAYS), ready.get("resp", ALWAYS)
    n_out = sum(len(r.out) for r in results if r.out is not None)
    o_cycles: list[int] = []
    resp_cycles: list[int] = []

    c_req, c_wd, c_rd, c_resp = Wire(), Wire(), Wire(), Wire()
    cache = kvcache_timed.Engine(kv, c_req, c_wd, c_rd, c_resp)
    a_wire, b_wire, g_cmd, g_o = Wire(), Wire(), Wire(), Wire()
    array = gemm_timed.Engine(cfg.array, g_cmd, a_wire, b_wire, g_o)
    feeder = AppendFeeder(kv_heads=H, sections=SEC, token_lines=TL, k=ins["k"], v=ins["v"],
                          wd=c_wd)
    query = QueryBuffer(ins["q"])
    beats = LinesToBeats(dim=D, cols=C, token_lines=TL, v_lines=VL, v_tiles=VT,
                         v_queue=cfg.v_queue, i=c_rd, o=b_wire)

    @functools.cache
    def program(m, k, n):
        return gemm_timed.programs(cfg.array, [(m, k, n)])[0]

    issuer = CommandIssuer(program, D, VD, g_cmd)
    r_req = Wire()
    reader = ReadIssuer(VT, r_req)

    own = dict.fromkeys(OWN_COUNTERS, 0)
    state = "IDLE"
    res = None
    tok_left = 0
    attending = False
    aqw = ocw = ChunkWalk([])
    reads = []  # the step's read outcomes
    read_lines: list[int] = []  # lines of each read, for the ends of reads on rd
    rd_at = rd_count = 0
    # The A sequencer.
    aq_k = aq_tb = aq_j = aq_vt = 0
    s1 = a_valid = False
    max_ready = alpha_pending = False
    # The score unit and the normalizer.
    oc_r = oc_tb = oc_vt = 0
    n_left = n_vt = n1_vt = 0
    n1 = out_valid = False

    t = 0
    limit = 10_000_000
    while len(resp_cycles) < len(results) or len(o_cycles) < n_out:
        if t > limit:
            raise RuntimeError(f"attention timed model: no progress after {t} cycles")
        # ---- This cycle's signals, from the state at its start.
        cmd_offer = state == "IDLE" and cmd.offers(t)
        resp_go = state == "RESP" and resp_ready[t]
        o_go = out_valid and o_ready[t]
        req = None
        if reader.valid:  # the block gives the cache the reader's request first
            req = reader.payload
        elif state == "REQ":
            req = res.cache[res.tokens - tok_left if res.op == Op.STEP else 0]
        r_req.set(reader.valid, cache.req_ready)
        feeder.drop = state == "DRAIN"
        feeder.start = query.start = None
        # Lines to beats, beats to the array.
        rd_ready = beats.i_ready(t)
        rd_last = cache.rd_valid and rd_count + 1 == read_lines[rd_at]
        b_wire.set(beats.o_valid, array.b_ready)
        a_wire.set(a_valid, array.a_ready)
        en_a = not a_valid or array.a_ready
        o_ready_g = not ocw.sub or (n_left == 0 and not n1)
        take_row = array.o_valid and o_ready_g and attending
        norm_idle = n_left == 0 and not n1
        finished = ocw.done and norm_idle and not out_valid
        issue_q = attending and not aqw.done and not aqw.sub
        issue_p = attending and not aqw.done and aqw.sub and max_ready
        waits = attending and not aqw.done and aqw.sub and not max_ready

        # ---- The parts.
        c_req.set(req is not None, cache.req_ready, req)
        c_wd.set(feeder.wd_valid, cache.wd_ready)
        c_rd.set(cache.rd_valid, rd_ready, rd_last)
        c_resp.set(cache.resp_valid, state in ("WAIT", "ATTEND"))
        cache.step(t)
        took_req, took_resp = c_req.taken, c_resp.taken
        g_cmd.set(issuer.valid, array.ready, issuer.payload)
        g_o.set(array.o_valid, o_ready_g)
        array.step(t)

        # ---- Counters of this cycle.
        if state in ("REQ", "WAIT", "QWAIT") and res.op == Op.STEP:
            own["append_cycles"] += 1
        own["attend_cycles"] += attending
        own["out_stalls"] += out_valid and not o_ready[t]

        # ---- The controller.
        if state == "IDLE":
            if cmd_offer:
                cmd.take(t)
                res = results[cmd.sent - 1]
                state = "DISPATCH"
        elif state == "DISPATCH":
            op = res.op
            if op in (Op.ALLOC, Op.FREE):
                state = "REQ"
            elif op == Op.APPEND:
                feeder.start, tok_left, state = 0, 1, "REQ"
            elif op == Op.STEP:
                feeder.start = res.tokens - 1
                query.start, tok_left = QH * res.tokens, res.tokens
                if res.tokens > cfg.max_step_tokens:
                    state = "DRAIN"
                else:
                    state = "REQ"
                    own["steps"] += 1
            else:
                state = "RESP"
        elif state == "DRAIN":
            if feeder.idle and query.idle:
                state = "RESP"
        elif state == "REQ":
            if took_req:
                state = "WAIT"
        elif state == "WAIT":
            if took_resp:
                tok_left -= 1
                if res.op != Op.STEP:
                    state = "RESP"
                else:
                    state = "REQ" if tok_left else "QWAIT"
        elif state == "QWAIT":
            if query.idle:
                if res.status == Status.OK:
                    attending = True
                    chunks = res.chunks
                    aqw, ocw = (ChunkWalk(chunks) for _ in range(2))
                    issuer.start(chunks)
                    reads = res.cache[res.tokens:]
                    reader.start(chunks, reads)
                    read_lines, rd_at, rd_count = [len(o.data) for o in reads], 0, 0
                    state = "ATTEND"
                else:
                    state = "RESP"
        elif state == "ATTEND":
            if finished:
                attending = False
                state = "RESP"
        elif state == "RESP":
            if resp_go:
                resp_cycles.append(t)
                state = "IDLE"
        # ---- The feeder and Q.
        feeder.step(t)
        query.step(t)
        # ---- The read issuer and the command issuer.
        reader.step(t)
        issuer.step(t)
        # ---- Lines to beats.
        beats.step(t)
        if c_rd.taken:
            rd_count += 1
            if rd_last:
                rd_at, rd_count = rd_at + 1, 0
        # ---- The A sequencer.
        own["softmax_waits"] += waits
        if en_a:
            a_valid, s1 = s1, issue_q or issue_p
            if issue_q:
                if aq_k == D - 1:
                    aq_k = 0
                    if aq_tb + C >= aqw.n:
                        aq_tb, aqw.sub, aq_j = 0, 1, 0
                    else:
                        aq_tb += C
                else:
                    aq_k += 1
            if issue_p:
                if aq_j != aqw.n - 1:
                    aq_j += 1
                elif aq_vt != VT - 1:  # P again, for V's next column tile
                    aq_j, aq_vt = 0, aq_vt + 1
                else:
                    max_ready, aq_j, aq_vt = False, 0, 0
                    aqw.advance()
        # ---- The normalizer (from its state at the cycle's start).
        if o_go:
            o_cycles.append(t)
        if not out_valid or o_ready[t]:
            # A row leaves after its VT column tiles.
            out_valid, n1, n1_vt = n1 and n1_vt == VT - 1, n_left != 0, n_vt
            if n_left:
                if n_vt == VT - 1:
                    n_vt, n_left = 0, n_left - 1
                else:
                    n_vt += 1
        # ---- The score unit.
        if alpha_pending:
            alpha_pending, max_ready = False, True
        if take_row and not ocw.sub:
            if oc_r == ocw.rows - 1:
                oc_r = 0
                if oc_tb + C >= ocw.n:
                    oc_tb, ocw.sub, alpha_pending = 0, 1, True
                else:
                    oc_tb += C
            else:
                oc_r += 1
        elif take_row:
            if oc_r != ocw.rows - 1:
                oc_r += 1
            elif oc_vt != VT - 1:  # the next column tile of P V's rows
                oc_r, oc_vt = 0, oc_vt + 1
            else:
                oc_r = oc_vt = 0
                if ocw.last_of_head:
                    n_left, n_vt = ocw.rows, 0
                ocw.advance()
        t += 1
    counters = {f"kv.{k}": v for k, v in cache.counters.items()}
    counters.update({f"array.{k}": v for k, v in array.counters.items()})
    counters.update(own)
    return Timing({"cmd": cmd.cycles, "q": ins["q"].cycles, "k": ins["k"].cycles,
                   "v": ins["v"].cycles, "o": o_cycles, "resp": resp_cycles}, counters)


def _synthetic_step(config, length: int, plan: list[int]):
    """A decode step as :func:`timing` reads it, without values: the append of the step's token
    (the sequence then holds ``length`` tokens) and, for each KV head, reads of ``plan``'s
    chunk sizes (K, then V)."""
    kv = config.kv
    append = SimpleNamespace(op=CacheOp.APPEND, status=Status.OK, reached="done",
                             new_page=(length - 1) % kv.page_tokens == 0, copied=False,
                             data=(), walked=0)
    chunks, cache = [], [append]
    for h in range(kv.kv_heads):
        a0 = 0
        for n in plan:
            chunks.append((h, a0, n, config.group))
            a0 += n
            k_read = SimpleNamespace(op=CacheOp.READ, status=Status.OK,
                                     data=range(n * kv.token_lines), walked=0)
            v_read = SimpleNamespace(op=CacheOp.READ, status=Status.OK,
                                     data=range(n * config.v_lines), walked=0)
            cache += [k_read] + [v_read] * config.v_tiles
    return SimpleNamespace(op=Op.STEP, status=Status.OK, out=range(config.q_heads),
                           cache=cache, chunks=chunks, tokens=1)


def _with_heads(config, heads: int):
    """``config`` with ``heads`` KV heads (the same group)."""
    kv = dataclasses.replace(config.kv, kv_heads=heads)
    return dataclasses.replace(config, kv=kv, q_heads=config.group * heads)


@functools.cache
def _step_counts(config, length: int, heads: int, plan: tuple[int, ...]) -> dict[str, int]:
    """:func:`timing` of one step (streams that keep up) on ``config`` with ``heads`` KV heads,
    its command offered from cycle 0: ``cycles`` to its answer, and every counter."""
    cfg = _with_heads(config, heads)
    t = timing(cfg, [_synthetic_step(cfg, length, list(plan))])
    return {"cycles": t.cycles, **t.counters}


#: Full chunks the fast path runs before it takes a step's counts as affine in the chunks: the
#: pipeline settles into a chunk-periodic state within them.
_WARM = 4
#: KV heads likewise (the first head's start differs from the next ones').
_WARM_HEADS = 2


def decode_step(config, length: int) -> dict[str, int]:
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
    lo, hi = config.attended(length)
    plan = [n for _, n in config.chunk_plan(lo, hi)]
    H = config.kv.kv_heads
    middle = len(plan) - 2
    # The points to run: the step itself where it is small, else two settled sizes.
    hs = (H,) if H <= _WARM_HEADS + 1 else (_WARM_HEADS, _WARM_HEADS + 1)
    ms = (middle,) if middle <= _WARM + 1 else (_WARM, _WARM + 1)

    def counts(h, mm):
        chunks = plan if mm == middle else (plan[0], *[plan[1]] * mm, plan[-1])
        return _step_counts(config, length, h, tuple(chunks))

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
