"""A chip assembled from Scoville's blocks, timed by the blocks' closed-form models.

Each of the chip's ``cores`` has one array of ``array_rows`` x ``array_cols`` (the ``gemm``
block's, in the MoE block's MXFP4 weights and the model's activations), the MoE block's weight
path and the attention block's KV cache. A layer's work is spread evenly over the cores, and a
layer's blocks run one after another:

- GEMMs (attention projections, shared experts, dense FFNs, the head):
  :func:`~scoville.sim.cycles.gemm.command_cycles` of one core's command (M the tokens, K the
  input width, N the core's share of the columns), never faster than the weights stream from
  HBM;
- attention in decode: :func:`~scoville.sim.cycles.attention.decode_step` of one sequence and
  one KV head on a core (its cycles are affine in the context, taken at two lengths), the
  sequences and heads spread over the cores; the KV cache in SRAM while ``kv_sram_frac`` of
  it holds the replica's share, else never faster than HBM; in prefill, the score and value
  products as GEMMs;
- the MoE layer: :func:`~scoville.sim.cycles.moe.layer`, the touched experts spread over the
  chips and cores (each expert's weights streamed once a batch of at most 256 tokens, from
  the core's share of the HBM bandwidth), each expert receiving the batch's choices evenly.
  The routed experts run in MXFP4 (the MoE block's weight format) whatever the model's
  checkpoint format;
- between the blocks, the commands of the ``decoder`` block's engine
  (:func:`~scoville.sim.cycles.decoder.fast`, one core's engine at the model's widths:
  :func:`glue_cycles`): the norms, the rotations (in decode a command a sequence: each
  waits for its table rows from HBM), the residual adds, the dense layers' gated products,
  the router's weights (``ROUTER``, every MoE layer), and every command's hand-over. The
  weights every core needs whole (the norms', the rotary table's, the router's) are read
  once and given to every core, a port word a cycle.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

from scoville.rtl.attention import AttentionConfig, rtl_error
from scoville.rtl.decoder import LINE, DecoderConfig, Op
from scoville.rtl.gemm import GemmConfig
from scoville.rtl.lib.params import ParamError, build_config
from scoville.rtl.moe import MoeConfig
from scoville.sim.cycles import attention as attention_timed
from scoville.sim.cycles import decoder as decoder_timed
from scoville.sim.cycles import gemm as gemm_timed
from scoville.sim.cycles import moe as moe_timed
from scoville.sim.golden.decoder import COMMAND_FIELDS, check

from . import shapes
from .parallel import Phase, comm, kv_split
from .specs import bytes_per_param

__all__ = ["LINES", "attention_line", "blocks_phase", "glue_cycles", "line_key", "moe_cycles",
           "weight_rate"]

#: The memory's latency in cycles as the MoE block sees it (HBM, a few hundred ns).
MEM_LATENCY = 500
#: The most tokens the MoE block holds in a batch.
MOE_TOKENS = 256
#: Bits of a core's weight port (the MoE block's and the decoder engine's).
PORT_BITS = 1024
#: Words the decoder engine's fetch of the shared weights (norms, rotary table, router) asks
#: ahead: more than the memory's round trip at a word a cycle.
GLUE_BUFFER = 1024
#: Hand-over cycles between two of the engine's commands (a command's last beat is counted
#: the cycle after, answered the next, and the next command taken the one after).
HANDOVER = 3


@functools.cache
def _gemm_config(rows: int, cols: int) -> GemmConfig:
    return build_config(GemmConfig, {"rows": rows, "cols": cols})


def gemm_cycles(rows: int, cols: int, m: int, k: int, n: int) -> int:
    """Cycles of one core's command of M x K x N on a rows x cols array."""
    return gemm_timed.command_cycles(_gemm_config(rows, cols), m, k, n)


@functools.cache
def _moe_config(rows, cols, hidden, inter, experts, top_k, bpc) -> MoeConfig:
    params = {"experts": experts, "top_k": top_k, "hidden": hidden, "intermediate": inter,
              "array.rows": rows, "array.cols": cols, "weight_port_bits": 1024,
              "tokens": MOE_TOKENS}
    for buffer in (32, 64, 128, 256, 512, 1024, 2048, 4096):
        cfg = build_config(MoeConfig, {**params, "fetch_buffer": buffer})
        if moe_timed.buffer_covers(cfg, MEM_LATENCY, bpc):
            return cfg
    return cfg


@functools.cache
def moe_cycles(rows, cols, hidden, inter, experts, top_k, bpc, n: int, count: int) -> int:
    """Cycles of ``count`` experts with ``n`` tokens each (at most :data:`MOE_TOKENS` a
    batch) on one core's MoE block: batches of ``count`` experts, the front end once a batch;
    the cost of the experts is the fast path's, from one and two experts (affine in the
    experts: each adds its tiles)."""
    cfg = _moe_config(rows, cols, hidden, inter, experts, top_k, bpc)
    if n > MOE_TOKENS:
        full, rest = divmod(n, MOE_TOKENS)
        return (full * moe_cycles(rows, cols, hidden, inter, experts, top_k, bpc, MOE_TOKENS,
                                  count)
                + (moe_cycles(rows, cols, hidden, inter, experts, top_k, bpc, rest, count)
                   if rest else 0))
    one = moe_timed.layer(cfg, n, [(0, n)], MEM_LATENCY, bpc)["cycles"]
    two = moe_timed.layer(cfg, n, [(0, n), (1, n)], MEM_LATENCY, bpc)["cycles"]
    return one + (count - 1) * (two - one)


def _attention_params(model, q_per_kv: int, window: int) -> dict:
    """The attention block's parameters for one KV head of ``model`` with ``q_per_kv`` query
    heads."""
    a = model.attention
    kv_fmt = "bf16" if model.kv_fmt == "bf16" else "fp8_e4m3"
    if a.kind == "gqa":
        params = {"kv.kv_heads": 1, "kv.head_dim": a.head_dim, "kv.kv_fmt": kv_fmt,
                  "q_heads": q_per_kv, "kv.banks": 16, "kv.word_bits": 64, "window": window}
    else:
        params = {"kv.kv_heads": 1, "kv.head_dim": a.kv_lora_rank + a.qk_rope,
                  "kv.kv_fmt": kv_fmt, "kv.k_only": 1, "mla": 1, "q_heads": q_per_kv,
                  "kv.banks": 8, "kv.word_bits": 64}
    # The array's M is the group (at most 64 rows: larger groups take several steps).
    params.update({"kv.bank_words": 65536, "kv.max_seqs": 1,
                   "array.rows": min(64, max(2, q_per_kv))})
    if a.kind == "gqa" and a.window:
        params["sinks"] = 1
    return params


def _attention_config(model, q_per_kv: int, window: int):
    """The attention block for one KV head of ``model`` with ``q_per_kv`` query heads."""
    cfg = build_config(AttentionConfig, _attention_params(model, q_per_kv, window))
    error = rtl_error(cfg)
    if error:
        raise ValueError(f"{model.name}: the attention block cannot be built: {error}")
    return cfg


#: The decode-step lines (:func:`attention_line`) the default sweep asks for, by the attention
#: block's parameters (``python scripts/explore_attention_lines.py`` writes them;
#: ``tests/test_explore.py`` recomputes each): the fast path runs the cycle model on small
#: steps, seconds for each of MLA's configurations, in every process of a sweep.
LINES_FILE = Path(__file__).parent / "attention_lines.json"
LINES: dict[str, list[float]] = (json.loads(LINES_FILE.read_text()) if LINES_FILE.exists()
                                 else {})


def line_key(params: dict) -> str:
    """:data:`LINES`'s key of the attention block's parameters."""
    return json.dumps(params, sort_keys=True)


def attention_line(params: dict) -> tuple[float, float]:
    """``(base, per token)`` cycles of one sequence's decode step on the attention block of
    ``params`` (:data:`LINES`'s where it holds them): its fast path at two context lengths,
    4 and 8 chunks (affine in them)."""
    known = LINES.get(line_key(params))
    if known:
        return known[0], known[1]
    cfg = build_config(AttentionConfig, params)
    lo, hi = 4 * cfg.chunk, 8 * cfg.chunk
    c_lo = attention_timed.decode_step(cfg, lo)["cycles"]
    c_hi = attention_timed.decode_step(cfg, hi)["cycles"]
    per = (c_hi - c_lo) / (hi - lo)
    return c_lo - per * lo, per


@functools.cache
def _attention_line(model, q_per_kv: int, window: int) -> tuple[float, float]:
    """``(base, per token)`` cycles of one sequence's decode step with one KV head of
    ``q_per_kv`` query heads (groups above 64 in steps of at most 64)."""
    steps = math.ceil(q_per_kv / 64)
    q = math.ceil(q_per_kv / steps)
    _attention_config(model, q, window)         # a config the block cannot build says why
    base, per = attention_line(_attention_params(model, q, window))
    return steps * base, steps * per


@functools.cache
def _engine(model) -> DecoderConfig:
    """One core's ``decoder`` engine at ``model``'s widths (its hidden size, its rotary
    vectors), for the commands between the blocks."""
    a = model.attention
    params = {"hidden": model.hidden, "act_lines": 32768, "moe.hidden": model.hidden,
              "linear.weight_port_bits": PORT_BITS, "moe.weight_port_bits": PORT_BITS,
              "linear.fetch_buffer": GLUE_BUFFER, "linear.addr_bits": 32,
              "rope.dim": a.head_dim if a.kind == "gqa" else a.qk_rope, "glu_lanes": LINE}
    try:
        return build_config(DecoderConfig, params)
    except ParamError as e:
        raise ValueError(f"{model.name}: the decoder engine cannot be built: {e}") from None


def _chunks(tokens: int, per: int, most: int = 32768) -> list[int]:
    """``tokens`` split into commands whose ``per`` lines a token fit the engine's activation
    memory, at most ``most`` tokens a command."""
    most = max(1, min(most, 32768 // per))
    return [most] * (tokens // most) + ([tokens % most] if tokens % most else [])


def _glue_commands(model, tokens: int, decode: bool, dense: bool) -> list[dict]:
    """One layer's commands between the blocks on a core's ``tokens`` tokens: the input norm
    (MLA: and the ``q_a`` and latent norms), the rotations (decode: a command a sequence, each
    at its own position; prefill: consecutive positions), the residual add, the MoE's norm, the
    dense layer's gated products (or those of the shared experts), the residual add. Addresses
    0: they do not change the cycles."""
    a, hl = model.attention, model.hidden // LINE
    cfg = _engine(model)
    # The rotated vectors of a token: every query head's and key head's (MLA: the one
    # rotary key).
    heads = a.q_heads + (a.kv_heads if a.kind == "gqa" else 1)
    norms = [0] + ([a.q_lora_rank, a.kv_lora_rank] if a.kind == "mla" else [])
    rope_lines = heads * cfg.rope_lines
    glu = (model.dense_intermediate if dense else model.shared * model.shared_intermediate)
    cmds = [{"op": Op.NORM, "a": 0, "dst": 0, "count": c, "k": k, "addr": 0}
            for k in norms for c in _chunks(tokens, (k or model.hidden) // LINE)]
    # A rotation's table rows are one fetch command long at most.
    rows = ((1 << cfg.norm_fetch.len_bits) - 1) // cfg.rope_words
    for c in [1] * tokens if decode else _chunks(tokens, rope_lines, rows):
        cmds.append({"op": Op.ROPE, "a": 0, "count": c, "heads": heads,
                     "stride": cfg.rope.dim, "row": rope_lines, "addr": 0})
    adds = [{"op": Op.ADD, "a": 0, "b": 16384, "dst": 0, "count": c * hl}
            for c in _chunks(tokens, 2 * hl)]
    cmds += adds + [{"op": Op.NORM, "a": 0, "dst": 0, "count": c, "addr": 0}
                    for c in _chunks(tokens, hl)]
    if glu:
        cmds += [{"op": Op.GLU, "a": 0, "b": 16384, "dst": 0, "count": c * glu // LINE}
                 for c in _chunks(tokens, 2 * glu // LINE)]
    return cmds + adds


@functools.cache
def _router_cycles(model) -> int:
    """A MoE layer's ``ROUTER``: its weights (``H / 32`` beats of columns and the bias's, each
    32 columns of the experts' FP32 logit weights) read once for every core, a port word a
    cycle, the last beat written with the last word, then the hand-over."""
    fetch = _engine(model).norm_fetch
    beat_words = -(-LINE * model.experts * 32 // PORT_BITS)
    words = (model.hidden // LINE + 1) * beat_words
    return math.ceil(decoder_timed.arrived(fetch, 0, words, MEM_LATENCY, 1.0)) + HANDOVER


@functools.cache
def glue(model, tokens: int, decode: bool, dense: bool) -> dict[str, int]:
    """One layer's commands between the blocks on one core's ``tokens`` tokens
    (:func:`_glue_commands`; a MoE layer's ``ROUTER``, :func:`_router_cycles`): cycles by
    op, each command's the decoder engine's fast path
    (:func:`~scoville.sim.cycles.decoder.fast`: a command's cycles with its hand-over; the
    commands run one after another, so a layer's are their sum)."""
    out: dict[str, int] = {}
    for c in _glue_commands(model, tokens, decode, dense):
        name = Op(c["op"]).name
        out[name] = out.get(name, 0) + _command_cycles(model, tuple(c.items()))
    if not dense:
        out["ROUTER"] = _router_cycles(model)
    return out


@functools.cache
def _command_cycles(model, fields: tuple) -> int:
    """One command's cycles with its hand-over on :func:`_engine` (the decoder engine's fast
    path; many of a sweep's layers share their commands)."""
    cfg, c = _engine(model), dict(fields)
    if check(cfg, {f: c.get(f, 0) for f in COMMAND_FIELDS}):    # a bug here: say which
        raise AssertionError(f"{model.name}: the decoder engine refuses {c}")
    return int(decoder_timed.fast(cfg, [c], MEM_LATENCY, PORT_BITS // 8)["cycles"])


def glue_cycles(model, tokens: int, decode: bool, dense: bool, handovers: int) -> int:
    """Cycles of one layer's commands between the blocks on one core (:func:`glue`) and the
    hand-overs of ``handovers`` commands of the blocks (projections, attention steps, MoE
    batches), whose own cycles the blocks' models give."""
    return sum(glue(model, tokens, decode, dense).values()) + HANDOVER * handovers


def _matmuls(model) -> list[tuple[int, int, int, str]]:
    """``(K, N, count, format)`` of one layer's GEMMs outside the routed experts and the
    attention products: the attention projections (MLA's up-projection absorbed: per head a
    ``qk_nope x kv_lora`` and a ``kv_lora x v_head_dim``), the shared experts."""
    a, H, wf = model.attention, model.hidden, model.weight_fmt
    if a.kind == "gqa":
        q, kv = a.q_heads * a.head_dim, a.kv_heads * a.head_dim
        mm = [(H, q + 2 * kv, 1, wf), (q, H, 1, wf)]
    else:
        mm = [(H, a.q_lora_rank + a.kv_lora_rank + a.qk_rope, 1, wf),
              (a.q_lora_rank, a.q_heads * (a.qk_nope + a.qk_rope), 1, wf),
              (a.qk_nope, a.kv_lora_rank, a.q_heads, wf),
              (a.kv_lora_rank, a.v_head_dim, a.q_heads, wf),
              (a.q_heads * a.v_head_dim, H, 1, wf)]
    if model.shared:
        mm += [(H, 2 * model.shared * model.shared_intermediate, 1, wf),
               (model.shared * model.shared_intermediate, H, 1, wf)]
    return mm


def _port_bytes(chip) -> int:
    """Bytes a cycle each core's weight port takes: its share of the HBM bandwidth, in whole
    bytes."""
    return max(1, int(chip.hbm_tb_s * 1e12 / (chip.clock_ghz * 1e9) / chip.cores))


def _expert_bytes(model) -> float:
    """One routed expert's weight bytes in the MoE block's format (MXFP4)."""
    return shapes.ffn_params(model.hidden, model.moe_intermediate) * bytes_per_param("mxfp4")


def weight_rate(chip, model) -> float:
    """Bytes a second the chip's weight paths achieve from HBM: every core's port (its whole
    bytes a cycle) at the utilization the MoE block's fetch path reaches streaming one
    expert after another at one token (its cycle model, which equals the RTL's): the extra
    cycles of a second expert over the bytes it brings."""
    bpc = _port_bytes(chip)
    args = (chip.array_rows, chip.array_cols, model.hidden, model.moe_intermediate,
            model.experts, model.top_k, bpc, 1)
    per_expert = moe_cycles(*args, 2) - moe_cycles(*args, 1)
    utilization = min(1.0, _expert_bytes(model) / (per_expert * bpc))
    return chip.cores * bpc * chip.clock_ghz * 1e9 * utilization


def _gemm_time(chip, tokens: float, k: int, n: int, count: int, fmt: str, split: int,
               rate: float) -> tuple[float, float, float]:
    """Seconds, operations and weight bytes of ``count`` M x K x N GEMMs on one chip whose
    columns are split ``split`` ways over the chips, spread over the cores: the array's
    cycles, never faster than the weights stream at ``rate``, after the memory's latency
    (:data:`MEM_LATENCY` cycles to the first weights: nothing fetches ahead across
    blocks)."""
    if tokens <= 0:
        return 0.0, 0.0, 0.0
    clock = chip.clock_ghz * 1e9
    cols = math.ceil(n * count / split / chip.cores)
    cyc = gemm_cycles(chip.array_rows, chip.array_cols, math.ceil(tokens), k, cols)
    weight = k * n * count / split * bytes_per_param(fmt)
    seconds = max(cyc / clock, weight / rate) + MEM_LATENCY / clock
    return seconds, 2 * tokens * k * n * count / split, weight


def blocks_phase(chip, model, par, tokens: float, context: float, experts: float,
                 kv_reads: float, *, decode: bool, held: float = 0.0):
    """One stage's phase (a decode step of ``tokens`` sequences, or a prefill of ``tokens``
    tokens) on a ``blocks`` chip, as :func:`scoville.explore.perf.step` describes it."""
    m, a = model, model.attention
    clock = chip.clock_ghz * 1e9
    bw = weight_rate(chip, m)
    layers = m.layers / par.pp
    moe_layers = (m.layers - m.dense_layers) / par.pp
    dense_layers = m.dense_layers / par.pp
    dp = par.attention_dp                             # data-parallel ways of attention
    split = par.width // dp                           # ways the non-expert columns split
    t = flops = hbm = sram = 0.0
    # GEMMs outside the experts, per layer; the dense FFNs and the head.
    gemms = [(*mm, layers) for mm in _matmuls(m)] + [
        (m.hidden, 2 * m.dense_intermediate, 1, m.weight_fmt, dense_layers),
        (m.dense_intermediate, m.hidden, 1, m.weight_fmt, dense_layers),
        (m.hidden, m.vocab, 1, m.weight_fmt, 1 / par.pp)]
    for k, n, count, fmt, times in gemms:
        if times and n:
            s, f, w = _gemm_time(chip, tokens / dp, k, n, count, fmt, split, bw)
            t, flops, hbm = t + s * times, flops + f * times, hbm + w * times
    # Attention.
    q_per_kv = a.q_heads // max(1, a.kv_heads) if a.kind == "gqa" else a.q_heads
    heads = (a.kv_heads if a.kind == "gqa" else 1)
    if dp == 1:
        if a.kind == "gqa":
            heads = math.ceil(a.kv_heads / min(par.width, a.kv_heads))
        else:
            q_per_kv = math.ceil(a.q_heads / par.width)
    att_flops = shapes.attention_flops(m, context) * tokens / par.chips
    flops += att_flops
    if decode:
        seqs = math.ceil(kv_reads / dp)
        units = seqs * heads
        per_core = steps = math.ceil(units / chip.cores)
        cycles = 0.0
        full = m.layers - (a.window_layers if a.window else 0)
        for count, ctx, window in ((full, context, 0),
                                   (a.window_layers if a.window else 0, context, a.window)):
            if count:
                base, per = _attention_line(m, q_per_kv, window)
                span = min(ctx, window) if window else ctx
                cycles += count / par.pp * per_core * (base + per * span)
        kv = kv_reads * shapes.kv_bytes(m, context) / kv_split(m, par) / par.pp
        # On chip while SRAM holds every micro-batch's sequences at their longest (the stage's
        # layers of pp micro-batches of kv_reads sequences).
        kept = kv_reads * shapes.kv_bytes(m, max(held, context)) / kv_split(m, par)
        on_chip = kept <= chip.sram_mib * 2**20 * chip.kv_sram_frac
        t += max(cycles / clock, 0.0 if on_chip else kv / bw)
        if on_chip:
            sram += kv
        else:
            hbm += kv
    else:
        peak = chip.cores * chip.array_rows * chip.array_cols * 2 * clock
        d = a.head_dim if a.kind == "gqa" else a.kv_lora_rank + a.qk_rope
        eff = (gemm_timed.ideal_cycles(_gemm_config(chip.array_rows, chip.array_cols),
                                       256, d, chip.array_cols)
               / gemm_cycles(chip.array_rows, chip.array_cols, 256, d, chip.array_cols))
        t += att_flops / (peak * eff)
        steps = math.ceil(tokens / dp / MOE_TOKENS)
    # The MoE layers: the chip's share of the touched experts over its cores; fewer experts
    # than cores split each expert's column tiles over several cores.
    if moe_layers:
        n = max(1, math.ceil(tokens * m.top_k / experts))
        per_chip = experts / par.width
        bpc = _port_bytes(chip)
        args = (chip.array_rows, chip.array_cols, m.hidden, m.moe_intermediate, m.experts,
                m.top_k, bpc, n)
        one, two = moe_cycles(*args, 1), moe_cycles(*args, 2)
        per_expert, base = two - one, 2 * one - two
        if per_chip >= chip.cores:
            cyc = base + math.ceil(per_chip / chip.cores) * per_expert
        else:
            cyc = base + per_expert / max(1, chip.cores // max(1, math.ceil(per_chip)))
        t += moe_layers * cyc / clock
        expert_bytes = _expert_bytes(m)
        batches = math.ceil(n / MOE_TOKENS)
        hbm += moe_layers * per_chip * expert_bytes * batches
        flops += moe_layers * 2 * tokens * m.top_k * shapes.ffn_params(
            m.hidden, m.moe_intermediate) / par.width
    # Between the blocks: the decoder engine's commands, each core's on its share of the
    # tokens (the cores in parallel), and the blocks' commands' hand-overs.
    per_core = max(1, math.ceil(tokens / dp / chip.cores))
    per_layer = len(_matmuls(m)) + steps
    for count, dense in ((moe_layers, False), (dense_layers, True)):
        if count:
            cyc = glue_cycles(m, per_core, decode, dense, per_layer + (2 if dense else 1))
            t += count * cyc / clock
    t_comm, link = comm(chip, m, par, tokens)
    # The sequencing between layers: the chip's own fixed time a layer (0 until the decoder
    # layer's RTL measures it).
    t += chip.layer_us * 1e-6 * layers
    return Phase(t + t_comm, flops, hbm, sram, link)
