"""A model's sizes as the performance model counts them: parameters and bytes per layer, KV
bytes per token, operations per token, and the experts a batch touches."""

from __future__ import annotations

import functools
import math

from .specs import Model, bytes_per_param

__all__ = ["STEP_KERNELS", "attention_flops", "attention_io_bytes", "attention_params",
           "busiest", "busiest_chip", "dense_gemms", "dense_params_per_chip", "expert_skew",
           "ffn_params", "gemm_columns", "kernels", "kv_bytes", "model_bytes", "touched"]


def attention_params(m: Model) -> int:
    """Parameters of one layer's attention: GQA's Q, K, V and O projections; MLA's low-rank
    Q (``q_a``, ``q_b``), the latent and rotary KV down-projection, its up-projection
    (``kv_b``, absorbed into Q and O in decode: the same multiply-adds) and O."""
    a, H = m.attention, m.hidden
    if a.kind == "gqa":
        q = a.q_heads * a.head_dim
        return H * q + 2 * H * a.kv_heads * a.head_dim + q * H
    return (H * a.q_lora_rank + a.q_lora_rank * a.q_heads * (a.qk_nope + a.qk_rope)
            + H * (a.kv_lora_rank + a.qk_rope)
            + a.kv_lora_rank * a.q_heads * (a.qk_nope + a.v_head_dim)
            + a.q_heads * a.v_head_dim * H)


def dense_gemms(m: Model) -> list[tuple[int, int, int, str]]:
    """The model's matrices outside the routed experts as GEMMs: ``(n, k, count, split)``,
    output columns, inner dimension, how many the model holds, and which dimension tensor
    parallelism splits (``n`` column-parallel, ``k`` row-parallel, ``-`` replicated: MLA's
    down-projections and the router, as SGLang and TensorRT-LLM hold them). Their
    ``n k count`` add up to :func:`attention_params` over the layers, the shared experts',
    routers' and dense FFNs' parameters and the head."""
    a, H, moe_layers = m.attention, m.hidden, m.layers - m.dense_layers
    if a.kind == "gqa":
        attn = [((a.q_heads + 2 * a.kv_heads) * a.head_dim, H, "n"),
                (H, a.q_heads * a.head_dim, "k")]
    else:
        attn = [(a.q_lora_rank, H, "-"), (a.q_heads * (a.qk_nope + a.qk_rope), a.q_lora_rank, "n"),
                (a.kv_lora_rank + a.qk_rope, H, "-"),
                (a.q_heads * (a.qk_nope + a.v_head_dim), a.kv_lora_rank, "n"),
                (H, a.q_heads * a.v_head_dim, "k")]
    out = [(n, k, m.layers, split) for n, k, split in attn]
    if moe_layers:
        out.append((m.experts, H, moe_layers, "-"))
        if m.shared:
            si = m.shared * m.shared_intermediate
            out += [(2 * si, H, moe_layers, "n"), (H, si, moe_layers, "k")]
    if m.dense_layers:
        out += [(2 * m.dense_intermediate, H, m.dense_layers, "n"),
                (H, m.dense_intermediate, m.dense_layers, "k")]
    return out + [(m.vocab, H, 1, "n")]


def _per_chip(n: int, k: int, split: str, width: int) -> tuple[float, float]:
    """A matrix's columns and rows on one of ``width`` tensor-parallel chips."""
    return (n / width, k) if split == "n" else (n, k / width) if split == "k" else (n, k)


@functools.cache
def dense_params_per_chip(m: Model, width: int) -> float:
    """Parameters of the matrices outside the routed experts that one of ``width``
    tensor-parallel chips holds and multiplies: a ``width``-th of each split one, the whole
    of each replicated one (:func:`dense_gemms`)."""
    return sum(math.prod(_per_chip(n, k, split, width)) * count
               for n, k, count, split in dense_gemms(m))


@functools.cache
def gemm_columns(m: Model, width: int) -> float:
    """The output columns a chip's GEMMs outside the experts have, weighted as their
    operations are (the padding :func:`scoville.explore.kernels.busy` adds for ``N``
    columns, summed over the GEMMs, is that for this ``N``), ``width`` chips splitting them
    as :func:`dense_gemms` says (a replicated one whole on every chip)."""
    ops = rows = 0.0
    for n, k, count, split in dense_gemms(m):
        n, k = _per_chip(n, k, split, width)
        ops, rows = ops + n * k * count, rows + k * count
    return ops / rows


def ffn_params(hidden: int, width: int) -> int:
    """A SwiGLU FFN's parameters: gate, up and down."""
    return 3 * hidden * width


@functools.cache
def model_bytes(m: Model) -> dict[str, float]:
    """Bytes of the weights by kind: ``attention`` (all layers), ``experts`` (routed, all
    layers), ``expert`` (one routed expert of one layer), ``shared`` (the shared experts and
    routers, all MoE layers), ``dense`` (the dense layers' FFNs), ``head`` (the output
    projection), ``embed`` (the embedding table, read a row per token)."""
    wb, eb = bytes_per_param(m.weight_fmt), bytes_per_param(m.expert_fmt)
    moe_layers = m.layers - m.dense_layers
    expert = ffn_params(m.hidden, m.moe_intermediate) * eb
    return {
        "attention": m.layers * attention_params(m) * wb,
        "experts": moe_layers * m.experts * expert,
        "expert": expert,
        "shared": moe_layers * (m.shared * ffn_params(m.hidden, m.shared_intermediate)
                                + m.hidden * m.experts) * wb,
        "dense": m.dense_layers * ffn_params(m.hidden, m.dense_intermediate) * wb,
        "head": m.vocab * m.hidden * wb,
        "embed": m.vocab * m.hidden * wb,
    }


def _layer_tokens(m: Model, context: float) -> float:
    """Tokens held (or attended) summed over all layers: ``context`` on every layer, at most
    ``window`` on the windowed ones."""
    a = m.attention
    windowed = a.window_layers if a.window else 0
    return (m.layers - windowed) * context + windowed * min(context, a.window)


def kv_bytes(m: Model, context: float) -> float:
    """KV-cache bytes of one sequence of ``context`` tokens over all layers (windowed layers
    hold at most ``window`` tokens): GQA K and V of every KV head; MLA the latent and the
    rotary key."""
    a = m.attention
    per_token = (2 * a.kv_heads * a.head_dim if a.kind == "gqa"
                 else a.kv_lora_rank + a.qk_rope) * (2 if m.kv_fmt == "bf16" else 1)
    return per_token * _layer_tokens(m, context)


def attention_flops(m: Model, context: float, absorbed: bool = True) -> float:
    """Operations of one token's attention over ``context`` tokens, all layers: GQA scores
    and values, ``4 q_heads head_dim`` per token attended; MLA in absorbed form (decode:
    scores against the latent and rotary key, values in the latent), ``q_heads (4
    kv_lora_rank + 2 qk_rope)`` per token attended, or, ``absorbed=False`` (prefill, as
    engines run it: K and V expanded per head), ``q_heads (2 (qk_nope + qk_rope) + 2
    v_head_dim)``."""
    a = m.attention
    if a.kind == "gqa":
        per = 4 * a.q_heads * a.head_dim
    elif absorbed:
        per = a.q_heads * (4 * a.kv_lora_rank + 2 * a.qk_rope)
    else:
        per = a.q_heads * (2 * (a.qk_nope + a.qk_rope) + 2 * a.v_head_dim)
    return per * _layer_tokens(m, context)


def attention_io_bytes(m: Model, tokens: float) -> float:
    """Bytes a prefill's attention kernels read and write for ``tokens`` tokens, all layers, in
    BF16: each token's query, key, value and output (GQA: ``(2 q_heads + 2 kv_heads)
    head_dim``; MLA expanded: ``q_heads (2 (qk_nope + qk_rope) + 2 v_head_dim)``), as
    :func:`scoville.explore.kernels.cost` counts them in the measured prefill kernels."""
    a = m.attention
    if a.kind == "gqa":
        per = (2 * a.q_heads + 2 * a.kv_heads) * a.head_dim
    else:
        per = a.q_heads * (2 * (a.qk_nope + a.qk_rope) + 2 * a.v_head_dim)
    return 2 * per * tokens * m.layers


def touched(m: Model, tokens: float) -> float:
    """Routed experts of one layer that a batch of ``tokens`` tokens touches, on average, with
    choices spread uniformly: ``E (1 - (1 - k/E)^tokens)``."""
    return m.experts * (1 - (1 - m.top_k / m.experts) ** tokens)


#: Kernels a layer's parts launch in a decode step, as the engines run them (SGLang's
#: ``models/deepseek_v2.py`` and ``models/gpt_oss.py``, TensorRT-LLM's DeepSeek-V3 and GPT-OSS
#: modules, with their usual fusions: the residual add in the RMSNorm, RoPE with the KV-cache
#: write, the SwiGLU activation its own kernel, the MoE's token permutation and the weighted
#: unpermutation one kernel each). Collectives are not counted here (``parallel.comm``).
#:
#: - ``norms``: the input and post-attention RMSNorms, 2;
#: - ``gqa``: the fused QKV projection, RoPE and cache write, attention, O projection: 4;
#: - ``mla``: the fused q_a and kv_a projection, the q_a and latent RMSNorms, q_b, the
#:   absorption of W_UK into the query, RoPE and cache write, attention, W_UV, O: 9;
#: - ``moe``: the router GEMM, its top-k, permutation, the grouped gate-up GEMM, SwiGLU, the
#:   grouped down GEMM, unpermutation: 7; a shared expert adds its gate-up GEMM, SwiGLU and
#:   down GEMM, 3;
#: - ``dense``: a dense FFN's gate-up GEMM, SwiGLU and down GEMM, 3.
LAYER_KERNELS = {"norms": 2, "gqa": 4, "mla": 9, "moe": 7, "shared": 3, "dense": 3}
#: Kernels a step launches once, outside the layers: the embedding lookup, the final RMSNorm,
#: the output head and sampling.
STEP_KERNELS = 4


def kernels(m: Model) -> float:
    """Kernels one decode step launches over all layers (:data:`LAYER_KERNELS`), the step's
    own (:data:`STEP_KERNELS`) not included: GPT-OSS-120B 36 x 13, DeepSeek-R1 58 x 21 + 3
    x 14."""
    k = LAYER_KERNELS
    attention = k["norms"] + k[m.attention.kind]
    moe = k["moe"] + k["shared"] * m.shared
    return (m.layers * attention + (m.layers - m.dense_layers) * moe
            + m.dense_layers * k["dense"])


def busiest(items: float, bins: int, skew: float = 0.0) -> float:
    """The busiest of ``bins`` chips' share over the mean when ``items`` choices fall on them
    at random: its expected maximum deviation over the bins, ``1 + sqrt(2 ln(bins) ((bins - 1)
    / items + skew))`` (a binomial's relative variance, uniform choices, plus ``skew``: the
    relative variance of the chips' expected shares, :func:`expert_skew`); at least ``bins /
    items`` (the busiest holds a whole choice), at most ``bins`` (it holds them all)."""
    if bins <= 1 or items <= 0:
        return 1.0
    spread = 1 + math.sqrt(2 * math.log(bins) * ((bins - 1) / items + skew))
    return min(float(bins), max(spread, bins / items))


def expert_skew(m: Model, bins: int) -> float:
    """The relative variance of ``bins`` chips' expected shares of a layer's expert choices
    when each holds ``experts / bins`` of them and the experts' expected loads vary with the
    model's coefficient of variation (``Model.expert_cv``): a chip's share sums ``experts /
    bins`` of the loads, drawn without replacement from all of them (their total fixed), so its
    relative variance is ``expert_cv^2 (bins - 1) / (experts - 1)``: 0 on one chip,
    ``expert_cv^2`` with an expert a chip."""
    if m.experts <= 1:
        return 0.0
    return m.expert_cv ** 2 * (bins - 1) / (m.experts - 1)


def busiest_chip(m: Model, width: int, tokens: float, touched: float) -> tuple[float, float]:
    """The busiest of ``width`` chips holding the model's experts spread over them, over the
    mean chip, when a layer routes ``tokens`` tokens that touch ``touched`` experts: its
    choices (:func:`busiest` with the router's skew, :func:`expert_skew`) and its touched
    experts (:func:`busiest` of the touched ones, at most all it holds)."""
    return (busiest(tokens * m.top_k, width, expert_skew(m, width)),
            min(busiest(touched, width), m.experts / touched))
