"""A chip assembled from Scoville's blocks, timed by the blocks' closed-form models.

Each of the chip's ``cores`` has one array of ``array_rows`` x ``array_cols`` (the ``gemm``
block's, in the MoE block's MXFP4 weights and the model's activations), the MoE block's weight
path, the attention block's KV cache, and a ``decoder`` engine's activation memory (its share
of the SRAM the KV cache leaves: :func:`engine_lines`) and units between the blocks. A
layer's work is spread evenly over the cores, and a layer's blocks run one after another:

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
  :func:`glue`), each core on its share of the sequences or tokens: the norms, the rotations
  (in decode a command a sequence: each waits for its table rows from HBM), the residual
  adds, the dense layers' gated products, the router's weights (``ROUTER``, every MoE
  layer), and every command's hand-over. The weights every core needs whole (the norms',
  the router's) are read once and given to every core, a port word a cycle; each core reads
  its own tokens' rotary table rows.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import json
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

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
from .specs import SpecError, bytes_per_param

__all__ = ["Engine", "Glue", "attention_line", "blocks_phase", "engine_lines", "glue",
           "glue_cycles", "gated_width", "line_key", "moe_cycles", "rotated_heads",
           "stored_lines", "timed_digest", "weight_rate"]

#: The memory's latency in cycles as the MoE block sees it (HBM, a few hundred ns).
MEM_LATENCY = 500
#: The most tokens the MoE block holds in a batch.
MOE_TOKENS = 256
#: Bits of a core's weight port (the MoE block's and the decoder engine's).
PORT_BITS = 1024
#: Words the decoder engine's fetch (of the norms' and router's weights, the rotary table's
#: rows) asks ahead: more than the memory's round trip at a word a cycle.
GLUE_BUFFER = 1024
#: Hand-over cycles between two of the engine's commands (a command's last beat is counted
#: the cycle after, answered the next, and the next command taken the one after).
HANDOVER = 3


@functools.cache
def gemm_config(rows: int, cols: int) -> GemmConfig:
    """The chip's array: Scoville's MXFP4 GEMM engine (its unit stages set a command's
    latency; ``scoville explore --verify`` holds its closed form to the RTL's)."""
    return build_config(GemmConfig, {"rows": rows, "cols": cols, "fmt": "mxfp4"})


def gemm_cycles(rows: int, cols: int, m: int, k: int, n: int) -> int:
    """Cycles of one core's command of M x K x N on a rows x cols array."""
    return gemm_timed.command_cycles(gemm_config(rows, cols), m, k, n)


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


def _source(name: str) -> Path | None:
    """The file of ``scoville`` module ``name`` (None: not a module, e.g. a name in one)."""
    path = Path(__file__).parent.parent.joinpath(*name.split(".")[1:])
    for f in (path.with_suffix(".py"), path / "__init__.py"):
        if f.is_file():
            return f
    return None


def _imports(name: str) -> set[str]:
    """The ``scoville`` modules that module ``name`` imports (absolute or relative)."""
    path = _source(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = (importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                    if node.level else node.module)
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return {m for m in found if m.startswith("scoville.") and _source(m)}


def timed_digest() -> str:
    """A digest of the sources the attention lines are computed from: the attention block's
    timed model and every ``scoville`` module it imports, transitively (its config's too)."""
    seen, todo = set(), ["scoville.sim.cycles.attention"]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += _imports(name)
    h = hashlib.sha256(_LINE_SOURCE.encode())
    for name in sorted(seen):
        h.update(name.encode() + b"\0" + _source(name).read_bytes())
    return h.hexdigest()[:16]


#: The decode-step lines (:func:`attention_line`) the default sweep asks for, by the attention
#: block's config (``python scripts/explore_attention_lines.py`` writes them; the fast path
#: runs the cycle model on small steps, seconds for each of MLA's configurations, in every
#: process of a sweep). Read, on first use (:func:`stored_lines`), only while they were
#: computed from today's sources (:func:`timed_digest`; ``tests/test_explore.py`` checks it).
LINES_FILE = Path(__file__).parent / "attention_lines.json"
LINES: dict[str, list[float]] | None = None


def stored_lines() -> dict[str, list[float]]:
    """:data:`LINES`, read from :data:`LINES_FILE` the first time (empty if the file is missing
    or was computed from other sources)."""
    global LINES
    if LINES is None:
        stored = json.loads(LINES_FILE.read_text()) if LINES_FILE.exists() else {}
        LINES = stored["lines"] if stored.get("digest") == timed_digest() else {}
        if stored and not LINES:
            warnings.warn(f"{LINES_FILE.name} is stale (the attention timed model changed): "
                          "its lines are computed again; run "
                          "scripts/explore_attention_lines.py", stacklevel=2)
    return LINES


def line_key(config) -> str:
    """:data:`LINES`'s key of an attention block's config (every field, defaults too)."""
    return repr(config)


def attention_line(config) -> tuple[float, float]:
    """``(base, per token)`` cycles of one sequence's decode step on the attention block
    ``config`` (:data:`LINES`'s where it holds them): its fast path at two context lengths,
    4 and 8 chunks (affine in them)."""
    known = stored_lines().get(line_key(config))
    if known:
        return known[0], known[1]
    lo, hi = 4 * config.chunk, 8 * config.chunk
    c_lo = attention_timed.decode_step(config, lo)["cycles"]
    c_hi = attention_timed.decode_step(config, hi)["cycles"]
    per = (c_hi - c_lo) / (hi - lo)
    return c_lo - per * lo, per


#: How :func:`attention_line` computes a line (part of :func:`timed_digest`), read when it is
#: defined.
_LINE_SOURCE = inspect.getsource(attention_line)


@functools.cache
def _attention_line(model, q_per_kv: int, window: int) -> tuple[float, float]:
    """``(base, per token)`` cycles of one sequence's decode step with one KV head of
    ``q_per_kv`` query heads (groups above 64 in steps of at most 64)."""
    steps = math.ceil(q_per_kv / 64)
    base, per = attention_line(_attention_config(model, math.ceil(q_per_kv / steps), window))
    return steps * base, steps * per


def engine_lines(chip) -> int:
    """Lines (32 FP32 values) of a core's activation memory: its share of the SRAM the KV
    cache leaves, within what the engine allows."""
    free = chip.sram_mib * 2**20 * (1 - chip.kv_sram_frac) / max(1, chip.cores)
    lines = min(32768, int(free // (LINE * 4)))
    if lines < 16:
        raise SpecError(f"chip {chip.name}: a core's activation memory (its share of the SRAM "
                        f"the KV cache leaves, sram_mib x (1 - kv_sram_frac) / cores) is "
                        f"{lines} lines of 128 bytes; the decoder engine needs at least 16")
    return lines


class Engine(NamedTuple):
    """One core's ``decoder`` engine for a model: its config, and whether the model's router
    fits one of its fetch commands (``ROUTER``)."""

    config: DecoderConfig
    router_fits: bool


def _router_words(model) -> int:
    """Port words of ``model``'s router as ``ROUTER`` reads it (``H / 32`` beats of 32 columns
    of the experts' FP32 weights, and the bias's beat)."""
    return (model.hidden // LINE + 1) * -(-LINE * model.experts * 32 // PORT_BITS)


@functools.cache
def _engine(model, act_lines: int) -> Engine:
    """One core's ``decoder`` engine at ``model``'s widths (its hidden size, its rotary
    vectors, its router) with ``act_lines`` of activation memory, for the commands between
    the blocks. A router past one fetch command (Kimi K2's 384 experts at hidden 7168: 86,400
    words of 1024 bits, past 65,535) leaves the engine's router at its default."""
    a = model.attention
    params = {"hidden": model.hidden, "act_lines": act_lines, "moe.hidden": model.hidden,
              "linear.weight_port_bits": PORT_BITS, "moe.weight_port_bits": PORT_BITS,
              "linear.fetch_buffer": GLUE_BUFFER, "linear.addr_bits": 32,
              "rope.dim": a.head_dim if a.kind == "gqa" else a.qk_rope, "glu_lanes": LINE}
    router = {"moe.experts": model.experts, "moe.top_k": model.top_k,
              "moe.intermediate": model.moe_intermediate}
    fits = _router_words(model) < 1 << 16
    try:
        return Engine(build_config(DecoderConfig, {**params, **router} if fits else params),
                      fits)
    except ParamError as e:
        raise SpecError(f"model {model.name}: a blocks chip's decoder engine cannot run it: "
                        f"{e}") from None


def _chunks(model, tokens: int, per: int, lines: int, most: int = 1 << 16) -> list[int]:
    """``tokens`` split into commands whose ``per`` lines a token fit ``lines`` lines of the
    activation memory, at most ``most`` tokens a command; a token that does not fit is the
    chip's error."""
    if per > lines:
        raise SpecError(f"a blocks chip's activation memory of {lines} lines (a core's share "
                        f"of the SRAM the KV cache leaves) cannot hold one of model "
                        f"{model.name}'s tokens ({per} lines)")
    return _pieces(tokens, max(1, min(most, lines // per)))


def _line_chunks(total: int, lines: int) -> list[int]:
    """``total`` lines of a two-operand op (``ADD``, ``GLU``: a line at a time, the result over
    the first) split into commands whose two ranges fit ``lines`` lines."""
    return _pieces(total, max(1, lines // 2))


def _pieces(total: int, most: int) -> list[int]:
    """``total`` in pieces of ``most``, the rest last."""
    return [most] * (total // most) + ([total % most] if total % most else [])


def _glue_commands(model, lines: int, seqs: int, per_seq: int, decode: bool, dense: bool,
                   heads: int, ffn: int) -> list[dict]:
    """One layer's commands between the blocks on a core's ``seqs`` sequences of ``per_seq``
    tokens each (decode: a step's tokens, ``1 + mtp``; prefill: ``seqs`` tokens of one),
    ``heads`` rotated vectors a token and ``ffn`` gated products a token (the chip's shares),
    ``lines`` of activation memory: the input norm (MLA: and the ``q_a`` and latent norms),
    the rotations (decode: a command a sequence, its tokens at their own positions; prefill:
    consecutive positions), the residual add, the MoE's norm, the dense layer's gated
    products (or those of the shared experts), the residual add. Addresses from 0: they do
    not change the cycles."""
    a, hl = model.attention, model.hidden // LINE
    cfg = _engine(model, lines).config
    tokens = seqs * per_seq
    norms = [0] + ([a.q_lora_rank, a.kv_lora_rank] if a.kind == "mla" else [])
    rope_lines = heads * cfg.rope_lines
    cmds = [{"op": Op.NORM, "a": 0, "dst": 0, "count": c, "k": k, "addr": 0}
            for k in norms for c in _chunks(model, tokens, (k or model.hidden) // LINE, lines)]
    # A rotation's table rows are one fetch command long at most.
    rows = ((1 << cfg.norm_fetch.len_bits) - 1) // cfg.rope_words
    _chunks(model, 1, rope_lines, lines)        # a token's vectors fit
    for c in [per_seq] * seqs if decode else _chunks(model, tokens, rope_lines, lines, rows):
        cmds.append({"op": Op.ROPE, "a": 0, "count": c, "heads": heads,
                     "stride": cfg.rope.dim, "row": rope_lines, "addr": 0})
    adds = [{"op": Op.ADD, "a": 0, "b": n, "dst": 0, "count": n}
            for n in _line_chunks(tokens * hl, lines)]
    cmds += adds + [{"op": Op.NORM, "a": 0, "dst": 0, "count": c, "addr": 0}
                    for c in _chunks(model, tokens, hl, lines)]
    cmds += [{"op": Op.GLU, "a": 0, "b": n, "dst": 0, "count": n}
             for n in _line_chunks(tokens * -(-ffn // LINE), lines)]
    return cmds + adds


@functools.cache
def _router(model, lines: int) -> tuple[int, int]:
    """A MoE layer's ``ROUTER`` (its weights, ``H / 32`` beats of 32 columns of the experts'
    FP32 logit weights and the bias's beat, read once for every core, a port word a cycle):
    its cycles with the hand-over and its words. The engine's fast path of the command
    where the router fits one fetch command; else (Kimi K2) the same fetch of its words, as
    if the fetch's length field were wider."""
    engine = _engine(model, lines)
    if engine.router_fits:
        return _command(model, lines, (("op", Op.ROUTER), ("addr", 0)))
    words = _router_words(model)
    fetch = engine.config.norm_fetch
    return (math.ceil(decoder_timed.arrived(fetch, 0, words, MEM_LATENCY, 1.0)) + HANDOVER,
            words)


class Glue(NamedTuple):
    """One layer's commands between the blocks on a core: ``cycles`` by op (each with its
    hand-over), and the weight-port words they read: ``shared`` (the norms' and the router's,
    the same for every core), ``own`` (the rotations' table rows of the core's tokens)."""

    cycles: Mapping[str, int]
    shared: int
    own: int


@functools.cache
def glue(model, lines: int, seqs: int, per_seq: int, decode: bool, dense: bool,
         heads: int, ffn: int) -> Glue:
    """:func:`_glue_commands` (and a MoE layer's ``ROUTER``, :func:`_router`), each command
    the decoder engine's fast path (:func:`~scoville.sim.cycles.decoder.fast`; the commands
    run one after another, so a layer's are their sum)."""
    cycles: dict[str, int] = {}
    shared = own = 0
    for c in _glue_commands(model, lines, seqs, per_seq, decode, dense, heads, ffn):
        name = Op(c["op"]).name
        cyc, words = _command(model, lines, tuple(c.items()))
        cycles[name] = cycles.get(name, 0) + cyc
        if name == "ROPE":
            own += words
        else:
            shared += words
    if not dense:
        cycles["ROUTER"], words = _router(model, lines)
        shared += words
    return Glue(MappingProxyType(cycles), shared, own)


#: Bits of the ``cmd`` beat's fields the glue's commands could outgrow
#: (:func:`scoville.rtl.decoder_parts.command_layout`).
_FIELD_BITS = {"count": 16, "heads": 8, "row": 16, "stride": 16}


@functools.cache
def _command(model, lines: int, fields: tuple) -> tuple[int, int]:
    """One command's cycles with its hand-over and its weight words on :func:`_engine` (the
    decoder engine's fast path; many of a sweep's layers share their commands)."""
    cfg, c = _engine(model, lines).config, dict(fields)
    wide = [f for f, bits in _FIELD_BITS.items() if c.get(f, 0) >> bits]
    if wide or check(cfg, {f: c.get(f, 0) for f in COMMAND_FIELDS}):
        raise SpecError(f"model {model.name}: a blocks chip's decoder engine cannot run "
                        f"{Op(c['op']).name} {c}" + (f" (field {wide[0]})" if wide else ""))
    got = decoder_timed.fast(cfg, [c], MEM_LATENCY, PORT_BITS // 8)
    return int(got["cycles"]), got["weight_words"]


def glue_cycles(chip, model, seqs: int, per_seq: int, decode: bool, dense: bool, heads: int,
                ffn: int, handovers: int, busy: int) -> tuple[int, float]:
    """One layer's cycles between the blocks on a core of ``chip`` (:func:`glue`) with the
    hand-overs of ``handovers`` commands of the blocks (projections, attention steps, MoE
    batches: counted roughly, 3 cycles each), and the bytes the chip reads for them: the
    shared words once, the rotations' table rows of ``busy`` cores."""
    g = glue(model, engine_lines(chip), seqs, per_seq, decode, dense, heads, ffn)
    return (sum(g.cycles.values()) + HANDOVER * handovers,
            (g.shared + g.own * busy) * PORT_BITS / 8)


def rotated_heads(model, split: int = 1) -> int:
    """Vectors a token rotates on a chip holding ``1 / split`` of the attention's heads: its
    query heads' and key heads' (MLA: the one rotary key, on every chip)."""
    a = model.attention
    if a.kind == "gqa":
        return math.ceil(a.q_heads / split) + math.ceil(a.kv_heads / min(split, a.kv_heads))
    return math.ceil(a.q_heads / split) + 1


def gated_width(model, dense: bool, split: int = 1) -> int:
    """Gated products a token on a chip holding ``1 / split`` of the FFN's columns: a dense
    layer's FFN, or a MoE layer's shared experts."""
    return math.ceil((model.dense_intermediate if dense
                      else model.shared * model.shared_intermediate) / split)


def _matmuls(model) -> list[tuple[int, int, int, str]]:
    """``(K, N, count, format)`` of one layer's attention projections (MLA's up-projection
    absorbed: per head a ``qk_nope x kv_lora`` and a ``kv_lora x v_head_dim``)."""
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
    return mm


def _shared(model) -> list[tuple[int, int, int, str]]:
    """``(K, N, count, format)`` of a MoE layer's shared experts' GEMMs."""
    width, H, wf = model.shared * model.shared_intermediate, model.hidden, model.weight_fmt
    return [(H, 2 * width, 1, wf), (width, H, 1, wf)] if width else []


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
    gemms = [(*mm, layers) for mm in _matmuls(m)] + [(*mm, moe_layers) for mm in _shared(m)] + [
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
    # A decode step's tokens a sequence: 1 + mtp.
    per_seq = max(1, round(tokens / kv_reads)) if decode and kv_reads else 1
    if decode:
        seqs = math.ceil(kv_reads / dp)
        # A decode-mode block steps one token: MTP's 1 + mtp tokens are as many steps.
        units = seqs * heads * per_seq
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
        eff = (gemm_timed.ideal_cycles(gemm_config(chip.array_rows, chip.array_cols),
                                       256, d, chip.array_cols)
               / gemm_cycles(chip.array_rows, chip.array_cols, 256, d, chip.array_cols))
        t += att_flops / (peak * eff)
        steps = math.ceil(tokens / dp / MOE_TOKENS)
    # The MoE layers: the chip's share of the touched experts over its cores; fewer experts
    # than cores split each expert's column tiles over several cores. Experts spread over the
    # chips: the step waits for the busiest chip, as on a roofline chip (``shapes.busiest_chip``):
    # its touched experts, and its choices (the router's skew too) over them; the bytes (the
    # energy) are the mean chip's.
    if moe_layers:
        n = uniform = max(1, math.ceil(tokens * m.top_k / experts))   # the mean chip's
        mean = per_chip = experts / par.width
        if par.experts_spread:
            choices, more = shapes.busiest_chip(m, par.width, tokens, experts)
            per_chip *= more
            n = max(n, round(tokens * m.top_k / experts * choices / more))
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
        # Each expert's weights read once a batch of its tokens, on the mean chip.
        hbm += moe_layers * mean * _expert_bytes(m) * math.ceil(uniform / MOE_TOKENS)
        flops += moe_layers * 2 * tokens * m.top_k * shapes.ffn_params(
            m.hidden, m.moe_intermediate) / par.width
    # Between the blocks: the decoder engine's commands, each core's on its share of the
    # chip's sequences (decode: each of 1 + mtp tokens) or tokens (the cores in parallel), on
    # the chip's share of the rotated heads; and the blocks' commands' hand-overs.
    spread = kv_reads / dp if decode else tokens / dp     # sequences or tokens over the cores
    seqs = max(1, math.ceil(spread / chip.cores))
    busy = min(chip.cores, max(1, math.ceil(spread / seqs)))
    for count, dense in ((moe_layers, False), (dense_layers, True)):
        if count:
            # The blocks' commands: projections, attention steps, the FFN's two GEMMs or the
            # shared experts' and the MoE.
            blocks_commands = (len(_matmuls(m)) + steps
                               + (2 if dense else len(_shared(m)) + 1))
            cyc, read = glue_cycles(chip, m, seqs, per_seq, decode, dense,
                                    rotated_heads(m, split), gated_width(m, dense, split),
                                    blocks_commands, busy)
            t, hbm = t + count * cyc / clock, hbm + count * read
    t_comm, link = comm(chip, m, par, tokens)
    # Besides, the chip's own fixed time a layer (a spec: 0 unless a TOML chip sets it).
    t += chip.layer_us * 1e-6 * layers
    return Phase(t + t_comm, flops, hbm, sram, link)
