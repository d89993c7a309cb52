#!/usr/bin/env python3
"""The GPUs' power from utilisation, fitted to measured board power and tested on other
measurements.

The model (``scoville.explore.specs.gpu_energy``): a GPU draws its idle power (measured,
the model loaded) plus, above it, a fraction of the rest of its limit while its compute units
are busy and another while its memory is busy (each at its achievable rate, as the roofline
times them), the phase slowed if that would pass the limit. The two fractions
(``GPU_POWER``) are fitted here by least squares on the log of power per GPU to the H100
points of ML.ENERGY's longitudinal study (vLLM 0.11.1 serving Llama 3.1 8B, 70B and 405B
FP8 on LM-Arena chat prompts, batch 16 to 1,024: GPU power from NVML), then tested, with
nothing of them in the fit, on ML.ENERGY's B200 serving DeepSeek-R1 (another GPU, another
model) and on InferenceX's H100 serving GPT-OSS-120B (another engine setting, another model;
from an issue marked experimental). Each point runs at its own layout, batch and lengths with
the GPU's measured operations and the built-in serving numbers (``GPU_FACTORS``),
concurrency equal to the batch (the engine kept full).

Writes ``docs/explore-power.md``.

Usage: ``python scripts/explore_power.py [--out FILE]``
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from pathlib import Path

from scoville.explore import perf
from scoville.explore.parallel import Parallelism
from scoville.explore.specs import (
    CHIPS,
    GPU_POWER,
    MODELS,
    Attention,
    Model,
    Scenario,
    gpu_energy,
)

ROOT = Path(__file__).resolve().parent.parent


def _llama(name: str, layers: int, hidden: int, heads: int, ffn: int, fmt: str) -> Model:
    """A dense Llama 3.1 (meta-llama/Llama-3.1-*B config.json): GQA with 8 KV heads of 128,
    vocab 128,256, KV cache BF16; written as a model whose every layer is dense."""
    return Model(name=name, layers=layers, dense_layers=layers, hidden=hidden, vocab=128256,
                 attention=Attention("gqa", q_heads=heads, kv_heads=8, head_dim=128),
                 experts=1, top_k=1, shared=0, moe_intermediate=1, dense_intermediate=ffn,
                 shared_intermediate=0, expert_fmt=fmt, weight_fmt=fmt, kv_fmt="bf16",
                 act_fmt="bf16" if fmt == "bf16" else "fp8", description=name)


LLAMA_8B = _llama("llama-3.1-8b", 32, 4096, 32, 14336, "bf16")
LLAMA_70B = _llama("llama-3.1-70b", 80, 8192, 64, 28672, "bf16")
LLAMA_405B = _llama("llama-3.1-405b-fp8", 126, 16384, 128, 53248, "fp8")

#: ML.ENERGY (ml-energy/blog at cb8ac0a49b4a, docs/posts/llm-energy-over-time.md and its
#: figure assets/llm-energy-over-time/llama-power-light.svg, read from the SVG's data): average
#: GPU power per GPU on LM-Arena chat, about 224 tokens in and 700 out.
CHAT = Scenario(224, 700)
FIT = [("h100", LLAMA_8B, 1, CHAT, b, w) for b, w in
       ((16, 513), (32, 560), (64, 610), (128, 669), (256, 690))] + \
      [("h100", LLAMA_70B, 4, CHAT, b, w) for b, w in
       ((16, 451), (64, 500), (128, 546), (256, 589), (512, 623), (1024, 637))] + \
      [("h100", LLAMA_405B, 8, CHAT, b, w) for b, w in
       ((16, 423), (64, 520), (128, 576), (256, 609))]
#: Held out. ML.ENERGY leaderboard v3.0 (same repository, docs/posts/
#: ml-energy-leaderboard-v3.0.md, figure section2-1-batch-size-light.svg): DeepSeek-R1 on 8
#: B200s (tensor-parallel, assumed), GPQA reasoning, about 7k tokens out (256 in, assumed),
#: power as a share of 1,000 W. InferenceX issue 828 ("[experimental] gptoss h100 nvidia-smi
#: power", a generated analysis): GPT-OSS-120B on 8 H100s (TP8), vLLM, 1k/1k.
REASONING = Scenario(256, 7168)
HELD_OUT = [("b200", MODELS["deepseek-r1"], 8, REASONING, b, w) for b, w in
            ((16, 614), (32, 675), (64, 770), (128, 891))] + \
           [("h100", MODELS["gpt-oss-120b"], 8, Scenario(1024, 1024), b, w) for b, w in
            ((4, 159), (8, 173), (16, 189), (32, 205), (64, 171))]


def power(point, fractions: dict) -> float:
    """The model's watts per GPU at ``point`` with the two fractions."""
    hw, model, gpus, scenario, batch, _ = point
    chip = CHIPS[hw]
    chip = dataclasses.replace(chip, energy=gpu_energy(hw, chip.tflops, chip.power_w,
                                                       fractions))
    got = perf.evaluate(chip, model, scenario, batch, Parallelism("tp", gpus))
    return None if got is None else got["power_w"]


def fits(points) -> list:
    """The points whose batch the model's memory holds (vLLM runs larger batches by
    preempting requests, which the model does not describe)."""
    return [p for p in points if power(p, GPU_POWER) is not None]


def fit(points=None) -> dict:
    """The fractions that minimize the squared log error of power on ``points`` (default: the
    points of :data:`FIT` the model holds)."""
    points = fits(FIT) if points is None else points
    from scipy.optimize import least_squares

    def residuals(x):
        f = {"compute": x[0], "memory": x[1]}
        return [math.log(power(p, f) / p[5]) for p in points]

    got = least_squares(residuals, [0.5, 0.5], bounds=([0.0, 0.0], [2.0, 2.0]),
                        diff_step=1e-3)
    return {"compute": round(float(got.x[0]), 2), "memory": round(float(got.x[1]), 2)}


def _rows(points, fractions) -> tuple[list[str], list[float]]:
    rows, errors = [], []
    for p in points:
        hw, model, gpus, scenario, batch, measured = p
        got = power(p, fractions)
        errors.append(got / measured - 1)
        limit = CHIPS[hw].power_w
        rows.append(f"| {hw} | {model.name} | {gpus} | {scenario.label} | {batch} | "
                    f"{measured:.0f} W ({measured / limit:.0%}) | {got:.0f} W "
                    f"({got / limit:.0%}) | {got / measured - 1:+.0%} |")
    return rows, errors


def held_out_errors() -> list[float]:
    """The built-in power model's errors on the held-out points."""
    return _rows(fits(HELD_OUT), GPU_POWER)[1]


def _summary(errors) -> str:
    a = sorted(abs(e) for e in errors)
    return f"median absolute error {statistics.median(a):.0%}, largest {a[-1]:.0%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "explore-power.md"))
    args = parser.parse_args()
    fitted = fit()
    head = ("| GPU | model | GPUs | in/out | batch | measured per GPU | model | error |\n"
            "|---|---|---:|---|---:|---:|---:|---:|")
    fit_rows, fit_errors = _rows(fits(FIT), GPU_POWER)
    out_rows, out_errors = _rows(fits(HELD_OUT), GPU_POWER)
    left = [p for p in FIT + HELD_OUT if p not in fits(FIT + HELD_OUT)]
    idle = {hw: CHIPS[hw].energy.static_w for hw in ("h100", "h200", "b200", "gb200", "gb300",
                                                       "asic-2026")}
    text = f"""# GPU power from utilisation

Made by `python scripts/explore_power.py` (its docstring states the model, the points and
their sources). A GPU draws its idle power, measured with the model loaded
({", ".join(f"{k} {v:.0f} W" for k, v in idle.items())}: GB200, GB300 and the ASIC at B200's
share of its limit, not published), plus a fraction of the rest of its limit while its
compute units are busy and another while its memory is busy, at the rates the roofline
times them.

Fitted on the {len(fits(FIT))} H100 points below: compute {fitted['compute']:.2f}, memory
{fitted['memory']:.2f} of the limit less idle; built in (`GPU_POWER`): compute
{GPU_POWER['compute']:.2f}, memory {GPU_POWER['memory']:.2f}.

## Fitted (ML.ENERGY, H100, Llama 3.1, vLLM)

{head}
{chr(10).join(fit_rows)}

{_summary(fit_errors)}.

## Held out (not in the fit)

DeepSeek-R1 on B200 (ML.ENERGY leaderboard v3.0) and GPT-OSS-120B on H100 (InferenceX, an
experimental power lane):

{head}
{chr(10).join(out_rows)}

{_summary(out_errors)}.

Left out, their batch does not fit the model's memory (vLLM ran them by preempting
requests): {", ".join(f"{p[1].name} on {p[2]} {p[0]} at batch {p[4]}" for p in left) or "none"}.

A known limit: past the batch where an operation turns compute-bound (at its measured
fraction of peak, `scoville.explore.kernels`), the model's power falls as the batch grows
(its memory idles more of the step), while the measured power keeps rising to the limit:
the shares are one pair for every operation and batch, and the limit is applied over a
whole phase, not per operation.

Before this model (30% of the limit static, the rest spent at the peak's rate per operation)
every GPU drew 30-46% of its limit whatever it served; the measurements run from 23%
(GPT-OSS-120B spread thin over eight H100s) to 99% (an 8B model at batch 256).
"""
    Path(args.out).write_text(text)
    print(text)
    print(f"fitted: {fitted}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
