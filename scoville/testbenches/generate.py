"""A model's greedy generation as programs of the ``decoder`` block: the engine's config for a
model (:func:`engine_params`), the hardware formats the golden model then computes in
(:func:`formats_of`), and each forward pass written as commands, a program a layer
(:class:`Generation`).

The programs (``docs/decoder.md`` states them): every weight placed once in the weight memory
(each layer's norms, its fused Q/K/V projection and biases, O projection, MoE router and
experts; the final norm and the head), then the rotary table rows of every position. Each layer
keeps its KV cache as a sequence of its own in the attention block (allocated by the first
pass). A forward pass of T tokens at positions ``p0 ..``: the embeddings ``IN`` (the host's
table lookup, as a chip's host would send them), then per layer its sink logits (``ATTN``
sinks: the block holds one set), ``NORM``, the Q/K/V ``LINEAR`` (one projection of the three
weights stacked, biases too), ``ROPE`` of the query and key heads, ``ATTN`` steps of its
sequence (the layer's sliding window as the step's own), the O ``LINEAR``, the residual
``ADD``, ``NORM``, ``ROUTER`` (the layer's router from memory: the block holds one) and
``MOE``, the residual ``ADD`` and the layer's hidden states ``OUT``; after the last layer the
last token's ``NORM`` (``model.norm``) and the head's ``LINEAR``, its logits ``OUT``, and
``ARGMAX`` of them: its answer is the next token.

DeepSeek-V3's layers: its MLA absorbed at run time (:meth:`Generation._mla`), its dense MLP
(:meth:`Generation._dense`) in its first layers, its MoE (DeepSeek's router, the shared
expert) after.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import cocotb
import numpy as np

from scoville.rtl.decoder import LINE, AttnOp, DecoderConfig, Op
from scoville.rtl.kvcache import KvCacheConfig
from scoville.sim.golden import decoder as golden
from scoville.sim.golden import moe as moe_golden
from scoville.sim.golden import rope as rope_golden

from .decoder import Program, run_program
from .failures import Failure, Kind
from .kit import context, record

__all__ = ["ENV_GENERATE", "Chunk", "Generation", "check_words", "engine_params",
           "formats_of", "image_words", "model_weights"]

#: The environment variable ``scoville generate`` hands the test its model in (JSON:
#: ``config`` a Hugging Face config dict, ``weights`` a safetensors file or null for seeded
#: random weights of ``weights_seed``, ``prompt`` the token ids, ``steps`` tokens to generate).
ENV_GENERATE = "SCOVILLE_GENERATE"
#: The decoder's arrays at the fewest stages (one partial sum, no cut product, the MoE's
#: block units whole): ``engine_params``'s, as the engine simulates a model rather than sets
#: a clock; each stage of an array is Verilog to build for every PE (the defaults take the
#: build about half again).
FEWEST_STAGES = {**{f"{part}.array.{stages}": 0 for part in ("attn", "linear")
                    for stages in ("pe_latency", "add_latency")},
                 "moe.array.unit_latency": 0}


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _layout(s, tokens: int) -> dict:
    """The activation memory's lines for a pass of ``tokens`` tokens (``lines`` in all): x
    (``X``), the normed x and the projections' outputs (``Hn``), a row of ``row`` lines a
    token (``U``), the attention's outputs (``Att``, ``out`` lines a token), the logits
    (``L``). GPT-OSS's row holds the token's Q, K and V heads. DeepSeek-V3's holds its query
    heads (``qh`` lines each: the absorbed query then the rotary part), its latent key
    (``K0`` on: the normed latent, then the rotary part) and its normed ``q_a`` (``QA0``);
    its own areas are the queries' no-position parts (``QN``, ``qn`` lines a token), the
    values (``O``, ``ol`` lines a token) and the dense MLP's gate and up (``G``, ``Up``,
    ``il`` lines a token)."""
    hl = s.hidden // LINE
    if s.arch == "gpt_oss":
        row = (s.heads + 2 * s.kv_heads) * s.head_dim // LINE
        out = s.heads * s.head_dim // LINE
        lay = {"hl": hl, "row": row, "out": out}
        sizes = (("X", hl), ("Hn", hl), ("U", row), ("Att", out))
    else:
        qh = (s.kv_lora + s.rope_dim) // LINE
        row = (s.heads + 1) * qh + s.q_lora // LINE
        lay = {"hl": hl, "row": row, "qh": qh, "K0": s.heads * qh, "QA0": (s.heads + 1) * qh,
               "out": s.heads * s.kv_lora // LINE, "qn": s.heads * s.nope // LINE,
               "ol": s.heads * s.v_dim // LINE, "il": s.inter // LINE}
        sizes = (("X", hl), ("Hn", hl), ("U", row), ("Att", lay["out"]), ("QN", lay["qn"]),
                 ("O", lay["ol"]), ("G", lay["il"]), ("Up", lay["il"]))
    at = 0
    for name, per in sizes:
        lay[name] = at
        at += tokens * per
    lay["L"] = at
    lay["lines"] = at + s.vocab // LINE
    return lay


def engine_params(config: dict, prompt_len: int, context: int) -> dict:
    """The ``decoder`` block's parameters (dotted names) for a Hugging Face ``config`` dict,
    a prompt of ``prompt_len`` tokens (the longest pass) and ``context`` tokens in all (the
    prompt and the generated ones): its hidden size, eps, projections up to the widest
    (the head's), the MoE's shape and router, the rotary and attention heads (DeepSeek-V3:
    MLA's latent key), a KV cache holding every layer's context, the vocabulary. A model the
    engine cannot run is a one-line ``ValueError`` naming the config's fields."""
    s = golden.shape(config)
    H = s.hidden
    if s.arch == "gpt_oss":
        d = s.head_dim
        qkv = (s.heads + 2 * s.kv_heads) * d
        whole = (("hidden_size", H), ("vocab_size", s.vocab),
                 ("num_attention_heads x head_dim", s.heads * d),
                 ("(num_attention_heads + 2 num_key_value_heads) x head_dim", qkv))
        ks, ns = (H, s.heads * d), (H, qkv, s.vocab)
        kv_heads, q_per_kv = s.kv_heads, s.heads // s.kv_heads
    else:
        d = s.kv_lora + s.rope_dim
        whole = (("hidden_size", H), ("vocab_size", s.vocab), ("q_lora_rank", s.q_lora),
                 ("kv_lora_rank", s.kv_lora), ("qk_nope_head_dim", s.nope),
                 ("qk_rope_head_dim", s.rope_dim), ("v_head_dim", s.v_dim),
                 ("intermediate_size", s.inter), ("moe_intermediate_size", s.moe_inter))
        ks = (H, s.q_lora, s.nope, s.kv_lora, s.heads * s.v_dim, s.inter)
        ns = (H, d + s.q_lora, s.heads * s.nope, s.vocab, s.inter)
        kv_heads, q_per_kv = 1, s.heads
        if s.eps != golden.LORA_NORM_EPS:
            raise ValueError(f"config field 'rms_norm_eps' = {s.eps} is not allowed in the "
                             f"decoder block; allowed: {golden.LORA_NORM_EPS} (the block has "
                             "one eps: the latent norms')")
        if s.shared > 1:
            raise ValueError(f"config field 'n_shared_experts' = {s.shared} is not allowed "
                             "in the decoder block; allowed: 0, 1 (the MoE block's shared "
                             "expert is moe_intermediate_size wide)")
        for name, value in (("q_lora_rank", s.q_lora), ("kv_lora_rank", s.kv_lora)):
            if value > H:
                raise ValueError(f"config field {name!r} = {value} is not allowed with "
                                 f"hidden_size = {H} in the decoder block; allowed: at most "
                                 "hidden_size (a NORM's tokens are at most hidden wide)")
        if s.heads > 64:
            raise ValueError(f"config field 'num_attention_heads' = {s.heads} is not allowed "
                             "in the decoder block with MLA; allowed: 1..64 (the attention's "
                             "query heads on its one latent head: the array's rows)")
    for name, value in whole:
        if value % LINE:
            raise ValueError(f"config field {name!r} = {value} is not allowed in the decoder "
                             f"block; allowed: a multiple of {LINE} (whole lines)")
    if max(ks) > 16384:
        raise ValueError(f"the model's widest projection input is {max(ks)} values (of "
                         "hidden_size, the heads, the LoRA ranks, intermediate_size); allowed: "
                         "16384 (the decoder block's linear.k_max)")
    lines = _layout(s, prompt_len)["lines"]
    if lines > 32768:
        raise ValueError(f"--prompt-len {prompt_len}: a pass takes {lines} lines of "
                         "activations for this model; allowed: 32768 (the decoder block's "
                         "act_lines): a shorter prompt")
    tokens = 8
    pages = 4
    kv = KvCacheConfig(banks=2, word_bits=64, bank_words=65536, page_tokens=pages,
                       max_seqs=max(2, s.layers), kv_heads=kv_heads, head_dim=d,
                       k_only=int(s.arch != "gpt_oss"))
    bank_words = _pow2_at_least(max(2, s.layers * -(-context // pages)) * kv.page_lines)
    params = {
        "hidden": H, "eps": float(s.eps),
        "act_lines": max(128, _pow2_at_least(_layout(s, prompt_len)["lines"])),
        "linear.array.rows": 2, "linear.array.cols": 8, "linear.tokens": tokens,
        "linear.k_max": _pow2_at_least(max(ks)), "linear.n_max": _pow2_at_least(max(ns)),
        "linear.weight_port_bits": 64, "linear.addr_bits": 20,
        "moe.hidden": H, "moe.intermediate": s.moe_inter, "moe.experts": s.experts,
        "moe.top_k": s.top_k, "moe.tokens": tokens, "moe.array.rows": 2,
        "moe.array.cols": 8, "moe.weight_port_bits": 64, "moe.act_fmt": "mxfp8",
        "moe.x_lanes": 1,
        "rope.dim": s.rotary, "rope.interleaved": int(s.arch != "gpt_oss" and s.interleave),
        "attn.kv.kv_heads": kv_heads, "attn.kv.head_dim": d, "attn.kv.k_only": kv.k_only,
        "attn.q_heads": s.heads, "attn.sinks": int(s.arch == "gpt_oss"),
        "attn.scale": float(s.scale), "attn.mode": "prefill", "attn.q_tokens": tokens,
        "attn.array.rows": _pow2_at_least(max(8, q_per_kv)),
        "attn.array.cols": _attn_cols(d),
        "attn.kv.banks": 2, "attn.kv.word_bits": 64,
        "attn.kv.bank_words": bank_words, "attn.kv.page_tokens": pages,
        "attn.kv.max_seqs": kv.max_seqs, "attn.chunk": 256, "argmax.vocab": s.vocab,
        **FEWEST_STAGES,
    }
    if s.arch != "gpt_oss":
        params.update({
            "attn.mla": 1, "attn.rope_dim": s.rope_dim, "moe.router": "deepseek",
            "moe.n_group": s.n_group, "moe.topk_group": s.topk_group,
            "moe.norm_topk_prob": int(s.norm_topk),
            "moe.routed_scaling_factor": float(s.scaling_factor), "moe.shared": s.shared})
    return params


def _attn_cols(d: int) -> int:
    """The attention array's columns for keys of ``d`` values: the key's width up to a line
    of 32 (wider arrays multiply the RTL's build time for little simulated speed), at least
    8. A key of a line or more is whole lines (the attention block refuses others), which 32
    columns divide, and so is its value."""
    return max(8, min(LINE, d))


def image_words(config: dict, params: dict, context: int) -> int:
    """Words of the weight memory a model takes on the engine of ``params``
    (:meth:`Generation._place` lays them out): each layer's norms, its attention's
    projections, its MoE's router and experts (or its dense MLP's projections); the final norm, the
    head; ``context`` rotary table rows."""
    from scoville.rtl.lib.params import build_config

    cfg = build_config(DecoderConfig, params)
    s, lin = golden.shape(config), cfg.linear
    total = 0
    for i in range(s.layers):
        total += 2 * cfg.norm_words + lin.weight_words(s.heads * (
            s.head_dim if s.arch == "gpt_oss" else s.v_dim), s.hidden, s.bias)
        if s.arch == "gpt_oss":
            total += lin.weight_words(s.hidden, (s.heads + 2 * s.kv_heads) * s.head_dim,
                                      s.bias)
        else:
            d = s.kv_lora + s.rope_dim
            total += ((s.q_lora + s.kv_lora) // LINE * cfg.norm_line_words
                      + lin.weight_words(s.hidden, d + s.q_lora, s.bias)
                      + lin.weight_words(s.q_lora, s.heads * s.nope, False)
                      + s.heads * (lin.weight_words(s.q_lora, s.rope_dim, False)
                                   + lin.weight_words(s.nope, s.kv_lora, False)
                                   + lin.weight_words(s.kv_lora, s.v_dim, False)))
        if s.is_moe(i):
            total += cfg.moe_words + cfg.router_words
        else:
            total += (2 * lin.weight_words(s.hidden, s.inter, False)
                      + lin.weight_words(s.inter, s.hidden, False))
    return (total + cfg.norm_words + lin.weight_words(s.hidden, s.vocab, False)
            + context * cfg.rope_words)


def check_words(words: int, addr_bits: int) -> None:
    """A one-line ``ValueError`` when a model's ``words`` of weights overflow a weight memory
    of ``addr_bits`` address bits."""
    if words > 1 << addr_bits:
        raise ValueError(f"the model's weights take {words} words of the weight memory; "
                         f"allowed: {1 << addr_bits} (its linear.addr_bits = {addr_bits})")


def formats_of(cfg: DecoderConfig) -> golden.Formats:
    """The formats and orders the engine ``cfg`` computes in, as :func:`~scoville.sim.golden
    .decoder.layer` takes them (its NORM sums in beats of a line)."""
    return golden.Formats(proj="bf16", attn=cfg.attn.array.fmt, kv=cfg.attn.kv.kv_fmt,
                          moe_act=cfg.moe.act_fmt, norm_lanes=LINE,
                          router_lanes=cfg.moe.x_lanes, chunk=cfg.attn.chunk,
                          rows=cfg.attn.array.rows, proj_sums=cfg.linear.array.sums,
                          attn_sums=cfg.attn.array.sums)


@dataclass
class Chunk:
    """One program run on its own (the block idle before it): what it is (``label``), and
    which ``OUT`` lines are a layer's hidden states or the logits."""

    prog: Program
    label: str
    outs: list[tuple[str, int]] = field(default_factory=list)   # (what, lines)


class Generation:
    """Greedy generation of ``steps`` tokens after ``prompt`` by ``config``'s model with
    ``weights`` (a full Hugging Face state dict) on the engine ``cfg``: the golden model's
    tokens, logits and layer outputs (:func:`~scoville.sim.golden.decoder.forward` in the
    engine's formats) and the programs (:attr:`chunks`) that compute them on the block."""

    def __init__(self, cfg: DecoderConfig, config: dict, weights: dict, prompt, steps: int):
        self.cfg, self.config = cfg, config
        self.s = golden.shape(config)
        self.formats = formats_of(cfg)
        self.prompt = np.asarray(prompt)
        self.steps = steps
        self.weights = {k: np.asarray(v, np.float32) for k, v in weights.items()}
        # The golden passes: the ids each pass takes, its layers' outputs and its logits.
        self.passes: list[tuple[np.ndarray, list, np.ndarray]] = []
        self.tokens, self.logits = golden.generate(config, weights, self.prompt, steps,
                                                   formats=self.formats, passes=self.passes)
        self._place()
        self.chunks: list[Chunk] = []
        pos = 0
        for n, (ids, _, _) in enumerate(self.passes):
            self._pass(n, ids, pos)
            pos += len(ids)

    # ---- the weight memory ---------------------------------------------------------------

    def _place(self) -> None:
        cfg, s, w = self.cfg, self.s, self.weights
        self.image = Program(cfg)
        img = self.image
        self.layer_addr = []
        for i in range(s.layers):
            p = f"model.layers.{i}."
            at = {"norm1": img.norm_weight(w[f"{p}input_layernorm.weight"])}
            at.update(self._place_attention(p) if s.arch == "gpt_oss" else self._place_mla(p))
            at["norm2"] = img.norm_weight(w[f"{p}post_attention_layernorm.weight"])
            m = f"{p}mlp."
            if not s.is_moe(i):      # the dense MLP: gate, up, down
                at.update({n: img.linear_weight(w[f"{m}{n}_proj.weight"])
                           for n in ("gate", "up", "down")})
            else:
                if s.arch == "gpt_oss":
                    moe = moe_golden.MoeWeights(
                        w[f"{m}router.weight"], w[f"{m}router.bias"],
                        w[f"{m}experts.gate_up_proj"], w[f"{m}experts.down_proj"],
                        w[f"{m}experts.gate_up_proj_bias"], w[f"{m}experts.down_proj_bias"])
                else:
                    sh = f"{m}shared_experts."
                    shared = [w.get(f"{sh}{n}_proj.weight") for n in ("gate", "up", "down")]
                    moe = moe_golden.MoeWeights(
                        w[f"{m}gate.weight"], w[f"{m}gate.e_score_correction_bias"],
                        w[f"{m}experts.gate_up_proj"], w[f"{m}experts.down_proj"], None, None,
                        *shared)
                at.update({"moe": img.moe_weights(moe), "router": img.router_weights(moe)})
            self.layer_addr.append(at)
        self.norm_addr = img.norm_weight(w["model.norm.weight"])
        self.head_addr = img.linear_weight(w["lm_head.weight"])
        positions = np.arange(len(self.prompt) + self.steps)
        cos, sin = rope_golden.table(s.rope, s.rotary, positions, s.max_positions)
        self.table_addr = img.table(cos, sin)
        check_words(len(img.image), cfg.linear.addr_bits)

    def _place_attention(self, p: str) -> dict:
        """GPT-OSS's attention: Q, K and V stacked into one projection (biases too), O, the
        sinks."""
        s, w, img = self.s, self.weights, self.image
        a = f"{p}self_attn."
        qkv = np.concatenate([w[f"{a}{n}_proj.weight"] for n in "qkv"])
        bias = np.concatenate([w[f"{a}{n}_proj.bias"] for n in "qkv"]) if s.bias else None
        return {"qkv": img.linear_weight(qkv, bias),
                "o": img.linear_weight(w[f"{a}o_proj.weight"], w.get(f"{a}o_proj.bias")),
                "sinks": w[f"{a}sinks"]}

    def _place_mla(self, p: str) -> dict:
        """DeepSeek-V3's MLA: ``kv_a_proj_with_mqa`` and ``q_a_proj`` stacked (the latent
        key, then ``q_a``), their norms, ``q_b_proj``'s no-position rows of every head, each
        head's rotary rows, and ``kv_b_proj``'s two parts per head as projections (``W_UK``
        transposed: the absorbed query; ``W_UV``: the values), O."""
        s, w, img = self.s, self.weights, self.image
        a = f"{p}self_attn."
        nq, ql = s.heads, s.q_lora
        stacked = np.concatenate([w[f"{a}kv_a_proj_with_mqa.weight"], w[f"{a}q_a_proj.weight"]])
        bias = (np.concatenate([w[f"{a}kv_a_proj_with_mqa.bias"], w[f"{a}q_a_proj.bias"]])
                if s.bias else None)
        q_b = w[f"{a}q_b_proj.weight"].reshape(nq, s.nope + s.rope_dim, ql)
        kv_b = w[f"{a}kv_b_proj.weight"].reshape(nq, s.nope + s.v_dim, s.kv_lora)
        return {
            "a": img.linear_weight(stacked, bias),
            "q_norm": img.norm_weight(w[f"{a}q_a_layernorm.weight"]),
            "kv_norm": img.norm_weight(w[f"{a}kv_a_layernorm.weight"]),
            "q_nope": img.linear_weight(q_b[:, :s.nope].reshape(nq * s.nope, ql)),
            "q_rot": [img.linear_weight(q_b[h, s.nope:]) for h in range(nq)],
            "uk": [img.linear_weight(np.ascontiguousarray(kv_b[h, :s.nope].T))
                   for h in range(nq)],
            "uv": [img.linear_weight(kv_b[h, s.nope:]) for h in range(nq)],
            "o": img.linear_weight(w[f"{a}o_proj.weight"], w.get(f"{a}o_proj.bias")),
        }

    # ---- a forward pass ------------------------------------------------------------------

    def _chunk(self, label: str) -> Chunk:
        prog = Program(self.cfg)
        prog.image, prog.moe = self.image.image, self.image.moe
        chunk = Chunk(prog, label)
        self.chunks.append(chunk)
        return chunk

    def _pass(self, n: int, ids, p0: int) -> None:
        cfg, s = self.cfg, self.s
        T = len(ids)
        lay = _layout(s, T)
        hl = lay["hl"]
        X, Hn, L = lay["X"], lay["Hn"], lay["L"]
        for i in range(s.layers):
            at = self.layer_addr[i]
            ch = self._chunk(f"pass {n} layer {i}")
            prog = ch.prog
            if i == 0:
                if n == 0:
                    for _ in range(s.layers):
                        prog.attn(AttnOp.ALLOC)
                prog.load(X, self.weights["model.embed_tokens.weight"][ids])
            attention = self._attention if s.arch == "gpt_oss" else self._mla
            attention(prog, at, i, lay, T, p0)
            prog.cmd(Op.ADD, a=X, b=Hn, dst=X, count=T * hl)
            for t, c in _groups(T, cfg.linear.tokens):
                prog.cmd(Op.NORM, a=X + t * hl, dst=Hn + t * hl, count=c, addr=at["norm2"])
            if s.is_moe(i):
                prog.cmd(Op.ROUTER, addr=at["router"])
                for t, c in _groups(T, cfg.moe.tokens):
                    prog.cmd(Op.MOE, a=Hn + t * hl, dst=Hn + t * hl, count=c, addr=at["moe"])
            else:
                self._dense(prog, at, lay, T)
            prog.cmd(Op.ADD, a=X, b=Hn, dst=X, count=T * hl)
            prog.cmd(Op.OUT, a=X, count=T * hl)
            ch.outs.append((f"layer {i}", T * hl))
        last = X + (T - 1) * hl
        prog.cmd(Op.NORM, a=last, dst=Hn, count=1, addr=self.norm_addr)
        prog.cmd(Op.LINEAR, a=Hn, dst=L, count=1, k=s.hidden, n=s.vocab, addr=self.head_addr)
        prog.cmd(Op.OUT, a=L, count=s.vocab // LINE)
        ch.outs.append(("logits", s.vocab // LINE))
        prog.cmd(Op.ARGMAX, a=L, count=s.vocab // LINE)

    def _attention(self, prog: Program, at: dict, i: int, lay: dict, T: int, p0: int) -> None:
        """GPT-OSS's attention block of layer ``i``: its sinks, ``NORM``, the Q/K/V
        ``LINEAR``, ``ROPE`` of the query and key heads, ``ATTN`` steps (the layer's window),
        the O ``LINEAR`` into ``Hn``."""
        cfg, s = self.cfg, self.s
        d, hl, row, out = s.head_dim, lay["hl"], lay["row"], lay["out"]
        X, Hn, U, Att = lay["X"], lay["Hn"], lay["U"], lay["Att"]
        for h, v in enumerate(at["sinks"]):
            prog.attn(AttnOp.SINK, heads=h, value=int(np.float32(v).view(np.uint32)))
        for t, c in _groups(T, cfg.linear.tokens):
            prog.cmd(Op.NORM, a=X + t * hl, dst=Hn + t * hl, count=c, addr=at["norm1"])
            prog.cmd(Op.LINEAR, a=Hn + t * hl, dst=U + t * row, count=c, k=s.hidden,
                     n=row * LINE, bias=int(s.bias), addr=at["qkv"])
        for t, c in _groups(T, cfg.linear.tokens):
            prog.cmd(Op.ROPE, a=U + t * row, count=c, heads=s.heads + s.kv_heads,
                     stride=d, row=row, addr=self.table_addr + (p0 + t) * cfg.rope_words)
        window = min(s.window_of(i), 0xFFFF)     # the step's 16 bits (lengths fit)
        for t, c in _groups(T, cfg.attn.max_step_tokens):
            prog.attn(AttnOp.STEP, seq=i, count=c, a=U + t * row, row=row,
                      dst=Att + t * out, value=window)
        for t, c in _groups(T, cfg.linear.tokens):
            prog.cmd(Op.LINEAR, a=Att + t * out, dst=Hn + t * hl, count=c, k=out * LINE,
                     n=s.hidden, bias=int(s.bias), addr=at["o"])

    def _mla(self, prog: Program, at: dict, i: int, lay: dict, T: int, p0: int) -> None:
        """DeepSeek-V3's MLA of layer ``i``, absorbed at run time: ``NORM``; one ``LINEAR``
        of the latent key and ``q_a`` into each token's row; their ``NORM`` in place (a line
        a token or more, row apart); ``q_b``'s no-position part (``QN``); per head its rotary
        part into its query's place and the absorbed query ``q_nope W_UK`` beside it;
        ``ROPE`` of every head's rotary part and the key's; ``ATTN`` steps over the latent
        cache (``Att``: the latent values); per head ``o_lat W_UV^T`` (``O``); the O
        ``LINEAR`` into ``Hn``."""
        cfg, s = self.cfg, self.s
        lin = cfg.linear
        hl, R, qh = lay["hl"], lay["row"], lay["qh"]
        X, Hn, U, Att, QN, Vo = (lay[k] for k in ("X", "Hn", "U", "Att", "QN", "O"))
        K0, QA0, qn, att, ol = lay["K0"], lay["QA0"], lay["qn"], lay["out"], lay["ol"]
        kvl, r, nope, v, ql = s.kv_lora, s.rope_dim, s.nope, s.v_dim, s.q_lora
        for t, c in _groups(T, lin.tokens):
            u = U + t * R
            prog.cmd(Op.NORM, a=X + t * hl, dst=Hn + t * hl, count=c, addr=at["norm1"])
            prog.cmd(Op.LINEAR, a=Hn + t * hl, dst=u + K0, count=c, k=s.hidden,
                     n=kvl + r + ql, row=R, bias=int(s.bias), addr=at["a"])
            prog.cmd(Op.NORM, a=u + QA0, dst=u + QA0, count=c, k=ql, row=R,
                     addr=at["q_norm"])
            prog.cmd(Op.NORM, a=u + K0, dst=u + K0, count=c, k=kvl, row=R, addr=at["kv_norm"])
            prog.cmd(Op.LINEAR, a=u + QA0, stride=R, dst=QN + t * qn, count=c, k=ql,
                     n=s.heads * nope, addr=at["q_nope"])
            for h in range(s.heads):
                prog.cmd(Op.LINEAR, a=u + QA0, stride=R, dst=u + h * qh + kvl // LINE,
                         row=R, count=c, k=ql, n=r, addr=at["q_rot"][h])
                prog.cmd(Op.LINEAR, a=QN + t * qn + h * nope // LINE, stride=qn,
                         dst=u + h * qh, row=R, count=c, k=nope, n=kvl, addr=at["uk"][h])
            prog.cmd(Op.ROPE, a=u, count=c, heads=s.heads + 1, off=kvl, stride=kvl + r,
                     row=R, addr=self.table_addr + (p0 + t) * cfg.rope_words)
        for t, c in _groups(T, cfg.attn.max_step_tokens):
            prog.attn(AttnOp.STEP, seq=i, count=c, a=U + t * R, row=R, dst=Att + t * att)
        for t, c in _groups(T, lin.tokens):
            for h in range(s.heads):
                prog.cmd(Op.LINEAR, a=Att + t * att + h * kvl // LINE, stride=att,
                         dst=Vo + t * ol + h * v // LINE, row=ol, count=c, k=kvl, n=v,
                         addr=at["uv"][h])
            prog.cmd(Op.LINEAR, a=Vo + t * ol, dst=Hn + t * hl, count=c, k=ol * LINE,
                     n=s.hidden, bias=int(s.bias), addr=at["o"])

    def _dense(self, prog: Program, at: dict, lay: dict, T: int) -> None:
        """A dense MLP (DeepSeek-V3's first layers): the gate and up ``LINEAR``s, their
        ``GLU`` in place, the down ``LINEAR`` into ``Hn``."""
        s, lin = self.s, self.cfg.linear
        hl, il = lay["hl"], lay["il"]
        Hn, G, Up = lay["Hn"], lay["G"], lay["Up"]
        for t, c in _groups(T, lin.tokens):
            for name, dst in (("gate", G), ("up", Up)):
                prog.cmd(Op.LINEAR, a=Hn + t * hl, dst=dst + t * il, count=c, k=s.hidden,
                         n=s.inter, addr=at[name])
        prog.cmd(Op.GLU, a=G, b=Up, dst=G, count=T * il)
        for t, c in _groups(T, lin.tokens):
            prog.cmd(Op.LINEAR, a=G + t * il, dst=Hn + t * hl, count=c, k=s.inter,
                     n=s.hidden, addr=at["down"])

    def expected(self, chunk: int) -> list[np.ndarray]:
        """The golden model's values of chunk ``chunk``'s ``OUT`` lines, in order (float32)."""
        n, i = divmod(chunk, self.s.layers)
        _, outputs, logits = self.passes[n]
        want = [outputs[i]]
        if i == self.s.layers - 1:
            want.append(logits)
        return [np.asarray(v, np.float32).reshape(-1, LINE) for v in want]


def _groups(total: int, most: int):
    """``(first, count)`` of ``total`` in runs of at most ``most``."""
    return [(t, min(most, total - t)) for t in range(0, total, most)]


def model_weights(spec: dict) -> dict:
    """The state dict ``spec`` names: its ``weights`` file (safetensors, Hugging Face names,
    read with its ``config_file``)
    or, when that is null, :func:`~scoville.sim.golden.decoder.random_weights` of its
    ``config`` and ``weights_seed``."""
    if spec.get("weights"):
        return golden.load(spec["config_file"], spec["weights"])[1]
    return golden.random_weights(spec["config"], int(spec.get("weights_seed", 0)))


@cocotb.test()
async def test_generate(dut):
    """Greedy generation through the block (the model in :data:`ENV_GENERATE`): each layer's
    program run after the one before, the block idle between them (its activation memory,
    KV cache and sequences kept), every ``OUT`` line
    (each layer's hidden states, each pass's logits) bit for bit against the golden layer
    model, each pass's ``ARGMAX`` answer the golden model's token, and every answer,
    request and handshake's cycle against the engine's golden and timed models, on the
    workload's memory with streams that keep up."""
    ctx = context()
    spec = json.loads(os.environ[ENV_GENERATE])
    gen = Generation(ctx.config, spec["config"], model_weights(spec), spec["prompt"],
                     int(spec["steps"]))
    model = gen.image.golden()
    cycles = model_cycles = fast_cycles = 0
    tokens = []
    for k, ch in enumerate(gen.chunks):
        m = await run_program(dut, ctx, f"test_generate[{ch.label}]", ch.prog, gaps=False,
                              model=model, reset_first=k == 0, want=gen.expected(k))
        cycles += m["cycles"]
        model_cycles += m["model_cycles"]
        fast_cycles += m["fast_cycles"]
        # The pass's token: the engine model's ARGMAX answer, which run_program held the
        # RTL's resp to (its index field) bit for bit.
        if ch.prog.commands[-1]["op"] == Op.ARGMAX:
            tokens.append(model.answer[2])
    if tokens != gen.tokens.tolist():
        raise Failure(Kind.DATA, f"test_generate: the engine's tokens {tokens} are not the "
                                 f"golden model's {gen.tokens.tolist()}")
    record("test_generate", tokens=tokens, prompt=gen.prompt.tolist(),
           cycles=cycles, model_cycles=model_cycles, fast_cycles=round(fast_cycles),
           programs=len(gen.chunks),
           commands=sum(len(ch.prog.commands) for ch in gen.chunks))
