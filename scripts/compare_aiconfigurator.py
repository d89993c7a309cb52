#!/usr/bin/env python3
"""The exploration model beside NVIDIA AIConfigurator, an independent model built on measured
kernel tables (TensorRT-LLM on each GPU), at the same configurations: GPT-OSS-120B and
DeepSeek-R1 on H200 and B200, 1k/1k, aggregated serving at concurrency 8, 64 and 256.

AIConfigurator is an optional tool, never a dependency of Scoville or its tests: install it
where you like (``pip install aiconfigurator==0.12.0``; it needs NumPy 2 and pandas, so a
virtual environment of its own is simplest) and name that Python with ``--aic-python``. This
script runs it there (its ``cli_estimate``, offline, ``database_mode`` SILICON), runs our model
here, and writes both side by side.

Writes ``docs/explore-aiconfigurator.md``.

Usage: ``python scripts/compare_aiconfigurator.py --aic-python PATH/TO/python [--out FILE]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from scoville.explore import perf
from scoville.explore.parallel import Parallelism
from scoville.explore.specs import Scenario, load_chip, load_model

ROOT = Path(__file__).resolve().parent.parent
#: (our model, its Hugging Face id, our layout, AIConfigurator's tp, moe_tp, moe_ep).
MODELS = (("gpt-oss-120b", "openai/gpt-oss-120b", Parallelism("tp", 1), 1, 1, 1),
          ("deepseek-r1", "deepseek-ai/DeepSeek-R1", Parallelism("tpep", 8), 8, 1, 8))
#: Our chip and AIConfigurator's system.
SYSTEMS = (("h200", "h200_sxm"), ("b200", "b200_sxm"))
CONCURRENCY = (8, 64, 256)
ISL = OSL = 1024

#: Run in AIConfigurator's Python: reads the cases as JSON on stdin, prints the results.
CHILD = r"""
import json, sys
from aiconfigurator.cli.api import cli_estimate
out = []
for case in json.load(sys.stdin):
    r = cli_estimate(case["hf"], case["system"], backend_name="trtllm", isl=case["isl"],
                     osl=case["osl"], batch_size=case["c"], tp_size=case["tp"],
                     moe_tp_size=case["moe_tp"], moe_ep_size=case["moe_ep"])
    raw = r.raw
    out.append({k: (float(raw[k]) if not isinstance(raw[k], str) else raw[k])
                for k in ("ttft", "tpot", "tokens/s/gpu", "tokens/s/user", "gemm", "moe",
                          "kvcache", "fmha", "version")})
print("AIC-RESULTS " + json.dumps(out))
"""


def cases() -> list[dict]:
    return [{"model": m, "hf": hf, "chip": chip, "system": system, "c": c, "tp": tp,
             "moe_tp": moe_tp, "moe_ep": moe_ep, "isl": ISL, "osl": OSL, "layout": par.label}
            for m, hf, par, tp, moe_tp, moe_ep in MODELS for chip, system in SYSTEMS
            for c in CONCURRENCY]


def ours(case: dict) -> dict:
    par = next(p for m, _, p, *_ in MODELS if m == case["model"])
    got = perf.evaluate(load_chip(case["chip"]), load_model(case["model"]),
                        Scenario(ISL, OSL), case["c"], par)
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aic-python", default=sys.executable,
                        help="a Python with aiconfigurator installed (default: this one)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "explore-aiconfigurator.md"))
    args = parser.parse_args()
    todo = cases()
    run = subprocess.run([args.aic_python, "-c", CHILD], input=json.dumps(todo),
                         capture_output=True, text=True)
    line = next((x for x in run.stdout.splitlines() if x.startswith("AIC-RESULTS ")), None)
    if run.returncode or line is None:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"compare_aiconfigurator: AIConfigurator did not run with {args.aic_python} "
              f"({last}); install it: pip install aiconfigurator==0.12.0", file=sys.stderr)
        return 2
    theirs = json.loads(line.removeprefix("AIC-RESULTS "))
    rows = []
    for case, aic in zip(todo, theirs, strict=True):
        me = ours(case)
        if me is None:
            rows.append(f"| {case['model']} | {case['chip']} | {case['layout']} | {case['c']} | "
                        f"{aic['tokens/s/gpu']:,.0f} | does not fit | | "
                        f"{aic['tokens/s/user']:.0f} | | {aic['ttft'] / 1e3:.2f} | |")
            continue
        rows.append(
            f"| {case['model']} | {case['chip']} | {case['layout']} | {case['c']} | "
            f"{aic['tokens/s/gpu']:,.0f} | {me['tok_s_chip']:,.0f} | "
            f"{me['tok_s_chip'] / aic['tokens/s/gpu']:.2f} | {aic['tokens/s/user']:.0f} | "
            f"{me['tok_s_user']:.0f} | {aic['ttft'] / 1e3:.2f} | {me['ttft_s']:.2f} |")
    formats = sorted({f"{c['model']}: GEMM {a['gemm']}, MoE {a['moe']}, KV {a['kvcache']}, "
                      f"attention {a['fmha']}" for c, a in zip(todo, theirs, strict=True)})
    text = "\n".join([
        "# The exploration model beside AIConfigurator",
        "",
        "Made by `python scripts/compare_aiconfigurator.py --aic-python PATH` "
        "(AIConfigurator 0.12.0, offline, its measured TensorRT-LLM "
        f"{theirs[0]['version']} kernel tables, `cli_estimate`, aggregated serving). Same "
        f"configurations on both sides: {ISL}/{OSL} tokens, the batch equal to the "
        "concurrency, the layout given (AIConfigurator: attention tensor-parallel over the "
        "same GPUs, experts spread `moe_ep`). Tokens/s are generated tokens (AIConfigurator's "
        "`tokens/s/gpu` is sequences/s x output length); ours is `tok_s_chip`. Neither model "
        "is fitted to the other.",
        "",
        "| model | GPU | layout | concurrency | AIConfigurator tok/s/GPU | ours | ours / "
        "theirs | AIConfigurator tok/s/user | ours | AIConfigurator TTFT (s) | ours |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "AIConfigurator's formats (from the checkpoints): " + "; ".join(formats) + ".",
        "",
    ])
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
