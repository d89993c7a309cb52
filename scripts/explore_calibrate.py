#!/usr/bin/env python3
"""The exploration model against the published measurements of ``../shared/MODELS.md``: its
error on each, with each GPU's measured kernels (``scoville.explore.kernels``) and the
serving numbers fitted elsewhere (``scripts/explore_validate.py``, on the InferenceX
dataset), so these points are held out of the fit.

Each published point is a chip, a model in the precision it ran, a scenario, the GPUs an
instance used where stated, and a throughput at an interactivity (tokens/s per user). The
model's value is its Pareto frontier's at that interactivity (linear between points; a
point past the curve's end is reported as such and takes the end's value). The serving
numbers are the built-in ones (``GPU_FACTORS``, ``perf.REQUEST_S``, ``perf.HANDOFF_S``);
nothing is fitted to these points.

Writes ``docs/explore-calibration.md``.

Usage: ``python scripts/explore_calibrate.py [--out FILE.md]``
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

from scoville.explore import perf, sweep
from scoville.explore.specs import CHIPS, GPU_FACTORS, MODELS, Scenario

_GPT, _DS, _KIMI = MODELS["gpt-oss-120b"], MODELS["deepseek-r1"], MODELS["kimi-k2"]
#: The models in the precisions the published runs used: "FP4" on Blackwell runs the routed
#: experts (GPT-OSS: MXFP4 already; DeepSeek, Kimi: NVFP4) on the FP4 array, the rest as the
#: checkpoint (scripts/explore_validate.py's ``at_precision``).
VARIANTS = {
    "gpt-oss-120b fp4": dataclasses.replace(_GPT, expert_act_fmt="fp4"),
    "gpt-oss-120b": _GPT,
    "deepseek-r1 fp4": dataclasses.replace(_DS, expert_fmt="nvfp4", expert_act_fmt="fp4"),
    "deepseek-r1 fp8": _DS,
    "kimi-k2.5 nvfp4": dataclasses.replace(_KIMI, expert_fmt="nvfp4", expert_act_fmt="fp4"),
    "kimi-k2.5 int4": _KIMI,
}
#: (label, chip, model variant, isl, osl, GPUs an instance uses or None, metric, published
#: value, at tokens/s per user). ``tok_s_chip_total`` counts input and output tokens (the
#: charts' tokens/s per GPU), ``tok_s_mw`` generated tokens per all-in provisioned MW.
POINTS = [
    ("GPT-OSS-120B 1k/1k, GB200 FP4, Dynamo + TRT-LLM", "gb200", "gpt-oss-120b fp4", 1024,
     1024, None, "tok_s_chip_total", 52496, 41),
    ("DeepSeek-R1 1k/1k, GB300 FP4", "gb300", "deepseek-r1 fp4", 1024, 1024, None,
     "tok_s_chip_total", 18321, 15),
    ("DeepSeek-R1 1k/1k, GB200 FP4", "gb200", "deepseek-r1 fp4", 1024, 1024, None,
     "tok_s_chip_total", 15003, 18),
    ("DeepSeek-R1 1k/1k, H100 FP8", "h100", "deepseek-r1 fp8", 1024, 1024, None,
     "tok_s_chip_total", 1376, 8),
    ("Kimi K2.5 8k/1k, B200 NVFP4, 4 GPUs", "b200", "kimi-k2.5 nvfp4", 8192, 1024, 4,
     "tok_s_chip_total", 3879, 32),
    ("Kimi K2.5 8k/1k, B200 NVFP4, 4 GPUs", "b200", "kimi-k2.5 nvfp4", 8192, 1024, 4,
     "tok_s_chip_total", 947, 111),
    ("Kimi K2.5 8k/1k, H200 INT4, 8 GPUs", "h200", "kimi-k2.5 int4", 8192, 1024, 8,
     "tok_s_chip_total", 1175, 16.7),
    ("Kimi K2.5 8k/1k, H200 INT4, 8 GPUs", "h200", "kimi-k2.5 int4", 8192, 1024, 8,
     "tok_s_chip_total", 384, 91),
    ("GPT-OSS-120B 1k/8k, H100, per all-in MW", "h100", "gpt-oss-120b", 1024, 8192, None,
     "tok_s_mw", 0.9e6, 90),
    ("GPT-OSS-120B 1k/8k, B200, per all-in MW", "b200", "gpt-oss-120b fp4", 1024, 8192, None,
     "tok_s_mw", 2.8e6, 90),
]


def model_value(factors: dict, point) -> tuple[float, str]:
    """The model's value for a published point and how it was read (on the curve, or past
    its end)."""
    _, chip, variant, isl, osl, gpus, metric, _, at = point
    c = dataclasses.replace(CHIPS[chip], **factors)
    m = VARIANTS[variant]
    sc = Scenario(isl, osl, tuple(2 ** i for i in range(15)), extend=False)
    pts = [p for p in sweep.run_task(c, m, sc)["points"] if gpus is None or p["chips"] == gpus]
    front = sweep.frontier(pts, y=metric)
    v = sweep.value_at(front, at, y=metric)
    if v is not None:
        return v, "on the curve"
    end = front[0] if at < front[0]["tok_s_user"] else front[-1]
    return end[metric], f"past the curve's end ({end['tok_s_user']:.0f} tok/s/user)"


def loss(factors: dict) -> float:
    return sum(math.log(model_value(factors, p)[0] / p[7]) ** 2 for p in POINTS) / len(POINTS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/explore-calibration.md")
    args = parser.parse_args()
    factors = dict(GPU_FACTORS)
    rows = []
    for p in POINTS:
        v, how = model_value(factors, p)
        unit = "tok/s per GPU (in + out)" if p[6] == "tok_s_chip_total" else \
            "generated tok/s per all-in MW"
        rows.append(f"| {p[0]} | {p[8]} | {p[7]:,.0f} | {v:,.0f} | {v / p[7] - 1:+.0%} | "
                    f"{unit}; {how} |")
    serving = (f"floor share {factors['floor_share']:.2f} (`GPU_FACTORS`), "
               f"{perf.REQUEST_S:.3f} s a request, {perf.HANDOFF_S:.2f} s a disaggregated "
               "hand-off (`perf.REQUEST_S`, `perf.HANDOFF_S`), MTP acceptance 85% (the "
               "sweep's)")
    where = ("fitted to the InferenceX dataset by `scripts/explore_validate.py`: these points "
             "are held out of the fit")
    text = f"""# Exploration model against MODELS.md's published points

Generated by `python scripts/explore_calibrate.py`. Each GPU's operations from its measured
kernels (`scoville.explore.kernels`, docs/explore-kernels.md); the serving numbers:
{serving}, {where}; one set for every GPU-class chip. Mean squared log error
{loss(factors):.3f}. Published points: ../shared/MODELS.md (SemiAnalysis InferenceX, 2026).
The model's value is its Pareto frontier's at the published interactivity, over the sweep's
layouts and servings (aggregated and disaggregated; DeepSeek-R1 with and without its MTP
module).

| point | tok/s per user | published | model | error | read as |
|---|---:|---:|---:|---:|---|
{chr(10).join(rows)}
"""
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
