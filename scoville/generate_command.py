"""``scoville generate``: a small model's greedy generation run through the ``decoder`` block
in RTL, layer by layer (:mod:`scoville.testbenches.generate`), against the golden model
(:func:`scoville.sim.golden.decoder.generate` in the engine's formats) bit for bit and the
timed model cycle for cycle."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from scoville.blocks import get_block, parse_params
from scoville.rtl.lib.params import ParamError
from scoville.sim.tools import SIMULATORS

__all__ = ["add_parser", "prepare", "run"]


def add_parser(sub):
    from scoville.sim.golden.decoder import TINY

    p = sub.add_parser("generate", help="generate tokens with a small model through the "
                                        "decoder block in RTL, checked against the golden "
                                        "model bit for bit")
    p.add_argument("--model", default="tiny-gpt-oss",
                   help=f"a built-in model ({', '.join(TINY)}; seeded random weights) or a "
                        "Hugging Face config.json (with --weights)")
    p.add_argument("--weights", type=Path, help="a safetensors file of the state dict, in "
                                                "Hugging Face's names (with a config file)")
    p.add_argument("--prompt-len", type=int, default=8, help="prompt tokens (default 8)")
    p.add_argument("--tokens", type=int, default=4, help="tokens to generate (default 4)")
    p.add_argument("--sim", default="verilator", choices=SIMULATORS)
    p.add_argument("--seed", type=int, default=1,
                   help="seeds the prompt (the built-in models' weights are seed 0's)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return p


def _model(args) -> tuple[dict, dict]:
    """``(config, spec)``: the model's config dict and what the test is handed."""
    from scoville.sim.golden import decoder as golden

    built_in = list(golden.TINY)
    if args.model in golden.TINY:
        if args.weights is not None:
            raise ParamError(f"--weights {args.weights}: allowed only with --model "
                             "CONFIG.json (a built-in model's weights are seeded)")
        return golden.tiny_config(args.model), {"weights": None, "weights_seed": 0}
    if not Path(args.model).is_file():
        raise ParamError(f"--model {args.model}: no such built-in model or file; allowed: "
                         f"{', '.join(built_in)}, or a Hugging Face config.json with --weights")
    if args.weights is None:
        raise ParamError(f"--model {args.model}: a config file needs --weights (a "
                         "safetensors file)")
    try:
        head = json.loads(Path(args.model).read_text())
    except (OSError, ValueError) as err:
        raise ParamError(f"--model {args.model}: cannot be read as JSON: {err}") from None
    if not isinstance(head, dict):
        raise ParamError(f"--model {args.model}: holds a {type(head).__name__}; allowed: a "
                         "JSON object (a Hugging Face config)")
    if head.get("model_type") not in ("gpt_oss", "deepseek_v3"):
        raise ParamError(f"config field 'model_type' = {head.get('model_type')!r} is not "
                         "allowed; allowed: 'gpt_oss', 'deepseek_v3'")
    config, _ = golden.load(args.model, args.weights)
    return config, {"weights": str(Path(args.weights).resolve()),
                    "config_file": str(Path(args.model).resolve())}


def prepare(args) -> tuple[dict, dict]:
    """What a run of ``args`` needs, checked (a one-line :class:`ParamError` otherwise): the
    engine's parameters and the model's spec as the test takes it (``config``, ``weights``,
    ``prompt``, ``steps``; :data:`~scoville.testbenches.generate.ENV_GENERATE`)."""
    from scoville.sim.golden import decoder as golden
    from scoville.testbenches.generate import check_words, engine_params, image_words

    try:
        config, spec = _model(args)
        s = golden.shape(config)
        if not 1 <= args.prompt_len <= 64:
            raise ValueError(f"--prompt-len {args.prompt_len}: allowed 1..64")
        if not 1 <= args.tokens <= 64:
            raise ValueError(f"--tokens {args.tokens}: allowed 1..64")
        if args.seed < 0:
            raise ValueError(f"--seed {args.seed}: allowed 0 or more")
        params = engine_params(config, args.prompt_len, args.prompt_len + args.tokens)
        check_words(image_words(config, params, args.prompt_len + args.tokens),
                    params["linear.addr_bits"])
    except ValueError as err:
        raise ParamError(str(err)) from None
    prompt = np.random.default_rng(args.seed).integers(0, s.vocab, args.prompt_len).tolist()
    return params, {**spec, "config": config, "prompt": prompt, "steps": args.tokens}


def run(args) -> int:
    from scoville.sim import flow
    from scoville.testbenches.generate import ENV_GENERATE

    params, spec = prepare(args)
    prompt = spec["prompt"]
    block = get_block("decoder")
    cfg, workload = parse_params(block, [f"{k}={v}" for k, v in params.items()])
    workload = dataclasses.replace(workload, gap=0.0, backpressure=0.0)
    block = dataclasses.replace(block, testbench="scoville.testbenches.generate")
    result = flow.run(block, cfg, workload, args.sim, seed=args.seed, tests=["test_generate"],
                      extra_env={ENV_GENERATE: json.dumps(spec)})
    m = result.metrics.get("test_generate", {})
    report = {"model": args.model, "sim": args.sim, "seed": args.seed, "prompt": prompt,
              "tokens": m.get("tokens"), "passed": result.passed,
              "cycles": m.get("cycles"), "model_cycles": m.get("model_cycles"),
              "fast_cycles": m.get("fast_cycles"),
              "programs": m.get("programs"), "commands": m.get("commands"),
              "log": result.log}
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{args.model} on {args.sim}: prompt {prompt}")
        if result.passed:
            print(f"  generated {m['tokens']}: RTL equal to the golden model bit for bit; "
                  f"{m['cycles']:,} cycles (timed model {m['model_cycles']:,}, fast path "
                  f"{m['fast_cycles']:,}) over "
                  f"{m['programs']} programs of {m['commands']} commands")
        else:
            print(f"  FAILED: {result.log}", file=sys.stderr)
    return 0 if result.passed else 1
