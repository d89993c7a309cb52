"""Attention as the ``attention`` block computes it, bit for bit, built from its parts' golden
models, and :func:`reference`, plain float64 attention to check it against.

For each KV head, its rows are (query token, query head) pairs of its group of G query heads;
row i attends positions ``lo_i .. hi_i`` (``hi_i`` its token's position, ``lo_i`` the start
of its window or 0). ``docs/attention.md`` states the steps:

1. Storage: K and V as the cache holds them in ``kv_fmt``
   (:func:`~scoville.sim.golden.kvcache.stored_values`).
2. Operands of the array in ``fmt``: Q rounded to BF16, or MXFP8 along the head dimension. K
   the same along the head dimension (``fp8_e4m3`` storage is MXFP8 with unit scales;
   ``mxfp4`` storage is B in the mixed ``mxfp8`` x ``mxfp4`` product as it is). V (and P)
   along the tokens: BF16, or requantized to MXFP8 in blocks of 32 positions (multiples of 32;
   positions before the first attended one are zeros).
3. Chunks of ``config.chunk`` positions, aligned to multiples of it, from the one holding the
   first attended position. For each chunk: ``S = Q K^T`` on the array
   (:func:`~scoville.sim.golden.gemm.gemm`, FP32); ``s = fp32(S * c)`` with
   ``c = fp32(scale * log2(e))``; for each row, over its positions in the chunk:
   ``m' = max(m, max_j s_j)``, ``p_j = exp2(fp32(s_j - m'))`` (0 outside its range),
   ``alpha = exp2(fp32(m - m'))`` or 1 where ``m' = m``
   (:func:`~scoville.sim.golden.exp2.exp2`); ``l = fp32(fp32(l * alpha) + sum_j p_j)`` (the p
   in position order from +0); ``O = fp32(fp32(O * alpha) + P V)``, ``P V`` on the array. A
   chunk where no row has a position is skipped.
4. Start: ``m = -inf``, ``l = 0``, ``O = 0``; with a sink logit ``z``, ``m = fp32(z *
   fp32(log2(e)))`` and ``l = 1``: the sink joins the denominator and nothing else.
5. Out: ``O * fp32(1 / l)``, one FP32 rounding each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from scoville.rtl.attention import (
    MLA_K_DIM,
    MLA_V_DIM,
    AttentionConfig,
    Op,
    Status,
    response_layout,
)
from scoville.rtl.gemm import GemmConfig
from scoville.rtl.kvcache import Op as CacheOp
from scoville.rtl.lib.formats import MX_BLOCK

from .exp2 import exp2
from .gemm import Operands, add_latency, gemm
from .kvcache import KvCacheModel, Outcome, Request, encode_heads, stored_values
from .mx import dequantize_mxfp8, encode_e4m3, quantize_bf16, quantize_mxfp4, quantize_mxfp8

__all__ = ["LOG2E", "AttentionModel", "Command", "Result", "beat_order", "chunk_plan", "decode",
           "decode_mla", "prefill", "query_values", "reference", "score_factor"]

#: log2(e) in FP32.
LOG2E = np.float32(math.log2(math.e))

_FORMATS = ("bf16", "mxfp8")
_KV_FORMATS = ("bf16", "fp8_e4m3", "mxfp4")


def score_factor(scale: float) -> np.float32:
    """``c = fp32(scale * log2(e))``: scores times ``c`` are in base-2 units."""
    return np.float32(scale * math.log2(math.e))


def decode(q, k, v, *, sinks=None, window=0, scale=None, kv_fmt="bf16", fmt="bf16",
           config=None) -> np.ndarray:
    """One decode step of grouped-query attention, as the block computes it (the module says
    how).

    Parameters
    ----------
    q : array (q_heads, d)
        The new token's queries.
    k, v : arrays (kv_heads, L, d)
        Keys and values of the sequence, the last position the new token.
    sinks : array (q_heads,) or None
        Sink logits (GPT-OSS), in the units of ``q.k * scale``.
    window : int
        Attend to the last ``window`` positions (0: all).
    scale : float or None
        Score scale; ``1 / sqrt(d)`` by default.
    kv_fmt, fmt : str
        Storage format of K and V; format of the two matmuls.
    config : AttentionConfig or None
        Fixes ``chunk`` (the default config when None).

    Returns
    -------
    numpy.ndarray
        (q_heads, d) float32.
    """
    q = np.asarray(q, np.float64)
    return prefill(q[None], k, v, sinks=sinks, window=window, scale=scale, kv_fmt=kv_fmt,
                   fmt=fmt, config=config)[0]


def prefill(q, k, v, *, sinks=None, window=0, scale=None, kv_fmt="bf16", fmt="bf16",
            config=None) -> np.ndarray:
    """T query tokens, the last T positions of ``k`` and ``v`` (kv_heads, L, d), with a causal
    mask (and the sliding window): ``q`` (T, q_heads, d); returns (T, q_heads, d) float32.
    With ``v`` None (MLA, ``config.mla``), V is the first ``config.v_dim`` elements of K's
    stored values and the result (T, q_heads, v_dim).
    The tokens go in row tiles of ``config.row_tokens`` (as many whole groups as the array
    has rows); each KV head attends a tile's (token, head) rows together, chunk by chunk over
    the tile's positions (the module says how; a row of a chunk outside its range keeps its
    state). With ``fmt=bf16`` row t is bit for bit :func:`decode` of its token over the first
    L - T + t + 1 positions (unless V holds an infinity or NaN where the row is masked: P's
    zero times it; the zeros after a row's token, at the end of ``P V``'s K, change none of
    the array's partial sums, which are numbered from a tile's first step); with ``mxfp8``
    V's blocks along the tokens also see tokens other rows of its tile attend."""
    q = np.asarray(q, np.float64)
    k = np.asarray(k, np.float64)
    config = AttentionConfig() if config is None else config
    if v is None and not config.mla:
        raise ValueError("parameter 'v' = None is not allowed without config.mla = 1; "
                         "allowed: an array (kv_heads, L, d)")
    # MLA (config.mla, v None): V is the first v_dim elements of K's stored values.
    v_dim = config.v_dim if v is None else None
    v = None if v is None else np.asarray(v, np.float64)
    tokens, q_heads, d = q.shape
    kv_heads, length, _ = k.shape
    if q_heads % kv_heads:
        raise ValueError(f"parameter 'q' has {q_heads} heads; allowed: a multiple of the "
                         f"{kv_heads} KV heads of 'k'")
    if not 1 <= tokens <= length:
        raise ValueError(f"parameter 'q' has {tokens} tokens; allowed: 1..{length} (the "
                         "positions of 'k')")
    group = q_heads // kv_heads
    tq = config.row_tokens
    sinks = None if sinks is None else np.asarray(sinks, np.float64)
    out = np.zeros((tokens, q_heads, v_dim or v.shape[-1]), np.float32)
    for t0 in range(0, tokens, tq):
        ts = slice(t0, min(t0 + tq, tokens))
        count = ts.stop - t0
        pos = np.repeat(np.arange(length - tokens + t0, length - tokens + ts.stop), group)
        lo = np.maximum(pos - window + 1, 0) if window else np.zeros_like(pos)
        for g in range(kv_heads):
            heads = slice(g * group, (g + 1) * group)
            rows = q[ts, heads].reshape(count * group, d)
            row_sinks = None if sinks is None else np.tile(sinks[heads], count)
            res = _attend(rows, lo, pos, k[g], None if v is None else v[g], row_sinks, scale,
                          kv_fmt, fmt, config, v_dim=v_dim)
            out[ts, heads] = res.reshape(count, group, -1)
    return out


def decode_mla(q, kv, *, v_dim=MLA_V_DIM, scale, kv_fmt="bf16", fmt="bf16",
               config=None) -> np.ndarray:
    """One decode step of MLA in absorbed form: every query head attends to the one latent KV
    head ``kv`` (L, 576 in DeepSeek-R1), whose first ``v_dim`` elements are the values; ``q``
    (heads, 576). Returns (heads, v_dim) float32."""
    q = np.asarray(q, np.float64)
    kv = np.asarray(kv, np.float64)
    if not v_dim < kv.shape[-1] == q.shape[-1]:
        raise ValueError(f"parameter 'kv' has {kv.shape[-1]} elements a token; allowed: "
                         f"as many as q's ({q.shape[-1]}; {MLA_K_DIM} in DeepSeek-R1), more "
                         f"than v_dim = {v_dim}")
    rows = len(q)
    lo, hi = np.zeros(rows, int), np.full(rows, len(kv) - 1)
    # V reads the same stored lines as K: its values are K's stored values' first v_dim.
    return _attend(q, lo, hi, kv, None, None, scale, kv_fmt, fmt, config, v_dim=v_dim)


def reference(q, k, v, *, sinks=None, window=0, scale=None) -> np.ndarray:
    """Plain float64 attention over ``k``, ``v`` (kv_heads, L, d) with GQA, sinks (an extra
    logit column dropped after the softmax, as Hugging Face's ``eager_attention_forward`` for
    GPT-OSS) and a sliding window: of one query token at the last position, ``q`` (q_heads,
    d) -> (q_heads, d_v); or of the last T positions with a causal mask, ``q`` (T, q_heads,
    d) -> (T, q_heads, d_v). Float64 throughout."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    if q.ndim == 3:
        length = k.shape[1]
        return np.stack([reference(q[t], k[:, :length - len(q) + t + 1],
                                   v[:, :length - len(q) + t + 1], sinks=sinks,
                                   window=window, scale=scale) for t in range(len(q))])
    q_heads, d = q.shape
    kv_heads, length, _ = k.shape
    scale = d ** -0.5 if scale is None else scale
    lo = 0 if window == 0 else max(0, length - window)
    group = q_heads // kv_heads
    kh, vh = np.repeat(k[:, lo:], group, axis=0), np.repeat(v[:, lo:], group, axis=0)
    logits = np.einsum("hd,hld->hl", q, kh) * scale
    if sinks is not None:
        logits = np.concatenate([logits, np.asarray(sinks, np.float64)[:, None]], axis=1)
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    weights /= weights.sum(axis=1, keepdims=True)
    return np.einsum("hl,hld->hd", weights[:, :vh.shape[1]], vh)


def query_values(q, fmt: str) -> np.ndarray:
    """Q as the array sees it in ``fmt`` (BF16, or MXFP8 along the last axis), as float64: the
    quantized Q that :func:`reference` is compared on."""
    codes, scales = _operand(np.asarray(q, np.float64), fmt, axis=-1)
    if fmt == "bf16":
        return (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return dequantize_mxfp8(codes, scales, axis=-1).astype(np.float64)


def _check(kv_fmt: str, fmt: str) -> None:
    if fmt not in _FORMATS:
        raise ValueError(f"parameter 'fmt' = {fmt!r} is not allowed; allowed: bf16, mxfp8")
    if kv_fmt not in _KV_FORMATS:
        raise ValueError(f"parameter 'kv_fmt' = {kv_fmt!r} is not allowed; allowed: bf16, "
                         "fp8_e4m3, mxfp4")


def _attend(q, lo, hi, k, v, sinks, scale, kv_fmt, fmt, config, *, v_dim=None):
    """One KV head: rows ``q`` (M, d), row i attending positions ``lo[i]..hi[i]`` of ``k``
    (L, d) and ``v`` (L, d_v) (None: V is the first ``v_dim`` elements of K's stored values),
    with sink logits ``sinks`` (M,) or None. Returns (M, d_v) float32."""
    _check(kv_fmt, fmt)
    config = AttentionConfig() if config is None else config
    length, d = k.shape
    if q.shape[1] != d:
        raise ValueError(f"parameter 'q' has {q.shape[1]} elements a head; 'k' has {d}")
    if fmt == "mxfp8" and d % MX_BLOCK:
        raise ValueError(f"head_dim {d} is not allowed with fmt=mxfp8; allowed: a multiple "
                         f"of {MX_BLOCK}")
    scale = d ** -0.5 if scale is None else scale
    first, last = int(lo.min()), int(hi.max())
    k_stored = stored_values(kv_fmt, k)
    v_stored = k_stored[:, :v_dim] if v is None else stored_values(kv_fmt, v)
    # Tokens before the first attended one are zeros (not read): they only fill its block.
    v_stored = np.where(np.arange(length)[:, None] < first, 0.0, v_stored)
    # BF16's partial sums: the array's.
    add = add_latency(fmt, config.array.sums)
    qk_config = GemmConfig(fmt=fmt, b_fmt="mxfp4" if (fmt, kv_fmt) == ("mxfp8", "mxfp4")
                           else "same", add_latency=add)
    pv_config = GemmConfig(fmt=fmt, add_latency=add)
    a = _operand(q, fmt, axis=1)
    b = _key_operand(k, k_stored, kv_fmt, fmt)
    c = score_factor(scale)
    rows = q.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        if sinks is None:
            m = np.full(rows, -np.inf, np.float32)
            total = np.zeros(rows, np.float32)
        else:
            m = (sinks.astype(np.float32) * LOG2E).astype(np.float32)
            total = np.ones(rows, np.float32)
        out = np.zeros((rows, v_stored.shape[1]), np.float32)
        chunk = config.chunk
        for c0 in range(first - first % chunk, last + 1, chunk):
            # Blocks along the tokens start at multiples of 32: so does every chunk's range.
            a0, a1 = max(c0, first - first % MX_BLOCK), min(c0 + chunk, last + 1)
            pos = np.arange(a0, a1)
            valid = (pos >= lo[:, None]) & (pos <= hi[:, None])
            if not valid.any():
                continue  # a tile that the mask empties: skipped
            cols = slice(a0, a1)
            ops = Operands(a[0], b[0][:, cols], a[1], None if b[1] is None else b[1][:, cols])
            s = (_f32(gemm(qk_config, ops)) * c).astype(np.float32)
            m_new = np.maximum(m, np.where(valid, s, -np.inf).max(axis=1)).astype(np.float32)
            # A row whose max stays (no key in this chunk, or none above it) keeps alpha = 1.
            alpha = np.where(m_new == m, np.float32(1), _exp2(m - m_new))
            p = np.where(valid, _exp2(s - m_new[:, None]), np.float32(0))
            total = (total * alpha + _sum_in_order(p)).astype(np.float32)
            pa, pv = _operand(p, fmt, axis=1), _operand(v_stored[cols], fmt, axis=0)
            pv_out = _f32(gemm(pv_config, Operands(pa[0], pv[0], pa[1], pv[1])))
            out = ((out * alpha[:, None]).astype(np.float32) + pv_out).astype(np.float32)
            m = m_new
        recip = (np.float32(1) / total).astype(np.float32)
        return (out * recip[:, None]).astype(np.float32)


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32)


def _exp2(x) -> np.ndarray:
    """The exp2 unit on float32 ``x``."""
    return _f32(exp2(np.asarray(x, np.float32).view(np.uint32)))


def _sum_in_order(p) -> np.ndarray:
    """FP32 sums of the rows of ``p`` from +0, one element at a time."""
    acc = np.zeros(p.shape[0], np.float32)
    for j in range(p.shape[1]):
        acc = (acc + p[:, j]).astype(np.float32)
    return acc


def _operand(x, fmt, axis):
    """Codes and (MXFP8) scales of ``x`` in ``fmt``, blocks along ``axis`` (zero-padded to
    whole blocks: the array sums a partial block over its elements)."""
    if fmt == "bf16":
        return quantize_bf16(x), None
    n = x.shape[axis]
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, -n % MX_BLOCK)
    codes, scales = quantize_mxfp8(np.pad(np.asarray(x, np.float64), pad), axis=axis)
    return np.take(codes, np.arange(n), axis=axis), scales


def _key_operand(k, k_stored, kv_fmt, fmt):
    """B = K^T (d, L) for ``Q K^T``: codes and scales along the head dimension."""
    if fmt == "bf16":
        return quantize_bf16(k_stored).T, None
    if kv_fmt == "fp8_e4m3":
        codes = encode_e4m3(k_stored)
        return codes.T, np.full((k.shape[1] // MX_BLOCK, k.shape[0]), 127, np.uint8)
    if kv_fmt == "mxfp4":
        codes, scales = quantize_mxfp4(k, axis=-1)
        return codes.T, scales.T
    codes, scales = quantize_mxfp8(k_stored, axis=-1)
    return codes.T, scales.T


def beat_order(config: AttentionConfig, length: int, out) -> np.ndarray:
    """A step's output ``out`` (T, q_heads, d_v), the sequence then holding ``length`` tokens,
    in the order of the block's ``o`` beats: row tile, KV head, the tile's tokens, the group's
    heads (T x q_heads, d)."""
    out = np.asarray(out)
    g = config.group
    beats = [out[first + t, h * g: (h + 1) * g]
             for first, count, _, _ in config.tiles(length, len(out))
             for h in range(config.kv.kv_heads) for t in range(count)]
    return np.concatenate(beats)


def chunk_plan(config: AttentionConfig, lo: int, hi: int) -> list[tuple[int, int]]:
    """The chunks a KV head's decode step walks, as ``(a0, n)`` (the module's step 3;
    :meth:`~scoville.rtl.attention.AttentionConfig.chunk_plan`)."""
    return config.chunk_plan(lo, hi)


@dataclass(frozen=True)
class Command:
    """One command of the block (:data:`~scoville.rtl.attention.OPS`) with its vectors,
    float32: ``q`` (q_heads, d) for a decode step, (T, q_heads, d) for a prefill step of T
    tokens; ``k`` and ``v`` (kv_heads, d) for an append, (T, kv_heads, d) or (kv_heads, d)
    for a step; ``head`` and ``value`` for a sink; ``window`` a step's own sliding window (0:
    the config's; the command's ``value`` low 16 bits in hardware)."""

    op: int
    seq: int = 0
    head: int = 0
    value: float = 0.0
    window: int = 0
    q: np.ndarray | None = None
    k: np.ndarray | None = None
    v: np.ndarray | None = None

    @property
    def tokens(self) -> int:
        """A step's new tokens T: ``q`` (T, q_heads, d), or one for ``q`` (q_heads, d)."""
        return 1 if self.q is None or np.ndim(self.q) < 3 else len(self.q)


@dataclass(frozen=True)
class Result:
    """What one command does: the answer (``status``, ``seq``, ``length``), a step's output
    ``out`` (T x q_heads, d) float32 in the order of ``o``'s beats (row tile, KV head, the
    tile's tokens, the group's heads; None without output), and what the timed model needs:
    the step's ``tokens``, the cache requests the block makes (``cache``: outcomes of the
    appends, alloc or free, then of each read) and the chunks of a step (``chunks``: ``(unit,
    a0, n, rows)`` in order, ``unit`` = row tile x kv_heads + head, ``rows`` its rows) and its
    own ``window`` (the command's, 0: the config's)."""

    op: int
    status: int
    seq: int
    length: int
    out: np.ndarray | None = None
    cache: list[Outcome] = field(default_factory=list)
    chunks: list[tuple[int, int, int, int]] = field(default_factory=list)
    tokens: int = 1
    window: int = 0

    def word(self) -> int:
        """The packed ``resp`` payload."""
        return sum(int(getattr(self, name)) << f.offset for name, f in _RESPONSE)


_RESPONSE = response_layout()


class AttentionModel:
    """The block as a program: its cache (:class:`~scoville.sim.golden.kvcache.KvCacheModel`),
    each sequence's K and V as given, the sink logits; :meth:`apply` carries out a command
    and returns its :class:`Result`, a step's output from :func:`prefill`, bit for bit."""

    def __init__(self, config: AttentionConfig | None = None):
        self.config = AttentionConfig() if config is None else config
        self.cache = KvCacheModel(self.config.kv)
        self.values: dict[int, tuple[list, list]] = {}
        self.sinks = np.full(self.config.q_heads, -np.inf, np.float32)

    def apply(self, cmd: Command) -> Result:
        cfg = self.config
        kv = cfg.kv
        if cmd.op == Op.SINK:
            if cmd.head >= cfg.q_heads:
                return Result(cmd.op, Status.BAD_HEAD, cmd.seq, 0)
            if not cfg.sinks:
                return Result(cmd.op, Status.BAD_OP, cmd.seq, 0)
            self.sinks[cmd.head] = np.float32(cmd.value)
            return Result(cmd.op, Status.OK, cmd.seq, 0)
        if cmd.op in (Op.ALLOC, Op.FREE):
            out = self.cache.apply(Request(CacheOp.ALLOC if cmd.op == Op.ALLOC
                                           else CacheOp.FREE, seq=cmd.seq))
            if out.status == Status.OK:
                if cmd.op == Op.ALLOC:
                    self.values[out.seq] = ([], [])
                else:
                    del self.values[out.seq]
            return Result(cmd.op, out.status, out.seq, out.length, cache=[out])
        if cmd.op not in (Op.APPEND, Op.STEP):
            return Result(cmd.op, Status.BAD_OP, cmd.seq, 0)
        H, d, QH = kv.kv_heads, kv.head_dim, cfg.q_heads
        tokens = cmd.tokens if cmd.op == Op.STEP else 1
        k = np.asarray(cmd.k, np.float32).reshape(tokens, H, d)
        # MLA: the latent vector alone (V reads take its lines).
        v = None if cfg.mla else np.asarray(cmd.v, np.float32).reshape(tokens, H, d)
        if not 1 <= tokens <= cfg.max_step_tokens:
            # Its vectors are taken and dropped; the cache is not asked.
            return Result(cmd.op, Status.BAD_RANGE, cmd.seq, 0, tokens=tokens)
        cache, status, length = [], Status.OK, 0
        for t in range(tokens):
            lines = encode_heads(kv, k[t]) + ([] if v is None else encode_heads(kv, v[t]))
            out = self.cache.apply(Request(CacheOp.APPEND, seq=cmd.seq, lines=lines))
            cache.append(out)
            length, seq = out.length, out.seq
            if out.status == Status.OK:
                keys, vals = self.values[cmd.seq]
                keys.append(k[t])
                vals.append(None if v is None else v[t])
            elif status == Status.OK:
                status = out.status  # the first failure's (later appends fail alike)
        if cmd.op == Op.APPEND or status != Status.OK:
            return Result(cmd.op, status, seq, length, cache=cache, tokens=tokens)
        chunks = []
        window = (cmd.window & 0xFFFF) or cfg.window     # the command's 16 bits
        for i, (_, count, lo, hi) in enumerate(cfg.tiles(length, tokens, window)):
            rows = count * cfg.group
            for h in range(H):
                for a0, n in cfg.chunk_plan(lo, hi):
                    chunks.append((i * H + h, a0, n, rows))
                    # K, then V: a read per column tile of P V (a window of each token's
                    # lines; with MLA, of K's lines).
                    for half, (line0, nlines) in [(0, (0, 0))] + [(1, w) for w in cfg.v_reads()]:
                        cache.append(self.cache.apply(Request(
                            CacheOp.READ, seq=cmd.seq, kv=half, head=h, start=a0,
                            count=n, line0=line0, nlines=nlines)))
        keys, vals = self.values[cmd.seq]
        q = np.asarray(cmd.q, np.float32).reshape(tokens, QH, d)
        result = prefill(q, np.stack(keys, axis=1),
                         None if cfg.mla else np.stack(vals, axis=1),
                         sinks=self.sinks if cfg.sinks else None, window=window,
                         scale=cfg.score_scale, kv_fmt=kv.kv_fmt, fmt=cfg.array.fmt,
                         config=cfg)
        return Result(cmd.op, status, seq, length, out=beat_order(cfg, length, result),
                      cache=cache, chunks=chunks, tokens=tokens, window=window)
