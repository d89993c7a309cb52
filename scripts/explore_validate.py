#!/usr/bin/env python3
"""The exploration model against published measurements it was not fitted to: every point of
``sim/explore/data/inferencex.csv`` (``scripts/inferencex_dataset.py``) that today's model can
describe, predicted at its own hardware, model, scenario, concurrency and layout.

Today's model (:mod:`scoville.sim.explore.perf`) serves aggregated (prefill and decode on the
same GPUs), without speculative decoding, in a ``tp`` or ``ep`` layout of a power-of-two width,
with each built-in model's own formats; its three global GPU factors were fitted to the ten
points of ``../shared/MODELS.md`` (``scripts/explore_calibrate.py``), none of them in this
dataset. So this is a held-out test of the model as it stands, the baseline the per-operation
model of issue #32 is measured against. A point is predicted when it is aggregated, has no
speculative method, and its GPUs and layout are known; its layout is ``ep`` over its GPUs when
its expert parallelism is above 1, else ``tp``. The rest are counted by reason.

Error = model / measured - 1 on total tokens/s per GPU (input + output), median interactivity
(tokens/s per user) and median TTFT. Then cross-validated: the three factors refitted on all
but one hardware (or model) and tested on it.

Writes ``docs/explore-validation.md``.

Usage: ``python scripts/explore_validate.py [--out FILE]``
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import math
import statistics
from collections import Counter
from pathlib import Path

from scoville.sim.explore import perf
from scoville.sim.explore.parallel import Parallelism
from scoville.sim.explore.specs import Scenario, load_chip, load_model

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "sim" / "explore" / "data" / "inferencex.csv"
#: ``scripts/explore_calibrate.py``'s grid of (bandwidth, compute, microseconds a layer).
GRID = list(itertools.product((0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.8),
                              (0.05, 0.1, 0.12, 0.15, 0.18, 0.2, 0.25, 0.3, 0.5),
                              (0.0, 10.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0, 60.0, 80.0)))
METRICS = (("tok_s_chip_total", "tok_s_gpu_total", "tokens/s per GPU (total)"),
           ("tok_s_user", "tok_s_user_median", "interactivity (tokens/s per user)"),
           ("ttft_s", "ttft_s_median", "TTFT"))


def why_not(row: dict) -> str | None:
    """Why today's model cannot describe ``row``, or None."""
    if row["disagg"] == "true":
        return "disaggregated prefill and decode"
    if row["spec_method"] not in ("", "none"):
        return f"speculative decoding ({row['spec_method']})"
    if not row["gpus"]:
        return "GPU count not published"
    return None


def predict(row: dict, factors: dict | None = None) -> dict | None:
    """The model's point for ``row``; ``factors`` replace the GPU's efficiency factors."""
    chip, model = load_chip(row["hardware"]), load_model(row["model"])
    if factors:
        chip = dataclasses.replace(chip, **factors)
    gpus = int(row["gpus"])
    mode = "ep" if row["ep"] and int(row["ep"]) > 1 else "tp"
    scenario = Scenario(int(row["isl"]), int(row["osl"]))
    return perf.evaluate(chip, model, scenario, int(row["concurrency"]),
                         Parallelism(mode, gpus))


def fit(rows: list[dict]) -> dict:
    """The three global factors (``scripts/explore_calibrate.py``'s grid) that minimize the
    mean squared log error of total tokens/s per GPU on ``rows``."""
    def loss(factors):
        return statistics.fmean(
            math.log(predict(r, factors)["tok_s_chip_total"] / float(r["tok_s_gpu_total"])) ** 2
            for r in rows)
    return min(({"bw_eff": bw, "compute_eff": ce, "layer_us": lu} for bw, ce, lu in GRID),
               key=loss)


def held_out(rows: list[dict], key: str) -> list[tuple[str, dict, list[float]]]:
    """Leave one group out (``key``: ``hardware`` or ``model``): the factors fitted on the
    other groups' points, and the errors on the group's."""
    out = []
    for group in sorted({r[key] for r in rows}):
        rest = [r for r in rows if r[key] != group]
        if not rest:
            continue
        factors = fit(rest)
        errors = [predict(r, factors)["tok_s_chip_total"] / float(r["tok_s_gpu_total"]) - 1
                  for r in rows if r[key] == group]
        out.append((group, factors, errors))
    return out


def summary(errors: list[float]) -> str:
    if not errors:
        return "| - | - | - | - |"
    absolute = sorted(abs(e) for e in errors)
    p90 = absolute[min(len(absolute) - 1, int(0.9 * len(absolute)))]
    within = sum(1 / 1.5 <= 1 + e <= 1.5 for e in errors) / len(errors)
    return (f"| {len(errors)} | {100 * statistics.median(absolute):.0f}% | {100 * p90:.0f}% | "
            f"{100 * within:.0f}% |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "explore-validation.md"))
    args = parser.parse_args()
    with open(DATA, newline="") as handle:
        rows = list(csv.DictReader(handle))
    skipped: Counter[str] = Counter()
    errors: dict[str, list[float]] = {m: [] for m, _, _ in METRICS}
    by_hw: dict[str, list[float]] = {}
    detail = []
    described = []
    for row in rows:
        reason = why_not(row)
        got = None if reason else predict(row)
        if reason is None and got is None:
            reason = "does not fit in the model's memory at this layout"
        if reason:
            skipped[reason] += 1
            continue
        described.append(row)
        for ours, theirs, _ in METRICS:
            if row[theirs]:
                errors[ours].append(got[ours] / float(row[theirs]) - 1)
        e = got["tok_s_chip_total"] / float(row["tok_s_gpu_total"]) - 1
        by_hw.setdefault(f"{row['model']} on {row['hardware']}", []).append(e)
        detail.append((row["id"], float(row["tok_s_gpu_total"]), got["tok_s_chip_total"], e))
    lines = [
        "# The exploration against held-out measurements",
        "",
        "Made by `python scripts/explore_validate.py`: every point of the InferenceX dataset",
        "(`sim/explore/data/`, one dated snapshot; its README says what it holds) that today's",
        "model can describe, predicted at its own hardware, model, scenario, concurrency and",
        "layout. Today's model is three global GPU factors fitted to `../shared/MODELS.md`'s ten",
        "points, none of which is in this dataset: these are held-out errors, the baseline of",
        "issue #32's per-operation model. Error = model / measured - 1.",
        "",
        f"{len(rows)} points; predicted {len(detail)}; not describable today:",
        "",
        *(f"- {reason}: {count}" for reason, count in skipped.most_common()),
        "",
        "| metric | points | median abs. error | 90th pct. abs. error | within 0.67-1.5x |",
        "|---|---:|---:|---:|---:|",
        *(f"| {label} " + summary(errors[ours]) for ours, _, label in METRICS),
        "",
        "Total tokens/s per GPU, by model and hardware:",
        "",
        "| model on hardware | points | median abs. error | 90th pct. abs. error | "
        "within 0.67-1.5x |",
        "|---|---:|---:|---:|---:|",
        *(f"| {key} " + summary(errs) for key, errs in sorted(by_hw.items())),
        "",
        "Cross-validated: the three factors refitted (`scripts/explore_calibrate.py`'s grid, "
        "mean squared log error of total tokens/s per GPU) on the other groups' points, "
        "errors on the group's:",
        "",
        "| held out | fitted (bandwidth, compute, us a layer) | points | median abs. error | "
        "90th pct. abs. error | within 0.67-1.5x |",
        "|---|---|---:|---:|---:|---:|",
        *(f"| {key} {group} | {f['bw_eff']}, {f['compute_eff']}, {f['layer_us']:g} "
          + summary(errs)
          for key in ("hardware", "model") for group, f, errs in held_out(described, key)),
        "",
        "Each predicted point (total tokens/s per GPU):",
        "",
        "| point | measured | model | error |",
        "|---|---:|---:|---:|",
        *(f"| {pid} | {meas:,.0f} | {mod:,.0f} | {100 * e:+.0f}% |"
          for pid, meas, mod, e in detail),
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}: {len(detail)} points predicted, median abs. error on tokens/s per "
          f"GPU {100 * statistics.median(abs(e) for e in errors['tok_s_chip_total']):.0f}%")


if __name__ == "__main__":
    main()
