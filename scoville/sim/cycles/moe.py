"""Cycle model of the MoE block (:class:`scoville.rtl.moe.Moe`) and its parts.

The router takes a token's ``hidden`` elements of ``x`` one a cycle (as the stream gives
them), then works alone for :func:`route_latency` cycles before its answer is valid on ``o``;
it takes the next token's ``x`` once the answer has been taken.

The dispatch takes a batch's beats one a cycle (as the stream gives them), then sorts for
:func:`dispatch_latency` cycles; its sorted beats are then valid on ``o`` every cycle until
the last is taken, and the next batch's first beat is taken from the cycle after.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections import deque
from dataclasses import dataclass

from scoville.rtl.gemm import COUNTERS as GEMM_COUNTER_LAYOUT
from scoville.rtl.lib.formats import MX_BLOCK
from scoville.rtl.moe import OWN_COUNTERS
from scoville.rtl.moe_swiglu import SwigluConfig
from scoville.rtl.mx_quant import MxQuantConfig

from . import fetch as fetch_timed
from . import gemm as gemm_timed
from .memory import MemoryAgent
from .stream import ALWAYS, Producer, Schedule, Source, Timing
from .unit import Wire

__all__ = ["COUNTERS", "Batch", "dispatch_latency", "layer", "route_latency", "timing"]

#: Every scalar counter of the block, as the testbench reads them: the array's, then its own.
#: With ``expert_counters`` the models also give :data:`EXPERT_COUNTERS`, a list each (one
#: entry per expert, the shared one last).
COUNTERS = (*(f"array.{c}" for c, _ in GEMM_COUNTER_LAYOUT), *OWN_COUNTERS)
_EXPERT_STATES = ("WAIT_X", "TILE", "ROWS", "DRAIN")

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
           ready: dict[str, Schedule] | None = None, memory: MemoryAgent | None = None,
           trace: list | None = None) -> Timing:
    """The cycle of every handshake on ``cmd``, ``x``, ``req``, ``rdata`` and ``o`` for
    ``batches`` (:class:`Batch`), the router's weights already loaded; ``sources`` of ``cmd``
    and ``x``, ``ready`` of ``o`` and ``req``, the memory answering as ``memory`` does (a
    fresh :class:`~scoville.sim.cycles.memory.MemoryAgent`; the model steps it).

    The model steps every part's registers as the RTL does, cycle by cycle (the module
    ``scoville.rtl.moe`` and its parts' docstrings say how each part moves)."""
    sources, ready = sources or {}, ready or {}
    cfg = config
    H, I_, C, R, P = (cfg.hidden, cfg.intermediate, cfg.array.cols, cfg.array.rows,
                      cfg.weight_port_bits)
    GT, DT, HB = cfg.gate_up_tiles, cfg.down_tiles, C // 2
    ROW, SCALE, BIAS = 4 * C, 8 * C, 32
    WBUF = P + max(ROW, SCALE, BIAS)
    need_of = (ROW, SCALE, BIAS)
    batches = list(batches)
    if batches and batches[-1].fault:
        raise ValueError("a batch with a weight fault ends the run without output: follow it "
                         "with another batch")
    good = [b for b in batches if b.groups is not None]
    cmd = Producer(sources.get("cmd", Source()), len(batches))
    x_src = Producer(sources.get("x", Source()), sum(b.tokens * H for b in good))
    o_ready, req_ready = ready.get("o", ALWAYS), ready.get("req", ALWAYS)
    n_out = sum(b.tokens * DT for b in good if not b.fault)
    mem = memory or MemoryAgent(1, P // 8, P)
    f_cmd_w, f_req, f_rdata, f_o = Wire(), Wire(), Wire(), Wire()
    mem.attach(f_req, f_rdata, req_ready)
    fetch = fetch_timed.Engine(cfg.fetch, f_cmd_w, f_req, f_rdata, f_o)
    o_cycles: list[int] = []

    a_wire, b_wire, g_wire, o_wire = Wire(), Wire(), Wire(), Wire()
    array = gemm_timed.Engine(cfg.array, g_wire, a_wire, b_wire, o_wire)

    @functools.cache
    def program(m, k):
        return gemm_timed.programs(cfg.array, [(m, k, C)])[0]

    # ---- State, named as the RTL's registers.
    state, batch = "IDLE", None
    n_tok = taking = x_count = pos = 0
    xq = deque()            # cycles the x quantizer's blocks become valid
    x_blocks = 0
    # Router: "ACC", or busy until r_out (its answer valid from then), answers taken.
    r_acc, r_h, r_out = True, 0, 0
    routed = 0
    # Dispatch.
    d_fill, d_emit_at, entries = True, 0, deque()
    sorting = False
    # Request issuer.
    req_armed = issuing = False
    req_list: list[int] = []
    t_req = sent_f = sent_t = 0
    # Weight tiles: loader, feeder, slots.
    loading, ws, fill, words_left, phase = False, 0, 0, 0, 0
    l_k = l_bias = row = blk_row = bias_i = 0
    full, slot_k = [False, False], [0, 0]
    rs, feeding, f_beats = 0, False, 0
    # Activation stores' feeders (one runs at a time).
    s_busy, s_beats = False, 0
    # Sequencer.
    n = last_group = shared_run = 0
    gu, tile, sent_g, sent_b, sent_a, rows_out = True, 0, False, False, False, 0
    glu = deque()           # cycles SwiGLU outputs become valid
    hq = deque()            # cycles the h quantizer's blocks become valid
    g_row = g_tile = h_blocks = 0
    acc_v = False
    o_at = 0
    own = dict.fromkeys(OWN_COUNTERS, 0)
    tokens_of, cycles_of = [0] * cfg.all_experts, [0] * cfg.all_experts
    cur_e = 0

    def start(tokens, expert):
        nonlocal cur_e
        own["experts_run"] += 1
        own["rows"] += tokens
        own["pad_rows"] += -(-tokens // R) * R - tokens
        tokens_of[expert] += tokens
        cur_e = expert

    t = 0
    limit = 50_000_000
    while len(o_cycles) < n_out or cmd.sent < len(batches):
        if t > limit:
            raise RuntimeError(f"moe timed model: no progress after {t} cycles")
        # ---- Offers and readies of this cycle, from the registers at its start.
        e_now = cur_e
        cmd_go = state == "IDLE" and cmd.offers(t)
        x_go = bool(taking) and r_acc and x_src.offers(t)
        r_valid = not r_acc and t >= r_out
        c_go = r_valid and d_fill
        e_valid = not d_fill and t >= d_emit_at and bool(entries)
        e_go = e_valid and state == "GROUP"
        # Issuer to fetch and to the loader.
        f_cmd = None            # the command the issuer offers the fetch engine
        if issuing and not sent_f:
            gu_req = t_req < GT
            tw = cfg.tile_words(H if gu_req else I_)
            f_cmd = (req_list[0] * cfg.expert_words
                     + (t_req * tw if gu_req else GT * cfg.tile_words(H) + (t_req - GT) * tw),
                     tw)
        fcmd_go = f_cmd is not None and fetch.ready
        tile_go = issuing and not sent_t and not loading
        tile_k = H if t_req < GT else I_    # the descriptor the issuer offers the loader
        # Loader.
        need = need_of[phase]
        can_out = loading and not full[ws] and fill >= need
        f2 = fill - (need if can_out else 0)
        take = loading and words_left != 0 and f2 + P <= WBUF
        pop = fetch.o_valid and take
        # Feeders and the array.
        b_wire.set(feeding, array.b_ready)
        a_wire.set(s_busy, array.a_ready)
        tcmd_ready = not feeding and full[rs]
        in_tile = state == "TILE"
        g_cmd = in_tile and not sent_g
        g_go = g_cmd and array.ready
        b_go = in_tile and not sent_b and tcmd_ready
        a_go = in_tile and not sent_a and not s_busy
        o_row = array.o_valid              # array.o.ready is always high
        glu_out = bool(glu) and glu[0] <= t
        hq_out = bool(hq) and hq[0] <= t
        out_go = state == "OUT" and o_ready[t]
        x_in = x_blocks == n_tok * (H // MX_BLOCK)
        h_in = h_blocks == n * (I_ // MX_BLOCK)

        # ---- The registers at the end of the cycle.
        nxt = state
        if cmd_go:
            batch = batches[cmd.sent]
            cmd.take(t)
            if batch.groups is not None:
                n_tok, taking, x_count, pos, x_blocks, routed = batch.tokens, 1, 0, 0, 0, 0
                shared_run, req_armed = 0, True
                nxt = "INPUT"
        if x_go:
            x_src.take(t)
            r_h += 1
            if r_h == H:
                r_h, r_acc, r_out = 0, False, t + 1 + route_latency(cfg)
            if pos == MX_BLOCK - 1:
                xq.append(t + _MXQ_LATENCY)
            pos = 0 if pos == MX_BLOCK - 1 else pos + 1
            x_count += 1
            if x_count == n_tok * H:
                taking = 0
        if xq and xq[0] <= t:                    # xs.w is always ready
            xq.popleft()
            x_blocks += 1
        if c_go:
            r_acc = True
            routed += 1
            if routed == n_tok or routed == cfg.tokens:
                d_fill = False
                groups = batch.groups
                d_emit_at = t + 1 + dispatch_latency(cfg, n_tok, len(groups))
                for g, (e, cnt) in enumerate(groups):
                    for j in range(cnt):
                        entries.append((e, cnt, j == cnt - 1,
                                        g == len(groups) - 1 and j == cnt - 1))
        if e_go:
            e, cnt, last, end = entries.popleft()
            if end:
                d_fill = True
            if last:
                start(cnt, e)
                n, last_group = cnt, int(end)
                gu, tile, g_row, g_tile, h_blocks = True, 0, 0, 0, 0
                nxt = "WAIT_X"
        if state == "INPUT" and sorting:
            nxt = "GROUP"
        # The issuer.
        if req_armed and sorting:
            req_armed, issuing, t_req, sent_f, sent_t = False, True, 0, False, False
            req_list = [e for e, _ in batch.groups] + ([cfg.experts] if cfg.shared else [])
        elif issuing:
            f_done, t_done = sent_f or fcmd_go, sent_t or tile_go
            sent_f, sent_t = f_done, t_done
            if f_done and t_done:
                sent_f = sent_t = False
                t_req += 1
                if t_req == GT + DT:
                    t_req = 0
                    req_list.pop(0)
                    if not req_list:
                        issuing = False
        f_cmd_w.set(f_cmd is not None, fetch.ready, f_cmd)
        f_req.set(fetch.req_valid, mem.req_ready(t), fetch.req_size)
        f_rdata.set(mem.offers(t), fetch.rdata_ready)
        f_o.set(fetch.o_valid, take)
        fetch.step(t)
        mem.step(t)
        # The loader.
        if tile_go:
            l_k, l_bias = tile_k, int(cfg.biases)
            loading, fill, phase, row, blk_row, bias_i = True, 0, 0, 0, 0, 0
            words_left = -(-cfg.tile_bits(l_k) // P)
        elif loading:
            fill = f2 + (P if pop else 0)
            words_left -= pop
            last_field = False
            if can_out:
                if phase == 0:
                    row += 1
                    blk_row += 1
                    if blk_row == MX_BLOCK:
                        phase = 1
                elif phase == 1:
                    blk_row = 0
                    if row == l_k:
                        phase = 2 if l_bias else 0
                        last_field = not l_bias
                    else:
                        phase = 0
                else:
                    bias_i += 1
                    last_field = bias_i == C
            if last_field:
                loading, fill = False, 0
                full[ws], slot_k[ws] = True, l_k
                ws ^= 1
        # The feeder and the A store (their beats taken by the array's model below).
        g_wire.set(g_cmd, array.ready, payload=program(n, H if gu else I_) if g_cmd else None)
        o_wire.set(array.o_valid)          # array.o.ready is always high
        array.step(t)
        if b_wire.taken:
            f_beats -= 1
            if f_beats == 0:
                feeding = False
                full[rs] = False
                rs ^= 1
        if b_go:
            feeding, f_beats = True, slot_k[rs] * -(-n // R)
        if a_wire.taken:
            s_beats -= 1
            if s_beats == 0:
                s_busy = False
        if a_go:
            s_busy, s_beats = True, -(-n // R) * (H if gu else I_)
        # SwiGLU, the h quantizer and the combine.
        if glu_out:
            glu.popleft()
            fills = g_tile % (MX_BLOCK // HB) == MX_BLOCK // HB - 1
            if fills:
                hq.append(t + _MXQ_LATENCY)
            if g_row == n - 1:
                g_row = 0
                g_tile = 0 if g_tile == GT - 1 else g_tile + 1
            else:
                g_row += 1
        if hq_out:
            hq.popleft()
            h_blocks += 1
        acc_v_next = o_row and not gu
        if o_row and gu:
            glu.append(t + _GLU_LATENCY)
        # The sequencer.
        if state == "WAIT_X" and x_in:
            nxt = "TILE"
        elif in_tile:
            ok_g, ok_b, ok_a = sent_g or g_go, sent_b or b_go, sent_a or a_go
            sent_g, sent_b, sent_a = ok_g, ok_b, ok_a
            if ok_g and ok_b and ok_a:
                sent_g = sent_b = sent_a = False
                rows_out = 0
                nxt = "ROWS"
        elif state == "ROWS" and o_row:
            rows_out += 1
            if rows_out == n:
                tile += 1
                nxt = "DRAIN" if tile == (GT if gu else DT) else "TILE"
        elif state == "DRAIN":
            if gu:
                if h_in:
                    gu, tile = False, 0
                    nxt = "TILE"
            elif not acc_v:
                if shared_run or (last_group and not cfg.shared):
                    nxt = "OUT_FIRST"
                elif last_group:
                    start(n_tok, cfg.experts)
                    n, last_group, shared_run = n_tok, 0, 1
                    gu, tile, g_row, g_tile, h_blocks = True, 0, 0, 0, 0
                    nxt = "WAIT_X"
                else:
                    nxt = "GROUP"
        elif state == "OUT_FIRST":
            o_at = 0
            if batch.fault:
                own["bad_weights"] += 1
                nxt = "IDLE"
            else:
                nxt = "OUT"
        elif out_go:
            o_cycles.append(t)
            o_at += 1
            if o_at == n_tok * DT:
                nxt = "IDLE"
        if state in _EXPERT_STATES:
            own["expert_cycles"] += 1
            cycles_of[e_now] += 1
        acc_v = acc_v_next
        sorting = not d_fill
        if trace is not None and nxt != state:
            trace.append((t + 1, nxt))
        state = nxt
        t += 1
    own["weight_words"] = len(mem.cycles)
    counters = {**{f"array.{c}": v for c, v in array.counters.items()}, **own}
    if cfg.expert_counters:
        counters.update(tokens_of=tokens_of, cycles_of=cycles_of)
    return Timing({"cmd": cmd.cycles, "x": x_src.cycles, "req": f_req.cycles,
                   "rdata": mem.cycles, "o": o_cycles}, counters)



def _tile_fields(config, k: int) -> int:
    """Fields the loader writes for a column tile of ``k`` rows, one a cycle: the rows, a scale
    row per block of 32, and ``cols`` biases with :attr:`~scoville.rtl.moe.MoeConfig.biases`."""
    return k + k // MX_BLOCK + (config.array.cols if config.biases else 0)


def layer(config, tokens: int, groups, mem_latency: int, mem_bytes_per_cycle: int) -> dict:
    """The fast path: one batch of ``tokens`` routed to ``groups`` (``(expert, tokens)``, as
    :class:`Batch`), streams that keep up, the memory agent at ``mem_latency`` and
    ``mem_bytes_per_cycle``: ``cycles`` from the command's handshake to the cycle after the
    last output beat, and every counter (:data:`COUNTERS`), at any size.

    It follows the column tiles, not the cycles. The front end (routing one token every
    ``hidden + route_latency + 1`` cycles, the dispatch's sort), the sequencer's transitions
    between tiles, phases and experts, and the array's command cycles
    (:func:`~scoville.sim.cycles.gemm.command_cycles`) are exact; the weights are a fluid: the
    memory streams words at ``min(1, bytes_per_cycle / word bytes)`` a word a cycle, at most
    the fetch buffer's words ahead of the loader and a column tile ahead of it (the issuer
    asks for a tile's words once the loader has started the tile before it), each word
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
    H, I_, C, R, P = (cfg.hidden, cfg.intermediate, cfg.array.cols, cfg.array.rows,
                      cfg.weight_port_bits)
    groups = [(int(e), int(n)) for e, n in groups]
    if cfg.shared:
        groups.append((cfg.experts, tokens))
    GT, DT = cfg.gate_up_tiles, cfg.down_tiles
    nbytes = -(-P // 8)
    rho = min(1.0, mem_bytes_per_cycle / nbytes)
    depth, burst = cfg.fetch.buffer, cfg.fetch.burst
    L = mem_latency
    S = max(R, C)
    # The front end, exact: the last token's answer taken at tc, the sort, the first group.
    tc = tokens * (H + route_latency(cfg) + 1)
    routed = len(groups) - int(cfg.shared)
    d_emit = tc + 1 + dispatch_latency(cfg, tokens, routed)
    issue0 = tc + 2                    # the issuer's first descriptor and fetch command
    # Per word of the batch's stream: its arrival as a fluid, through the tiles in order.
    arr_last = issue0 + 1 + L + 2 - 1 / rho
    window = depth - burst / 2          # words in flight, on average, when the buffer binds
    pops: list[tuple[int, float, float]] = []   # per tile: its first word, first and last pop
    words_before = 0

    def popped(j: float) -> float:
        """When the loader took word ``j`` of the batch's stream (-inf before it)."""
        if j < 0:
            return float("-inf")
        i = bisect.bisect_right(pops, (j, float("inf"), 0.0)) - 1
        w0, p0, p1 = pops[i]
        end = pops[i + 1][0] if i + 1 < len(pops) else words_before
        return p0 + (p1 - p0) * (j - w0) / max(1, end - w0 - 1)

    lf_prev = issue0 - 1 - 1           # the loader takes its first descriptor at issue0
    feed_end: list[float] = []
    loaded: list[float] = []            # per tile: the loader's last field
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
            W, F = cfg.tile_words(k), _tile_fields(cfg, k)
            cc = gemm_timed.command_cycles(cfg.array, n, k, C)
            for _ in range(tiles):
                i = len(feed_end)
                # The weights: the tile's first word arrives after the stream's previous word
                # and once the word ``depth`` before it has left the buffer; the loader then
                # takes a word every ``sigma`` cycles (a field a cycle), the words beyond the
                # buffered ones arriving at the stream's rate: the memory's, the latency's
                # (``depth`` words a round trip) or the loader's.
                sigma = max(1.0, F / W)
                a_first = max(arr_last + 1 / rho, popped(words_before - window) + L + 3,
                              loaded[i - 2] + L + 4 if i >= 2 else 0)
                slot = feed_end[i - 2] + 1 if i >= 2 else float("-inf")
                f = max(lf_prev + 3, slot, a_first + 3)
                ready_words = min(W, window, 1 + (f - 3 - a_first) * rho)
                tw = max(sigma, (L + 3) / window, 1 / rho)
                lf = f - 1 + max(F, ready_words * sigma + (W - ready_words) * tw)
                pops.append((words_before, f - 1, lf - 1))
                words_before += W
                arr_last = max(a_first + (W - 1) / rho,
                               popped(words_before - 1 - window) + L + 3)
                lf_prev = lf
                loaded.append(lf)
                le = math.ceil(lf + 1)
                # The array: accepted on entering TILE, waits for the weights' slot.
                s = max(tau, le)
                stall_b += s - tau
                stall_a += le <= tau
                busy += cc
                feed_end.append(s + (rt - 1) * max(k, S) + k)
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
    buffer less a burst, and at most a column tile: the issuer asks for a tile's words once
    the loader has started the tile before it) cover ``mem_latency`` at the stream's pace
    (the memory's rate or the loader's field a cycle). Where they do not, the stream is
    latency-bound: a larger ``fetch_buffer`` or tile is the fix."""
    P = config.weight_port_bits
    rho = min(1.0, mem_bytes_per_cycle / -(-P // 8))
    pace = []
    for k in (config.hidden, config.intermediate):
        W = config.tile_words(k)
        window = min(config.fetch.buffer - config.fetch.burst, W)
        pace.append((mem_latency + 4) / window <= max(1.0, _tile_fields(config, k) / W,
                                                      1 / rho))
    return all(pace)
