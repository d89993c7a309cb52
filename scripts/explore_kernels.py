#!/usr/bin/env python3
"""Each GPU's efficiency per operation, fitted to measured kernel latencies.

The measurements are NVIDIA AIConfigurator 0.12's kernel tables (TensorRT-LLM 1.3.0rc20 on
each GPU, timed by AIConfigurator's collectors; ``aiconfigurator_core/systems/data/<system>/``,
Apache 2.0): dense GEMMs (``gemm_perf``), grouped MoE GEMMs (``moe_perf``, balanced routing,
gated (SwiGLU) kernels only; MXFP4 weights with BF16 or MXFP8 activations as ``w4a16`` and
``w4a8``, on GPT-OSS's shapes), collectives (TensorRT-LLM's custom all-reduce,
``custom_allreduce_perf``; DeepEP's low-latency dispatch and combine inside one node, SGLang
0.5.12's ``wideep_deepep_ll_perf``),
attention in decode and prefill (``generation_attention_perf``, ``context_attention_perf``
for GQA, heads of 64 and groups of 8 query heads a KV head as GPT-OSS's, no window;
``generation_mla_perf``, ``context_mla_perf`` for MLA). ``--aic-python PATH`` reads them in
AIConfigurator's Python (an optional tool, never a dependency) and writes a deterministic
sample of the shapes our models run, with their source, to
``scoville/explore/data/kernels.csv.gz``; without it the script refits from that file.

Each (GPU, operation, format) gets the three numbers of :mod:`scoville.explore.kernels`' model
(fraction of peak compute, fraction of HBM bandwidth, a latency floor), fitted by least
squares on the log of latency; the table of them is ``scoville/explore/kernels.json``, and
``docs/explore-kernels.md`` reports the fits' errors: on the GPU's own rows, and with the GPU
held out (its numbers taken, as the exploration takes them for a GPU left out of a fit, from
the other GPUs of its architecture).

Usage: ``python scripts/explore_kernels.py [--aic-python PATH] [--out FILE] [--table FILE]``
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import math
import statistics
import subprocess
from pathlib import Path

from scoville.explore import kernels
from scoville.explore.specs import load_chip

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "scoville" / "explore" / "data" / "kernels.csv.gz"
#: AIConfigurator's systems, by our chip's name.
SYSTEMS = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "gb200": "gb200",
           "gb300": "gb300"}
VERSION = "1.3.0rc20"
#: The SGLang version whose DeepEP low-latency all-to-all tables are taken (every GPU has one).
DEEPEP = "0.5.12"
#: Rows kept of each (GPU, operation, format) at most, evenly spaced over the table sorted by
#: shape.
SAMPLE = 400
COLUMNS = ("chip", "op", "fmt", "kv_fmt", "m", "n", "k", "tokens", "hidden", "inter", "topk",
           "experts", "tp", "ep", "batch", "context", "heads", "kv_heads", "head_dim", "us",
           "source")

#: Run in AIConfigurator's Python: prints the sampled rows as CSV.
CHILD = r"""
import csv, io, json, sys
from pathlib import Path
import pandas as pd
import aiconfigurator_core
args = json.loads(sys.argv[1])
root = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
out = csv.DictWriter(sys.stdout, fieldnames=args["columns"], extrasaction="ignore")
out.writeheader()

def sample(d, keys):
    d = d.sort_values(keys).reset_index(drop=True)
    n = min(len(d), args["sample"])
    return d.iloc[sorted({round(i * (len(d) - 1) / max(1, n - 1)) for i in range(n)})]

def emit(d, chip, op, fmt, source, **cols):
    for _, r in d.iterrows():
        row = {"chip": chip, "op": op, "fmt": fmt, "us": round(float(r.latency) * 1e3, 4),
               "source": source}
        for k, v in cols.items():
            row[k] = v(r) if callable(v) else v
        out.writerow(row)

for chip, system in args["systems"].items():
    base = root / system
    v = args["version"]
    g = pd.read_parquet(base / "gemm" / "trtllm" / v / "gemm_perf.parquet")
    g = g[(g.n >= 256) & (g.k >= 256) & (g.n <= 16384) & (g.k <= 16384) & (g.m <= 16384)]
    for dtype, fmt in (("bfloat16", "bf16"), ("fp8_block", "fp8"), ("nvfp4", "fp4")):
        d = g[g.gemm_dtype == dtype].groupby(["m", "n", "k"], as_index=False).latency.min()
        if len(d):
            emit(sample(d, ["m", "n", "k"]), chip, "gemm", fmt,
                 f"{system}/gemm/trtllm/{v}/gemm_perf ({dtype})",
                 m=lambda r: int(r.m), n=lambda r: int(r.n), k=lambda r: int(r.k))
    m = pd.read_parquet(base / "moe" / "trtllm" / v / "moe_perf.parquet")
    m = m[(m.distribution == "balanced") & (m.hidden_size >= 2048)
          & ~m.kernel_source.str.contains("nongated")]
    keys = ["num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
            "moe_ep_size"]
    for dtype, fmt in (("bfloat16", "bf16"), ("fp8_block", "fp8"), ("nvfp4", "fp4"),
                       ("w4a16_mxfp4", "w4a16"), ("w4a8_mxfp4_mxfp8", "w4a8")):
        d = m[m.moe_dtype == dtype]
        if dtype.startswith("w4"):          # MXFP4 experts: GPT-OSS's, the model that runs them
            d = d[d.hidden_size == 2880]
        d = d.groupby(keys, as_index=False).latency.min()
        if len(d):
            emit(sample(d, keys), chip, "moe", fmt,
                 f"{system}/moe/trtllm/{v}/moe_perf ({dtype}, balanced)",
                 tokens=lambda r: int(r.num_tokens), hidden=lambda r: int(r.hidden_size),
                 inter=lambda r: int(r.inter_size), topk=lambda r: int(r.topk),
                 experts=lambda r: int(r.num_experts), tp=lambda r: int(r.moe_tp_size),
                 ep=lambda r: int(r.moe_ep_size))
    for phase, table in (("decode", "generation"), ("prefill", "context")):
        a = pd.read_parquet(base / "attention" / "trtllm" / v / f"{table}_attention_perf.parquet")
        a = a[(a.window_size == 0) & (a.attn_dtype == "bfloat16") & (a.head_dim == 64)
              & (a.num_heads == 8 * a.num_key_value_heads)]
        keys = ["batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim",
                "kv_cache_dtype"]
        d = a.groupby(keys, as_index=False).latency.min()
        kv = {"bfloat16": "bf16", "fp8": "fp8"}
        d = d[d.kv_cache_dtype.isin(list(kv))]
        emit(sample(d, keys), chip, f"{phase}_gqa", "bf16",
             f"{system}/attention/trtllm/{v}/{table}_attention_perf",
             kv_fmt=lambda r: kv[r.kv_cache_dtype], batch=lambda r: int(r.batch_size),
             context=lambda r: int(r.isl + r.step), heads=lambda r: int(r.num_heads),
             kv_heads=lambda r: int(r.num_key_value_heads), head_dim=lambda r: int(r.head_dim))
        a = pd.read_parquet(base / "mla" / "trtllm" / v / f"{table}_mla_perf.parquet")
        keys = ["batch_size", "isl", "step", "num_heads", "kv_cache_dtype"]
        d = a.groupby(keys, as_index=False).latency.min()
        d = d[d.kv_cache_dtype.isin(list(kv))]
        emit(sample(d, keys), chip, f"{phase}_mla", "bf16",
             f"{system}/mla/trtllm/{v}/{table}_mla_perf",
             kv_fmt=lambda r: kv[r.kv_cache_dtype], batch=lambda r: int(r.batch_size),
             context=lambda r: int(r.isl + r.step), heads=lambda r: int(r.num_heads))
    ar = pd.read_parquet(base / "comm" / "trtllm" / v / "custom_allreduce_perf.parquet")
    ar = ar[ar.allreduce_dtype == "bfloat16"]
    emit(sample(ar, ["num_gpus", "message_size"]), chip, "allreduce", "bf16",
         f"{system}/comm/trtllm/{v}/custom_allreduce_perf",
         m=lambda r: int(r.message_size), n=lambda r: int(r.num_gpus))
    ll = pd.read_parquet(base / "comm" / "sglang" / args["deepep"] /
                         "wideep_deepep_ll_perf.parquet")
    ll = ll[(ll.node_num == 1) & (ll.hidden_size == 7168) & (ll.num_experts == 256)]
    for phase, fmt in (("dispatch", "fp8"), ("combine", "bf16")):
        d = ll.assign(latency=ll[f"{phase}_avg_t_us"] / 1e3)
        emit(sample(d, ["num_token", "num_topk"]), chip, "a2a", fmt,
             f"{system}/comm/sglang/{args['deepep']}/wideep_deepep_ll_perf ({phase}, one node)",
             tokens=lambda r: int(r.num_token), hidden=lambda r: int(r.hidden_size),
             topk=lambda r: int(r.num_topk), experts=lambda r: int(r.num_experts))
"""


def extract(aic_python: str) -> None:
    """Samples AIConfigurator's tables into :data:`DATA`."""
    args = {"systems": SYSTEMS, "version": VERSION, "sample": SAMPLE, "columns": COLUMNS,
            "deepep": DEEPEP}
    got = subprocess.run([aic_python, "-c", CHILD, json.dumps(args)], check=True,
                         capture_output=True, text=True)
    with gzip.open(DATA, "wt", newline="") as f:
        f.write(got.stdout)


def rows() -> list[dict]:
    with gzip.open(DATA, "rt", newline="") as f:
        return list(csv.DictReader(io.StringIO(f.read())))


def _model(chip, row: dict, p: kernels.OpParams) -> float:
    """The model's seconds for a table's row."""
    if row["op"] == "allreduce":
        return kernels.allreduce_seconds(chip, p, int(row["n"]),
                                         float(row["m"]) * kernels.ACT_BYTES[row["fmt"]])
    f, b, n = kernels.cost(row)
    return kernels.seconds(chip, row["op"], row["fmt"], p, f, b, n, kernels.shape(row))


#: A pad is fitted only where its dimension takes at least this many values in the rows.
PAD_VALUES = 3
#: The largest pad the fit may give (rows or columns); one at it is flagged in the doc.
PAD_MAX = 4096.0


def _aic(residuals: list[float], k: int) -> float:
    """Akaike's information criterion of a least-squares fit of ``k`` numbers."""
    n = len(residuals)
    return n * math.log(max(sum(r * r for r in residuals), 1e-30) / n) + 2 * k


def _with_pads(y, pads: tuple[int, ...]) -> list[float]:
    """A fit's numbers ``y`` (three, then one for each pad in ``pads``: 0 for M, 1 for N) as
    five: the three, then pad M and pad N (0 where left out)."""
    full = [*y[:3], 0.0, 0.0]
    for i, v in zip(pads, y[3:], strict=True):
        full[3 + i] = v
    return full


def _fit(chip, group: list[dict]) -> dict:
    """The numbers of one (GPU, operation, format) on its rows: compute, bandwidth and floor
    (the all-reduce: bandwidth, floor and its two-shot's fixed time); a GEMM's or a MoE's
    also its pads: each a candidate where its dimension varies in the rows
    (:data:`PAD_VALUES`), the candidates' fit of least Akaike criterion kept (a pad left out
    is 0)."""
    from scipy.optimize import least_squares

    measured = [float(r["us"]) * 1e-6 for r in group]
    allreduce = group[0]["op"] == "allreduce"

    def numbers(x):
        if allreduce:
            return kernels.OpParams(0.5, x[0], x[1], x[2])
        return kernels.OpParams(x[0], x[1], x[2], 0.0, x[3], x[4])

    def residuals(x):
        p = numbers(x)
        return [math.log(_model(chip, r, p) / t) for r, t in zip(group, measured, strict=True)]

    start, lo, hi = (([0.7, 5.0, 10.0], [0.01, 0.0, 0.0], [1.0, 1000.0, 1000.0]) if allreduce
                     else ([0.5, 0.7, 5.0], [0.01, 0.01, 0.0], [1.0, 1.0, 1000.0]))
    # The fits tried: without pads, and for a GEMM or a MoE with each pad whose dimension
    # takes several values in the rows (with one N, pad_n and the compute fraction are the
    # same number); the one of least AIC is kept.
    candidates = [()]
    padded = group[0]["op"] in ("gemm", "moe")
    if padded:
        dims = [kernels.shape(r) for r in group]
        varies = [len({d[i] for d in dims}) >= PAD_VALUES for i in (0, 1)]
        candidates += [pads for pads in ((0,), (1,), (0, 1)) if all(varies[i] for i in pads)]
    best = None
    for pads in candidates:
        def fitted(y, pads=pads):
            return residuals(_with_pads(y, pads))

        y = least_squares(fitted, start + [16.0] * len(pads),
                          bounds=(lo + [0.0] * len(pads), hi + [PAD_MAX] * len(pads))).x
        aic = _aic(fitted(y), len(y))
        if best is None or aic < best[0]:
            best = (aic, _with_pads(y, pads))
    x = best[1]
    p = numbers(x)
    binds = not allreduce and any(
        c > b for c, b in (kernels.busy(chip, r["op"], r["fmt"], p, *kernels.cost(r)[:2],
                                        kernels.shape(r))
                           for r in group))
    out = {"compute": round(p.compute, 4), "bandwidth": round(p.bandwidth, 4),
           "floor_us": round(p.floor_us, 3), "rows": len(group), "compute_binds": binds}
    if padded:
        out |= {"pad_m": round(p.pad_m, 2), "pad_n": round(p.pad_n, 2)}
    return out | ({"switch_us": round(p.switch_us, 3)} if allreduce else {})


def _errors(chip, group, p: kernels.OpParams) -> list[float]:
    return [_model(chip, r, p) / (float(r["us"]) * 1e-6) - 1 for r in group]


def _pct(errors, q):
    e = sorted(abs(x) for x in errors)
    return e[min(len(e) - 1, int(q * len(e)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--aic-python", help="AIConfigurator's Python: resample its tables first")
    ap.add_argument("--out", default=str(ROOT / "docs" / "explore-kernels.md"))
    ap.add_argument("--table", default=str(kernels.TABLE_FILE),
                    help="the table the exploration reads (default: %(default)s)")
    args = ap.parse_args()
    if args.aic_python:
        extract(args.aic_python)
    groups: dict[tuple, list[dict]] = {}
    for r in rows():
        groups.setdefault((r["chip"], r["op"], r["fmt"]), []).append(r)
    table: dict = {}
    for (name, op, fmt), group in sorted(groups.items()):
        table.setdefault(name, {}).setdefault(op, {})[fmt] = _fit(load_chip(name), group)
    Path(args.table).write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    kernels.reload(Path(args.table))
    lines = [
        "# Each GPU's efficiency per operation", "",
        "Made by `python scripts/explore_kernels.py` from "
        "`scoville/explore/data/kernels.csv.gz`: a sample of NVIDIA AIConfigurator 0.12's "
        f"measured kernel tables (TensorRT-LLM {VERSION}; DeepEP's all-to-all from SGLang "
        f"{DEEPEP}'s; "
        "`aiconfigurator_core/systems/data/<system>/`, each row naming its table), "
        f"at most {SAMPLE} rows of each GPU, operation and format. The model of an operation "
        "(`scoville.explore.kernels`): a latency floor plus the longer of its compute at a "
        "fraction of the GPU's peak in its format and its bytes at a fraction of HBM "
        "bandwidth (the collectives': of its links' bandwidth, and no compute), a GEMM's and "
        "a MoE's operations padded by pad M rows and pad N columns (M: rows, a MoE's tokens "
        "a touched expert; N: output columns, a MoE's expert width a rank holds; a pad fitted "
        f"only where its dimension takes {PAD_VALUES} or more values in the rows and kept "
        "where it lowers Akaike's criterion, else 0; *(bound)*: at the fit's largest, "
        f"{PAD_MAX:.0f}); each (GPU, "
        "operation, format) fitted by least squares on log latency (compute –: no row is "
        "compute-bound, so the fraction is not determined; it stays at the fit's start, "
        "0.5). "
        "Error = model / measured - 1. *Held out*: the GPU's numbers taken from the other GPUs "
        "of its architecture (`kernels.params` of `kernels.transfer`'s GPUs: the geometric mean of "
        "their fractions and floors, the mean of their pads), as the exploration's "
        "leave-one-hardware-out validation does.", "",
        "| GPU | operation | format | rows | compute | bandwidth | floor (us) | pad M | pad N "
        "| median abs. error | 90th pct. | held out: median | held out: 90th pct. |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (name, op, fmt), group in sorted(groups.items()):
        chip = load_chip(name)
        p = kernels.params(name, op, fmt)
        own = _errors(chip, group, p)
        held = _errors(chip, group, kernels.params(kernels.transfer(name), op, fmt))
        binds = kernels.TABLE[name][op][fmt]["compute_binds"]
        compute = f"{p.compute:.2f}" if binds else "–"
        pads = (" | ".join(f"{v:.0f}" + (" (bound)" if v >= PAD_MAX - 0.5 else "")
                           for v in (p.pad_m, p.pad_n)) if op in ("gemm", "moe") else "– | –")
        lines.append(f"| {name} | {op} | {fmt} | {len(group)} | {compute} | "
                     f"{p.bandwidth:.2f} | {p.floor_us:.1f} | {pads} | "
                     f"{statistics.median(map(abs, own)):.0%} | {_pct(own, 0.9):.0%} | "
                     f"{statistics.median(map(abs, held)):.0%} | {_pct(held, 0.9):.0%} |")
    lines += ["", kernels.__doc__.strip().split("\n\n", 1)[1], ""]
    Path(args.out).write_text("\n".join(lines))
    kernels.reload()
    print(f"wrote {args.table} and {args.out}")


if __name__ == "__main__":
    main()
