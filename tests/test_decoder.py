"""The decoder's golden models (its units': tests/test_rmsnorm.py, tests/test_rope.py): a layer of
GPT-OSS and of DeepSeek-V3 in both arithmetics (float64
against Hugging Face's outputs saved by ``scripts/decoder_vs_hf.py``; the hardware's against
float64 within the bound docs/decoder.md states), the cache, and generation; the ``decoder``
block's engine: its golden model op by op, its refusals, its timed model by hand, and the RTL
on both simulators."""

from pathlib import Path

import numpy as np
import pytest

from scoville.rtl.decoder import LINE, AttnOp, DecoderConfig, Op, Status
from scoville.rtl.lib.params import ParamError, build_config
from scoville.sim.cycles.decoder import fast as decoder_fast
from scoville.sim.cycles.decoder import timing as engine_timing
from scoville.sim.golden import decoder
from scoville.sim.golden import linear as linear_golden
from scoville.sim.golden import moe as moe_golden
from scoville.sim.golden import rmsnorm as rmsnorm_golden
from scoville.testbenches.decoder import Program, refusals, timed_commands
from scoville.testbenches.generate import FEWEST_STAGES
from scoville.testbenches.kit import join_words

from .script import load
from .simcheck import assert_passed, simulate

FIXTURE = Path(__file__).parent / "data" / "decoder_hf.npz"


# ---- a layer and a model ---------------------------------------------------------------------

MODELS = list(decoder.TINY)


def _layer_weights(weights, i):
    prefix = f"model.layers.{i}."
    return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}


@pytest.mark.parametrize("name", MODELS)
def test_float64_matches_hugging_face(name):
    """``fmt=None`` against Hugging Face's model in float64 (saved by
    ``scripts/decoder_vs_hf.py --fixture``): every layer's prefill output and each step's
    logits within 1e-6 of the largest (Hugging Face keeps some steps in float32 inside a
    float64 model: RoPE's angles, the RMSNorms, DeepSeek's router and its softmax), the same
    tokens."""
    data = np.load(FIXTURE)
    config = decoder.tiny_config(name)
    weights = decoder.random_weights(config, int(data["seed"]))
    prompt, hf_tokens = data[f"{name}/prompt"], data[f"{name}/tokens"]
    layers, _, _ = decoder.forward(config, weights, prompt, [None] * 2, fmt=None)
    for ours, theirs in zip(layers, data[f"{name}/prefill_layers"], strict=True):
        assert np.max(np.abs(ours - theirs)) < 1e-6 * np.max(np.abs(theirs))
    tokens, logits = decoder.generate(config, weights, prompt, len(hf_tokens), fmt=None)
    theirs = data[f"{name}/logits"]
    assert np.max(np.abs(logits - theirs)) < 1e-6 * np.max(np.abs(theirs))
    assert tokens.tolist() == hf_tokens.tolist()


@pytest.mark.parametrize("fmt", ["hw", None])
@pytest.mark.parametrize("name", MODELS)
def test_prefill_then_decode_equals_one_prefill(name, fmt):
    """The cache and positions: T tokens in one prefill give the outputs of T - 3 in a prefill
    and three decode steps after it; bit for bit in the hardware's arithmetic (every step is
    row by row, and BF16 attention's row is its decode), to rounding in float64."""
    config = decoder.tiny_config(name)
    weights = decoder.random_weights(config, 3)
    ids = np.random.default_rng(3).integers(0, 256, 11)
    whole, _, caches_whole = decoder.forward(config, weights, ids, [None] * 2, fmt)
    parts, _, caches = decoder.forward(config, weights, ids[:8], [None] * 2, fmt)
    rows = [p for p in parts[-1]]
    for t in ids[8:]:
        out, _, caches = decoder.forward(config, weights, [t], caches, fmt)
        rows.append(out[-1][0])
    got = np.stack(rows)
    if fmt == "hw":
        assert np.array_equal(got, whole[-1])
        for (ka, va), (kb, vb) in zip(caches, caches_whole, strict=True):
            assert np.array_equal(ka, kb) and np.array_equal(va, vb)
    else:
        assert np.max(np.abs(got - whole[-1])) < 1e-12 * np.max(np.abs(whole[-1]))


#: The hardware's arithmetic against float64 on the same weights (on their storage grids) and
#: inputs, largest error over the largest value, the median over seeds 1-5: the bound
#: docs/decoder.md states (``python scripts/decoder_error.py``: medians of 0.03-0.06 over 20
#: seeds). The median, because an error's tail is a token the MoE routes otherwise (a score
#: within the upstream rounding of the k-th): a whole expert's output apart.
HW_BOUND = 0.1


@pytest.mark.parametrize("name", MODELS)
def test_hardware_arithmetic_within_its_bound(name):
    config = decoder.tiny_config(name)
    layers, logits = [], []
    for seed in range(1, 6):
        weights = decoder.random_weights(config, seed)
        ids = np.random.default_rng(seed).integers(0, 256, 12)
        hw, hw_logits, _ = decoder.forward(config, weights, ids, [None] * 2, "hw")
        f64, f64_logits, _ = decoder.forward(config, weights, ids, [None] * 2, None)
        layers.append([np.max(np.abs(a - b)) / np.max(np.abs(b))
                       for a, b in zip(hw, f64, strict=True)])
        logits.append(np.max(np.abs(hw_logits - f64_logits)) / np.max(np.abs(f64_logits)))
    medians = np.median(layers, axis=0).tolist() + [float(np.median(logits))]
    assert all(1e-4 < m < HW_BOUND for m in medians), medians


def test_mla_absorbed_at_run_time_is_the_expanded_layer(monkeypatch):
    """The hardware's MLA path (q_nope W_UK per head, attention over the latents, o_lat W_UV^T)
    is Hugging Face's expanded layer: run it with every step's arithmetic in float64 (norms,
    matmuls, adds, RoPE, attention over the latent cache, the dense MLP) and it gives
    ``fmt=None``'s outputs to rounding."""
    config = decoder.tiny_config("tiny-deepseek")
    weights = decoder.random_weights(config, 5)
    w = _layer_weights(weights, 0)  # a dense layer: its MLP swapped for float64 below
    f64 = decoder._Ops(None, decoder.Formats())  # hw False: each method's float64 branch
    for name in ("cast", "norm", "matmul", "linear", "add", "rope"):
        method = getattr(decoder._Ops, name)
        monkeypatch.setattr(decoder._Ops, name, lambda self, *a, _m=method, **k:
                            _m(f64, *a, **k))

    def attend(q, k, v, *, scale, config, **_):
        assert v is None and config.mla  # V is the latents' first v_dim elements
        return decoder.attn_golden.reference(q, k, k[..., :config.v_dim], scale=scale)

    monkeypatch.setattr(decoder.attn_golden, "prefill", attend)
    def glu64(h):
        gate, up = np.split(np.asarray(h, np.float64), 2, axis=1)
        return gate / (1 + np.exp(-gate)) * up

    monkeypatch.setattr(decoder.moe_golden, "silu_glu", glu64)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 64)).astype(np.float32)
    past = decoder.layer(x[:4], w, config, layer_idx=0, positions=np.arange(4), fmt=None)[1]
    hw, _ = decoder.layer(x[4:], w, config, layer_idx=0, positions=[4, 5], cache=past,
                          fmt="hw")
    ref, _ = decoder.layer(x[4:], w, config, layer_idx=0, positions=[4, 5], cache=past,
                           fmt=None)
    assert np.max(np.abs(hw - ref)) < 1e-12 * np.max(np.abs(ref))


def test_generate_is_argmax_of_its_logits_and_feed_replaces_the_inputs():
    config = decoder.tiny_config("tiny-gpt-oss")
    weights = decoder.random_weights(config, 4)
    tokens, logits = decoder.generate(config, weights, [1, 2, 3], 4)
    assert logits.shape == (4, 256) and logits.dtype == np.float32
    assert tokens.tolist() == [int(np.argmax(r)) for r in logits]
    fed, fed_logits = decoder.generate(config, weights, [1, 2, 3], 4, feed=[9, 9, 9])
    assert np.array_equal(fed_logits[0], logits[0]) and not np.array_equal(fed_logits[1],
                                                                            logits[1])
    assert decoder.argmax(np.array([[1.0, np.nan, 3.0, 3.0]])).tolist() == [2]


@pytest.mark.parametrize(("change", "match"), [
    (lambda c: c.update(model_type="llama"), "'model_type' = 'llama'"),
    (lambda c: c.pop("hidden_size"), "'hidden_size' = None"),
    (lambda c: c.update(num_key_value_heads=3), "'num_key_value_heads' = 3"),
    (lambda c: c.update(swiglu_limit=5.0), "'swiglu_limit' = 5.0"),
    (lambda c: c.update(layer_types=["full_attention"]), "'layer_types'"),
    (lambda c: c["rope_parameters"].update(rope_type="longrope"), "rope_type' = 'longrope'"),
])
def test_bad_configs_are_one_line(change, match):
    config = decoder.tiny_config("tiny-gpt-oss")
    change(config)
    with pytest.raises(ValueError, match=match):
        weights = decoder.random_weights(decoder.tiny_config("tiny-gpt-oss"), 1)
        decoder.layer(np.zeros((1, 64)), _layer_weights(weights, 0), config, layer_idx=0,
                      positions=[0])


def test_bad_weights_inputs_and_formats_are_one_line():
    config = decoder.tiny_config("tiny-deepseek")
    weights = decoder.random_weights(config, 1)
    w = _layer_weights(weights, 1)
    x = np.zeros((2, 64))
    with pytest.raises(ValueError, match="weight 'mlp.gate.weight' is missing"):
        decoder.layer(x, {k: v for k, v in w.items() if k != "mlp.gate.weight"}, config,
                      layer_idx=1, positions=[0, 1])
    with pytest.raises(ValueError, match=r"'self_attn.o_proj.weight' has shape \(64, 32\)"):
        decoder.layer(x, {**w, "self_attn.o_proj.weight": np.zeros((64, 32))}, config,
                      layer_idx=1, positions=[0, 1])
    with pytest.raises(ValueError, match="'positions' = \\[1, 2\\]"):
        decoder.layer(x, w, config, layer_idx=1, positions=[1, 2])
    with pytest.raises(ValueError, match="'layer_idx' = 2"):
        decoder.layer(x, w, config, layer_idx=2, positions=[0, 1])
    with pytest.raises(ValueError, match="'fmt' = 'fp16'"):
        decoder.layer(x, w, config, layer_idx=1, positions=[0, 1], fmt="fp16")
    with pytest.raises(ValueError, match="'formats.kv' = 'int8'"):
        decoder.Formats(kv="int8")
    with pytest.raises(ValueError, match="'formats.chunk' = 100"):
        decoder.Formats(chunk=100)
    with pytest.raises(ValueError, match="'hidden_act' = 'gelu'"):
        decoder.layer(x, w, {**config, "hidden_act": "gelu"}, layer_idx=1, positions=[0, 1])
    with pytest.raises(ValueError, match="'ids' = \\[256\\]"):
        decoder.generate(config, weights, [256], 2)
    with pytest.raises(ValueError, match="'model' = 'tiny-llama'"):
        decoder.tiny_config("tiny-llama")


def test_docs_state_what_the_error_script_measures():
    """docs/decoder.md's table is ``scripts/decoder_error.py``'s output today."""
    doc = (Path(__file__).parent.parent / "docs" / "decoder.md").read_text()
    assert load("decoder_error").table(20, 12, 6) in doc, "run python scripts/decoder_error.py " \
        "--out docs/decoder.md"


def test_a_users_model_from_files(tmp_path):
    """A config.json and a safetensors state dict load into the same model (BF16 tensors
    widened exactly); a missing tensor, a quantized checkpoint, a bad file are one line."""
    import json

    import ml_dtypes
    from safetensors.numpy import save_file

    config = decoder.tiny_config("tiny-deepseek")
    weights = decoder.random_weights(config, 6)
    (tmp_path / "config.json").write_text(json.dumps(config))
    decoder.save(weights, tmp_path / "model.safetensors")
    got_config, got = decoder.load(tmp_path / "config.json", tmp_path / "model.safetensors")
    assert got_config == config and set(got) == set(weights)
    assert all(np.array_equal(got[k], weights[k]) for k in weights)
    # BF16 on disk (weights on the BF16 grid: the same values).
    name = "model.layers.0.self_attn.q_a_proj.weight"
    save_file({**{k: v for k, v in weights.items() if k != name},
               name: weights[name].astype(ml_dtypes.bfloat16)}, str(tmp_path / "bf16.st"))
    _, bf = decoder.load(tmp_path / "config.json", tmp_path / "bf16.st")
    assert np.array_equal(bf[name], weights[name])
    save_file({k: v for k, v in weights.items() if k != name}, str(tmp_path / "short.st"))
    with pytest.raises(ValueError, match=f"weight '{name}' is missing"):
        decoder.load(tmp_path / "config.json", tmp_path / "short.st")
    save_file({**weights, "model.layers.1.mlp.experts.gate_up_proj_blocks":
               np.zeros((2, 2), np.uint8)}, str(tmp_path / "mxfp4.st"))
    with pytest.raises(ValueError, match="MXFP4 blocks and scales"):
        decoder.load(tmp_path / "config.json", tmp_path / "mxfp4.st")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="config file .*bad.json' cannot be read"):
        decoder.load(tmp_path / "bad.json", tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="cannot be read as safetensors"):
        decoder.load(tmp_path / "config.json", tmp_path / "bad.json")


# ---- the decoder block's engine --------------------------------------------------------------

ENGINE = {"hidden": 64, "act_lines": 128, "linear.array.rows": 2, "linear.array.cols": 8,
          "linear.tokens": 4, "linear.k_max": 128, "linear.n_max": 128,
          "linear.weight_port_bits": 64, "linear.addr_bits": 14, "moe.hidden": 64,
          "moe.intermediate": 32, "moe.experts": 4, "moe.top_k": 2, "moe.tokens": 4,
          "moe.array.rows": 2, "moe.array.cols": 8, "moe.weight_port_bits": 64,
          "moe.act_fmt": "mxfp4", "moe.x_lanes": 1, "rope.dim": 16,
          # tiny GPT-OSS's attention: 4 query and 2 KV heads of 16, steps of up to 4 tokens
          "attn.kv.kv_heads": 2, "attn.kv.head_dim": 16, "attn.q_heads": 4,
          "attn.array.rows": 4, "attn.array.cols": 16, "attn.kv.banks": 2,
          "attn.kv.word_bits": 64, "attn.kv.bank_words": 1024, "attn.kv.page_tokens": 4,
          "attn.kv.max_seqs": 2, "attn.chunk": 32, "attn.q_tokens": 4}
ENGINE_CFG = build_config(DecoderConfig, ENGINE)
# The simulations of the whole block take the arrays of the fewest stages (FEWEST_STAGES, as
# scoville generate's engine: they build in about two thirds of the time); h64 keeps the
# arrays' default stages (the arrays' own tests cover every count). A whole decoder builds in
# minutes: of the six whole-decoder simulations (these two, the wide-ROPE and MLA engines
# below, the two tiny models of test_generate) one runs a CI run, the seed's
# (``one_case_per_seed("whole-decoder")``, tests/conftest.py; ``--both-sims`` runs all).


def _run(prog, cmds=None):
    model = prog.golden()
    xs = iter(prog.x)
    outs = []
    for c in cmds or prog.commands:
        ok = decoder.check(prog.cfg, c) == Status.OK
        x = next(xs).view(np.uint32) if c["op"] == Op.IN and ok else None
        outs.append(model.apply(c, x))
    return model, outs


def test_engine_ops_against_float64():
    """Each op of the engine's golden model against plain arithmetic: IN then OUT gives the
    lines back; ADD is NumPy's float32 sum; NORM within 1e-6 of float64 RMSNorm; LINEAR
    within the BF16 product bound of float64 x W^T + b and the linear block's bits; MOE the
    moe block's bits (its own tests hold it to float64), on the lines it names."""
    rng = np.random.default_rng(4)
    prog = Program(ENGINE_CFG)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    y = rng.standard_normal((3, 64)).astype(np.float32)
    wn = (1 + rng.standard_normal(64) / 4).astype(np.float32)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    prog.load(0, x)
    prog.load(6, y)
    prog.cmd(Op.ADD, a=0, b=6, dst=12, count=6)
    prog.cmd(Op.NORM, a=0, dst=18, count=3, addr=prog.norm_weight(wn))
    prog.cmd(Op.LINEAR, a=0, dst=24, count=3, k=64, n=64, bias=1,
             addr=prog.linear_weight(w, b))
    moe = moe_golden.random_weights(ENGINE_CFG.moe, rng)
    prog.cmd(Op.ROUTER, addr=prog.router_weights(moe))
    prog.cmd(Op.MOE, a=0, dst=30, count=3, addr=prog.moe_weights(moe))
    prog.cmd(Op.OUT, a=0, count=36)
    _, outs = _run(prog)
    assert all(s == Status.OK for s, _ in outs)
    got = outs[-1][1].view(np.float32)
    assert np.array_equal(got[0:6].reshape(3, 64), x)
    assert np.array_equal(got[12:18].reshape(3, 64), x + y)
    ref = rmsnorm_golden.reference(x, wn, ENGINE_CFG.eps)
    assert np.allclose(got[18:24].reshape(3, 64), ref, rtol=1e-6, atol=1e-6)
    lin = linear_golden.reference(x, w, b)
    assert np.abs(got[24:30].reshape(3, 64) - lin).max() <= 2e-2 * np.abs(lin).max()
    assert np.array_equal(got[24:30].reshape(3, 64), linear_golden.apply(x, w, b))
    assert np.array_equal(got[30:36].reshape(3, 64), moe_golden.moe(ENGINE_CFG.moe, moe, x))


@pytest.mark.parametrize(("lanes", "experts", "port"),
                         [(1, 4, 64), (4, 6, 64), (32, 4, 256), (1, 3, 64), (2, 3, 128)])
def test_router_words_are_the_documented_layout(lanes, experts, port):
    """``ROUTER``'s words (:func:`~scoville.sim.golden.decoder.router_words`) as
    ``docs/decoder.md`` lays them out, read bit by bit: beat ``b``'s column ``q`` (weight
    column ``b L + q``) from bit ``32 E q`` of the beat, expert 0 lowest; the bias beat's
    first column; beats of ``ceil(L E 32 / port)`` words, zeros above; and the golden model
    reads them back (``router_at``) as they were (the last two cases pad each beat's top
    word)."""
    cfg = build_config(DecoderConfig, {**ENGINE, "moe.x_lanes": lanes, "moe.experts": experts,
                                       "linear.weight_port_bits": port,
                                       "moe.weight_port_bits": port, "rope.dim": 32})
    H, E, L = cfg.hidden, experts, lanes
    rng = np.random.default_rng(2)
    w = rng.standard_normal((E, H)).astype(np.float32)
    b = rng.standard_normal(E).astype(np.float32)
    words = decoder.router_words(cfg, w, b)
    per = -(-L * E * 32 // port)
    assert cfg.router_beat_words == per and len(words) == (H // L + 1) * per
    bits = w.view(np.uint32)

    def beat(k):
        return sum(int(v) << (port * j) for j, v in enumerate(words[k * per:(k + 1) * per]))

    for k in range(H // L):
        value = beat(k)
        for q in range(L):
            for e in range(E):
                assert (value >> (32 * (E * q + e))) & 0xFFFFFFFF == bits[e, k * L + q]
        assert value >> (32 * E * L) == 0
    assert beat(H // L) == sum(int(v) << (32 * e) for e, v in enumerate(b.view(np.uint32)))
    model = decoder.DecoderModel(cfg, [0] * 3 + words)
    got_w, got_b = model.router_at(3)
    assert np.array_equal(got_w.view(np.uint32), bits)
    assert np.array_equal(got_b.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize(("dim", "interleaved"), [(16, 0), (16, 1), (64, 0), (64, 1)])
def test_engine_rope_against_float64(dim, interleaved):
    """ROPE rotates each named vector by its token's table row as the float64 formula does
    (to FP32's rounding), every value it does not name unchanged: two tokens of three lines,
    two vectors each from value ``off`` apart by ``stride``, rows at positions 70 and 71 of
    a YaRN table (GPT-OSS's parameters)."""
    from scoville.sim.golden import rope as rope_golden

    cfg = build_config(DecoderConfig, {**ENGINE, "rope.dim": dim,
                                       "rope.interleaved": interleaved})
    rng = np.random.default_rng(dim + interleaved)
    prog = Program(cfg)
    x = rng.standard_normal((2, 96)).astype(np.float32)
    prog.load(10, x)
    yarn = decoder.TINY["tiny-gpt-oss"]["rope_parameters"]
    cos, sin = rope_golden.table(yarn, dim, [70, 71], 131072)
    rows = np.concatenate([cos, sin], axis=1).view(np.uint32)
    per = cfg.linear.weight_port_bits // 32
    addr = prog._put([join_words(r[j:j + per].tolist(), 32) for r in rows
                      for j in range(0, dim, per)])
    off, stride = (16, 32) if dim == 16 else (0, 64)
    heads = 2 if dim == 16 else 1
    prog.cmd(Op.ROPE, a=10, count=2, heads=heads, stride=stride, off=off, row=3, addr=addr)
    prog.cmd(Op.OUT, a=10, count=6)
    _, outs = _run(prog)
    got = outs[-1][1].view(np.float32).reshape(2, 96)
    want = x.astype(np.float64)
    for h in range(heads):
        part = slice(off + h * stride, off + h * stride + dim)
        want[:, part] = rope_golden.reference(x[:, None, part], [70, 71], yarn,
                                              interleaved=bool(interleaved),
                                              max_position_embeddings=131072)[:, 0]
        assert np.array_equal(got[:, part], rope_golden.rotate(
            x[:, None, part], cos, sin, interleaved=bool(interleaved))[:, 0])
    assert np.allclose(got, want, rtol=1e-6, atol=1e-6)
    touched = np.zeros(96, bool)
    for h in range(heads):
        touched[off + h * stride: off + h * stride + dim] = True
    assert np.array_equal(got[:, ~touched], x[:, ~touched])


def test_engine_attn_against_float64():
    """ATTN: a sequence allocated, the sinks set, a step of three tokens then one of one
    (after the first step's tokens), each from rows of the query, key and value heads
    (``off`` 32 values in, 5 lines a token): every output within the BF16 bound of float64
    attention with the sinks over all tokens so far (GPT-OSS's), written token by token from
    ``dst``, the lines after them unchanged; the answers' sequences and lengths."""
    from scoville.rtl.decoder import AttnOp
    from scoville.sim.golden import attention as attn_golden

    cfg = ENGINE_CFG
    A = cfg.attn
    rng = np.random.default_rng(9)
    prog = Program(cfg)
    x = rng.standard_normal((4, 5 * 32)).astype(np.float32)
    sinks = rng.standard_normal(A.q_heads).astype(np.float32)
    prog.load(0, x)
    prog.attn(AttnOp.ALLOC)
    for h, value in enumerate(sinks):
        prog.attn(AttnOp.SINK, heads=h, value=int(value.view(np.uint32)))
    prog.attn(AttnOp.STEP, seq=0, count=3, a=0, row=5, off=32, dst=40)
    prog.attn(AttnOp.STEP, seq=0, count=1, a=15, row=5, off=32, dst=46)
    prog.cmd(Op.OUT, a=40, count=10)
    model, outs = _run(prog)
    assert [s for s, _ in outs] == [Status.OK] * len(outs)
    got = outs[-1][1].view(np.float32)
    d = A.kv.head_dim
    heads = x[:, 32:32 + (A.q_heads + 2 * A.kv.kv_heads) * d].reshape(4, -1, d)
    q, k, v = np.split(heads, [A.q_heads, A.q_heads + A.kv.kv_heads], axis=1)
    ref = attn_golden.reference(q, k.transpose(1, 0, 2), v.transpose(1, 0, 2), sinks=sinks)
    out = got[:8].reshape(4, A.q_heads, d)
    assert np.abs(out - ref).max() <= 2e-2 * np.abs(ref).max()
    assert not np.any(got[8:])       # never written (the activation memory starts at 0)
    assert [r.length for r in model.results] == [0] + [0] * A.q_heads + [3, 4]


#: Configs whose edges differ: a column tile a line wide, a token a line with a port that holds
#: its norm weights in one word, the first look.
REFUSAL_CONFIGS = [ENGINE_CFG, build_config(DecoderConfig, {**ENGINE, "linear.array.cols": 32}),
                   build_config(DecoderConfig, {**ENGINE, "hidden": 32, "act_lines": 100,
                                                "linear.weight_port_bits": 1024,
                                                "moe.hidden": 32,
                                                "moe.weight_port_bits": 1024,
                                                "rope.dim": 32})]


@pytest.mark.parametrize("cfg", REFUSAL_CONFIGS, ids=["first-look", "cols32", "h32-p1024"])
def test_a_refused_command_changes_nothing(cfg):
    """Each refusal of the testbench's list fits the command's fields, is refused with the
    status its reason names, and leaves the activations as they were."""
    rng = np.random.default_rng(cfg.hidden)
    assert len(refusals(cfg)) >= 17
    for want, fields in refusals(cfg):
        prog = Program(cfg)
        prog.load(0, rng.standard_normal((cfg.act_lines, 32)))
        prog.cmd(**fields)           # raises if a field does not fit
        model = decoder.DecoderModel(cfg, [])
        model.apply(prog.commands[0], prog.x[0].view(np.uint32))
        before = model.act.copy()
        status, _ = model.apply(prog.commands[1])
        assert status == want, fields
        assert np.array_equal(model.act, before)


@pytest.mark.parametrize(("fields", "status"), [
    ({"op": Op.ADD, "a": 0, "b": 2, "dst": 0, "count": 2}, Status.OK),     # over a, in place
    ({"op": Op.ADD, "a": 2, "b": 0, "dst": 0, "count": 2}, Status.OK),     # over b, in place
    ({"op": Op.ADD, "a": 0, "b": 2, "dst": 1, "count": 2}, Status.BAD_RANGE),
    ({"op": Op.ADD, "a": 0, "b": 0, "dst": 2, "count": 2}, Status.OK),     # touching
    ({"op": Op.NORM, "a": 0, "dst": 2, "count": 1}, Status.OK),
    ({"op": Op.NORM, "a": 0, "dst": 1, "count": 2}, Status.BAD_RANGE),
    ({"op": Op.LINEAR, "a": 0, "dst": 1, "count": 2, "k": 64, "n": 64}, Status.OK),
    ({"op": Op.OUT, "a": 127, "count": 1}, Status.OK),
    ({"op": Op.IN, "dst": 127, "count": 2}, Status.BAD_RANGE),
    ({"op": Op.LINEAR, "a": 0, "dst": 0, "count": 4, "k": 64, "n": 64}, Status.OK),
    ({"op": Op.LINEAR, "a": 0, "dst": 0, "count": 4, "k": 160, "n": 64}, Status.BAD_SHAPE),
    ({"op": Op.LINEAR, "a": 0, "dst": 0, "count": 1, "k": 64, "n": 40}, Status.BAD_SHAPE),
    # ROPE (vectors of 16 values, a table row 8 words, fetches of at most 511 words)
    ({"op": Op.ROPE, "a": 127, "count": 1, "heads": 2, "stride": 16, "row": 1}, Status.OK),
    ({"op": Op.ROPE, "a": 127, "count": 2, "heads": 1, "row": 1}, Status.BAD_RANGE),
    ({"op": Op.ROPE, "a": 0, "count": 1, "heads": 3, "stride": 16, "row": 1},
     Status.BAD_SHAPE),                                                     # past its row
    ({"op": Op.ROPE, "a": 0, "count": 1, "heads": 1, "off": 16, "row": 1}, Status.OK),
    ({"op": Op.ROPE, "a": 0, "count": 1, "heads": 1, "off": 8, "row": 1}, Status.BAD_SHAPE),
    ({"op": Op.ROPE, "a": 0, "count": 1, "heads": 2, "stride": 8, "row": 1},
     Status.BAD_SHAPE),                                                     # overlapping
    ({"op": Op.ROPE, "a": 0, "count": 1, "heads": 0, "row": 1}, Status.BAD_SHAPE),
    ({"op": Op.ROPE, "a": 0, "count": 63, "heads": 1, "row": 1}, Status.OK),
    ({"op": Op.ROPE, "a": 0, "count": 64, "heads": 1, "row": 1}, Status.BAD_SHAPE),
    ({"op": Op.ROPE, "count": 1, "heads": 1, "row": 1, "addr": (1 << 14) - 8}, Status.OK),
    ({"op": Op.ROPE, "count": 1, "heads": 1, "row": 1, "addr": (1 << 14) - 7},
     Status.BAD_SHAPE),
    # ATTN (4 query and 2 KV heads of 16: 128 values, 4 lines a token; outputs 2 lines)
    ({"op": Op.ATTN, "aop": 0}, Status.OK),                                 # alloc
    ({"op": Op.ATTN, "aop": 3, "count": 2, "a": 120, "row": 4, "dst": 124}, Status.OK),
    ({"op": Op.ATTN, "aop": 3, "count": 2, "a": 121, "row": 4}, Status.BAD_RANGE),
    ({"op": Op.ATTN, "aop": 3, "count": 2, "row": 4, "dst": 125}, Status.BAD_RANGE),
    ({"op": Op.ATTN, "aop": 3, "count": 0, "row": 4}, Status.BAD_RANGE),
    ({"op": Op.ATTN, "aop": 3, "count": 1, "row": 4, "off": 16}, Status.BAD_SHAPE),
    ({"op": Op.ATTN, "aop": 3, "count": 1, "row": 5, "off": 16}, Status.OK),
    ({"op": Op.ATTN, "aop": 3, "count": 1, "row": 5, "off": 8}, Status.BAD_SHAPE),
    ({"op": Op.ATTN, "aop": 2, "count": 2, "row": 4}, Status.BAD_SHAPE),    # append of two
    ({"op": Op.ATTN, "aop": 2, "count": 1, "row": 4, "dst": 127}, Status.OK),
    ({"op": Op.ATTN, "aop": 3, "count": 9, "row": 4}, Status.OK),  # the attention refuses it
    ({"op": Op.ATTN, "aop": 6, "count": 0}, Status.OK),             # the attention refuses it
    ({"op": Op.MOE, "a": 126, "dst": 0, "count": 1}, Status.OK),            # the last token
    ({"op": Op.MOE, "a": 127, "dst": 0, "count": 1}, Status.BAD_RANGE),
    ({"op": Op.MOE, "a": 0, "dst": 126, "count": 2}, Status.BAD_RANGE),
    ({"op": Op.MOE, "a": 0, "dst": 1, "count": 4}, Status.OK),              # over its x
    ({"op": Op.MOE, "a": 0, "dst": 0, "count": 5}, Status.BAD_SHAPE),
    ({"op": Op.MOE, "count": 1, "addr": (1 << 14) - ENGINE_CFG.moe_words}, Status.OK),
    ({"op": Op.MOE, "count": 1, "addr": (1 << 14) - ENGINE_CFG.moe_words + 1},
     Status.BAD_SHAPE),
    # ARGMAX (a vocabulary of 1024: 32 lines a token)
    ({"op": Op.ARGMAX, "a": 96, "count": 32}, Status.OK),
    ({"op": Op.ARGMAX, "a": 97, "count": 32}, Status.BAD_RANGE),
    ({"op": Op.ARGMAX, "a": 0, "count": 31}, Status.BAD_SHAPE),
    ({"op": Op.ARGMAX, "a": 0, "count": 0}, Status.BAD_RANGE),
    # NORM of narrower tokens, apart (hidden 64: two lines a token)
    ({"op": Op.NORM, "a": 0, "dst": 0, "count": 3, "k": 32, "row": 5}, Status.OK),
    ({"op": Op.NORM, "a": 117, "dst": 0, "count": 3, "k": 32, "row": 5}, Status.OK),
    ({"op": Op.NORM, "a": 118, "dst": 0, "count": 3, "k": 32, "row": 5}, Status.BAD_RANGE),
    ({"op": Op.NORM, "a": 0, "dst": 1, "count": 3, "k": 32, "row": 5}, Status.BAD_RANGE),
    ({"op": Op.NORM, "a": 0, "dst": 11, "count": 3, "k": 32, "row": 5}, Status.OK),
    ({"op": Op.NORM, "a": 0, "dst": 0, "count": 1, "k": 48}, Status.BAD_SHAPE),
    ({"op": Op.NORM, "a": 0, "dst": 0, "count": 1, "k": 96}, Status.BAD_SHAPE),
    ({"op": Op.NORM, "a": 0, "dst": 0, "count": 2, "row": 1}, Status.BAD_SHAPE),
    ({"op": Op.NORM, "a": 0, "dst": 0, "count": 2, "row": 2}, Status.OK),
    ({"op": Op.NORM, "count": 1, "k": 32, "addr": (1 << 14) - 16}, Status.OK),
    ({"op": Op.NORM, "count": 1, "k": 32, "addr": (1 << 14) - 15}, Status.BAD_SHAPE),
    # LINEAR's tokens apart: x a stride, outputs a row
    ({"op": Op.LINEAR, "a": 0, "dst": 0, "count": 2, "k": 64, "n": 32, "stride": 3, "row": 4},
     Status.OK),
    ({"op": Op.LINEAR, "a": 123, "dst": 0, "count": 2, "k": 64, "n": 32, "stride": 3},
     Status.OK),
    ({"op": Op.LINEAR, "a": 124, "dst": 0, "count": 2, "k": 64, "n": 32, "stride": 3},
     Status.BAD_RANGE),
    ({"op": Op.LINEAR, "a": 0, "dst": 123, "count": 2, "k": 32, "n": 64, "row": 3},
     Status.OK),
    ({"op": Op.LINEAR, "a": 0, "dst": 124, "count": 2, "k": 32, "n": 64, "row": 3},
     Status.BAD_RANGE),
    ({"op": Op.LINEAR, "a": 0, "dst": 0, "count": 2, "k": 64, "n": 32, "stride": 1},
     Status.BAD_SHAPE),
    ({"op": Op.LINEAR, "a": 0, "dst": 0, "count": 2, "k": 32, "n": 64, "row": 1},
     Status.BAD_SHAPE),
    # GLU: ADD's ranges
    ({"op": Op.GLU, "a": 0, "b": 4, "dst": 0, "count": 4}, Status.OK),
    ({"op": Op.GLU, "a": 0, "b": 4, "dst": 1, "count": 4}, Status.BAD_RANGE),
    ({"op": Op.GLU, "a": 0, "b": 125, "dst": 8, "count": 4}, Status.BAD_RANGE),
    ({"op": 11, "a": 0, "count": 1}, Status.BAD_OP),
    ({"op": Op.ROUTER, "addr": 0}, Status.OK),            # no lines: its count ignored
    ({"op": Op.ROUTER, "addr": 0, "count": 3, "a": 2000}, Status.OK),
    ({"op": Op.ROUTER, "addr": (1 << 14) - 130}, Status.OK),      # its last word the top
    ({"op": Op.ROUTER, "addr": (1 << 14) - 129}, Status.BAD_SHAPE),
    ({"op": 15}, Status.BAD_OP),
])
def test_engine_checks(fields, status):
    """In place is allowed, a write that overtakes a read is not (ADD, GLU and NORM; LINEAR
    holds its x first); the edges of the memory, a strided walk's from its first line to its
    last; the projections' shapes and tokens apart; a NORM's width; ROPE's vectors within
    their rows, on their grid, apart, and its table within one fetch and the memory."""
    cmd = {f: 0 for f in decoder.COMMAND_FIELDS} | fields
    assert decoder.check(ENGINE_CFG, cmd) == status


def test_engine_timing_by_hand():
    """Hand-worked cycles, every stream keeping up: IN of 3 lines taken in cycle 0 runs
    cycles 1-3 (its lines), counts them at 4, answers at 5; OUT of 2 lines next (taken at 6)
    gives them at 7 and 8, answers at 10; a refused command is answered the cycle after it
    is taken."""
    cmds = [{"op": Op.IN, "dst": 0, "count": 3}, {"op": Op.OUT, "a": 0, "count": 2},
            {"op": Op.IN, "count": 0}]
    t = engine_timing(ENGINE_CFG, cmds)
    assert t.handshakes["x"] == [1, 2, 3]
    assert t.handshakes["resp"] == [5, 10, 12]
    assert t.handshakes["cmd"] == [0, 6, 11]
    assert t.handshakes["o"] == [7, 8]
    assert t.counters == {"commands": 2, "refused": 1, "weight_words": 0}


def test_engine_argmax_by_hand():
    """ARGMAX of a token's 32 lines (1024 logits): the lowest index of the largest (NaN never
    chosen, -0 equal to +0), in the answer's index; its lines taken in cycles 1-32 (every
    stream keeping up), the answer valid the argmax's four cycles after the last (36: its
    latency unset at 32 lanes) and taken then, counted the cycle after, offered on ``resp``
    the cycle after that."""
    rng = np.random.default_rng(4)
    model = decoder.DecoderModel(ENGINE_CFG)
    cases = []
    x = rng.standard_normal(1024).astype(np.float32)
    cases.append((x, int(np.argmax(x))))
    y = x.copy()
    y[[5, 900]] = 9.0
    y[0] = np.nan
    cases.append((y, 5))
    cases.append((np.full(1024, np.nan, np.float32), 0))
    z = np.full(1024, -1.0, np.float32)
    z[[7, 8]] = [-0.0, 0.0]
    cases.append((z, 7))
    for logits, want in cases:
        model.apply({"op": Op.IN, "dst": 0, "count": 32}, logits.view(np.uint32).reshape(32, 32))
        assert model.apply({"op": Op.ARGMAX, "a": 0, "count": 32}) == (Status.OK, None)
        assert model.answer == (0, 0, want)
    t = engine_timing(ENGINE_CFG, [{"op": Op.ARGMAX, "a": 0, "count": 32}])
    assert ENGINE_CFG.argmax.latency == 4
    assert t.handshakes["resp"] == [38]
    assert decoder_fast(ENGINE_CFG, [{"op": Op.ARGMAX, "a": 0, "count": 32}], 1, 8)["cycles"] \
        == 39


@pytest.mark.parametrize(("params", "match"), [
    ({"hidden": 48}, "'hidden' = 48 is not allowed; allowed: a multiple of 32"),
    ({"linear.array.cols": 64, "linear.n_max": 1024},
     "'linear.array.cols' = 64 is not allowed"),
    ({"act_lines": 8}, "act_lines"),
    ({"eps": 0.0}, "eps"),
    ({"hidden": 8192, "moe.hidden": 8192, "moe.experts": 128, "linear.addr_bits": 32},
     "'moe.experts' = 128 is not allowed with moe.hidden = 8192, moe.x_lanes = 32 and "
     r"linear.weight_port_bits = 256: the router's weights \(131584 words\) must fit one fetch "
     "command; allowed: at most 63"),
    ({"hidden": 128}, "'moe.hidden' = 256 is not allowed; allowed: 128"),
    ({"moe.x_fmt": "bf16"}, "'moe.x_fmt' = 'bf16' is not allowed; allowed: 'fp32'"),
    ({"moe.array.cols": 64, "moe.hidden": 256},
     "'moe.array.cols' = 64 is not allowed; allowed: 2, 4, 8, 16, 32"),
    ({**ENGINE, "linear.addr_bits": 10}, "'linear.addr_bits' = 10 is not allowed with this MoE"),
    ({"moe.weight_port_bits": 64}, "'moe.weight_port_bits' = 64 is not allowed; allowed: 256"),
    ({"attn.kv.head_dim": 48}, "'attn.kv.head_dim' = 48 is not allowed; allowed: a divisor"),
    ({"attn.mla": 1, "attn.kv.kv_heads": 1, "attn.kv.head_dim": 64, "attn.rope_dim": 16,
      "attn.kv.k_only": 1},
     "'attn.rope_dim' = 16 is not allowed with attn.mla = 1 and attn.kv.head_dim = 64"),
    ({"glu_lanes": 3}, "'glu_lanes' = 3 is out of range; allowed: 1, 2, 4, 8, 16, 32"),
    ({"attn.array.fmt": "mxfp8"}, "'attn.array.fmt' = 'mxfp8' is not allowed in the RTL"),
])
def test_engine_config_errors_are_one_line(params, match):
    with pytest.raises(ParamError, match=match) as err:
        build_config(DecoderConfig, params)
    assert "\n" not in str(err.value)


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.one_case_per_seed("whole-decoder")
@pytest.mark.parametrize("params", [
    ENGINE,
    # three lines a token, four columns, a wide port, a slow far memory, heavy gaps and
    # back-pressure
    {**ENGINE, "hidden": 96, "linear.array.cols": 4, "linear.k_max": 96, "linear.n_max": 96,
     "linear.weight_port_bits": 128, "moe.hidden": 96, "moe.weight_port_bits": 128,
     "moe.router": "deepseek", "moe.n_group": 2, "moe.topk_group": 1, "moe.shared": 1,
     "moe.routed_scaling_factor": 2.5, "moe.array.cols": 4, "moe.x_lanes": 4,
     "mem_latency": 100,
     "mem_bytes_per_cycle": 4, "gap": 0.8, "backpressure": 0.8, "commands": 6,
     "rope.dim": 8, "rope.interleaved": 1, "rope.latency": 1,
     # decode steps of one KV head of a line (32 values) and one query head (a token's
     # query, key and value: the 96 values of the up projection), a window of 6
     "attn.mode": "decode", "attn.kv.kv_heads": 1, "attn.kv.head_dim": 32, "attn.q_heads": 1,
     "attn.array.rows": 2, "attn.array.cols": 32, "attn.window": 6, "attn.sinks": 0,
     **FEWEST_STAGES},
], ids=["h64", "h96-heavy"])
def test_decoder_rtl(simulator, seed, params):
    """The engine's programs (every op, refusals, ties) through the RTL, bit for bit against
    the golden model and every handshake where the timed model puts it: h64 at the arrays'
    default stages, h96-heavy at their fewest, with heavy gaps and back-pressure and a far
    memory. One case of the whole-decoder group a run."""
    assert_passed(simulate("decoder", simulator, seed, **params))


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.one_case_per_seed("whole-decoder")
@pytest.mark.parametrize("params", [
    # ROPE's and the attention's vectors of two lines (joined, split), interleaved pairs,
    # two query heads on one KV head (256 values a token), P V in two column tiles of 32
    pytest.param({**ENGINE, "rope.dim": 64, "rope.interleaved": 1, "rope.latency": 3,
                  "linear.k_max": 256, "linear.n_max": 256, "attn.kv.kv_heads": 1,
                  "attn.kv.head_dim": 64, "attn.q_heads": 2, "attn.array.rows": 2,
                  "attn.array.cols": 32, "glu_lanes": 1, **FEWEST_STAGES},
                 marks=pytest.mark.verilator_unless_both),
    # MLA (DeepSeek's absorbed attention): four query heads and one latent key of 64 values
    # (two lines; its first 32 the value), a line's ROPE (rotary 32); GLU a line a beat;
    # three experts: a router beat of 96 bits, its top word padded
    pytest.param({**ENGINE, "rope.dim": 32, "rope.interleaved": 1, "linear.k_max": 384,
                  "linear.n_max": 384, "attn.mla": 1, "attn.rope_dim": 32,
                  "attn.kv.kv_heads": 1, "attn.kv.head_dim": 64, "attn.kv.k_only": 1,
                  "attn.q_heads": 4, "attn.array.rows": 4, "attn.array.cols": 32,
                  "attn.sinks": 0, "glu_lanes": 32, "moe.experts": 3,
                  "linear.addr_bits": 18, **FEWEST_STAGES},
                 marks=pytest.mark.verilator_unless_both),
], ids=["rope64", "mla"])
def test_decoder_rtl_wide_rope(simulator, seed, params):
    """ROPE's 64 or 32 FP32 rotations a vector take Icarus minutes to compile: Verilator
    alone unless ``--both-sims``; one case of the whole-decoder group a run (the seed's). The first
    also runs heads of 64 values through the attention (its gatherers join two lines, its
    outputs split into two, P V in two column tiles) and GLU a lane a beat; the second MLA,
    GLU a line a beat and a padded router
    beat."""
    assert_passed(simulate("decoder", simulator, seed, **params))


def test_rope_fast_path_is_the_cycle_model():
    """ROPE commands alone, on vectors within a line, a line, and two and four lines, table
    rows of one to 64 words, memories near and far: the fast path's cycles are the cycle
    model's."""
    from scoville.sim.cycles.decoder import fast
    from scoville.sim.cycles.memory import MemoryAgent

    for dim, lat, port in ((16, 2, 64), (32, 3, 256), (64, 2, 64), (128, 4, 256), (8, 1, 256)):
        cfg = build_config(DecoderConfig, {**ENGINE, "rope.dim": dim, "rope.latency": lat,
                                           "act_lines": 4096, "linear.weight_port_bits": port,
                                           "moe.weight_port_bits": port})
        for heads, count in ((1, 1), (8, 2), (3, 5)):
            row = heads * cfg.rope_lines
            cmds = [{"op": Op.ROPE, "count": count, "heads": heads, "stride": dim,
                     "row": row}] * 2
            for latency, bpc in ((1, 8), (100, 2), (500, 32)):
                model = engine_timing(cfg, cmds, memory=MemoryAgent(latency, bpc, port))
                assert fast(cfg, cmds, latency, bpc)["cycles"] == model.cycles, (
                    dim, heads, count, latency, bpc)


@pytest.mark.parametrize(("lanes", "experts", "buffer"), [(1, 4, 64), (32, 4, 64), (4, 3, 32)])
def test_router_and_norm_fast_path_is_the_cycle_model(lanes, experts, buffer):
    """A ROUTER and a NORM (of H and of a line) alone, their words within the fetch buffer and
    past it, memories near and far: the fast path's cycles are the cycle model's."""
    from scoville.sim.cycles.memory import MemoryAgent

    cfg = build_config(DecoderConfig, {**ENGINE, "moe.x_lanes": lanes, "moe.experts": experts,
                                       "linear.fetch_buffer": buffer})
    assert cfg.router_words > buffer
    cmds = ([{"op": Op.ROUTER, "addr": 7}], [{"op": Op.NORM, "count": 2, "dst": 8, "addr": 3}],
            [{"op": Op.NORM, "count": 1, "k": LINE, "dst": 8, "addr": 3}])
    for cmd in cmds:
        for latency, bpc in ((1, 8), (20, 4), (100, 8), (300, 2)):
            model = engine_timing(cfg, cmd, memory=MemoryAgent(latency, bpc, 64))
            assert decoder_fast(cfg, cmd, latency, bpc)["cycles"] == model.cycles, (
                cmd, latency, bpc)


def _fast_cases():
    rng = np.random.default_rng(11)
    for _ in range(8):
        rows, cols = int(rng.choice([1, 2, 8])), int(rng.choice([4, 8, 16]))
        port, hidden = int(rng.choice([64, 128, 256])), int(rng.choice([64, 96, 256]))
        latency, bpc = int(rng.choice([1, 20, 500])), int(rng.choice([2, 8, 32]))
        # the memory's queue holds a round trip (the fast path's domain)
        bpc = min(bpc, 256 * port // 8 // latency)
        buffer = int(max(64, latency * min(1.0, bpc / (port // 8)) + 64))
        cfg = build_config(DecoderConfig, {
            "hidden": hidden, "act_lines": 1024, "linear.array.rows": rows,
            "linear.array.cols": cols, "linear.tokens": 8, "linear.k_max": 256,
            "linear.n_max": 256, "linear.weight_port_bits": port,
            "linear.fetch_buffer": buffer, "moe.hidden": hidden, "moe.weight_port_bits": port,
            "moe.intermediate": 64, "moe.experts": 8, "moe.top_k": 2, "moe.tokens": 8,
            "moe.array.rows": rows, "moe.array.cols": cols, "moe.fetch_buffer": buffer})
        yield cfg, int(rng.integers(1, 9)), latency, bpc, int(rng.integers(0, 1000))


@pytest.mark.parametrize("case", list(_fast_cases()), ids=lambda c: f"h{c[0].hidden}-"
                         f"{c[0].linear.array.rows}x{c[0].linear.array.cols}-"
                         f"p{c[0].linear.weight_port_bits}-L{c[2]}-b{c[3]}-t{c[1]}")
def test_engine_fast_path_within_2_percent_of_the_cycle_model(case):
    """A layer's shape then random commands, on random configs and memories: the fast path's
    cycles within 2% of the cycle model's, its weight words exact."""
    from scoville.sim.cycles.decoder import fast
    from scoville.sim.cycles.memory import MemoryAgent
    from scoville.testbenches.decoder import layer, random_commands

    cfg, tokens, latency, bpc, seed = case
    rng = np.random.default_rng(seed)
    prog = Program(cfg)
    layer(prog, rng, tokens)
    random_commands(prog, rng, 6)
    golden, _ = _run(prog)
    cmds = timed_commands(cfg, prog.commands, golden)
    model = engine_timing(cfg, cmds,
                          memory=MemoryAgent(latency, bpc, cfg.linear.weight_port_bits))
    got = fast(cfg, cmds, latency, bpc)
    assert abs(got["cycles"] / model.cycles - 1) <= 0.02, (got["cycles"], model.cycles)
    assert got["weight_words"] == model.counters["weight_words"]


@pytest.mark.parametrize(("length", "window"), [(9, 0), (40, 0), (40, 6)])
def test_a_synthetic_step_takes_the_same_cycles_in_the_fast_path_and_the_cycle_model(
        length, window):
    """The benchmark's attention steps (:func:`~scoville.sim.cycles.attention
    .synthetic_step`: a cache's reads without its values) run through the engine's fast
    path and its cycle model alike, a step's own window too."""
    from scoville.sim.cycles import attention as attention_timed
    from scoville.sim.cycles.memory import MemoryAgent

    cfg = ENGINE_CFG
    rows = -(-(cfg.attn.q_heads + cfg.attn_vectors) * cfg.attn.kv.head_dim // LINE)
    step = attention_timed.synthetic_step(cfg.attn, length, window=window)
    cmds = [{"op": Op.ATTN, "aop": AttnOp.STEP, "count": 1, "a": 0, "row": rows, "dst": 20,
             "value": window, "result": step}]
    model = engine_timing(cfg, cmds, memory=MemoryAgent(20, 8, 64))
    assert decoder_fast(cfg, cmds, 20, 8)["cycles"] == model.cycles
