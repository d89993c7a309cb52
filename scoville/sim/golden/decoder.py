"""A decoder layer of GPT-OSS or DeepSeek-V3, and a small model generating tokens through such
layers, with configs and weights as Hugging Face transformers 5.x writes them: ``fmt="hw"``
as the decoder block computes it, bit for bit, composed of its units' golden models;
``fmt=None`` in float64 with no quantization anywhere, Hugging Face's
``GptOssDecoderLayer`` and ``DeepseekV3DecoderLayer`` (``scripts/decoder_vs_hf.py`` runs them
side by side).

A layer (``docs/decoder.md`` states it too), ``x`` the hidden states (T, H):

- **GPT-OSS**: ``h = rmsnorm(x)``; ``q, k, v`` = ``h`` times ``q_proj``, ``k_proj``,
  ``v_proj`` plus their biases; RoPE on q and k (halves); attention of the T tokens at
  ``positions`` over the cache's past K, V and their own (causal; the sliding window on
  ``sliding_attention`` layers; the sink logits); ``o_proj`` plus bias; ``x1 = x + o``; MoE of
  ``rmsnorm(x1)`` (router, top-k softmax, experts, combine); ``x1 + moe``.
- **DeepSeek-V3**: ``h = rmsnorm(x)``; ``q = q_b(rmsnorm_qa(q_a(h)))``, split per head into
  ``q_nope`` and ``q_rot``; ``kv_a_proj_with_mqa(h)`` split into the latent, normalized by
  ``kv_a_layernorm``, and ``k_rot``; RoPE on ``q_rot`` and ``k_rot`` (interleaved pairs with
  ``rope_interleave``, the result in halves); MLA over the cache's latents and rotary keys;
  ``o_proj``; residual; the MoE with its shared expert (layers from ``first_k_dense_replace``)
  or the dense SwiGLU MLP; residual.

The cache holds what Hugging Face's ``DynamicCache`` holds for the layer, without the batch
axis, for every past token: ``(keys, values)``, GPT-OSS's K after RoPE and V (kv_heads, L,
head_dim), DeepSeek-V3's normalized latent (1, L, kv_lora_rank) and rotary key after RoPE (1,
L, qk_rope_head_dim). (Given a config, Hugging Face's cache keeps only the last
``sliding_window - 1`` tokens of a sliding layer; here every layer keeps all, which attends
the same: the window is applied in attention.)

**The hardware's steps** (``fmt="hw"``, :class:`Formats`): the hidden state stays FP32; every
norm is :func:`~scoville.sim.golden.rmsnorm.normalize`; every projection is a matmul on the
array (:func:`~scoville.sim.golden.gemm.matmul`, activations and weights in ``proj``, FP32
out) plus its bias, ``fp32(y + b)``; RoPE is :func:`~scoville.sim.golden.rope.rotate` with
the table of :func:`~scoville.sim.golden.rope.table`; attention is the attention block's
(:func:`~scoville.sim.golden.attention.prefill`, K and V stored in ``kv``, its matmuls in
``attn``); the MoE is the MoE block's (:mod:`scoville.sim.golden.moe`, activations in
``moe_act``, weights MXFP4, its shared expert too); the dense MLP is three projections with
``silu(gate) up`` between them in FP32 (:func:`~scoville.sim.golden.moe.silu_glu`, the
decoder block's ``GLU``); each residual is ``fp32(x + y)``. MLA runs in
absorbed form in decode and prefill alike, absorbed at run time: per head, ``q_lat = q_nope
W_UK`` and, after attention over the latents, ``v = o_lat W_UV^T`` (``kv_b_proj``'s two parts
per head, each a projection on the array), so the cache holds the latent alone; prefill pays
attention's 3.4x more operations than the unabsorbed form for one datapath and no second copy
of ``kv_b_proj`` in memory.

The head of :func:`generate`: ``model.norm``, then ``lm_head`` on the array, and greedy
sampling by :func:`argmax` (the lowest index of the largest logit).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from scoville.rtl.attention import AttentionConfig
from scoville.rtl.decoder import AttnOp, DecoderConfig, Op, Status
from scoville.rtl.gemm import ADD_LATENCY, MOST_ADD_LATENCY, GemmConfig
from scoville.rtl.kvcache import KvCacheConfig
from scoville.rtl.kvcache import Status as CacheStatus
from scoville.rtl.moe import ACT_FORMATS, SWIGLU_ALPHA, SWIGLU_LIMIT

from . import attention as attn_golden
from . import linear as linear_golden
from . import moe as moe_golden
from . import rmsnorm as norm_golden
from . import rope as rope_golden
from .argmax import greedy
from .fp32_add import canonical_bits, fp32_add
from .gemm import add_latency, matmul
from .mx import dequantize_mxfp4, quantize_bf16, quantize_mxfp4

__all__ = ["ARCHS", "COMMAND_FIELDS", "TINY", "DecoderModel", "Formats", "Shape", "argmax",
           "check", "forward", "generate", "layer", "load", "random_weights", "ranges",
           "rope_fits", "save", "shape", "tiny_config"]

ARCHS = ("gpt_oss", "deepseek_v3")
_FMTS = ("hw", None)
#: The ``rmsnorm`` eps of DeepSeek-V3's ``q_a_layernorm`` and ``kv_a_layernorm`` (Hugging
#: Face builds them with the class default, not ``rms_norm_eps``).
LORA_NORM_EPS = 1e-6


@dataclass(frozen=True)
class Formats:
    """The hardware's formats and the sizes its bits depend on (``fmt="hw"``).

    Attributes
    ----------
    proj : str
        Array format of the projections and the head (activations and weights): ``bf16`` or
        ``mxfp8``.
    attn, kv : str
        The attention block's ``array.fmt`` and ``kv.kv_fmt``.
    moe_act : str
        The MoE block's ``act_fmt`` (and the dense MLP's); weights MXFP4.
    norm_lanes : int
        Values a beat of the RMSNorm's sum of squares (its order).
    router_lanes : int
        Elements of ``x`` a beat of the MoE router (the MoE block's ``x_lanes``: its order).
    chunk, rows : int
        The attention block's ``chunk`` and ``array.rows`` (its prefill row tiles).
    proj_sums, attn_sums : int
        The partial sums of a BF16 output of the projections' array and of the attention's
        (their :attr:`~scoville.rtl.gemm.GemmConfig.sums`; by default an ``os`` array's).
    """

    proj: str = "bf16"
    attn: str = "bf16"
    kv: str = "bf16"
    moe_act: str = "mxfp8"
    norm_lanes: int = 1
    router_lanes: int = 32
    chunk: int = 256
    rows: int = 8
    proj_sums: int = ADD_LATENCY + 1
    attn_sums: int = ADD_LATENCY + 1

    def __post_init__(self):
        for name in ("proj_sums", "attn_sums"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or \
                    not 1 <= value <= MOST_ADD_LATENCY + 1:
                raise ValueError(f"parameter 'formats.{name}' = {value!r} is out of range; "
                                 f"allowed: 1..{MOST_ADD_LATENCY + 1}")
        for name, low, high in (("norm_lanes", 1, 32), ("router_lanes", 1, 32),
                                ("chunk", 32, 4096), ("rows", 1, 256)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high \
                    or value & (value - 1):
                raise ValueError(f"parameter 'formats.{name}' = {value!r} is not allowed; "
                                 f"allowed: a power of two {low}..{high}")
        for name, allowed in (("proj", ("bf16", "mxfp8")), ("attn", ("bf16", "mxfp8")),
                              ("kv", ("bf16", "fp8_e4m3", "mxfp4")),
                              ("moe_act", ACT_FORMATS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"parameter 'formats.{name}' = {getattr(self, name)!r} is "
                                 f"not allowed; allowed: {', '.join(allowed)}")


@dataclass(frozen=True)
class Shape:
    """What a layer needs of a Hugging Face config dict (:func:`shape`)."""

    arch: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    rope: dict
    max_positions: int
    layer_types: tuple
    window: int
    experts: int
    top_k: int
    inter: int
    moe_inter: int
    vocab: int
    layers: int
    bias: bool
    q_lora: int = 0
    kv_lora: int = 0
    nope: int = 0
    rope_dim: int = 0
    v_dim: int = 0
    n_group: int = 1
    topk_group: int = 1
    norm_topk: bool = True
    scaling_factor: float = 1.0
    first_dense: int = 0
    shared: int = 0
    interleave: bool = False

    @property
    def scale(self) -> float:
        """The attention's score scale."""
        if self.arch == "gpt_oss":
            return self.head_dim ** -0.5
        return rope_golden.softmax_scale(self.rope, self.nope + self.rope_dim)

    @property
    def rotary(self) -> int:
        """Elements of a head RoPE turns."""
        return self.head_dim if self.arch == "gpt_oss" else self.rope_dim

    def is_moe(self, layer_idx: int) -> bool:
        return self.arch == "gpt_oss" or layer_idx >= self.first_dense

    def window_of(self, layer_idx: int) -> int:
        """The sliding window of layer ``layer_idx`` (0: full attention)."""
        if self.arch == "gpt_oss" and self.layer_types[layer_idx] == "sliding_attention":
            return self.window
        return 0


def _field(config: dict, name: str, kind=int, *, default=None, low=1):
    value = config.get(name, default)
    if value is None or isinstance(value, bool) != (kind is bool) or not isinstance(
            value, (int, float) if kind is float else kind):
        raise ValueError(f"config field '{name}' = {value!r} is not allowed; allowed: "
                         f"{'a number' if kind is float else kind.__name__}")
    if kind is int and value < low:
        raise ValueError(f"config field '{name}' = {value} is not allowed; allowed: {low} or "
                         "more")
    return value


def shape(config: dict) -> Shape:
    """The shape of a Hugging Face config dict (``model_type`` ``gpt_oss`` or
    ``deepseek_v3``), checked: a field missing or out of range is one line naming it."""
    if not isinstance(config, dict):
        raise ValueError(f"parameter 'config' is a {type(config).__name__}; allowed: a dict "
                         "(a Hugging Face config.json)")
    arch = config.get("model_type")
    if arch not in ARCHS:
        raise ValueError(f"config field 'model_type' = {arch!r} is not allowed; allowed: "
                         f"{', '.join(ARCHS)}")
    rope = config.get("rope_parameters")
    if not isinstance(rope, dict):
        raise ValueError(f"config field 'rope_parameters' = {rope!r} is not allowed; allowed: "
                         "a dict (transformers 5.x)")
    rope = dict(rope)
    if "rope_theta" not in rope and "rope_theta" in config:
        rope["rope_theta"] = config["rope_theta"]
    layers = _field(config, "num_hidden_layers")
    common = dict(
        arch=arch, hidden=_field(config, "hidden_size"),
        heads=_field(config, "num_attention_heads"),
        eps=float(_field(config, "rms_norm_eps", float)), rope=rope,
        max_positions=_field(config, "max_position_embeddings"),
        top_k=_field(config, "num_experts_per_tok"), vocab=_field(config, "vocab_size"),
        layers=layers, bias=bool(config.get("attention_bias", arch == "gpt_oss")))
    if arch == "gpt_oss":
        for name, want in (("swiglu_alpha", SWIGLU_ALPHA), ("swiglu_limit", SWIGLU_LIMIT)):
            if config.get(name, want) != want:
                raise ValueError(f"config field '{name}' = {config[name]!r} is not allowed; "
                                 f"allowed: {want} (the MoE block's constant)")
        types = config.get("layer_types") or [
            "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
        if len(types) != layers or set(types) - {"sliding_attention", "full_attention"}:
            raise ValueError(f"config field 'layer_types' = {types!r} is not allowed; "
                             f"allowed: {layers} of sliding_attention, full_attention")
        heads = common["heads"]
        head_dim = config.get("head_dim", 64)  # GptOssConfig's default
        head_dim = head_dim or common["hidden"] // heads
        s = Shape(**common, kv_heads=_field(config, "num_key_value_heads"), head_dim=head_dim,
                  layer_types=tuple(types), window=_field(config, "sliding_window"),
                  experts=_field(config, "num_local_experts"),
                  inter=_field(config, "intermediate_size"),
                  moe_inter=_field(config, "intermediate_size"))
        if heads % s.kv_heads or head_dim % 2:
            raise ValueError(f"config fields 'num_attention_heads' = {heads}, 'head_dim' = "
                             f"{head_dim} are not allowed with 'num_key_value_heads' = "
                             f"{s.kv_heads}; allowed: a multiple of it, an even head_dim")
        return s
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config field 'hidden_act' = {config['hidden_act']!r} is not "
                         "allowed; allowed: silu (the MoE block's SwiGLU)")
    if config.get("q_lora_rank") is None:
        raise ValueError("config field 'q_lora_rank' = None is not allowed; allowed: a "
                         "positive integer (DeepSeek-V3's q_a_proj)")
    experts = config.get("n_routed_experts", config.get("num_local_experts"))
    s = Shape(**common, kv_heads=1, head_dim=_field(config, "qk_rope_head_dim"),
              layer_types=("full_attention",) * layers, window=0,
              experts=_field({"n_routed_experts": experts}, "n_routed_experts"),
              inter=_field(config, "intermediate_size"),
              moe_inter=_field(config, "moe_intermediate_size"),
              q_lora=_field(config, "q_lora_rank"), kv_lora=_field(config, "kv_lora_rank"),
              nope=_field(config, "qk_nope_head_dim"),
              rope_dim=_field(config, "qk_rope_head_dim"),
              v_dim=_field(config, "v_head_dim"), n_group=_field(config, "n_group"),
              topk_group=_field(config, "topk_group"),
              norm_topk=bool(config.get("norm_topk_prob", True)),
              scaling_factor=float(_field(config, "routed_scaling_factor", float)),
              first_dense=_field(config, "first_k_dense_replace", low=0),
              shared=_field(config, "n_shared_experts", low=0),
              interleave=bool(config.get("rope_interleave", True)))
    if s.experts % s.n_group or s.topk_group > s.n_group or s.rope_dim % 2:
        raise ValueError(f"config fields 'n_routed_experts' = {s.experts}, 'n_group' = "
                         f"{s.n_group}, 'topk_group' = {s.topk_group}, 'qk_rope_head_dim' = "
                         f"{s.rope_dim} are not allowed together; allowed: experts a multiple "
                         "of n_group, topk_group at most n_group, an even rotary width")
    return s


# ---- weights -------------------------------------------------------------------------------

def _layer_shapes(s: Shape, layer_idx: int) -> dict:
    """The tensors of layer ``layer_idx`` and their shapes, Hugging Face's names."""
    H, E = s.hidden, s.experts
    out = {"input_layernorm.weight": (H,), "post_attention_layernorm.weight": (H,)}
    if s.arch == "gpt_oss":
        d, nq, nk, I_ = s.head_dim, s.heads, s.kv_heads, s.moe_inter
        for name, rows in (("q", nq * d), ("k", nk * d), ("v", nk * d)):
            out[f"self_attn.{name}_proj.weight"] = (rows, H)
            if s.bias:
                out[f"self_attn.{name}_proj.bias"] = (rows,)
        out["self_attn.o_proj.weight"] = (H, nq * d)
        if s.bias:
            out["self_attn.o_proj.bias"] = (H,)
        out["self_attn.sinks"] = (nq,)
        out.update({"mlp.router.weight": (E, H), "mlp.router.bias": (E,),
                    "mlp.experts.gate_up_proj": (E, H, 2 * I_),
                    "mlp.experts.gate_up_proj_bias": (E, 2 * I_),
                    "mlp.experts.down_proj": (E, I_, H),
                    "mlp.experts.down_proj_bias": (E, H)})
        return out
    nq, qk = s.heads, s.nope + s.rope_dim
    out.update({"self_attn.q_a_proj.weight": (s.q_lora, H),
                "self_attn.q_a_layernorm.weight": (s.q_lora,),
                "self_attn.q_b_proj.weight": (nq * qk, s.q_lora),
                "self_attn.kv_a_proj_with_mqa.weight": (s.kv_lora + s.rope_dim, H),
                "self_attn.kv_a_layernorm.weight": (s.kv_lora,),
                "self_attn.kv_b_proj.weight": (nq * (s.nope + s.v_dim), s.kv_lora),
                "self_attn.o_proj.weight": (H, nq * s.v_dim)})
    if s.bias:
        out["self_attn.q_a_proj.bias"] = (s.q_lora,)
        out["self_attn.kv_a_proj_with_mqa.bias"] = (s.kv_lora + s.rope_dim,)
        out["self_attn.o_proj.bias"] = (H,)
    if not s.is_moe(layer_idx):
        out.update({"mlp.gate_proj.weight": (s.inter, H), "mlp.up_proj.weight": (s.inter, H),
                    "mlp.down_proj.weight": (H, s.inter)})
        return out
    I_ = s.moe_inter
    out.update({"mlp.gate.weight": (E, H), "mlp.gate.e_score_correction_bias": (E,),
                "mlp.experts.gate_up_proj": (E, 2 * I_, H),
                "mlp.experts.down_proj": (E, H, I_)})
    if s.shared:
        i_s = I_ * s.shared
        out.update({"mlp.shared_experts.gate_proj.weight": (i_s, H),
                    "mlp.shared_experts.up_proj.weight": (i_s, H),
                    "mlp.shared_experts.down_proj.weight": (H, i_s)})
    return out


def _model_shapes(s: Shape) -> dict:
    out = {"model.embed_tokens.weight": (s.vocab, s.hidden), "model.norm.weight": (s.hidden,),
           "lm_head.weight": (s.vocab, s.hidden)}
    for i in range(s.layers):
        out.update({f"model.layers.{i}.{k}": v for k, v in _layer_shapes(s, i).items()})
    return out


def _checked(weights: dict, shapes: dict, where: str = "") -> dict:
    """The tensors of ``shapes`` from ``weights`` as float64 arrays: a missing one or one of
    another shape is one line naming it."""
    out = {}
    for name, want in shapes.items():
        if name not in weights:
            raise ValueError(f"weight '{where}{name}' is missing; allowed: a tensor of shape "
                             f"{want}")
        value = np.asarray(weights[name], np.float64)
        if value.shape != want:
            raise ValueError(f"weight '{where}{name}' has shape {value.shape}; allowed: {want}")
        out[name] = value
    return out


#: Tensors the memory holds in MXFP4 (along the reduction, the axis given): drawn on its grid.
def _mxfp4_axis(name: str, s: Shape) -> int | None:
    if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
        return 1 if s.arch == "gpt_oss" else 2
    if "shared_experts." in name and name.endswith("_proj.weight"):
        return 1  # nn.Linear (out, in): the shared expert (the dense MLP's are BF16)
    return None


def _on_grid(value: np.ndarray, axis: int | None) -> np.ndarray:
    if axis is None:
        return (quantize_bf16(value).astype(np.uint32) << 16).view(np.float32)
    codes, scales = quantize_mxfp4(value, axis=axis)
    return dequantize_mxfp4(codes, scales, axis=axis).astype(np.float32)


def random_weights(config: dict, seed: int) -> dict:
    """A seeded random state dict of ``config``'s model (embedding, layers, final norm, head),
    float32, each tensor on the grid it is stored in (experts' and MLPs' matrices MXFP4 along
    the reduction, everything else BF16), so ``fmt="hw"`` and ``fmt=None`` see the same
    weights: matrices normal with deviation 1/sqrt(fan-in), norm weights about 1, biases,
    sinks and correction biases small."""
    s = shape(config)
    rng = np.random.default_rng(seed)
    out = {}
    for name, dims in _model_shapes(s).items():
        if name.endswith("norm.weight") or "layernorm" in name:
            value = 1 + 0.1 * rng.standard_normal(dims)
        elif name.endswith(("bias", "sinks")):
            value = 0.1 * rng.standard_normal(dims)
        elif name.endswith("e_score_correction_bias"):
            value = 0.02 * rng.random(dims)
        elif name == "model.embed_tokens.weight":
            value = rng.standard_normal(dims)
        else:
            fan_in = dims[1] if s.arch == "gpt_oss" and ".experts." in name else dims[-1]
            value = rng.standard_normal(dims) / np.sqrt(fan_in)
        out[name] = _on_grid(np.asarray(value, np.float64), _mxfp4_axis(name, s))
    return out


# ---- the steps in both arithmetics ---------------------------------------------------------

class _Ops:
    """One arithmetic: ``hw`` (the units' golden models) or float64."""

    def __init__(self, fmt, formats: Formats):
        if fmt not in _FMTS:
            raise ValueError(f"parameter 'fmt' = {fmt!r} is not allowed; allowed: 'hw', None")
        self.hw = fmt == "hw"
        self.f = formats
        # The MoE block's config as its golden model reads it: only x_lanes changes bits.
        self.moe = SimpleNamespace(x_lanes=formats.router_lanes)

    def cast(self, x):
        return np.asarray(x, np.float32 if self.hw else np.float64)

    def norm(self, x, w, eps):
        if self.hw:
            return norm_golden.normalize(x, w, eps, lanes=self.f.norm_lanes)
        return norm_golden.reference(x, w, eps)

    def matmul(self, a, b):
        """``a`` (M, K) times ``b`` (K, N)."""
        if self.hw:
            return matmul(np.asarray(a, np.float32), b, self.f.proj, sums=self.f.proj_sums)
        return np.asarray(a, np.float64) @ b

    def linear(self, x, w, b=None):
        """``nn.Linear``: ``x W^T + b`` (``hw``: the ``linear`` block's
        :func:`~scoville.sim.golden.linear.apply`, its weights in ``proj``)."""
        if self.hw and self.f.proj == "bf16":
            return linear_golden.apply(x, w, b, sums=self.f.proj_sums)
        y = self.matmul(x, w.T)
        return y if b is None else self.add(y, b)

    def add(self, a, b):
        if self.hw:
            with np.errstate(over="ignore", invalid="ignore"):
                return (np.asarray(a, np.float32) + np.asarray(b, np.float32)).astype(np.float32)
        return np.asarray(a, np.float64) + b

    def rope(self, x, positions, s: Shape, interleaved: bool):
        if self.hw:
            cos, sin = rope_golden.table(s.rope, s.rotary, positions, s.max_positions)
            return rope_golden.rotate(x, cos, sin, interleaved=interleaved)
        return rope_golden.reference(x, positions, s.rope, interleaved=interleaved,
                                     max_position_embeddings=s.max_positions)

    def attention_config(self, s: Shape, window: int, *, mla: bool) -> AttentionConfig:
        d = s.kv_lora + s.rope_dim if mla else s.head_dim
        return AttentionConfig(
            kv=KvCacheConfig(kv_heads=s.kv_heads, head_dim=d, kv_fmt=self.f.kv),
            array=GemmConfig(rows=self.f.rows, cols=max(8, min(64, d)), fmt=self.f.attn,
                             add_latency=add_latency(self.f.attn, self.f.attn_sums)),
            q_heads=s.heads, window=window, sinks=int(s.arch == "gpt_oss"), mla=int(mla),
            rope_dim=s.rope_dim if mla else 64, mode="prefill", chunk=self.f.chunk,
            q_tokens=256)


def _split_cache(cache, want_heads: int, dims: tuple[int, int]):
    if cache is None:
        return (np.zeros((want_heads, 0, dims[0])), np.zeros((want_heads, 0, dims[1])))
    keys, values = (np.asarray(c, np.float64) for c in cache)
    if keys.ndim != 3 or keys.shape[0] != want_heads or keys.shape[2] != dims[0] or \
            values.shape != keys.shape[:2] + (dims[1],):
        raise ValueError(f"parameter 'cache' holds {keys.shape} and {values.shape}; allowed: "
                         f"({want_heads}, L, {dims[0]}) and ({want_heads}, L, {dims[1]})")
    return keys, values


def _gpt_oss(ops: _Ops, s: Shape, w: dict, x, positions, cache, layer_idx):
    T, d, nq, nk = len(x), s.head_dim, s.heads, s.kv_heads
    past_k, past_v = _split_cache(cache, nk, (d, d))
    h = ops.norm(x, w["input_layernorm.weight"], s.eps)
    a = "self_attn."
    q, k, v = (ops.linear(h, w[f"{a}{p}_proj.weight"], w.get(f"{a}{p}_proj.bias"))
               for p in "qkv")
    q = ops.rope(q.reshape(T, nq, d), positions, s, interleaved=False)
    k = ops.rope(k.reshape(T, nk, d), positions, s, interleaved=False)
    keys = np.concatenate([past_k, np.transpose(k, (1, 0, 2))], axis=1)
    values = np.concatenate([past_v, np.transpose(v.reshape(T, nk, d), (1, 0, 2))], axis=1)
    window, sinks = s.window_of(layer_idx), w[f"{a}sinks"]
    if ops.hw:
        att = attn_golden.prefill(q, keys, values, sinks=sinks, window=window, scale=s.scale,
                                  kv_fmt=ops.f.kv, fmt=ops.f.attn,
                                  config=ops.attention_config(s, window, mla=False))
    else:
        att = attn_golden.reference(q, keys, values, sinks=sinks, window=window,
                                    scale=s.scale)
    o = ops.linear(att.reshape(T, nq * d), w[f"{a}o_proj.weight"], w.get(f"{a}o_proj.bias"))
    x1 = ops.add(x, o)
    h2 = ops.norm(x1, w["post_attention_layernorm.weight"], s.eps)
    m = "mlp."
    if ops.hw:
        y = moe_golden.gpt_oss_moe(
            h2, w[f"{m}router.weight"], w[f"{m}router.bias"], w[f"{m}experts.gate_up_proj"],
            w[f"{m}experts.gate_up_proj_bias"], w[f"{m}experts.down_proj"],
            w[f"{m}experts.down_proj_bias"], top_k=s.top_k, act_fmt=ops.f.moe_act,
            config=ops.moe)
    else:
        y = _gpt_oss_moe64(s, w, h2)
    return ops.add(x1, y), (keys, values)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _gpt_oss_moe64(s: Shape, w: dict, x):
    """``GptOssMLP`` in float64."""
    logits = x @ w["mlp.router.weight"].T + w["mlp.router.bias"]
    out = np.zeros_like(x)
    for t in range(len(x)):
        top = np.argsort(-logits[t], kind="stable")[:s.top_k]
        e = np.exp(logits[t, top] - logits[t, top].max())
        for weight, i in zip(e / e.sum(), top, strict=True):
            h = x[t] @ w["mlp.experts.gate_up_proj"][i] + w["mlp.experts.gate_up_proj_bias"][i]
            g = np.minimum(h[0::2], SWIGLU_LIMIT)
            u = np.clip(h[1::2], -SWIGLU_LIMIT, SWIGLU_LIMIT)
            act = (u + 1) * g * _sigmoid(SWIGLU_ALPHA * g)
            out[t] += weight * (act @ w["mlp.experts.down_proj"][i]
                                + w["mlp.experts.down_proj_bias"][i])
    return out


def _swiglu64(x, gate, up, down):
    g = x @ gate.T
    return (g * _sigmoid(g) * (x @ up.T)) @ down.T


def _deepseek_moe64(s: Shape, w: dict, x):
    """``DeepseekV3MoE`` in float64 (transformers 5.x: groups left out masked to -inf)."""
    scores = _sigmoid(x @ w["mlp.gate.weight"].T)
    choice = scores + w["mlp.gate.e_score_correction_bias"]
    size = s.experts // s.n_group
    out = np.zeros_like(x)
    for t in range(len(x)):
        groups = np.sort(choice[t].reshape(s.n_group, size), axis=1)[:, -2:].sum(axis=1)
        kept = np.argsort(-groups, kind="stable")[:s.topk_group]
        masked = np.full(s.experts, -np.inf)
        for g in kept:
            masked[g * size:(g + 1) * size] = choice[t, g * size:(g + 1) * size]
        top = np.argsort(-masked, kind="stable")[:s.top_k]
        weights = scores[t, top]
        if s.norm_topk:
            weights = weights / (weights.sum() + 1e-20)
        for weight, i in zip(weights * s.scaling_factor, top, strict=True):
            gate, up = np.split(w["mlp.experts.gate_up_proj"][i], 2)
            out[t] += weight * _swiglu64(x[t:t + 1], gate, up, w["mlp.experts.down_proj"][i])[0]
    if s.shared:
        p = "mlp.shared_experts."
        out += _swiglu64(x, w[f"{p}gate_proj.weight"], w[f"{p}up_proj.weight"],
                         w[f"{p}down_proj.weight"])
    return out


def _deepseek(ops: _Ops, s: Shape, w: dict, x, positions, cache, layer_idx):
    T, nq, r, lat = len(x), s.heads, s.rope_dim, s.kv_lora
    past_lat, past_rot = _split_cache(cache, 1, (lat, r))
    a = "self_attn."
    h = ops.norm(x, w["input_layernorm.weight"], s.eps)
    qa = ops.linear(h, w[f"{a}q_a_proj.weight"], w.get(f"{a}q_a_proj.bias"))
    qa = ops.norm(qa, w[f"{a}q_a_layernorm.weight"], LORA_NORM_EPS)
    q = ops.linear(qa, w[f"{a}q_b_proj.weight"]).reshape(T, nq, s.nope + r)
    q_nope, q_rot = q[..., :s.nope], q[..., s.nope:]
    ckv = ops.linear(h, w[f"{a}kv_a_proj_with_mqa.weight"],
                     w.get(f"{a}kv_a_proj_with_mqa.bias"))
    latent = ops.norm(ckv[:, :lat], w[f"{a}kv_a_layernorm.weight"], LORA_NORM_EPS)
    q_rot = ops.rope(q_rot, positions, s, interleaved=s.interleave)
    k_rot = ops.rope(ckv[:, None, lat:], positions, s, interleaved=s.interleave)[:, 0]
    latents = np.concatenate([past_lat, latent[None]], axis=1)
    rots = np.concatenate([past_rot, k_rot[None]], axis=1)
    kv_b = w[f"{a}kv_b_proj.weight"].reshape(nq, s.nope + s.v_dim, lat)
    if ops.hw:
        # Absorbed at run time: per head q_lat = q_nope W_UK; o_lat W_UV^T after attention
        # (each a projection of the engine: nn.Linear weights W_UK^T and W_UV).
        q_lat = np.stack([ops.linear(q_nope[:, i], kv_b[i, :s.nope].T) for i in range(nq)], 1)
        query = np.concatenate([q_lat, q_rot], axis=-1)
        keys = np.concatenate([latents, rots], axis=-1)
        o_lat = attn_golden.prefill(query, keys, None, scale=s.scale, kv_fmt=ops.f.kv,
                                    fmt=ops.f.attn,
                                    config=ops.attention_config(s, 0, mla=True))
        att = np.stack([ops.linear(o_lat[:, i], kv_b[i, s.nope:]) for i in range(nq)], 1)
    else:
        # Hugging Face's form: kv_b_proj expands every latent into K's nope part and V.
        kv = np.einsum("ld,hed->hle", latents[0], kv_b)
        keys = np.concatenate([kv[..., :s.nope], np.broadcast_to(
            rots, (nq,) + rots.shape[1:])], axis=-1)
        att = attn_golden.reference(np.concatenate([q_nope, q_rot], axis=-1), keys,
                                    kv[..., s.nope:], scale=s.scale)
    o = ops.linear(att.reshape(T, nq * s.v_dim), w[f"{a}o_proj.weight"],
                   w.get(f"{a}o_proj.bias"))
    x1 = ops.add(x, o)
    h2 = ops.norm(x1, w["post_attention_layernorm.weight"], s.eps)
    m = "mlp."
    if not s.is_moe(layer_idx):
        parts = (w[f"{m}gate_proj.weight"], w[f"{m}up_proj.weight"], w[f"{m}down_proj.weight"])
        if ops.hw:      # the projections' arithmetic, the gated product in FP32
            gate, up = ops.linear(h2, parts[0]), ops.linear(h2, parts[1])
            y = ops.linear(moe_golden.silu_glu(np.concatenate([gate, up], axis=1)), parts[2])
        else:
            y = _swiglu64(h2, *parts)
    elif ops.hw:
        p = f"{m}shared_experts."
        shared = [w[f"{p}{n}_proj.weight"] for n in ("gate", "up", "down")] if s.shared \
            else [None] * 3
        y = moe_golden.deepseek_moe(
            h2, w[f"{m}gate.weight"], w[f"{m}gate.e_score_correction_bias"],
            w[f"{m}experts.gate_up_proj"], w[f"{m}experts.down_proj"], *shared, top_k=s.top_k,
            n_group=s.n_group, topk_group=s.topk_group, norm_topk_prob=s.norm_topk,
            routed_scaling_factor=s.scaling_factor, act_fmt=ops.f.moe_act, config=ops.moe)
    else:
        y = _deepseek_moe64(s, w, h2)
    return ops.add(x1, y), (latents, rots)


def layer(x, weights: dict, config: dict, *, layer_idx: int, positions, cache=None, fmt="hw",
          formats: Formats | None = None):
    """One decoder layer (the module says which steps, in which arithmetic).

    Parameters
    ----------
    x : array (T, hidden)
        The hidden states of T tokens.
    weights : dict
        The layer's tensors as the transformers 5.x module's ``state_dict()`` names them,
        without the ``model.layers.{i}.`` prefix.
    config : dict
        A Hugging Face config dict (``model_type`` ``gpt_oss`` or ``deepseek_v3``).
    layer_idx : int
        The layer's index (its ``layer_types`` entry; DeepSeek's dense layers come first).
    positions : array (T,)
        The tokens' positions: the cache's length and on, one apart.
    cache : (keys, values) or None
        The past the layer attends (the module says what it holds).
    fmt : ``"hw"`` or None
        The hardware's arithmetic, or float64 with no quantization.
    formats : Formats or None
        The hardware's formats (``fmt="hw"``; the defaults when None).

    Returns
    -------
    (out, cache)
        The output hidden states (T, hidden), float32 (``hw``) or float64, and the cache with
        the T tokens appended.
    """
    s = shape(config)
    ops = _Ops(fmt, formats or Formats())
    if s.hidden % ops.f.router_lanes:
        raise ValueError(f"parameter 'formats.router_lanes' = {ops.f.router_lanes} is not "
                         f"allowed with hidden_size = {s.hidden}; allowed: a divisor of it")
    if not (isinstance(layer_idx, int) and 0 <= layer_idx < s.layers):
        raise ValueError(f"parameter 'layer_idx' = {layer_idx!r} is not allowed; allowed: "
                         f"0..{s.layers - 1}")
    x = ops.cast(x)
    if x.ndim != 2 or x.shape[1] != s.hidden or not len(x):
        raise ValueError(f"parameter 'x' has shape {x.shape}; allowed: (T, {s.hidden}), T >= 1")
    w = _checked(weights, _layer_shapes(s, layer_idx))
    if ops.hw:
        w = {k: v.astype(np.float32) for k, v in w.items()}
    past = 0 if cache is None else np.shape(cache[0])[1]
    positions = np.asarray(positions)
    if positions.shape != (len(x),) or np.any(positions != past + np.arange(len(x))):
        raise ValueError(f"parameter 'positions' = {positions.tolist()} is not allowed; "
                         f"allowed: {past}..{past + len(x) - 1} (after the cache's {past})")
    run = _gpt_oss if s.arch == "gpt_oss" else _deepseek
    return run(ops, s, w, x, positions, cache, layer_idx)


def argmax(logits) -> np.ndarray:
    """Greedy sampling, the ``argmax`` block's rule (:func:`scoville.sim.golden.argmax.greedy`):
    per row of ``logits`` (n, V), the lowest index of its largest value (-0 equals +0, NaN
    never chosen; 0 when every value is NaN); a scalar for one row."""
    logits = np.asarray(logits)
    chosen = greedy(logits)
    return chosen[0] if logits.ndim == 1 else chosen


def forward(config: dict, weights: dict, ids, caches: list, fmt="hw",
            formats: Formats | None = None) -> tuple[list, np.ndarray, list]:
    """One pass of token ids ``ids`` through the model after the tokens ``caches`` hold (a
    list of each layer's cache, None for none): ``(outputs, logits, caches)``, each layer's
    output hidden states (T, hidden), the last token's logits (vocab,) and the caches with the
    tokens appended. ``weights`` a full Hugging Face state dict (embedding, layers,
    ``model.norm``, ``lm_head``)."""
    s = shape(config)
    ops = _Ops(fmt, formats or Formats())
    ids = np.asarray(ids)
    if ids.ndim != 1 or not len(ids) or ids.min() < 0 or ids.max() >= s.vocab:
        raise ValueError(f"parameter 'ids' = {ids.tolist()} is not allowed; allowed: one or "
                         f"more token ids in 0..{s.vocab - 1}")
    if len(caches) != s.layers:
        raise ValueError(f"parameter 'caches' has {len(caches)} entries; allowed: one a layer "
                         f"({s.layers})")
    full = _checked(weights, _model_shapes(s))
    past = 0 if caches[0] is None else np.shape(caches[0][0])[1]
    x = ops.cast(full["model.embed_tokens.weight"][ids])
    positions = past + np.arange(len(ids))
    outputs, new = [], []
    for i in range(s.layers):
        prefix = f"model.layers.{i}."
        lw = {k[len(prefix):]: v for k, v in full.items() if k.startswith(prefix)}
        x, cache = layer(x, lw, config, layer_idx=i, positions=positions, cache=caches[i],
                         fmt=fmt, formats=formats)
        outputs.append(x)
        new.append(cache)
    last = ops.norm(x[-1:], ops.cast(full["model.norm.weight"]), s.eps)
    return outputs, ops.linear(last, ops.cast(full["lm_head.weight"]))[0], new


def generate(config: dict, weights: dict, prompt, steps: int, fmt="hw",
             formats: Formats | None = None, feed=None,
             passes: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Greedy generation: the prompt's token ids in one prefill (:func:`forward`), then a
    decode step per generated token. Returns ``(tokens (steps,), logits (steps, vocab))``, the
    logits of each step's last token (float32 for ``hw``, float64 for None). ``feed``: the
    ids to decode instead of the generated ones (``steps - 1`` of them), to compare two
    arithmetics' logits on the same inputs. ``passes``: a list each pass appends its ``(ids,
    outputs, logits)`` to (the ids it took, each layer's output hidden states, its
    logits)."""
    s = shape(config)
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"parameter 'steps' = {steps!r} is not allowed; allowed: 1 or more")
    if feed is not None and len(feed) != steps - 1:
        raise ValueError(f"parameter 'feed' has {len(feed)} ids; allowed: steps - 1 = "
                         f"{steps - 1}")
    caches: list = [None] * s.layers
    ids, tokens, logits = np.asarray(prompt), [], []
    for step in range(steps):
        outputs, row, caches = forward(config, weights, ids, caches, fmt, formats)
        if passes is not None:
            passes.append((ids, outputs, row))
        logits.append(row)
        tokens.append(int(argmax(row)))
        ids = np.array([tokens[-1] if feed is None or step == steps - 1 else feed[step]])
    return np.array(tokens), np.stack(logits)


# ---- the built-in tiny models --------------------------------------------------------------

#: The built-in tiny models: Hugging Face config dicts (two layers, hidden 64, vocabulary 256).
TINY = {
    "tiny-gpt-oss": {
        "model_type": "gpt_oss", "num_hidden_layers": 2, "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 32, "num_local_experts": 4, "num_experts_per_tok": 2,
        "vocab_size": 256, "sliding_window": 8, "rms_norm_eps": 1e-5,
        "max_position_embeddings": 131072, "attention_bias": True,
        "layer_types": ["sliding_attention", "full_attention"],
        "swiglu_alpha": 1.702, "swiglu_limit": 7.0, "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                            "beta_slow": 1.0, "truncate": False,
                            "original_max_position_embeddings": 4096,
                            "rope_theta": 150000.0},
    },
    "tiny-deepseek": {
        "model_type": "deepseek_v3", "num_hidden_layers": 2, "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 32,
        "kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 32,
        "v_head_dim": 32, "intermediate_size": 128, "moe_intermediate_size": 32,
        "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
        "n_group": 2, "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
        "first_k_dense_replace": 1, "vocab_size": 256, "rms_norm_eps": 1e-6,
        "max_position_embeddings": 163840, "rope_interleave": True, "attention_bias": False,
        "hidden_act": "silu", "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "yarn", "factor": 40.0, "beta_fast": 32,
                            "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0,
                            "original_max_position_embeddings": 4096, "rope_theta": 10000.0},
    },
}


def tiny_config(name: str) -> dict:
    """A copy of a built-in tiny model's config dict."""
    if name not in TINY:
        raise ValueError(f"parameter 'model' = {name!r} is not allowed; allowed: "
                         f"{', '.join(TINY)}")
    return json.loads(json.dumps(TINY[name]))


# ---- a user's model ------------------------------------------------------------------------

def load(config_path, weights_path) -> tuple[dict, dict]:
    """A model from a Hugging Face ``config.json`` and a ``safetensors`` file of the state
    dict's layout (the tensors :func:`random_weights` makes, any float dtype): ``(config,
    weights)``, checked (a field, a tensor or a shape wrong is one line naming it)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        config = json.loads(Path(config_path).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"config file '{config_path}' cannot be read: {err}") from None
    s = shape(config)
    try:
        raw = load_file(str(weights_path))
    except (OSError, SafetensorError, AttributeError, TypeError, ValueError) as err:
        raise ValueError(f"weights file '{weights_path}' cannot be read as safetensors of "
                         f"float tensors: {err}") from None
    blocks = sorted(k for k in raw if k.endswith("_blocks"))
    if blocks:
        raise ValueError(f"weights file '{weights_path}' holds '{blocks[0]}' (MXFP4 blocks and "
                         "scales); allowed: the state dict's layout (dequantize it first)")
    _checked(raw, _model_shapes(s))
    return config, {k: np.asarray(v, np.float32) for k, v in raw.items()}


def save(weights: dict, path) -> None:
    """Write a state dict (:func:`random_weights`'s) as a ``safetensors`` file."""
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(v, np.float32) for k, v in weights.items()}, str(path))



# ---- the decoder block's engine ------------------------------------------------------------

#: A command's fields (:func:`scoville.rtl.decoder.command_layout`), a missing one 0.
COMMAND_FIELDS = ("op", "a", "b", "dst", "count", "k", "n", "addr", "bias", "heads", "stride",
                  "off", "row", "aop", "seq", "value")


def walk(config, cmd: dict) -> tuple[int, int, int]:
    """Reader A's walk of a command that reads through it: ``(lines, per, stride)``, ``per``
    lines a token, each token ``stride`` lines after the one before (``NORM``: ``k / 32``
    lines a token, or ``H / 32`` for a ``k`` of 0, ``row`` apart; ``LINEAR``: ``k / 32``,
    ``stride`` apart; ``MOE``: ``H / 32``; a zero ``row`` or ``stride`` packs them); the other
    ops' ``count`` lines in order."""
    op, n = cmd["op"], cmd["count"]
    per, apart = 1, 0
    if op == Op.NORM:
        per, apart = cmd["k"] // 32 if cmd["k"] else config.hidden // 32, cmd["row"]
    elif op == Op.LINEAR:
        per, apart = cmd["k"] // 32, cmd["stride"]
    elif op == Op.MOE:
        per = config.hidden // 32
    return n * per, per, apart or per


def ranges(config, cmd: dict) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """The line ranges ``(first, lines)`` a command reads, and the one it writes (a strided
    walk's from its first line to its last)."""
    op, n = cmd["op"], cmd["count"]
    if op == Op.IN:
        return [], (cmd["dst"], n)
    if op in (Op.OUT, Op.ARGMAX):
        return [(cmd["a"], n)], None
    if op in (Op.ADD, Op.GLU):
        return [(cmd["a"], n), (cmd["b"], n)], (cmd["dst"], n)
    if op in (Op.NORM, Op.MOE):
        _, per, stride = walk(config, cmd)
        span = (n - 1) * stride + per
        return [(cmd["a"], span)], (cmd["dst"], span)
    if op == Op.ROPE:      # in place
        return [(cmd["a"], n * cmd["row"])], (cmd["a"], n * cmd["row"])
    if op == Op.ROUTER:
        return [], None
    if op == Op.ATTN:
        if cmd["aop"] not in (AttnOp.STEP, AttnOp.APPEND):
            return [], None
        write = (cmd["dst"], config.attn_out_lines(n)) if cmd["aop"] == AttnOp.STEP else None
        return [(cmd["a"], n * cmd["row"])], write
    kl, nl = cmd["k"] // 32, cmd["n"] // 32
    return ([(cmd["a"], (n - 1) * (cmd["stride"] or kl) + kl)],
            (cmd["dst"], (n - 1) * (cmd["row"] or nl) + nl))


def check(config, cmd: dict):
    """The :class:`~scoville.rtl.decoder.Status` the block answers ``cmd`` (its fields) with,
    as ``docs/decoder.md`` states: ``BAD_OP`` for an op past ``ROUTER``; ``BAD_RANGE`` for a
    ``count`` of 0, a range past the activation memory (counted in whole lines: ``k // 32``
    and ``n // 32`` a token, from the first token's first line to the last one's last), or
    (``ADD``, ``GLU``, ``NORM``) a written range that overlaps a read range without starting
    where it starts; then ``BAD_SHAPE`` for
    an ``ARGMAX`` of other than a token's ``argmax.vocab / 32`` lines, a ``LINEAR`` the
    projections refuse or whose ``k`` or ``n`` is not a multiple of 32 or whose tokens
    overlap (a ``stride`` or ``row`` other than 0 below a token's lines), a ``NORM`` whose
    ``k`` is not a multiple of 32 or past ``hidden`` or whose tokens overlap, a
    ``MOE`` of more tokens than the MoE holds, a ``ROPE`` whose vectors do not fit
    (:func:`rope_fits`), an ``ATTN`` step or append whose token rows cannot hold its query,
    key and value heads from ``off`` (on the heads' grid; its key heads from a value below
    65536), of more than 256 tokens, or an append of other than one, or weights (or table
    rows, a ``ROUTER``'s :attr:`~scoville.rtl.decoder.DecoderConfig.router_words`) past the
    memory's addresses. An ``ATTN`` of another attention command (alloc, free, sink) and a
    ``ROUTER`` read and write no lines (a ``count`` of 0 is theirs to ignore)."""
    if cmd["op"] not in set(Op):
        return Status.BAD_OP
    op, lin = Op(cmd["op"]), config.linear
    reads, write = ranges(config, cmd)
    spans = reads + ([write] if write else [])
    if spans and (cmd["count"] == 0 or any(s + n > config.act_lines for s, n in spans)):
        return Status.BAD_RANGE
    if op in (Op.ADD, Op.GLU, Op.NORM) and any(
            s != write[0] and s < write[0] + write[1] and write[0] < s + n for s, n in reads):
        return Status.BAD_RANGE
    words = 1 << lin.addr_bits
    if op == Op.ARGMAX and cmd["count"] != config.argmax.beats:
        return Status.BAD_SHAPE
    if op == Op.LINEAR:
        k, n, bias = cmd["k"], cmd["n"], bool(cmd["bias"])
        if (cmd["count"] > lin.tokens or not 0 < k <= lin.k_max or not 0 < n <= lin.n_max
                or k % 32 or n % 32 or 0 < cmd["stride"] < k // 32 or 0 < cmd["row"] < n // 32
                or cmd["addr"] + lin.weight_words(k, n, bias) > words):
            return Status.BAD_SHAPE
    if op == Op.NORM:
        _, per, _ = walk(config, cmd)
        if (cmd["k"] % 32 or cmd["k"] > config.hidden or 0 < cmd["row"] < per
                or cmd["addr"] + norm_words(config, cmd) > words):
            return Status.BAD_SHAPE
    if op == Op.MOE and (cmd["count"] > config.moe.tokens
                         or cmd["addr"] + config.moe_words > words):
        return Status.BAD_SHAPE
    if op == Op.ROUTER and cmd["addr"] + config.router_words > words:
        return Status.BAD_SHAPE
    if op == Op.ROPE and not rope_fits(config, cmd):
        return Status.BAD_SHAPE
    if op == Op.ATTN and spans:
        A = config.attn
        d = A.kv.head_dim
        if (cmd["count"] > 256 or cmd["off"] % min(d, 32)
                or cmd["off"] + A.q_heads * d >= 1 << 16
                or cmd["off"] + (A.q_heads + config.attn_vectors) * d > cmd["row"] * 32
                or (cmd["aop"] == AttnOp.APPEND and cmd["count"] != 1)):
            return Status.BAD_SHAPE
    return Status.OK


def norm_words(config, cmd: dict) -> int:
    """Weight-port words of a ``NORM``'s weight vector (``k`` FP32 values, or ``H``)."""
    return (cmd["k"] or config.hidden) * 32 // config.linear.weight_port_bits


def router_words(config, weight, bias) -> list[int]:
    """The memory words of a ``ROUTER``'s weights (``config`` the block's): the router's
    ``weight`` (experts x hidden) and ``bias`` (experts) as FP32, in
    :attr:`~scoville.rtl.decoder.DecoderConfig.router_beats` beats of ``router_beat_words``
    words each (the first word lowest): beat ``b`` below ``hidden / x_lanes`` the columns
    ``W[:, b L .. b L + L - 1]`` (``L`` = ``moe.x_lanes``; column ``q`` from bit ``32 E q``,
    expert 0 lowest in it), the last the bias in its first column; zeros above."""
    m, p = config.moe, config.linear.weight_port_bits
    L = m.x_lanes
    cols = np.concatenate([np.asarray(weight, np.float32).T,
                           np.asarray(bias, np.float32)[None]]).view(np.uint32)
    words, mask = [], (1 << p) - 1
    for b in range(config.router_beats):
        beat = cols[b * L:(b + 1) * L] if b < config.router_beats - 1 else cols[-1:]
        value = 0
        for i, bits in enumerate(np.asarray(beat).reshape(-1).tolist()):
            value |= int(bits) << (32 * i)
        words += [(value >> (p * j)) & mask for j in range(config.router_beat_words)]
    return words


def rope_fits(config, cmd: dict) -> bool:
    """Whether a ``ROPE``'s vectors fit: at least one a token; ``off`` and ``stride`` on the
    vectors' grid (``min(dim, 32)`` values: a vector within one line, or whole lines); no two
    overlapping (``stride`` at least ``dim``); the last within its token's ``row`` lines; the
    table rows (:attr:`~scoville.rtl.decoder.DecoderConfig.rope_words` words a token) one
    fetch command long at most and within the memory."""
    d, heads = config.rope.dim, cmd["heads"]
    g, words = min(d, 32), cmd["count"] * config.rope_words
    return (heads >= 1 and cmd["off"] % g == 0 and cmd["stride"] % g == 0
            and (heads == 1 or cmd["stride"] >= d)
            and cmd["off"] + (heads - 1) * cmd["stride"] + d <= cmd["row"] * 32
            and words < 1 << config.norm_fetch.len_bits
            and cmd["addr"] + words <= 1 << config.linear.addr_bits)


def _rows(first: int, tokens: int, per: int, stride: int) -> np.ndarray:
    """The lines of ``tokens`` tokens of ``per`` lines each, ``stride`` apart from ``first``,
    in order."""
    return (first + stride * np.arange(tokens)[:, None] + np.arange(per)).reshape(-1)


class DecoderModel:
    """The ``decoder`` block as a program (:mod:`scoville.rtl.decoder`): its activation memory
    (``act_lines`` lines of 32 FP32 values, binary32 bits; zero here, but the block's keeps
    its lines through a reset: a program reads only lines it wrote) and the weight
    ``memory`` (the port's words) it reads. :meth:`apply` carries out one command as
    ``docs/decoder.md`` states it, bit for bit:

    - ``IN``: ``count`` lines of ``x`` into lines ``dst`` on;
    - ``OUT``: lines ``a`` on, ``count`` of them, returned (``o``'s beats);
    - ``ARGMAX``: the ``count`` lines from ``a`` (a token's logits), the lowest index of
      the largest (:func:`~scoville.sim.golden.argmax.greedy`) its answer's ``index``;
    - ``ADD``: line ``dst + i`` = FP32 sum of lines ``a + i`` and ``b + i``, lane by lane;
    - ``NORM``: ``count`` tokens of ``H / 32`` lines each from ``a`` (token-major), normalized
      (:func:`~scoville.sim.golden.rmsnorm.normalize`, sums in beats of 32) with the weight of
      ``H`` FP32 values at word ``addr`` (value 0 lowest), into ``dst`` on;
    - ``LINEAR``: ``count`` tokens of ``k / 32`` lines from ``a``, times the weight (and bias)
      at word ``addr`` as :func:`~scoville.sim.golden.linear.tile_words` lays it out
      (:func:`~scoville.sim.golden.linear.apply`), each token's ``n / 32`` lines into ``dst``
      on;
    - ``MOE``: ``count`` tokens of ``H / 32`` lines from ``a``, through the MoE layer
      (:func:`~scoville.sim.golden.moe.moe`) whose experts' weights are at word ``addr``
      (:func:`~scoville.sim.golden.moe.memory_image` laid out from there; the model is told
      them with :meth:`load_moe`) and the router the last ``ROUTER`` loaded, into ``dst``
      on; :attr:`routes` records each one's expert groups;
    - ``ROUTER``: the MoE router's weight and bias from word ``addr`` (:func:`router_words`
      lays them out), which every ``MOE`` after it uses;
    - ``ROPE``: in place, for each of ``count`` tokens (token ``t``'s row at line ``a + t *
      row``) its ``heads`` vectors of ``rope.dim`` values (vector ``h`` from value ``off + h *
      stride`` of the row) rotated (:func:`~scoville.sim.golden.rope.rotate`, the pairs as
      ``rope.interleaved`` says) by the table row at word ``addr + t * rope_words``
      (``dim / 2`` cosines, then the sines, FP32, value 0 lowest);
    - ``ATTN``: the attention block's command ``aop`` (:class:`~scoville.sim.golden.attention
      .AttentionModel`, whose cache and sequences it keeps): a step's (an append's) ``count``
      tokens, token ``t``'s row at line ``a + t * row``, its ``q_heads`` query vectors of
      ``head_dim`` values from value ``off`` of the row, then its key vectors, then its value
      vectors (``kv_heads`` each); a step's outputs, token by token and each token's query
      heads in order (``v_dim`` values each), into the values from line ``dst`` on, its own
      sliding window ``value``'s low 16 bits (0: ``attn.window``); a sink's head ``heads`` and
      logit ``value`` (binary32 bits). :attr:`answer` is its ``seq`` and
      ``length``, :attr:`results` the attention model's results (what the timed model needs).

    A refused command (:func:`check`) changes nothing."""

    def __init__(self, config=None, memory=()):
        self.config = DecoderConfig() if config is None else config
        self.memory = list(memory)
        self.act = np.zeros((self.config.act_lines, 32), np.uint32)
        self._moe: dict[int, moe_golden.MoeWeights] = {}
        #: The router's weight and bias, as the last ``ROUTER`` loaded them.
        self._router: tuple[np.ndarray, np.ndarray] | None = None
        #: Each ``MOE`` run's expert groups ``((expert, tokens), ...)``, as its dispatch
        #: sorts them (what the timed model needs of it).
        self.routes: list[tuple[tuple[int, int], ...]] = []
        self.attention = attn_golden.AttentionModel(self.config.attn)
        #: Each ``ATTN`` the engine passed on: the attention model's result.
        self.results: list[attn_golden.Result] = []
        #: The last command's ``seq``, ``length`` and ``index`` (an ``ATTN``'s answer, an
        #: ``ARGMAX``'s index; else 0).
        self.answer = (0, 0, 0)

    def load_moe(self, addr: int, weights) -> None:
        """The MoE layer whose experts' weights (of ``weights``, a
        :class:`~scoville.sim.golden.moe.MoeWeights`) the memory holds from word ``addr``."""
        self._moe[addr] = weights

    def router_at(self, addr: int) -> tuple[np.ndarray, np.ndarray]:
        """The router's weight (experts x hidden) and bias (experts), FP32, at word ``addr``
        (:func:`router_words`' layout)."""
        cfg = self.config
        m, per = cfg.moe, cfg.router_beat_words
        E, L = m.experts, m.x_lanes
        cols = []
        for b in range(cfg.router_beats):
            value = self._words_value(addr + b * per, per)
            cols += [[(value >> (32 * (q * E + e))) & 0xFFFFFFFF for e in range(E)]
                     for q in range(L if b < cfg.router_beats - 1 else 1)]
        cols = np.array(cols, np.uint32).view(np.float32)
        return cols[:-1].T.copy(), cols[-1].copy()

    def _lines(self, first: int, n: int) -> np.ndarray:
        return self.act[first:first + n].view(np.float32)

    def _words_value(self, addr: int, n: int) -> int:
        p = self.config.linear.weight_port_bits
        words = self.memory[addr:addr + n]
        words += [0] * (n - len(words))
        return sum(int(v) << (p * i) for i, v in enumerate(words))

    def norm_weight(self, addr: int, values: int | None = None) -> np.ndarray:
        """The ``values`` (``H`` when None) FP32 values of a norm's weight at word ``addr``."""
        cfg = self.config
        values = values or cfg.hidden
        value = self._words_value(addr, values * 32 // cfg.linear.weight_port_bits)
        bits = [(value >> (32 * i)) & 0xFFFFFFFF for i in range(values)]
        return np.array(bits, np.uint32).view(np.float32)

    def table_row(self, addr: int) -> tuple[np.ndarray, np.ndarray]:
        """The cosines and sines (``dim / 2`` FP32 values each) of a ``ROPE`` table row at
        word ``addr``."""
        cfg = self.config
        half = cfg.rope.dim // 2
        value = self._words_value(addr, cfg.rope_words)
        bits = np.array([(value >> (32 * i)) & 0xFFFFFFFF for i in range(2 * half)],
                        np.uint32).view(np.float32)
        return bits[:half], bits[half:]

    def _attend(self, cmd: dict) -> Status:
        A = self.config.attn
        d, QH, KH = A.kv.head_dim, A.q_heads, A.kv.kv_heads
        aop, n = cmd["aop"], cmd["count"]
        vectors = {}
        if aop in (AttnOp.STEP, AttnOp.APPEND):
            flat = self.act.reshape(-1)
            first = (cmd["a"] + cmd["row"] * np.arange(n)) * 32 + cmd["off"]
            kinds = (("q", 0, QH), ("k", QH, KH)) if A.mla else \
                (("q", 0, QH), ("k", QH, KH), ("v", QH + KH, KH))
            for name, h0, heads in kinds:
                idx = first[:, None, None] + (h0 + np.arange(heads))[:, None] * d \
                    + np.arange(d)
                vectors[name] = flat[idx].view(np.float32)
            if aop == AttnOp.APPEND:
                del vectors["q"]
        value = float(np.uint32(cmd["value"]).view(np.float32))
        res = self.attention.apply(attn_golden.Command(
            op=aop, seq=cmd["seq"], head=cmd["heads"], value=value,
            window=cmd["value"] & 0xFFFF if aop == AttnOp.STEP else 0, **vectors))
        self.results.append(res)
        self.answer = (int(res.seq), int(res.length), 0)
        if res.out is not None and res.status == CacheStatus.OK:
            order = attn_golden.beat_order(A, res.length, np.arange(n * QH).reshape(n, QH, 1))
            out = np.empty_like(res.out)
            out[order[:, 0]] = res.out
            start = cmd["dst"] * 32
            self.act.reshape(-1)[start:start + out.size] = out.reshape(-1).view(np.uint32)
        return Status[CacheStatus(res.status).name]

    def _rope(self, cmd: dict) -> None:
        cfg, d = self.config, self.config.rope.dim
        flat = self.act.reshape(-1)
        for t in range(cmd["count"]):
            cos, sin = self.table_row(cmd["addr"] + t * cfg.rope_words)
            first = (cmd["a"] + t * cmd["row"]) * 32 + cmd["off"]
            idx = first + cmd["stride"] * np.arange(cmd["heads"])[:, None] + np.arange(d)
            x = flat[idx].view(np.float32)[None]
            y = rope_golden.rotate(x, cos[None], sin[None],
                                   interleaved=bool(cfg.rope.interleaved))[0]
            flat[idx] = y.view(np.uint32)

    def apply(self, cmd: dict, x=None):
        """Carry out ``cmd`` (its fields, :data:`COMMAND_FIELDS`; ``x`` the ``IN`` lines,
        (count, 32) binary32 bits): ``(status, o)``, ``o`` the ``OUT`` lines (count, 32) bits
        or None."""
        cfg = self.config
        cmd = {f: int(cmd.get(f, 0)) for f in COMMAND_FIELDS}
        status = check(cfg, cmd)
        self.answer = (0, 0, 0)
        if status != Status.OK:
            return status, None
        if cmd["op"] == Op.ATTN:
            return self._attend(cmd), None
        op, n, hl = Op(cmd["op"]), cmd["count"], cfg.hidden // 32
        dst, a = cmd["dst"], cmd["a"]
        if op == Op.IN:
            self.act[dst:dst + n] = np.asarray(x, np.uint32).reshape(n, 32)
        elif op == Op.OUT:
            return status, self.act[a:a + n].copy()
        elif op == Op.ARGMAX:
            self.answer = (0, 0, int(greedy(self._lines(a, n).reshape(1, -1))[0]))
        elif op == Op.ADD:
            self.act[dst:dst + n] = fp32_add(self.act[a:a + n], self.act[cmd["b"]:cmd["b"] + n])
        elif op == Op.GLU:
            gate, up = self._lines(a, n).reshape(1, -1), self._lines(cmd["b"], n).reshape(1, -1)
            y = moe_golden.silu_glu(np.concatenate([gate, up], axis=1))
            self.act[dst:dst + n] = canonical_bits(y).reshape(n, 32)   # NaN: the unit's
        elif op == Op.NORM:
            _, per, stride = walk(cfg, cmd)
            xs = self.act[_rows(a, n, per, stride)].view(np.float32).reshape(n, per * 32)
            w = self.norm_weight(cmd["addr"], per * 32)
            y = norm_golden.normalize(xs, w, cfg.eps, lanes=32)
            self.act[_rows(dst, n, per, stride)] = y.view(np.uint32).reshape(n * per, 32)
        elif op == Op.ROPE:
            self._rope(cmd)
        elif op == Op.ROUTER:
            self._router = self.router_at(cmd["addr"])
        elif op == Op.MOE:
            if cmd["addr"] not in self._moe or self._router is None:
                raise ValueError(f"MOE at word {cmd['addr']}: the model was not told the "
                                 "experts' weights there (load_moe), or no ROUTER ran "
                                 "before it")
            weights = dataclasses.replace(self._moe[cmd["addr"]],
                                          router_weight=self._router[0],
                                          router_bias=self._router[1])
            xs = self._lines(a, n * hl).reshape(n, cfg.hidden).copy()
            self.routes.append(tuple((e, len(rows)) for e, rows, _ in moe_golden.dispatch(
                *moe_golden.routing(cfg.moe, weights, xs))))
            y = np.asarray(moe_golden.moe(cfg.moe, weights, xs), np.float32)
            self.act[dst:dst + n * hl] = y.view(np.uint32).reshape(n * hl, 32)
        else:
            k, m = cmd["k"], cmd["n"]
            xs = self.act[_rows(a, n, k // 32, cmd["stride"] or k // 32)].view(np.float32)
            w, b = linear_golden.read_weight(cfg.linear, self.memory, cmd["addr"], k, m,
                                             bool(cmd["bias"]))
            y = linear_golden.apply(xs.reshape(n, k), w, b, sums=cfg.linear.array.sums)
            out = _rows(dst, n, m // 32, cmd["row"] or m // 32)
            self.act[out] = y.view(np.uint32).reshape(n * m // 32, 32)
        return status, None
