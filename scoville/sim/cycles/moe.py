"""Cycle model of the MoE block (:class:`scoville.rtl.moe.Moe`) and its fast path.

:func:`timing` is the block's picture in unit models (:mod:`scoville.sim.cycles.unit`), one per
RTL unit, joined by wires as the RTL connects them and stepped together cycle by cycle: the
sequencer (:mod:`~scoville.sim.cycles.moe_sequencer`), the input split
(:mod:`~scoville.sim.cycles.moe_input`), the router and the dispatch
(:mod:`~scoville.sim.cycles.moe_router`), the quantizers and SwiGLU
(each a :class:`~scoville.sim.cycles.stream.StallPipeline` of its config's latency), the
stores' writers and A feeders and the line packer (:mod:`~scoville.sim.cycles.moe_acts`), the
weight requests (:mod:`~scoville.sim.cycles.moe_requests`), the fetch engine and the memory
(:mod:`~scoville.sim.cycles.fetch`, :mod:`~scoville.sim.cycles.memory`), the weight tiles
(:mod:`~scoville.sim.cycles.moe_weights`), the array (:mod:`~scoville.sim.cycles.gemm`) and
the combine (:mod:`~scoville.sim.cycles.moe_combine`). :func:`layer` is the fast path.

The router takes a token's ``hidden / x_lanes`` beats of ``x`` one a cycle (as the stream
gives them), then works alone for :func:`route_latency` cycles before its answer is valid on
``o``; it takes the next token's ``x`` once the answer has been taken.

The dispatch takes a batch's beats one a cycle (as the stream gives them), then sorts for
:func:`dispatch_latency` cycles; its sorted beats are then valid on ``o`` every cycle until
the last is taken, and the next batch's first beat is taken from the cycle after.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from types import SimpleNamespace

from scoville.rtl.gemm import COUNTERS as GEMM_COUNTER_LAYOUT
from scoville.rtl.moe import OWN_COUNTERS
from scoville.rtl.moe_swiglu import SwigluConfig
from scoville.rtl.mx_quant import MxQuantConfig
from scoville.sim.harness import MEM_QUEUE

from . import fetch as fetch_timed
from . import gemm as gemm_timed
from .memory import MemoryAgent
from .moe_acts import LinePacker, StoreFeeder, StoreWriter
from .moe_combine import Combine
from .moe_input import XSplit
from .moe_requests import WeightRequests
from .moe_router import Dispatch, Router
from .moe_sequencer import Sequencer
from .moe_weights import TileStream, WeightTiles, tile_fields
from .stream import ALWAYS, Consumer, Producer, Queue, Schedule, Source, StallPipeline, Timing
from .unit import Wire, run

__all__ = ["COUNTERS", "Batch", "Parts", "dispatch_latency", "layer", "route_cycles",
           "route_latency", "timing"]

#: Every scalar counter of the block, as the testbench reads them: the array's, then its own.
#: With ``expert_counters`` the models also give :data:`EXPERT_COUNTERS`, a list each (one
#: entry per expert, the shared one last).
COUNTERS = (*(f"array.{c}" for c, _ in GEMM_COUNTER_LAYOUT), *OWN_COUNTERS)

#: The quantizers' register stages and the SwiGLU unit's: their configs' defaults, as the
#: block builds them.
_MXQ_LATENCY = MxQuantConfig().latency
_GLU_LATENCY = SwigluConfig().latency


def route_latency(config) -> int:
    """Cycles from the clock edge that takes a token's last ``x`` element to the first cycle
    its answer is valid on ``o``: GPT-OSS the bias (1), the choices (``top_k``) and the weights
    (1); DeepSeek one sigmoid a cycle (``experts``), the group scores (1), the kept groups
    (``topk_group``), the choices (``top_k``) and the weights (1)."""
    if config.router == "deepseek":
        return config.experts + 1 + config.topk_group + config.top_k + 1
    return 1 + config.top_k + 1


def route_cycles(config, tokens: int) -> int:
    """The front end's routing, streams that keep up: each token's ``hidden / x_lanes`` beats,
    :func:`route_latency`, and the cycle its answer is taken; the cycle the last token's answer
    is taken, from the batch's first beat of ``x``."""
    return tokens * (config.hidden // config.x_lanes + route_latency(config) + 1)


def dispatch_latency(config, tokens: int, experts: int) -> int:
    """Cycles from the clock edge that takes a batch's last beat to the first cycle its first
    sorted beat is valid: a cycle per expert chosen at all (``experts``), one per choice
    (``tokens * top_k``), and one to open the first expert's group."""
    return experts + tokens * config.top_k + 1


@dataclass(frozen=True)
class Batch:
    """One ``cmd`` of the block, as the golden model sees it: ``tokens`` (T), and ``groups``,
    the dispatch's expert groups ``(expert, tokens)`` in ascending expert order
    (:func:`scoville.sim.golden.moe.dispatch`), None for a refused command; ``fault``: a
    weight response of the batch came with a misplaced ``last`` (the batch ends without
    output)."""

    tokens: int
    groups: tuple[tuple[int, int], ...] | None
    fault: bool = False


def timing(config, batches, sources: dict[str, Source] | None = None,
           ready: dict[str, Schedule] | None = None,
           memory: MemoryAgent | None = None) -> Timing:
    """The cycle of every handshake on ``cmd``, ``x``, ``req``, ``rdata`` and ``o`` for
    ``batches`` (:class:`Batch`), the router's weights already loaded; ``sources`` of ``cmd``
    and ``x``, ``ready`` of ``o`` and ``req``, the memory answering as ``memory`` does (a
    fresh :class:`~scoville.sim.cycles.memory.MemoryAgent`; the model steps it).

    The block's unit models, one per RTL unit, stepped together cycle by cycle as the RTL
    connects them (:class:`Parts`)."""
    batches = list(batches)
    if batches and batches[-1].fault:
        raise ValueError("a batch with a weight fault ends the run without output: follow it "
                         "with another batch")
    cfg, sources, ready = config, sources or {}, ready or {}
    good = [b for b in batches if b.groups is not None]
    n_out = sum(b.tokens * cfg.down_tiles for b in good if not b.fault)
    cmd = Producer(sources.get("cmd", Source()), len(batches), batches)
    x = Producer(sources.get("x", Source()),
                 sum(b.tokens * cfg.hidden // cfg.x_lanes for b in good))
    o = Consumer(ready.get("o", ALWAYS))
    req, rdata = Wire(), Wire()
    P = cfg.weight_port_bits
    mem = memory or MemoryAgent(1, P // 8, P)
    mem.attach(req, rdata, ready.get("req", ALWAYS))
    block = Parts(cfg, cmd, x, o, req, rdata)

    def cycle(t: int) -> int:
        req.set(block.fetch.req_valid, mem.req_ready(t), block.fetch.req_size)
        rdata.set(mem.offers(t), block.fetch.rdata_ready)
        block.cycle(t)
        mem.step(t)
        return t + 1

    run("moe", cycle, lambda: len(o.cycles) == n_out and cmd.sent == len(batches), 50_000_000,
        lambda: {**block.parts(), "mem": mem})
    own = dict(block.own, weight_words=len(mem.cycles))
    counters = {**{f"array.{c}": v for c, v in block.array.counters.items()}, **own}
    if cfg.expert_counters:
        counters.update(tokens_of=block.tokens_of, cycles_of=block.cycles_of)
    return Timing({"cmd": cmd.cycles, "x": x.cycles, "req": req.cycles, "rdata": mem.cycles,
                   "o": o.cycles}, counters)


class Parts:
    """The MoE block's unit models and the wires between them, as the RTL connects them,
    between its ports: ``cmd`` (payloads :class:`Batch`) and ``x`` (input ports), ``o`` (an
    output port) and the weight port's ``req`` and ``rdata`` (wires the caller sets from
    :attr:`fetch` and the memory, or a memory mux, before :meth:`cycle`). A composed block
    steps it beside its other parts."""

    def __init__(self, cfg, cmd, x, o, req, rdata):
        H, I_, C, R = cfg.hidden, cfg.intermediate, cfg.array.cols, cfg.array.rows
        self.cfg, self.cmd, self.x, self.o = cfg, cmd, x, o
        self.w = w = SimpleNamespace(**{name: Wire() for name in (
            "router", "line", "xq", "xst", "c", "entry", "fcmd", "tile", "words", "g_cmd",
            "g_a", "g_b", "g_o", "feed", "xcmd", "hcmd", "a_x", "a_h", "glu", "pack", "hq",
            "hw", "hst", "rows", "tileq")})
        self._k, self._rows = (I_, H), R  # the array's K in the down and gate-up phases
        XL = cfg.x_lanes
        self.fetch = fetch_timed.Engine(cfg.fetch, w.fcmd, req, rdata, w.words)
        self.array = gemm_timed.Engine(cfg.array, w.g_cmd, w.g_a, w.g_b, w.g_o)
        self.seq = Sequencer(cfg, cmd, w.entry, w.g_cmd, w.feed, w.xcmd, w.hcmd)
        self.split = XSplit(H, x, w.router, w.line, XL)
        self.router = Router(H // XL, route_latency(cfg), w.router, w.c)
        self.dispatch = Dispatch(functools.partial(dispatch_latency, cfg), w.c, w.entry)
        self.xq = StallPipeline(_MXQ_LATENCY, w.line, w.xq)
        self.xw = StoreWriter(w.xq, w.xst)
        self.requests = WeightRequests(cfg, w.fcmd, w.tile)
        #: The descriptors' queue (``tile_queue``): the requests run ahead of the loader.
        self.tileq = Queue(cfg.tile_queue, w.tile, w.tileq) if cfg.tile_queue else None
        self.tiles = WeightTiles(cfg.tile_format, w.tileq if cfg.tile_queue else w.tile,
                                 w.words, w.feed, w.g_b)
        self.xfeed = StoreFeeder(H, R, w.xcmd, w.a_x)
        self.hfeed = StoreFeeder(I_, R, w.hcmd, w.a_h)
        self.glu = StallPipeline(_GLU_LATENCY, w.glu, w.pack)
        self.pack = LinePacker(C // 2, cfg.gate_up_tiles, w.pack, w.hq)
        self.hq = StallPipeline(_MXQ_LATENCY, w.hq, w.hw)
        self.hw = StoreWriter(w.hw, w.hst)
        self.combine = Combine(cfg.down_tiles, w.rows, o)
        self.n = self.routed = self.cur_e = 0
        self.own = dict.fromkeys(OWN_COUNTERS, 0)
        self.tokens_of, self.cycles_of = [0] * cfg.all_experts, [0] * cfg.all_experts

        @functools.cache
        def program(m, k):
            return gemm_timed.programs(cfg.array, [(m, k, C)])[0]

        self.program = program

    def parts(self) -> dict:
        """The unit models, then the wires between them, by name (a trace's columns)."""
        units = ("seq", "split", "router", "dispatch", "xq", "xw", "requests", "tileq", "fetch",
                 "tiles", "array", "xfeed", "hfeed", "glu", "pack", "hq", "hw", "combine")
        return {**{name: getattr(self, name) for name in units
                   if getattr(self, name) is not None},
                **{f"w.{name}": wire for name, wire in vars(self.w).items()}}

    def wires(self, t: int) -> None:
        """Every wire of cycle ``t`` from the units' state at its start (a pass-through's
        ``ready`` set before its producer's ``valid`` is asked): :meth:`cycle`'s first half (a
        composed block sets its own wires around it, then calls :meth:`step`)."""
        w, seq, array, split, xq, hq = self.w, self.seq, self.array, self.split, self.xq, self.hq
        fetch, tiles, req = self.fetch, self.tiles, self.requests
        # x: split to the router and the quantizer, into the x store (always ready).
        xq_valid = xq.o_valid
        w.xq.set(xq_valid, True)
        w.xst.set(xq_valid, True)
        taking, xq_ready = self.router.taking, xq.i_ready(t)
        w.router.ready, w.line.ready = taking, xq_ready
        w.router.set(split.router_valid(t), taking)
        w.line.set(split.line_valid(t), xq_ready)
        batch = seq.batch
        last = batch is not None and self.routed == batch.tokens - 1
        w.c.set(self.router.o_valid(t), not self.dispatch.sorting,
                batch.groups if last else None)
        w.entry.set(self.dispatch.o_valid(t), seq.entry_ready, self.dispatch.o_payload)
        # The weights: requests, fetch and the memory, the tiles.
        f_valid, t_valid = req.fetch_valid, req.tile_valid
        w.fcmd.set(f_valid, fetch.ready, req.fetch_payload if f_valid else None)
        q = self.tileq
        if q is None:
            w.tile.set(t_valid, tiles.tile_ready, req.tile_payload if t_valid else None)
        else:
            w.tileq.set(q.o_valid, tiles.tile_ready, q.o_payload)
            w.tile.set(t_valid, q.i_ready(t), req.tile_payload if t_valid else None)
        w.words.set(fetch.o_valid, tiles.words_ready)
        # A column tile's commands; A, B; the array's rows to SwiGLU (gate-up) or the
        # combine (down); SwiGLU's lines quantized into the h store (always ready).
        g, b, xa, ha = seq.tile_valid()
        n, gu, a_ready = self.n, seq.gu, array.a_ready
        if g:
            w.g_cmd.set(True, array.ready, self.program(n, self._k[gu]))
        else:
            w.g_cmd.set(False)
        w.feed.set(b, tiles.cmd_ready, -(-n // self._rows))
        x_busy, h_busy = self.xfeed.busy, self.hfeed.busy
        w.xcmd.set(xa, not x_busy, n)
        w.hcmd.set(ha, not h_busy, n)
        w.a_x.set(x_busy, a_ready)
        w.a_h.set(h_busy, a_ready)
        w.g_a.set(x_busy or h_busy, a_ready)
        w.g_b.set(tiles.b_valid, array.b_ready)
        hq_valid, hq_ready = hq.o_valid, hq.i_ready(t)
        w.hw.set(hq_valid, True)
        w.hst.set(hq_valid, True)
        w.hq.ready = hq_ready
        w.pack.set(self.glu.o_valid, self.pack.i_ready(t))
        w.hq.set(self.pack.o_valid(t), hq_ready)
        o_valid, glu_ready = array.o_valid, self.glu.i_ready(t)
        w.glu.set(o_valid and gu, glu_ready)
        w.rows.set(o_valid and not gu, True)
        w.g_o.set(o_valid, glu_ready if gu else True)

    def cycle(self, t: int) -> None:
        """Cycle ``t``: every wire and input from the units' state at its start, then every
        unit steps (the memory is the caller's)."""
        self.wires(t)
        self.step(t)

    def x_ready(self, t: int) -> bool:
        """``x.ready`` in cycle ``t`` (after :meth:`wires`): the split passes a beat on."""
        return self.split.x_ready(t)

    @property
    def o_valid(self) -> bool:
        """``o.valid``: the combine offers a word."""
        return self.seq.out and not self.seq.first

    def step(self, t: int) -> None:
        """Cycle ``t``'s steps, after :meth:`wires`."""
        seq, comb, own = self.seq, self.combine, self.own
        seq.sorting, seq.n = self.dispatch.sorting, self.n
        seq.x_blocks, seq.h_blocks = self.xw.count, self.hw.count
        seq.row = self.w.g_o.valid and self.w.g_o.ready
        comb.first, comb.out = seq.first, seq.out
        seq.busy, seq.o_last = comb.busy, comb.o_last(t)
        self.requests.sorting = self.dispatch.sorting
        self.pack.n = self.n
        own["expert_cycles"] += seq.in_expert
        self.cycles_of[self.cur_e] += seq.in_expert
        own["bad_weights"] += seq.bad_batch
        entry = self.w.entry.payload
        event = seq.step(t)
        self.split.start = None
        n = self.n
        if event == "batch":
            batch = seq.batch
            self.split.start, comb.tokens = batch.tokens, batch.tokens
            self.xw.clear()
            self.requests.arm([e for e, _ in batch.groups]
                              + ([self.cfg.experts] if self.cfg.shared else []))
        elif event in ("expert", "shared"):
            tokens, expert = (entry[1], entry[0]) if event == "expert" \
                else (seq.batch.tokens, self.cfg.experts)
            self._start(tokens, expert)
            n = tokens
            self.hw.clear()
            self.pack.clear()
        for unit in (self.split, self.router, self.dispatch, self.xq, self.xw, self.requests,
                     self.fetch, self.tiles, self.array, self.xfeed, self.hfeed,
                     self.glu, self.pack, self.hq, self.hw, comb):
            unit.step(t)
        if self.tileq is not None:
            self.tileq.step(t)
        self.routed = 0 if event == "batch" else self.routed + self.w.c.taken
        self.n = n

    def _start(self, tokens: int, expert: int) -> None:
        """An expert starts with ``tokens`` tokens: the counters of its start."""
        R, own = self.cfg.array.rows, self.own
        own["experts_run"] += 1
        own["rows"] += tokens
        own["pad_rows"] += -(-tokens // R) * R - tokens
        self.tokens_of[expert] += tokens
        self.cur_e = expert


def layer(config, tokens: int, groups, mem_latency: int, mem_bytes_per_cycle: int) -> dict:
    """The fast path: one batch of ``tokens`` routed to ``groups`` (``(expert, tokens)``, as
    :class:`Batch`), streams that keep up, the memory agent at ``mem_latency`` and
    ``mem_bytes_per_cycle``: ``cycles`` from the command's handshake to the cycle after the
    last output beat, and every counter (:data:`COUNTERS`), at any size.

    It follows the column tiles, not the cycles. The front end (routing one token every
    ``hidden / x_lanes + route_latency + 1`` cycles, the dispatch's sort), the sequencer's
    transitions between tiles, phases and experts, and the array's command cycles
    (:func:`~scoville.sim.cycles.gemm.command_cycles`) are exact; the weights are a fluid: the
    memory streams words at ``min(1, bytes_per_cycle / word bytes)`` a word a cycle, at most
    the fetch buffer's words ahead of the loader and ``tile_queue + 1`` column tiles ahead of
    it (the issuer asks for a tile's words once the loader has started the tile
    ``tile_queue + 1`` before it), each word
    ``mem_latency`` cycles after its request; the loader writes a field (a row, a scale row
    or a bias) a cycle and takes a word a cycle. Each tile's array command starts when its
    TILE state is entered and its weights are in a slot; a slot frees when the array has taken
    the tile's last weight beat.
    The counts of words, experts, rows, pad rows, tokens per expert and the array's busy
    cycles are exact; the
    cycles agree with :func:`timing` within 2.5% wherever :func:`buffer_covers` holds
    (``tests/test_moe_fast.py``); where it does not, the stream is latency-bound and the fast
    path errs up to about 15% low."""
    cfg = config
    H, I_, C, R = cfg.hidden, cfg.intermediate, cfg.array.cols, cfg.array.rows
    groups = [(int(e), int(n)) for e, n in groups]
    if cfg.shared:
        groups.append((cfg.experts, tokens))
    GT, DT = cfg.gate_up_tiles, cfg.down_tiles
    # The front end, exact: the last token's answer taken at tc, the sort, the first group.
    tc = route_cycles(cfg, tokens)
    routed = len(groups) - int(cfg.shared)
    d_emit = tc + 1 + dispatch_latency(cfg, tokens, routed)
    issue0 = tc + 2                    # the issuer's first descriptor and fetch command
    stream = TileStream(cfg.tile_format, cfg.fetch, mem_latency, mem_bytes_per_cycle, issue0,
                        cfg.tile_queue)
    tau = None
    busy = stall_b = stall_a = 0.0
    own = dict.fromkeys(OWN_COUNTERS, 0)
    own["weight_words"] = len(groups) * cfg.expert_words
    expert_start = d_emit + groups[0][1] if groups else 0
    gaps = 0
    o_last = 0.0
    tokens_of, cycles_of = [0] * cfg.all_experts, [0] * cfg.all_experts
    for g, (e, n) in enumerate(groups):
        tokens_of[e] += n
        own["experts_run"] += 1
        own["rows"] += n
        own["pad_rows"] += -(-n // R) * R - n
        rt = -(-n // R)
        if g == 0:
            tau = d_emit + n + 1
        elif cfg.shared and g == len(groups) - 1:
            tau = o_last + 4
        else:
            tau = o_last + n + 4
            gaps += n
        first = tau - 1                 # the expert's WAIT_X
        for phase, (tiles, k) in enumerate(((GT, H), (DT, I_))):
            cc = gemm_timed.command_cycles(cfg.array, n, k, C)
            for _ in range(tiles):
                lf = stream.load(k, cfg.biases)
                le = math.ceil(lf + 1)
                # The array: accepted on entering TILE, waits for the weights' slot.
                s = max(tau, le)
                stall_b += s - tau
                stall_a += le <= tau
                busy += cc
                stream.fed(s + (rt - 1) * cfg.array.tile_steps(k) + k)
                o_last = s + cc + 1
                tau = o_last + 1
            if phase == 0:
                tau = o_last + _GLU_LATENCY + _MXQ_LATENCY + 2
        cycles_of[e] += int(o_last) + 3 - int(first)
    cycles = int(o_last) + 4 + tokens * DT if groups else 0
    own["expert_cycles"] = int(o_last) + 3 - expert_start - gaps if groups else 0
    counters = dict.fromkeys(COUNTERS, 0)
    counters.update({f"array.{k}": int(v) for k, v in
                     (("busy", busy), ("stall_b", stall_b), ("stall_a", stall_a))})
    counters["array.idle"] = cycles - int(busy) - int(stall_b) - int(stall_a)
    counters.update(own)
    if cfg.expert_counters:
        counters.update(tokens_of=tokens_of, cycles_of=cycles_of)
    return {"cycles": cycles, **counters}


def buffer_covers(config, mem_latency: int, mem_bytes_per_cycle: int) -> bool:
    """Whether the weight stream hides the memory's round trip: the words in flight (the fetch
    buffer less a burst, at most ``tile_queue + 1`` column tiles: the issuer asks for a
    tile's words once the loader has started the tile ``tile_queue + 1`` before it, and at
    most the harness memory agent's queue of :data:`~scoville.sim.harness.MEM_QUEUE` bursts)
    cover ``mem_latency`` at the stream's pace (the memory's rate or the loader's field a
    cycle). Where they do not, the stream is latency-bound: a larger ``fetch_buffer``,
    ``tile_queue`` or tile is the fix (beyond the agent's queue, a memory that keeps more
    requests in flight, as a real one does)."""
    P = config.weight_port_bits
    rho = min(1.0, mem_bytes_per_cycle / -(-P // 8))
    pace = []
    for k in (config.hidden, config.intermediate):
        W = config.tile_words(k)
        window = min(config.fetch.buffer - config.fetch.burst, (config.tile_queue + 1) * W,
                     MEM_QUEUE * config.fetch.burst)
        fields = tile_fields(config.tile_format, k, config.biases)
        pace.append((mem_latency + 4) / window <= max(1.0, fields / W, 1 / rho))
    return all(pace)
