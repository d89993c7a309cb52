"""The decoder's float64 golden model (``fmt=None``) against Hugging Face transformers'
``GptOssForCausalLM`` and ``DeepseekV3ForCausalLM`` run in float64, and its hardware
arithmetic (``fmt="hw"``) against both.

    pip install -e '.[hf]'          # torch (CPU) and transformers, only for this script
    python scripts/decoder_vs_hf.py [--seed 1] [--prompt-len 12] [--tokens 6] [--out FILE]
                                    [--fixture tests/data/decoder_hf.npz]

For each built-in tiny model, on the same seeded weights (``decoder.random_weights``): Hugging
Face's model is built from the config dict (eager attention, float64) and loaded with the
state dict; both run the prompt in one prefill and then decode, greedily. Compared: every
layer's output hidden states at every step (a forward hook on each decoder layer; ours through
``decoder.layer`` with its cache: a decode step's outputs depend on what the cache holds and on
the positions, so those are checked through them), the logits of each step, and the tokens.
Errors are relative to the largest absolute value of what is compared. Prints a Markdown
table (``--out`` writes it into that file between the markers ``<!-- decoder_vs_hf -->``).
``--fixture`` saves Hugging Face's side (the prompt, its tokens, the logits of each step,
every layer's output in the prefill) for ``tests/test_decoder.py``, which checks ``fmt=None``
against it with no torch installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from decoder_error import write_between

from scoville.sim.golden import decoder


def _hf_model(config: dict, weights: dict):
    import torch
    import transformers

    kind = {"gpt_oss": transformers.GptOssConfig, "deepseek_v3": transformers.DeepseekV3Config}
    model_class = {"gpt_oss": transformers.GptOssForCausalLM,
                   "deepseek_v3": transformers.DeepseekV3ForCausalLM}
    fields = {k: v for k, v in config.items() if k != "model_type"}
    hf_config = kind[config["model_type"]](**fields)
    hf_config._attn_implementation = "eager"
    if hasattr(hf_config, "_experts_implementation"):
        hf_config._experts_implementation = "eager"
    torch.manual_seed(0)
    model = model_class[config["model_type"]](hf_config).to(torch.float64).eval()
    state = model.state_dict()
    missing = set(state) - set(weights)
    extra = set(weights) - set(state)
    if missing or extra:
        raise SystemExit(f"state dicts differ: ours lacks {sorted(missing)}, has extra "
                         f"{sorted(extra)}")
    model.load_state_dict({k: torch.from_numpy(np.asarray(v, np.float64))
                           for k, v in weights.items()})
    return model


def _hf_run(model, prompt, steps: int):
    """Greedy generation in Hugging Face's model: per step the logits and each layer's
    output."""
    import torch
    from transformers import DynamicCache

    captured = []
    hooks = [layer.register_forward_hook(
        lambda _m, _i, out, i=i: captured.append((i, (out[0] if isinstance(out, tuple)
                                                      else out)[0].detach().numpy())))
        for i, layer in enumerate(model.model.layers)]
    cache = DynamicCache(config=model.config)
    ids = torch.tensor([list(prompt)])
    steps_out = []
    pos = 0
    with torch.no_grad():
        for _ in range(steps):
            captured.clear()
            positions = torch.arange(pos, pos + ids.shape[1])[None]
            out = model(input_ids=ids, cache=cache, use_cache=True,
                        position_ids=positions)
            logits = out.logits[0, -1].numpy()
            layers = [h for _, h in sorted(captured, key=lambda c: c[0])]
            token = int(np.argmax(logits))
            steps_out.append((logits, layers, token))
            pos += ids.shape[1]
            ids = torch.tensor([[token]])
    for h in hooks:
        h.remove()
    return steps_out


def _ours(config, weights, prompt, steps, fmt, tokens):
    """Our model step by step (:func:`decoder.forward`), decoding ``tokens`` (Hugging Face's),
    so a diverged token does not change what is compared."""
    caches = [None] * decoder.shape(config).layers
    ids, out = np.asarray(prompt), []
    for step in range(steps):
        layers, logits, caches = decoder.forward(config, weights, ids, caches, fmt)
        out.append((np.asarray(logits, np.float64), [np.asarray(h, np.float64) for h in layers],
                    int(decoder.argmax(logits))))
        ids = np.array([tokens[step]])
    return out


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b)))


def compare(name: str, seed: int, prompt_len: int, steps: int) -> dict:
    config = decoder.tiny_config(name)
    weights = decoder.random_weights(config, seed)
    rng = np.random.default_rng(seed)
    prompt = rng.integers(0, config["vocab_size"], prompt_len)
    hf = _hf_run(_hf_model(config, weights), prompt, steps)
    hf_tokens = [t for _, _, t in hf]
    ours = _ours(config, weights, prompt, steps, None, hf_tokens)
    hw = _ours(config, weights, prompt, steps, "hw", hf_tokens)
    row = {"model": name, "layers": 0.0, "logits": 0.0, "hw_layers": 0.0, "hw_logits": 0.0}
    for (hl, hlayers, _), (ol, olayers, _), (wl, wlayers, _) in zip(hf, ours, hw, strict=True):
        row["layers"] = max(row["layers"], *(_rel(o, h) for o, h in zip(olayers, hlayers,
                                                                        strict=True)))
        row["logits"] = max(row["logits"], _rel(ol, hl))
        row["hw_layers"] = max(row["hw_layers"], *(_rel(w, o) for w, o in zip(
            wlayers, olayers, strict=True)))
        row["hw_logits"] = max(row["hw_logits"], _rel(wl, ol))
    free = decoder.generate(config, weights, prompt, steps, fmt=None)[0]
    free_hw = decoder.generate(config, weights, prompt, steps, fmt="hw")[0]
    row["fixture"] = {f"{name}/prompt": prompt, f"{name}/tokens": np.array(hf_tokens),
                      f"{name}/logits": np.stack([lg for lg, _, _ in hf]),
                      f"{name}/prefill_layers": np.stack(hf[0][1])}
    row["tokens_hf"] = hf_tokens
    row["tokens_f64"] = free.tolist()
    row["tokens_hw"] = free_hw.tolist()
    return row


def table(rows: list[dict], seed: int, prompt_len: int, steps: int) -> str:
    lines = [
        f"Seed {seed}, a prompt of {prompt_len} random tokens, {steps} generated (one prefill, "
        f"then {steps - 1} decode steps); every layer's output at every step and each step's "
        "logits; error = largest absolute difference / largest absolute value of the "
        "reference. Decode inputs are Hugging Face's tokens in every column.",
        "",
        "| model | float64 vs HF: layers | float64 vs HF: logits | hw vs float64: layers | "
        "hw vs float64: logits | tokens HF | tokens float64 | tokens hw |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['layers']:.1e} | {r['logits']:.1e} | {r['hw_layers']:.1e} | "
            f"{r['hw_logits']:.1e} | {' '.join(map(str, r['tokens_hf']))} | "
            f"{' '.join(map(str, r['tokens_f64']))} | {' '.join(map(str, r['tokens_hw']))} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--prompt-len", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=6)
    parser.add_argument("--out", type=Path, help="a Markdown file to write the table into")
    parser.add_argument("--fixture", type=Path, help="an .npz file to save Hugging Face's "
                        "outputs into")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("decoder_vs_hf: needs torch and transformers: pip install -e '.[hf]'",
              file=sys.stderr)
        return 2
    rows = [compare(name, args.seed, args.prompt_len, args.tokens) for name in decoder.TINY]
    text = table(rows, args.seed, args.prompt_len, args.tokens)
    print(text)
    if args.fixture:
        arrays = {k: v for r in rows for k, v in r["fixture"].items()}
        np.savez_compressed(args.fixture, seed=args.seed, **arrays)
    if args.out:
        return write_between(args.out, "decoder_vs_hf", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
