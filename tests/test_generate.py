"""``scoville generate``: a tiny model's generation as the decoder block's programs
(:mod:`scoville.testbenches.generate`), their golden model against the layer model bit for
bit, the RTL run through the command, and its bad input."""

import json

import numpy as np
import pytest

from scoville.cli import main
from scoville.rtl.decoder import LINE, DecoderConfig, Op
from scoville.rtl.lib.params import build_config
from scoville.sim.golden import decoder as golden
from scoville.testbenches.generate import Generation, engine_params, formats_of, image_words


def _engine_run(gen: Generation) -> list[list[np.ndarray]]:
    """Each program's ``OUT`` lines, float32, from the engine's golden model run over every
    program in turn (one model: its memories, cache and sequences carried on)."""
    model = gen.image.golden()
    outs = []
    for ch in gen.chunks:
        xs, got = iter(ch.prog.x), []
        for c in ch.prog.commands:
            status, o = model.apply(c, next(xs).view(np.uint32) if c["op"] == Op.IN else None)
            assert status == 0, (ch.label, c)
            if o is not None:
                got.append(o.view(np.float32))
            if c["op"] == Op.ARGMAX:
                got.append(model.answer[2])
        outs.append(got)
    return outs


@pytest.mark.parametrize(("name", "prompt_len", "steps"), [
    ("tiny-gpt-oss", 1, 3), ("tiny-gpt-oss", 12, 4), ("tiny-deepseek", 1, 3),
    ("tiny-deepseek", 12, 3)])
def test_programs_compute_the_layer_model_bit_for_bit(name, prompt_len, steps):
    """The engine running the programs (its golden model) gives every layer's hidden states
    and every pass's logits of the golden layer model in the engine's formats, bit for bit;
    the tokens are the golden ``generate``'s. GPT-OSS with a prompt longer than the sliding
    layer's window (8): the window slides in prefill and decode; DeepSeek's MLA over more
    tokens than a projection takes (8), its dense layer then its MoE layer."""
    config = golden.tiny_config(name)
    weights = golden.random_weights(config, 3)
    cfg = build_config(DecoderConfig, engine_params(config, prompt_len, prompt_len + steps))
    prompt = np.random.default_rng(prompt_len).integers(0, 256, prompt_len)
    gen = Generation(cfg, config, weights, prompt, steps)
    tokens, logits = golden.generate(config, weights, prompt, steps, formats=formats_of(cfg))
    assert np.array_equal(gen.tokens, tokens)
    assert np.array_equal(gen.logits.view(np.uint32), logits.view(np.uint32))
    assert len(gen.chunks) == steps * 2
    runs = _engine_run(gen)
    assert [got.pop() for got in runs[1::2]] == tokens.tolist()     # ARGMAX's answers
    for k, got in enumerate(runs):
        want = gen.expected(k)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g.view(np.uint32), w.view(np.uint32)), gen.chunks[k].label


def test_the_layers_own_windows_matter():
    """Without the sliding layer's window on its steps, the engine's results differ (the
    window is carried by the programs, not by the config)."""
    config = golden.tiny_config("tiny-gpt-oss")
    weights = golden.random_weights(config, 3)
    cfg = build_config(DecoderConfig, engine_params(config, 12, 14))
    assert cfg.attn.window == 0
    gen = Generation(cfg, config, weights, np.arange(12), 2)
    for ch in gen.chunks:
        for c in ch.prog.commands:
            if c["op"] == Op.ATTN and c["value"] and c["aop"] == 3:
                c["value"] = 0
    got = _engine_run(gen)
    assert not np.array_equal(got[0][0], gen.expected(0)[0])


def test_engine_params_follow_the_model():
    config = golden.tiny_config("tiny-gpt-oss")
    cfg = build_config(DecoderConfig, engine_params(config, 16, 20))
    assert (cfg.hidden, cfg.attn.q_heads, cfg.attn.kv.kv_heads, cfg.attn.kv.head_dim) == \
        (64, 4, 2, 16)
    assert cfg.linear.n_max >= 256 and cfg.rope.dim == 16 and cfg.attn.sinks == 1
    assert cfg.act_lines * LINE >= 20 * 64


@pytest.mark.parametrize(("argv", "match"), [
    (["--model", "tiny-llama"], "--model tiny-llama: no such built-in model or file; allowed: "
                                "tiny-gpt-oss, tiny-deepseek, or a Hugging Face config.json"),
    (["--weights", "w.safetensors"], "--weights w.safetensors: allowed only with --model"),
    (["--prompt-len", "0"], "--prompt-len 0: allowed 1..64"),
    (["--tokens", "65"], "--tokens 65: allowed 1..64"),
    (["--seed", "-1"], "--seed -1: allowed 0 or more"),
])
def test_bad_input_is_one_line(capsys, argv, match):
    import re

    assert main(["generate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(match, err), err


def test_a_config_file_needs_weights_and_a_known_model_type(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(golden.tiny_config("tiny-gpt-oss")))
    assert main(["generate", "--model", str(path)]) == 2
    assert "needs --weights" in capsys.readouterr().err
    path.write_text(json.dumps({**golden.tiny_config("tiny-gpt-oss"), "model_type": "llama"}))
    assert main(["generate", "--model", str(path), "--weights", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("'model_type' = 'llama' is not allowed; allowed: 'gpt_oss', "
                        "'deepseek_v3'"), err


def test_deepseek_engine_params_follow_the_model():
    """Tiny DeepSeek on the engine: MLA's one latent key of the latent and rotary widths,
    its value the latent; DeepSeek's router with the shared expert; interleaved rotary pairs
    of the rotary width; no sinks."""
    config = golden.tiny_config("tiny-deepseek")
    cfg = build_config(DecoderConfig, engine_params(config, 12, 16))
    A = cfg.attn
    assert (A.mla, A.kv.kv_heads, A.kv.head_dim, A.rope_dim, A.v_dim, A.q_heads, A.sinks) == \
        (1, 1, 64, 32, 32, 4, 0)
    assert (cfg.moe.router, cfg.moe.shared, cfg.moe.n_group, cfg.rope.dim,
            cfg.rope.interleaved) == ("deepseek", 1, 2, 32, 1)
    assert A.scale == pytest.approx(golden.shape(config).scale)


@pytest.mark.parametrize(("change", "match"), [
    ({"rms_norm_eps": 1e-5}, r"'rms_norm_eps' = 1e-05 is not allowed in the decoder block; "
                             r"allowed: 1e-06"),
    ({"n_shared_experts": 2}, r"'n_shared_experts' = 2 is not allowed in the decoder block; "
                              r"allowed: 0, 1"),
    ({"qk_rope_head_dim": 16}, r"'qk_rope_head_dim' = 16 is not allowed in the decoder block; "
                               r"allowed: a multiple of 32"),
    ({"q_lora_rank": 96}, r"'q_lora_rank' = 96 is not allowed with hidden_size = 64 in the "
                          r"decoder block; allowed: at most hidden_size"),
    ({"num_attention_heads": 128, "num_key_value_heads": 128},
     r"'num_attention_heads' = 128 is not allowed in the decoder block with MLA; allowed: "
     r"1..64"),
    ({"intermediate_size": 16416}, r"widest projection input is 16416 values .* allowed: "
                                   r"16384"),
    ({"vocab_size": 1 << 20}, r"--prompt-len 4: a pass takes \d+ lines of activations for "
                              r"this model; allowed: 32768"),
])
def test_deepseek_engine_params_refuse_in_one_line(change, match):
    config = {**golden.tiny_config("tiny-deepseek"), **change}
    with pytest.raises(ValueError, match=match) as err:
        engine_params(config, 4, 8)
    assert "\n" not in str(err.value)


def test_mla_attention_array_divides_the_value():
    """A latent of 160 values and a rotary part of 32 (keys of 192): the attention array's
    columns divide the value (32), where 64 would not; the engine builds."""
    config = {**golden.tiny_config("tiny-deepseek"), "hidden_size": 256, "kv_lora_rank": 160}
    cfg = build_config(DecoderConfig, engine_params(config, 4, 8))
    assert cfg.attn.array.cols == 32 and cfg.attn.v_dim == 160


def test_engine_params_refuse_what_the_engine_cannot_hold():
    """A token's Q, K and V not whole lines (one KV head of 8 beside four query heads: 48
    values) is refused in one line naming the config's fields."""
    config = {**golden.tiny_config("tiny-gpt-oss"), "num_key_value_heads": 1, "head_dim": 8}
    with pytest.raises(ValueError, match=r"num_key_value_heads\) x head_dim' = 48 is not "
                                         r"allowed in the decoder block; allowed: a multiple"):
        engine_params(config, 4, 8)


@pytest.mark.parametrize(("change", "tokens"), [({}, 64), ({"head_dim": 64}, 40),
                                                ({"num_attention_heads": 32,
                                                  "num_key_value_heads": 2}, 16)])
def test_engine_params_build_and_hold_the_context(change, tokens):
    """The engine's config builds, its KV cache holds every layer's context, its activation
    memory a prompt's pass, its projections the widest K and N."""
    config = {**golden.tiny_config("tiny-gpt-oss"), **change}
    s = golden.shape(config)
    cfg = build_config(DecoderConfig, engine_params(config, tokens, 2 * tokens))
    kv = cfg.attn.kv
    assert kv.pages >= s.layers * -(-2 * tokens // kv.page_tokens)
    assert cfg.linear.n_max >= s.vocab and cfg.linear.k_max >= s.heads * s.head_dim
    assert cfg.act_lines * LINE >= tokens * (2 * s.hidden + (s.heads + 2 * s.kv_heads)
                                             * s.head_dim + s.heads * s.head_dim)


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.one_case_per_seed("whole-decoder")
@pytest.mark.parametrize(("name", "prompt_len"), [
    pytest.param("tiny-deepseek", 10, marks=pytest.mark.verilator_unless_both),
    pytest.param("tiny-gpt-oss", 10, marks=pytest.mark.verilator_unless_both)])
def test_generate_rtl(simulator, seed, name, prompt_len, capsys):
    """A tiny model through the RTL: a prompt of 10 (GPT-OSS: past the sliding window;
    DeepSeek: past a projection's 8 tokens), 3 tokens; the tokens are the golden model's (the
    engine's ARGMAX answers) and the RTL's cycles the timed model's. On Verilator unless
    ``--both-sims`` (Icarus takes six minutes or more: its compile and some 80,000 cycles of
    an engine with projections up to the vocabulary's 256); one case of the whole-decoder
    group a run (the seed's, tests/conftest.py: a build of each takes minutes). The decoder's
    fast path is within 2% of the RTL's cycles."""
    code = main(["generate", "--model", name, "--prompt-len", str(prompt_len),
                 "--tokens", "3", "--sim", simulator, "--seed", str(seed), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["passed"], report["log"]
    config = golden.tiny_config(name)
    cfg = build_config(DecoderConfig, engine_params(config, prompt_len, prompt_len + 3))
    tokens, _ = golden.generate(config, golden.random_weights(config, 0), report["prompt"], 3,
                                formats=formats_of(cfg))
    assert report["tokens"] == tokens.tolist()
    assert report["cycles"] == report["model_cycles"] > 0
    # The fast path (what the exploration reads) within its 2% of the RTL's whole run.
    assert abs(report["fast_cycles"] / report["cycles"] - 1) <= 0.02, report


@pytest.mark.parametrize("name", ["tiny-gpt-oss", "tiny-deepseek"])
def test_a_users_files_reach_the_test(tmp_path, name):
    """``--model config.json --weights model.safetensors``: the spec the test is handed reads
    back the same weights, their image is the size ``image_words`` counts, and their programs
    give the golden ``generate``'s tokens."""
    import argparse

    from scoville.generate_command import prepare
    from scoville.testbenches.generate import model_weights

    config = golden.tiny_config(name)
    weights = golden.random_weights(config, 9)
    (tmp_path / "config.json").write_text(json.dumps(config))
    golden.save(weights, tmp_path / "model.safetensors")
    args = argparse.Namespace(model=str(tmp_path / "config.json"),
                              weights=tmp_path / "model.safetensors", prompt_len=5, tokens=2,
                              seed=4)
    params, spec = prepare(args)
    got = model_weights(spec)
    assert set(got) == set(weights)
    assert all(np.array_equal(got[k], weights[k]) for k in weights)
    cfg = build_config(DecoderConfig, params)
    gen = Generation(cfg, spec["config"], got, spec["prompt"], spec["steps"])
    assert len(gen.image.image) == image_words(config, params, 7)
    tokens, _ = golden.generate(config, weights, spec["prompt"], 2, formats=formats_of(cfg))
    assert gen.tokens.tolist() == tokens.tolist()
