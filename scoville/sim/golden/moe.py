"""Mixture-of-Experts as the ``moe`` block computes it, bit for bit, with weights in the Hugging
Face transformers layouts, and :func:`reference`, the same layer in float64.

The steps (``docs/moe.md`` states them too):

1. **Router logits**, FP32: for each token and expert, ``acc = +0``, then for each beat of
   ``L`` = ``x_lanes`` elements in order, the products ``fp32(x_h * W_eh)`` added as a binary
   tree (neighbours, then neighbouring sums) and ``acc = fp32(acc + tree)`` (with ``L = 1``,
   ``acc = fp32(acc + fp32(x_h * W_eh))`` along the hidden dimension in order); ``gpt_oss``
   adds the bias: ``fp32(acc + b_e)``.
2. **Exponentials** come from the ``exp2`` unit (:func:`~scoville.sim.golden.exp2.exp2`):
   ``exp(z) = exp2(fp32(z * fp32(log2 e)))``; ``sigmoid(z) = 1 / fp32(1 + exp(-z))`` with a
   correctly rounded reciprocal (``-z`` as ``fp32(z * fp32(-log2 e))``; 0 once the
   denominator reaches 2^126, below z = -87.3).
3. **gpt_oss routing**: the ``top_k`` largest logits, largest first (ties: the lower expert
   index); ``e_i = exp(fp32(l_i - l_max))``; ``s`` their FP32 sum in that order from +0;
   ``w_i = fp32(e_i * fp32(1 / s))``.
4. **deepseek routing**: ``s_e = sigmoid(l_e)``; ``c_e = fp32(s_e + bias_e)`` for choosing
   only; each group of ``E / n_group`` consecutive experts scores ``fp32(c_1 + c_2)``, its two
   largest (largest first); the ``topk_group`` best groups are kept (ties: the lower group),
   the others' ``c`` set to 0.0 (as Hugging Face's ``masked_fill``, so a kept expert whose
   biased score is negative can lose to a masked one); the ``top_k`` largest ``c``, largest
   first (ties: the lower index); weights ``s`` of those; with ``norm_topk_prob``: ``d =
   fp32(sum + fp32(1e-20))`` (sum in the same order from +0), ``w = fp32(w * fp32(1 / d))``;
   then ``w = fp32(w * fp32(routed_scaling_factor))``.
5. **Experts** on the array (:func:`~scoville.sim.golden.gemm.gemm`: MX block sums exact,
   rounded once with both scales, accumulated in FP32 in block order): the token's ``x``
   quantized to ``act_fmt`` along H, the weights MXFP4 along the reduction (as the memory
   holds them); ``h = x W_gu`` (+ bias, FP32); the gated activation in FP32 (``gpt_oss``:
   ``g = min(gate, 7)``, ``u = clamp(up, -7, 7)``, ``fp32(fp32(u + 1) * fp32(g *
   sigmoid(fp32(1.702 * g))))`` with gate and up interleaved; ``deepseek``: ``fp32(fp32(gate *
   sigmoid(gate)) * up)``, gate the first half); that quantized to ``act_fmt`` along I;
   ``y = a W_down`` (+ bias).
6. **Combine**, FP32 from +0: the token's experts in ascending expert index (the order the
   block runs them), ``out = fp32(out + fp32(w * y))``; then the shared expert,
   ``out = fp32(out + y_shared)``.

The functions take ``config`` (a :class:`~scoville.rtl.moe.MoeConfig`) as the block's other
golden models do; of its fields only ``x_lanes`` changes bits (the router's order of sums,
step 1); none of its sizes do (the array's os schedule does not change a matmul's bits), so
None is any config with ``x_lanes`` 1.

``act_fmt=None`` runs the same steps with the activations left in FP32 (the weights still
MXFP4, the matmuls in float64 rounded once to FP32): a float reference for comparing formats,
not a mode of the block.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from scoville.rtl.gemm import GemmConfig
from scoville.rtl.lib.formats import MX_BLOCK
from scoville.rtl.moe import ACT_FORMATS, ARRAY_FORMATS, SWIGLU_ALPHA, SWIGLU_LIMIT

from .attention import LOG2E
from .exp2 import exp2
from .fp32_add import tree_sum
from .gemm import Operands, gemm
from .mx import (
    dequantize_mxfp4,
    dequantize_mxfp8,
    quantize_bf16,
    quantize_mxfp4,
    quantize_mxfp8,
)

__all__ = ["MoeWeights", "block_input", "deepseek_moe", "deepseek_route",
           "deepseek_weight_image", "dispatch", "exp_unit", "gpt_oss_glu", "gpt_oss_moe",
           "gpt_oss_route", "gpt_oss_weight_image", "memory_image", "moe", "random_weights",
           "reference", "reference_routing", "router_logits", "routing", "sigmoid_unit",
           "silu_glu", "swiglu_mlp", "tile_commands", "tile_words", "weight_image"]

_F32 = np.float32
_NEG_LOG2E = _F32(-LOG2E)


def _f32(x) -> np.ndarray:
    return np.asarray(x, np.float32)


def exp_unit(z) -> np.ndarray:
    """``exp(z)`` on the exp2 unit: ``exp2(fp32(z * log2 e))``."""
    with np.errstate(over="ignore", invalid="ignore"):
        t = (_f32(z) * LOG2E).astype(np.float32)
    return exp2(t.view(np.uint32)).view(np.float32)


def _recip(x) -> np.ndarray:
    """``1 / x`` rounded once to FP32 (the reciprocal unit, :func:`~scoville.rtl.lib.fp32
    .fp32_recip`), for ``x`` of at least 2^-126; 0 from ``x`` = 2^126 up (where the
    reciprocal would be subnormal, flushed as the exp2 unit flushes)."""
    x = np.asarray(x, np.float64)
    with np.errstate(divide="ignore"):
        return np.where(x >= 2.0 ** 126, 0.0, 1.0 / x).astype(np.float32)


def sigmoid_unit(z) -> np.ndarray:
    """``1 / fp32(1 + exp2(fp32(z * -log2 e)))`` (0 once the denominator reaches 2^126)."""
    with np.errstate(over="ignore", invalid="ignore"):
        t = (_f32(z) * _NEG_LOG2E).astype(np.float32)
        e = exp2(t.view(np.uint32)).view(np.float32)
        return _recip((_F32(1) + e).astype(np.float32))


def router_logits(x, weight, bias=None, lanes: int = 1) -> np.ndarray:
    """Step 1: ``x`` (T, H), ``weight`` (E, H), ``bias`` (E,) or None, ``lanes`` elements a
    beat; (T, E) float32."""
    x, w = _f32(x), _f32(weight)
    if lanes not in (1, 2, 4, 8, 16, 32) or x.shape[1] % lanes:
        raise ValueError(f"parameter 'lanes' = {lanes!r} is not allowed with {x.shape[1]} "
                         "elements; allowed: 1, 2, 4, 8, 16, 32 dividing them")
    acc = np.zeros((x.shape[0], w.shape[0]), np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for b in range(0, x.shape[1], lanes):
            beat = (x[:, None, b:b + lanes] * w[None, :, b:b + lanes]).astype(np.float32)
            acc = (acc + tree_sum(beat)).astype(np.float32)
        if bias is not None:
            acc = (acc + _f32(bias)).astype(np.float32)
    return acc


def _lanes(config) -> int:
    return 1 if config is None else config.x_lanes


def _top(values, k: int) -> np.ndarray:
    """Indices of the ``k`` largest of each row, largest first, ties to the lower index, in
    the router's order of binary32 values (the RTL's ``fp32_key``): -0 below +0, NaN above
    +inf (as ``torch.topk`` ranks NaN first; the hardware's NaNs are the canonical quiet NaN,
    sign bit clear, whatever sign NumPy's arithmetic gives them here)."""
    v = np.asarray(values, np.float32)
    bits = np.where(np.isnan(v), 0x7FC0_0000, v.view(np.uint32)).astype(np.int64)
    key = np.where(bits >= 1 << 31, (1 << 32) - 1 - bits, bits | 1 << 31)
    return np.argsort(-key, axis=-1, kind="stable")[..., :k]


def _sum_in_order(v) -> np.ndarray:
    acc = np.zeros(v.shape[:-1], np.float32)
    for j in range(v.shape[-1]):
        acc = (acc + v[..., j]).astype(np.float32)
    return acc


def gpt_oss_route(x, weight, bias, *, top_k, config=None) -> tuple[np.ndarray, np.ndarray]:
    """GPT-OSS routing (steps 1 to 3): ``(weights (T, top_k) float32, indices (T, top_k)
    int64)``, largest logit first."""
    logits = router_logits(x, weight, bias, _lanes(config))
    idx = _top(logits, top_k)
    top = np.take_along_axis(logits, idx, axis=-1)
    with np.errstate(over="ignore", invalid="ignore"):
        e = exp_unit((top - top[:, :1]).astype(np.float32))
        w = (e * _recip(_sum_in_order(e))[:, None]).astype(np.float32)
    return w, idx.astype(np.int64)


def deepseek_route(x, weight, e_score_correction_bias, *, top_k, n_group, topk_group,
                   norm_topk_prob=True, routed_scaling_factor=1.0,
                   config=None) -> tuple[np.ndarray, np.ndarray]:
    """DeepSeek-V3 routing (steps 1, 2 and 4): ``(weights (T, top_k) float32, indices (T,
    top_k) int64)``, the largest biased score first."""
    logits = router_logits(x, weight, lanes=_lanes(config))
    t, e = logits.shape
    if e % n_group:
        raise ValueError(f"parameter 'n_group' = {n_group} is not allowed with {e} experts; "
                         f"allowed: a divisor of {e}")
    s = sigmoid_unit(logits)
    c = (s + _f32(e_score_correction_bias)).astype(np.float32)
    groups = c.reshape(t, n_group, e // n_group)
    two = np.take_along_axis(groups, _top(groups, min(2, e // n_group)), axis=-1)
    gscore = two[..., 0] if two.shape[-1] == 1 else (two[..., 0] + two[..., 1]).astype(
        np.float32)
    kept = np.zeros((t, n_group), bool)
    np.put_along_axis(kept, _top(gscore, topk_group), True, axis=-1)
    masked = np.where(np.repeat(kept, e // n_group, axis=-1), c, _F32(0))
    idx = _top(masked, top_k)
    w = np.take_along_axis(s, idx, axis=-1)
    if norm_topk_prob:
        d = (_sum_in_order(w) + _F32(1e-20)).astype(np.float32)
        w = (w * _recip(d)[:, None]).astype(np.float32)
    w = (w * _F32(routed_scaling_factor)).astype(np.float32)
    return w, idx.astype(np.int64)


def _quantize(x, act_fmt, axis):
    """Codes and scales of ``x`` in ``act_fmt`` along ``axis`` (blocks of 32)."""
    quant = quantize_mxfp8 if act_fmt == "mxfp8" else quantize_mxfp4
    return quant(np.asarray(x, np.float64), axis=axis)


def _dequantize(codes, scales, act_fmt, axis):
    dq = dequantize_mxfp8 if act_fmt == "mxfp8" else dequantize_mxfp4
    return dq(codes, scales, axis=axis).astype(np.float64)


class _Weights:
    """An expert's matrix as the memory holds it: B (K, N) of a matmul, MXFP4 along K."""

    def __init__(self, b):
        b = np.asarray(b, np.float64)
        if b.shape[0] % MX_BLOCK:
            raise ValueError(f"a reduction of {b.shape[0]} is not allowed; allowed: a "
                             f"multiple of {MX_BLOCK}")
        self.codes, self.scales = quantize_mxfp4(b, axis=0)

    @property
    def values(self) -> np.ndarray:
        return dequantize_mxfp4(self.codes, self.scales, axis=0).astype(np.float64)


def tile_words(config, codes, scales, bias=None) -> list[int]:
    """The weight port's words of every column tile of one matrix as the memory holds it
    (:meth:`~scoville.rtl.moe.MoeConfig.tile_bits`): ``codes`` (K, N) MXFP4 codes, ``scales``
    (K / 32, N) E8M0 codes, ``bias`` (N,) float32 or None; tile after tile, each padded to
    whole words, bit 0 of a tile the lowest bit of its first word."""
    c, p = config.array.cols, config.weight_port_bits
    codes, scales = np.asarray(codes, np.int64), np.asarray(scales, np.int64)
    k, n = codes.shape
    words = []
    for j in range(0, n, c):
        fields = []
        for b in range(k // MX_BLOCK):
            fields += [(v, 4) for v in codes[b * MX_BLOCK:(b + 1) * MX_BLOCK, j:j + c].ravel()]
            fields += [(v, 8) for v in scales[b, j:j + c]]
        if bias is not None:
            fields += [(v, 32) for v in np.asarray(bias, np.float32)[j:j + c].view(np.uint32)]
        value, pos = 0, 0
        for v, width in fields:
            value |= int(v) << pos
            pos += width
        count = -(-pos // p)
        words += [(value >> (i * p)) & ((1 << p) - 1) for i in range(count)]
    return words


def weight_image(config, gate_up, down, gate_up_bias=None, down_bias=None) -> list[int]:
    """The memory the block fetches its experts' weights from, in weight-port words: expert
    after expert (``gate_up`` (E', H, 2I), gate and up interleaved on the last axis, and
    ``down`` (E', I, H), both as B of ``x B``; the biases (E', 2I) and (E', H) or None), each
    its gate-up column tiles then its down column tiles (:func:`tile_words`), the weights
    quantized to MXFP4 along the reduction as :func:`gpt_oss_moe` quantizes them."""
    words = []
    for e in range(len(gate_up)):
        for b, bias in ((gate_up[e], gate_up_bias), (down[e], down_bias)):
            w = _Weights(b)
            words += tile_words(config, w.codes, w.scales,
                                None if bias is None else np.asarray(bias[e], np.float32))
    return words


def gpt_oss_weight_image(config, gate_up_proj, gate_up_proj_bias, down_proj, down_proj_bias):
    """:func:`weight_image` from :func:`gpt_oss_moe`'s (Hugging Face's) layouts."""
    return weight_image(config, gate_up_proj, down_proj, gate_up_proj_bias, down_proj_bias)


def deepseek_weight_image(config, gate_up_proj, down_proj, shared_gate=None, shared_up=None,
                          shared_down=None):
    """:func:`weight_image` from :func:`deepseek_moe`'s (Hugging Face's) layouts: the gate
    and up rows interleaved as columns of B (the block's SwiGLU takes them in pairs), the
    shared expert last."""
    gate_up = [np.asarray(g).T for g in gate_up_proj]
    down = [np.asarray(d).T for d in down_proj]
    if shared_gate is not None:
        gate_up.append(np.concatenate([np.asarray(shared_gate), np.asarray(shared_up)]).T)
        down.append(np.asarray(shared_down).T)
    inter = []
    for b in gate_up:
        i = b.shape[1] // 2
        pairs = np.empty_like(b)
        pairs[:, 0::2], pairs[:, 1::2] = b[:, :i], b[:, i:]
        inter.append(pairs)
    return weight_image(config, inter, down)


def _matmul(a, w: _Weights, act_fmt) -> np.ndarray:
    """``a`` (M, K) float32 times the expert's weights, as the array computes it (FP32)."""
    if act_fmt is None:
        with np.errstate(over="ignore", invalid="ignore"):
            return (np.asarray(a, np.float64) @ w.values).astype(np.float32)
    codes, scales = _quantize(a, act_fmt, axis=1)
    fmt, b_fmt = ARRAY_FORMATS[act_fmt]
    config = GemmConfig(fmt=fmt, b_fmt=b_fmt)
    return gemm(config, Operands(codes, w.codes, scales, w.scales)).view(np.float32)


def _check_act(act_fmt):
    if act_fmt is not None and act_fmt not in ACT_FORMATS:
        raise ValueError(f"parameter 'act_fmt' = {act_fmt!r} is not allowed; allowed: "
                         f"{', '.join(ACT_FORMATS)}, None (FP32 activations: a float reference)")


def gpt_oss_glu(h) -> np.ndarray:
    """GPT-OSS's gated activation of ``h`` (n, 2I) float32 (biases added), gate and up
    interleaved: (n, I) float32."""
    gate, up = h[:, 0::2], h[:, 1::2]
    with np.errstate(over="ignore", invalid="ignore"):
        g = np.minimum(gate, _F32(SWIGLU_LIMIT))
        u = np.clip(up, _F32(-SWIGLU_LIMIT), _F32(SWIGLU_LIMIT))
        sig = sigmoid_unit((g * _F32(SWIGLU_ALPHA)).astype(np.float32))
        glu = (g * sig).astype(np.float32)
        return ((u + _F32(1)).astype(np.float32) * glu).astype(np.float32)


def silu_glu(h) -> np.ndarray:
    """DeepSeek's gated activation of ``h`` (n, 2I) float32, gate the first half: (n, I)."""
    i = h.shape[1] // 2
    gate, up = h[:, :i], h[:, i:]
    with np.errstate(over="ignore", invalid="ignore"):
        return ((gate * sigmoid_unit(gate)).astype(np.float32) * up).astype(np.float32)


def _add(a, b) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return (a + _f32(b)).astype(np.float32)


def dispatch(weights, indices) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """The batch grouped by expert, as the block's dispatch sorts it: for each expert chosen
    at all, ascending, ``(expert, tokens, weights)``, its tokens in ascending order and their
    weights (float32) for it."""
    indices, weights = np.asarray(indices), np.asarray(weights, np.float32)
    groups = []
    for e in np.unique(indices):
        rows, slot = np.nonzero(indices == e)
        groups.append((int(e), rows, weights[rows, slot]))
    return groups


def _combine(x, weights, indices, expert) -> np.ndarray:
    """Step 6 without the shared expert: ``expert(e, rows)`` gives expert e's outputs (n, H)
    for the tokens ``rows``; experts in ascending index."""
    out = np.zeros(x.shape, np.float32)
    for e, rows, w in dispatch(weights, indices):
        y = expert(e, rows)
        w = w[:, None]
        with np.errstate(over="ignore", invalid="ignore"):
            out[rows] = (out[rows] + (w * y).astype(np.float32)).astype(np.float32)
    return out


def gpt_oss_moe(x, router_weight, router_bias, gate_up_proj, gate_up_proj_bias, down_proj,
                down_proj_bias, *, top_k, act_fmt="mxfp8", config=None) -> np.ndarray:
    """A GPT-OSS MoE layer (Hugging Face ``GptOssMLP``): ``x`` (T, H); ``router_weight`` (E,
    H), ``router_bias`` (E,); ``gate_up_proj`` (E, H, 2I), gate and up interleaved on the last
    axis, ``gate_up_proj_bias`` (E, 2I); ``down_proj`` (E, I, H), ``down_proj_bias`` (E, H).
    Returns (T, H) float32 (the module's steps 1, 2, 3, 5, 6)."""
    _check_act(act_fmt)
    x = _f32(x)
    weights, indices = gpt_oss_route(x, router_weight, router_bias, top_k=top_k, config=config)

    def expert(e, rows):
        h = _add(_matmul(x[rows], _Weights(gate_up_proj[e]), act_fmt), gate_up_proj_bias[e])
        return _add(_matmul(gpt_oss_glu(h), _Weights(down_proj[e]), act_fmt),
                    down_proj_bias[e])

    return _combine(x, weights, indices, expert)


def deepseek_moe(x, router_weight, e_score_correction_bias, gate_up_proj, down_proj,
                 shared_gate, shared_up, shared_down, *, top_k, n_group, topk_group,
                 norm_topk_prob=True, routed_scaling_factor=1.0, act_fmt="mxfp8",
                 config=None) -> np.ndarray:
    """A DeepSeek-V3 MoE layer (Hugging Face ``DeepseekV3MoE``, fused experts): ``x`` (T, H);
    ``router_weight`` (E, H); ``e_score_correction_bias`` (E,); ``gate_up_proj`` (E, 2I, H),
    gate rows then up rows; ``down_proj`` (E, H, I); the shared expert as ``shared_gate``,
    ``shared_up`` (I_s, H) and ``shared_down`` (H, I_s), or all None without one. Returns (T,
    H) float32 (the module's steps 1, 2, 4, 5, 6)."""
    _check_act(act_fmt)
    x = _f32(x)
    weights, indices = deepseek_route(
        x, router_weight, e_score_correction_bias, top_k=top_k, n_group=n_group,
        topk_group=topk_group, norm_topk_prob=norm_topk_prob,
        routed_scaling_factor=routed_scaling_factor, config=config)

    def run(rows, gate_up, down):
        # nn.Linear layouts (out, in): B is the transpose.
        h = _matmul(x[rows], _Weights(np.asarray(gate_up).T), act_fmt)
        return _matmul(silu_glu(h), _Weights(np.asarray(down).T), act_fmt)

    out = _combine(x, weights, indices, lambda e, rows: run(rows, gate_up_proj[e],
                                                            down_proj[e]))
    if shared_gate is not None:
        out = _add(out, swiglu_mlp(x, shared_gate, shared_up, shared_down, act_fmt=act_fmt))
    return out


def swiglu_mlp(x, gate, up, down, *, act_fmt="mxfp8") -> np.ndarray:
    """DeepSeek's dense SwiGLU MLP (Hugging Face ``DeepseekV3MLP``: a dense layer's MLP and the
    shared expert) as the array computes an expert (step 5): ``x`` (T, H) float32; ``gate``,
    ``up`` (I, H) and ``down`` (H, I) in ``nn.Linear`` layouts, MXFP4 along the reduction.
    Returns (T, H) float32."""
    _check_act(act_fmt)
    gate_up = np.concatenate([np.asarray(gate), np.asarray(up)])
    h = _matmul(_f32(x), _Weights(gate_up.T), act_fmt)
    return _matmul(silu_glu(h), _Weights(np.asarray(down).T), act_fmt)


def reference(x, weights, indices, experts, shared=None, *, router="gpt_oss",
              act_fmt="mxfp8") -> np.ndarray:
    """The layer in float64 on the same quantized values, for checking the block: ``x`` (T,
    H); the router's ``weights`` and ``indices`` (T, k), as the block chose them; ``experts``
    a list of ``(gate_up, gate_up_bias, down, down_bias)`` per expert in the golden functions'
    layouts as B matrices (H, 2I) and (I, H) (biases None for ``deepseek``); ``shared`` the
    same for a shared expert. Activations are quantized to ``act_fmt`` where the block
    quantizes them (from float64), weights to MXFP4; the rest is float64 with exact exp and
    sigmoid."""
    x = np.asarray(x, np.float64)

    def q(a):
        if act_fmt is None:
            return a
        codes, scales = _quantize(a, act_fmt, axis=1)
        return _dequantize(codes, scales, act_fmt, axis=1)

    def sig(z):
        return 1.0 / (1.0 + np.exp(-z))

    def run(e, rows):
        gu, gub, down, db = e
        h = q(x[rows]) @ _Weights(gu).values
        if gub is not None:
            h = h + np.asarray(gub, np.float64)
        if router == "gpt_oss":
            g = np.minimum(h[:, 0::2], SWIGLU_LIMIT)
            u = np.clip(h[:, 1::2], -SWIGLU_LIMIT, SWIGLU_LIMIT)
            a = (u + 1) * g * sig(SWIGLU_ALPHA * g)
        else:
            i = h.shape[1] // 2
            a = h[:, :i] * sig(h[:, :i]) * h[:, i:]
        y = q(a) @ _Weights(down).values
        return y if db is None else y + np.asarray(db, np.float64)

    out = np.zeros(x.shape)
    for t in range(len(x)):
        for w, e in zip(weights[t], indices[t], strict=True):
            out[t] += float(w) * run(experts[int(e)], [t])[0]
    if shared is not None:
        out += run(shared, np.arange(len(x)))
    return out



@dataclass(frozen=True)
class MoeWeights:
    """A layer's weights in the Hugging Face layouts of :func:`gpt_oss_moe` (``router_bias``
    the router's bias, ``gate_up_bias`` and ``down_bias`` the experts') or :func:`deepseek_moe`
    (``router_bias`` the correction bias; ``gate_up`` (E, 2I, H), ``down`` (E, H, I); the
    shared expert's ``shared_gate``, ``shared_up``, ``shared_down`` or None)."""

    router_weight: np.ndarray
    router_bias: np.ndarray
    gate_up: np.ndarray
    down: np.ndarray
    gate_up_bias: np.ndarray | None = None
    down_bias: np.ndarray | None = None
    shared_gate: np.ndarray | None = None
    shared_up: np.ndarray | None = None
    shared_down: np.ndarray | None = None


def random_weights(config, rng, scale: float = 0.25) -> MoeWeights:
    """Random weights of ``config``'s shapes (normal, times ``scale``; the router's bias a
    tenth of that), float32."""
    E, H, I_ = config.experts, config.hidden, config.intermediate

    def draw(*shape, s=scale):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    if config.router == "gpt_oss":
        return MoeWeights(draw(E, H), draw(E, s=scale / 10), draw(E, H, 2 * I_),
                          draw(E, I_, H), draw(E, 2 * I_), draw(E, H))
    shared = (draw(I_, H), draw(I_, H), draw(H, I_)) if config.shared else (None,) * 3
    return MoeWeights(draw(E, H), draw(E, s=scale / 10), draw(E, 2 * I_, H), draw(E, H, I_),
                      None, None, *shared)


def routing(config, weights: MoeWeights, x) -> tuple[np.ndarray, np.ndarray]:
    """The router's ``(weights (T, top_k), indices (T, top_k))`` for ``x`` (T, H)."""
    if config.router == "gpt_oss":
        return gpt_oss_route(x, weights.router_weight, weights.router_bias,
                             top_k=config.top_k, config=config)
    return deepseek_route(x, weights.router_weight, weights.router_bias, top_k=config.top_k,
                          n_group=config.n_group, topk_group=config.topk_group,
                          norm_topk_prob=bool(config.norm_topk_prob),
                          routed_scaling_factor=config.routed_scaling_factor, config=config)


def block_input(config, x) -> np.ndarray:
    """``x`` as the block takes it: float32, rounded to BF16 (to nearest, ties to even) when
    ``config.x_fmt`` is ``bf16``."""
    x = np.asarray(x, np.float32)
    if config.x_fmt != "bf16":
        return x
    return (quantize_bf16(x).astype(np.uint32) << 16).view(np.float32)


def moe(config, weights: MoeWeights, x) -> np.ndarray:
    """The block's output for ``x`` (T, H) float32 (:func:`block_input`): :func:`gpt_oss_moe`
    or :func:`deepseek_moe` as ``config.router`` says, with ``config``'s parameters."""
    w = weights
    x = block_input(config, x)
    if config.router == "gpt_oss":
        return gpt_oss_moe(x, w.router_weight, w.router_bias, w.gate_up, w.gate_up_bias, w.down,
                           w.down_bias, top_k=config.top_k, act_fmt=config.act_fmt,
                           config=config)
    return deepseek_moe(x, w.router_weight, w.router_bias, w.gate_up, w.down, w.shared_gate,
                        w.shared_up, w.shared_down, top_k=config.top_k, n_group=config.n_group,
                        topk_group=config.topk_group, norm_topk_prob=bool(config.norm_topk_prob),
                        routed_scaling_factor=config.routed_scaling_factor,
                        act_fmt=config.act_fmt, config=config)


#: The exp2-based sigmoid's error carried into a score (0.25 x its 1.5e-5 relative, twice for
#: a group's two), with room: part of :func:`reference_routing`'s tie bound.
_UNIT_ERROR = 2e-5


def reference_routing(config, weights: MoeWeights, x, near=None):
    """Routing in float64, as Hugging Face's ``GptOssTopKRouter`` and ``DeepseekV3TopkRouter``
    define it (exact exp and sigmoid; DeepSeek's group mask filling 0.0 and its 1e-20):
    ``(weights (T, top_k) float64, indices (T, top_k), margin (T,))``, the largest score
    first, ties to the lower index. ``margin`` is each token's smallest gap at a cut (between
    the k-th chosen score and the best one left out; for DeepSeek also between the groups kept
    and the best one masked).

    ``near``: indices (T, top_k) of another router (the block's, in FP32). Where it chooses
    other experts, its choice is taken (weighed in float64) if it is a tie within FP32's
    rounding: each score may be off by ``bound = (H + 1) 2^-24 max_e sum_h |x_h W_eh|`` (the
    logits' FP32 sums) plus :data:`_UNIT_ERROR` (the sigmoid), so two scores within
    ``2 bound`` are a tie. For GPT-OSS, the two choices' logits, sorted, must agree within
    that; for DeepSeek, the groups ``near``'s experts lie in must be keepable (each within
    ``2 bound`` of the groups' cut, and every group float64 keeps that they displace at the
    cut too), and then, with those groups kept, the two choices' scores, sorted, must agree
    within ``2 bound``. Anywhere else the difference stays, and shows as a wrong output."""
    x = np.asarray(x, np.float64)
    w_r = np.asarray(weights.router_weight, np.float64)
    b = np.asarray(weights.router_bias, np.float64)
    logits = x @ w_r.T
    k, t, e = config.top_k, *logits.shape
    bound = (x.shape[1] + 1) * 2.0 ** -24 * (np.abs(x) @ np.abs(w_r).T).max(axis=1) \
        + _UNIT_ERROR
    groups = None
    if config.router == "gpt_oss":
        logits = logits + b
        score = logits
        margins = []
    else:
        s = 1.0 / (1.0 + np.exp(-logits))
        c = s + b
        size = e // config.n_group
        grouped = np.sort(c.reshape(t, config.n_group, size), axis=-1)[..., ::-1]
        gscore = grouped[..., :min(2, size)].sum(-1)
        order = np.argsort(-gscore, axis=-1, kind="stable")
        groups = (c, gscore, order, size)
        score = np.stack([_masked(c[i], order[i, :config.topk_group], size)
                          for i in range(t)]) if t else c
        ranked = np.take_along_axis(gscore, order, axis=-1)
        margins = [ranked[:, config.topk_group - 1] - ranked[:, config.topk_group]] \
            if config.topk_group < config.n_group else []
    idx = np.argsort(-score, axis=-1, kind="stable")
    ranked = np.take_along_axis(score, idx, axis=-1)
    margins.append(ranked[:, k - 1] - ranked[:, k] if k < e else np.full(t, np.inf))
    margin = np.min(margins, axis=0)
    idx = idx[:, :k]
    if near is not None:
        near = np.asarray(near, idx.dtype)
        for i in np.flatnonzero(np.any(np.sort(idx, 1) != np.sort(near, 1), axis=1)):
            if _tie(config, score[i], idx[i], near[i], 2 * bound[i],
                    None if groups is None else (g[i] for g in groups[:3])):
                idx[i] = near[i]
    if config.router == "gpt_oss":
        top = np.take_along_axis(logits, idx, axis=-1)
        ex = np.exp(top - top.max(axis=-1, keepdims=True))
        return ex / ex.sum(axis=-1, keepdims=True), idx, margin
    wts = np.take_along_axis(s, idx, axis=-1)
    if config.norm_topk_prob:
        wts = wts / (wts.sum(axis=-1, keepdims=True) + 1e-20)
    return wts * config.routed_scaling_factor, idx, margin


def _masked(c, kept_groups, size) -> np.ndarray:
    """DeepSeek's candidates' scores: ``c`` in the kept groups, 0.0 elsewhere."""
    keep = np.zeros(len(c) // size, bool)
    keep[list(kept_groups)] = True
    return np.where(np.repeat(keep, size), c, 0.0)


def _tie(config, score, idx, near, tol: float, groups) -> bool:
    """Whether one token's ``near`` choice ties float64's ``idx`` within ``tol`` (see
    :func:`reference_routing`); ``groups``: DeepSeek's ``(c, gscore, order)`` or None."""
    if groups is not None:
        c, gscore, order = groups
        size = len(c) // config.n_group
        chosen = list(order[:config.topk_group])
        theirs = list(dict.fromkeys(int(g) for g in near // size))
        extra = [g for g in theirs if g not in chosen]
        if extra:  # near kept other groups: each must be at the groups' cut
            kept = (theirs + [g for g in chosen if g not in theirs])[:config.topk_group]
            if len(theirs) > config.topk_group:
                return False
            cut = gscore[chosen[-1]]
            dropped = [g for g in chosen if g not in kept]
            if any(gscore[g] < cut - tol for g in extra) or \
                    any(gscore[g] > gscore[kept].min() + tol for g in dropped):
                return False
            score = _masked(c, kept, size)
            idx = np.argsort(-score, kind="stable")[:config.top_k]
    return bool(np.all(np.abs(np.sort(score[idx]) - np.sort(score[near])) <= tol))


def float64_reference(config, weights: MoeWeights, x) -> np.ndarray:
    """:func:`reference` of the block's layer for ``x`` (T, H), routed in float64
    (:func:`reference_routing`; a token on a tie within FP32's rounding takes the block's
    choice), the rest in float64 on the same quantized values."""
    w, x = weights, block_input(config, x)
    if config.router == "gpt_oss":
        experts = [(w.gate_up[e], w.gate_up_bias[e], w.down[e], w.down_bias[e])
                   for e in range(config.experts)]
        shared = None
    else:
        experts = [(w.gate_up[e].T, None, w.down[e].T, None) for e in range(config.experts)]
        shared = None if w.shared_gate is None else (
            np.concatenate([w.shared_gate, w.shared_up]).T, None, w.shared_down.T, None)
    route_w, route_idx, _ = reference_routing(config, weights, x,
                                              near=routing(config, weights, x)[1])
    return reference(x, route_w, route_idx, experts, shared, router=config.router,
                     act_fmt=config.act_fmt)


def skewed(config, weights: MoeWeights, skew: float) -> MoeWeights:
    """``weights`` with the router's bias (GPT-OSS's, or DeepSeek's correction bias) raised
    by a ramp that favours the lower experts: ``skew`` times four standard deviations of the
    logits of :func:`random_weights` on standard normal ``x`` from the last expert to the
    first. 0 leaves the router as drawn (its choices fall about evenly); 1 sends most tokens
    to the first few experts."""
    E = config.experts
    spread = 4 * float(np.std(weights.router_weight)) * np.sqrt(config.hidden)
    ramp = skew * spread * np.arange(E - 1, -1, -1) / (E - 1)
    return dataclasses.replace(weights, router_bias=(weights.router_bias
                                                     + ramp).astype(np.float32))


def memory_image(config, weights: MoeWeights) -> list[int]:
    """The weight memory the block reads (:func:`weight_image`) for ``weights``."""
    w = weights
    if config.router == "gpt_oss":
        return gpt_oss_weight_image(config, w.gate_up, w.gate_up_bias, w.down, w.down_bias)
    return deepseek_weight_image(config, w.gate_up, w.down, w.shared_gate, w.shared_up,
                                 w.shared_down)


def tile_commands(config, experts) -> list[tuple[int, int]]:
    """The block's fetch commands ``(addr, len)`` (weight-port words) for a batch that runs
    ``experts`` (ascending, the shared one, index ``config.experts``, last): each expert's
    gate-up column tiles, then its down column tiles, in the memory of
    :func:`weight_image`."""
    gu, dn = config.tile_words(config.hidden), config.tile_words(config.intermediate)
    out = []
    for e in experts:
        base = e * config.expert_words
        out += [(base + j * gu, gu) for j in range(config.gate_up_tiles)]
        base += config.gate_up_tiles * gu
        out += [(base + j * dn, dn) for j in range(config.down_tiles)]
    return out
