"""A model's greedy generation as programs of the ``decoder`` block: the engine's config for a
model (:func:`engine_params`), the hardware formats the golden model then computes in
(:func:`formats_of`), and each forward pass written as commands, a program a layer
(:class:`Generation`).

The programs (``docs/decoder.md`` states them): every weight placed once in the weight
memory (each layer's norms, its fused Q/K/V projection and biases, O projection, MoE experts;
the final norm and the head), then the rotary table rows of every position. Each layer keeps
its KV cache as a sequence of its own in the attention block (allocated by the first pass).
A forward pass of T tokens at positions ``p0 ..``: the embeddings ``IN`` (the host's table
lookup, as a chip's host would send them), then per layer its sink logits (``ATTN`` sinks:
the block holds one set), ``NORM``, the Q/K/V ``LINEAR`` (one projection of the three weights
stacked, biases too), ``ROPE`` of the query and key heads, ``ATTN`` steps of its sequence
(the layer's sliding window as the step's own), the O ``LINEAR``, the residual ``ADD``,
``NORM``, ``MOE`` (the layer's router written on ``wr`` before its program: the block has
one router), the residual ``ADD`` and the layer's hidden states ``OUT``; after the last
layer the last token's ``NORM`` (``model.norm``) and the head's ``LINEAR``, its logits
``OUT``, and ``ARGMAX`` of them: its answer is the next token.

GPT-OSS only for now: DeepSeek-V3's MLA is not in the engine yet (a one-line error).
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


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _layout(s, tokens: int) -> dict:
    """The activation memory's lines for a pass of ``tokens`` tokens: x (``X``), the normed x
    and the projections' outputs (``Hn``), each token's Q, K and V row (``U``, ``row`` lines
    a token), the attention's outputs (``Att``, ``out`` lines a token), the logits (``L``);
    ``lines`` in all."""
    hl = s.hidden // LINE
    row = (s.heads + 2 * s.kv_heads) * s.head_dim // LINE
    out = s.heads * s.head_dim // LINE
    X, Hn = 0, tokens * hl
    U = Hn + tokens * hl
    Att = U + tokens * row
    L = Att + tokens * out
    return {"hl": hl, "row": row, "out": out, "X": X, "Hn": Hn, "U": U, "Att": Att, "L": L,
            "lines": L + s.vocab // LINE}


def engine_params(config: dict, prompt_len: int, context: int) -> dict:
    """The ``decoder`` block's parameters (dotted names) for a Hugging Face ``config`` dict,
    a prompt of ``prompt_len`` tokens (the longest pass) and ``context`` tokens in all (the
    prompt and the generated ones): its hidden size, eps, projections up to the head's width,
    the MoE's shape, the rotary and attention heads, a KV cache holding every layer's
    context, the vocabulary. A model the engine cannot run is a one-line ``ValueError``
    naming the config's fields."""
    if config.get("model_type") != "gpt_oss":
        raise ValueError(f"config field 'model_type' = {config.get('model_type')!r} is not "
                         "allowed in the decoder block yet; allowed: 'gpt_oss' (DeepSeek-V3's "
                         "MLA is not in the engine)")
    s = golden.shape(config)
    d, H = s.head_dim, s.hidden
    qkv = (s.heads + 2 * s.kv_heads) * d
    for name, value in (("hidden_size", H), ("vocab_size", s.vocab),
                        ("num_attention_heads x head_dim", s.heads * d),
                        ("(num_attention_heads + 2 num_key_value_heads) x head_dim", qkv)):
        if value % LINE:
            raise ValueError(f"config field {name!r} = {value} is not allowed in the decoder "
                             f"block; allowed: a multiple of {LINE} (whole lines)")
    group = s.heads // s.kv_heads
    tokens = 8
    pages = 4
    kv = KvCacheConfig(banks=2, word_bits=64, bank_words=65536, page_tokens=pages,
                       max_seqs=max(2, s.layers), kv_heads=s.kv_heads, head_dim=d)
    bank_words = _pow2_at_least(max(2, s.layers * -(-context // pages)) * kv.page_lines)
    return {
        "hidden": H, "eps": float(s.eps),
        "act_lines": max(128, _pow2_at_least(_layout(s, prompt_len)["lines"])),
        "linear.array.rows": 2, "linear.array.cols": 8, "linear.tokens": tokens,
        "linear.k_max": _pow2_at_least(max(H, s.heads * d)),
        "linear.n_max": _pow2_at_least(max(H, qkv, s.vocab)),
        "linear.weight_port_bits": 64, "linear.addr_bits": 20,
        "moe.hidden": H, "moe.intermediate": s.moe_inter, "moe.experts": s.experts,
        "moe.top_k": s.top_k, "moe.tokens": tokens, "moe.array.rows": 2,
        "moe.array.cols": 8, "moe.weight_port_bits": 64, "moe.act_fmt": "mxfp8",
        "moe.x_lanes": 1,
        "rope.dim": s.rotary, "attn.kv.kv_heads": s.kv_heads, "attn.kv.head_dim": d,
        "attn.q_heads": s.heads, "attn.sinks": 1, "attn.scale": float(s.scale),
        "attn.mode": "prefill", "attn.q_tokens": tokens,
        "attn.array.rows": _pow2_at_least(max(8, group)),
        "attn.array.cols": max(8, min(64, d)) if d <= 64 or d % 64 == 0 else 32,
        "attn.kv.banks": 2, "attn.kv.word_bits": 64,
        "attn.kv.bank_words": bank_words, "attn.kv.page_tokens": pages,
        "attn.kv.max_seqs": kv.max_seqs, "attn.chunk": 256, "argmax.vocab": s.vocab,
    }


def image_words(config: dict, params: dict, context: int) -> int:
    """Words of the weight memory a model takes on the engine of ``params``
    (:meth:`Generation._place` lays them out): each layer's two norm vectors, its Q/K/V and O
    projections, its MoE's experts; the final norm, the head; ``context`` rotary table rows."""
    from scoville.rtl.lib.params import build_config

    cfg = build_config(DecoderConfig, params)
    s, lin = golden.shape(config), cfg.linear
    qkv = (s.heads + 2 * s.kv_heads) * s.head_dim
    layer = (2 * cfg.norm_words + lin.weight_words(s.hidden, qkv, s.bias)
             + lin.weight_words(s.heads * s.head_dim, s.hidden, s.bias) + cfg.moe_words)
    return (s.layers * layer + cfg.norm_words + lin.weight_words(s.hidden, s.vocab, False)
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
                          rows=cfg.attn.array.rows)


@dataclass
class Chunk:
    """One program run on its own (the block idle before it): ``router`` the MoE router the
    block holds for it (written on ``wr`` first; None: the one it holds), what it is
    (``label``), and which ``OUT`` lines are a layer's hidden states or the logits."""

    prog: Program
    router: moe_golden.MoeWeights | None
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
            a = f"{p}self_attn."
            qkv = np.concatenate([w[f"{a}{n}_proj.weight"] for n in "qkv"])
            bias = (np.concatenate([w[f"{a}{n}_proj.bias"] for n in "qkv"]) if s.bias
                    else None)
            m = f"{p}mlp."
            moe = moe_golden.MoeWeights(
                w[f"{m}router.weight"], w[f"{m}router.bias"], w[f"{m}experts.gate_up_proj"],
                w[f"{m}experts.down_proj"], w[f"{m}experts.gate_up_proj_bias"],
                w[f"{m}experts.down_proj_bias"])
            self.layer_addr.append({
                "norm1": img.norm_weight(w[f"{p}input_layernorm.weight"]),
                "qkv": img.linear_weight(qkv, bias),
                "o": img.linear_weight(w[f"{a}o_proj.weight"], w.get(f"{a}o_proj.bias")),
                "norm2": img.norm_weight(w[f"{p}post_attention_layernorm.weight"]),
                "moe": img.moe_weights(moe), "moe_weights": moe,
                "sinks": w[f"{a}sinks"],
            })
        self.norm_addr = img.norm_weight(w["model.norm.weight"])
        self.head_addr = img.linear_weight(w["lm_head.weight"])
        positions = np.arange(len(self.prompt) + self.steps)
        cos, sin = rope_golden.table(s.rope, s.rotary, positions, s.max_positions)
        self.table_addr = img.table(cos, sin)
        check_words(len(img.image), cfg.linear.addr_bits)

    # ---- a forward pass ------------------------------------------------------------------

    def _chunk(self, router, label: str) -> Chunk:
        prog = Program(self.cfg)
        prog.image, prog.moe = self.image.image, self.image.moe
        chunk = Chunk(prog, router, label)
        self.chunks.append(chunk)
        return chunk

    def _pass(self, n: int, ids, p0: int) -> None:
        cfg, s = self.cfg, self.s
        A = cfg.attn
        T, d = len(ids), s.head_dim
        lay = _layout(s, T)
        hl, row, out = lay["hl"], lay["row"], lay["out"]
        X, Hn, U, Att, L = (lay[k] for k in ("X", "Hn", "U", "Att", "L"))
        steps = A.max_step_tokens
        for i in range(s.layers):
            at = self.layer_addr[i]
            ch = self._chunk(at["moe_weights"], f"pass {n} layer {i}")
            prog = ch.prog
            if i == 0:
                if n == 0:
                    for _ in range(s.layers):
                        prog.attn(AttnOp.ALLOC)
                prog.load(X, self.weights["model.embed_tokens.weight"][ids])
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
            for t, c in _groups(T, steps):
                prog.attn(AttnOp.STEP, seq=i, count=c, a=U + t * row, row=row,
                          dst=Att + t * out, value=window)
            for t, c in _groups(T, cfg.linear.tokens):
                prog.cmd(Op.LINEAR, a=Att + t * out, dst=Hn + t * hl, count=c, k=out * LINE,
                         n=s.hidden, bias=int(s.bias), addr=at["o"])
            prog.cmd(Op.ADD, a=X, b=Hn, dst=X, count=T * hl)
            for t, c in _groups(T, cfg.linear.tokens):
                prog.cmd(Op.NORM, a=X + t * hl, dst=Hn + t * hl, count=c, addr=at["norm2"])
            for t, c in _groups(T, cfg.moe.tokens):
                prog.cmd(Op.MOE, a=Hn + t * hl, dst=Hn + t * hl, count=c, addr=at["moe"])
            prog.cmd(Op.ADD, a=X, b=Hn, dst=X, count=T * hl)
            prog.cmd(Op.OUT, a=X, count=T * hl)
            ch.outs.append((f"layer {i}", T * hl))
        last = X + (T - 1) * hl
        prog.cmd(Op.NORM, a=last, dst=Hn, count=1, addr=self.norm_addr)
        prog.cmd(Op.LINEAR, a=Hn, dst=L, count=1, k=s.hidden, n=s.vocab, addr=self.head_addr)
        prog.cmd(Op.OUT, a=L, count=s.vocab // LINE)
        ch.outs.append(("logits", s.vocab // LINE))
        prog.cmd(Op.ARGMAX, a=L, count=s.vocab // LINE)

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
    KV cache and sequences kept; the layer's router written on ``wr``), every ``OUT`` line
    (each layer's hidden states, each pass's logits) bit for bit against the golden layer
    model, each pass's ``ARGMAX`` answer the golden model's token, and every answer,
    request and handshake's cycle against the engine's golden and timed models, on the
    workload's memory with streams that keep up."""
    ctx = context()
    spec = json.loads(os.environ[ENV_GENERATE])
    gen = Generation(ctx.config, spec["config"], model_weights(spec), spec["prompt"],
                     int(spec["steps"]))
    model = gen.image.golden()
    cycles = model_cycles = 0
    tokens = []
    for k, ch in enumerate(gen.chunks):
        ch.prog.router = ch.router
        m = await run_program(dut, ctx, f"test_generate[{ch.label}]", ch.prog, gaps=False,
                              model=model, reset_first=k == 0, want=gen.expected(k))
        cycles += m["cycles"]
        model_cycles += m["model_cycles"]
        # The pass's token: the engine model's ARGMAX answer, which run_program held the
        # RTL's resp to (its index field) bit for bit.
        if ch.prog.commands[-1]["op"] == Op.ARGMAX:
            tokens.append(model.answer[2])
    if tokens != gen.tokens.tolist():
        raise Failure(Kind.DATA, f"test_generate: the engine's tokens {tokens} are not the "
                                 f"golden model's {gen.tokens.tolist()}")
    record("test_generate", tokens=tokens, prompt=gen.prompt.tolist(),
           cycles=cycles, model_cycles=model_cycles, programs=len(gen.chunks),
           commands=sum(len(ch.prog.commands) for ch in gen.chunks))
