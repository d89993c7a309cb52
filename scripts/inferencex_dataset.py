#!/usr/bin/env python3
"""Rebuild the InferenceX validation dataset (``scoville/explore/data/inferencex*.csv``).

Source: SemiAnalysis InferenceX, as published in the InferenceX-app repository,
``SemiAnalysisAI/InferenceX-app`` at the pinned commit ``528c4146b8f502fcbce8df7870a935a970cbae25``
(2026-06-14, "chore(e2e): refresh Cypress fixtures so MiniMax M3 appears in dropdown (#458)").
Neither InferenceX repository commits its measured results (they live in GitHub Actions artifacts
and the app's Postgres database, released as dump zips that are not in git); the only committed,
dated copies of published points with their configurations are these files of that commit:

- ``packages/app/cypress/fixtures/api/benchmarks.json``: a capture of the production API
  ``/api/v1/benchmarks?model=DeepSeek-R1-0528`` (the dashboard's "latest run per config" view:
  one row per config, concurrency, ISL and OSL) written by ``packages/app/scripts/
  capture-cypress-fixtures.ts``. The capture keeps at most 5 concurrencies per (hardware,
  framework, precision, ISL, OSL), evenly spaced along the sweep and including both ends, so
  a config's sweep can be incomplete. DeepSeek-R1 only. Its sha256 equals the one the
  upstream ``_manifest.json`` records for this fixture.
- two blog posts of the same commit with per-concurrency tables for Kimi K2.5 (the snapshot has
  no API record for Kimi or gpt-oss-120b):
  ``packages/app/content/blog/b200-nvfp4-vs-h200-int4-kimi-k2-vllm-perf-per-dollar.mdx`` and
  ``packages/app/content/blog/gb200-nvl72-kimi-k2-5-vllm-wide-ep-3x-vs-b200.mdx``; and two
  DeepSeek-R1 blog posts whose rows are only listed as excluded
  (``gb200-nvl72-vs-b200-disagg-deepseek-r1-fp4-dynamo-trt.mdx``,
  ``sglang-0-5-6-b200-deepseek-r1-fp4-up-to-1-8x.mdx``).

Kept (``inferencex.csv``): every point of DeepSeek-R1, gpt-oss-120b and Kimi K2/K2.5 on H100,
H200, B200, GB200 and GB300 at 1k/1k, 1k/8k and 8k/1k (ISL/OSL 1024/1024, 1024/8192,
8192/1024). API rows first; blog-table rows only for a model that has no API row in the
snapshot (Kimi), and of a recipe published for two runs only the newer run's rows.

Dropped (``inferencex-excluded.csv``, one row each with a ``reason``): legacy disaggregated API
rows without a recorded prefill/decode split; rows whose per-GPU throughputs do not add up;
rows missing a required metric; duplicates; DeepSeek-R1 blog rows (the API rows are the record
for that model); Kimi blog rows superseded by a newer run of the same config. Not listed one by
one: other models, AMD GPUs and B300 (out of scope), counted on stdout.

Mapping (API field -> column): ``tput_per_gpu`` -> tok_s_gpu_total (input + output tokens per
second over all GPUs of the deployment: prefill + decode GPUs when disaggregated);
``output_tput_per_gpu`` -> tok_s_gpu_output, except that for disaggregated rows InferenceX
divides output tokens by the decode GPUs only, so here it is rescaled to all GPUs:
``output_tput_per_gpu * num_decode_gpu / (num_prefill_gpu + num_decode_gpu)``;
``median_intvty`` (= 1 / ``median_tpot``) -> tok_s_user_median; ``median_ttft`` ->
ttft_s_median; ``median_tpot`` -> tpot_s_median; ``image`` -> engine_version; ``framework``
-> engine; ``date`` (the workflow run's date) -> date. See ``scoville/explore/data/README.md``.

Usage::

    python scripts/inferencex_dataset.py                 # download the pinned files
    python scripts/inferencex_dataset.py --source DIR    # DIR: a checkout of InferenceX-app

Python 3.11, standard library only.
"""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import json
import re
import sys
import urllib.request
from decimal import Decimal
from pathlib import Path

REPO = "SemiAnalysisAI/InferenceX-app"
COMMIT = "528c4146b8f502fcbce8df7870a935a970cbae25"
COMMIT_DATE = "2026-06-14"

API_PATH = "packages/app/cypress/fixtures/api/benchmarks.json"
BLOG = "packages/app/content/blog/"
BLOG_KIMI_B200_H200 = BLOG + "b200-nvfp4-vs-h200-int4-kimi-k2-vllm-perf-per-dollar.mdx"
BLOG_KIMI_GB200 = BLOG + "gb200-nvl72-kimi-k2-5-vllm-wide-ep-3x-vs-b200.mdx"
BLOG_DSR1_GB200 = BLOG + "gb200-nvl72-vs-b200-disagg-deepseek-r1-fp4-dynamo-trt.mdx"
BLOG_DSR1_SGLANG = BLOG + "sglang-0-5-6-b200-deepseek-r1-fp4-up-to-1-8x.mdx"

#: sha256 of every file at the pinned commit (the API fixture's is also in upstream's
#: ``packages/app/cypress/fixtures/api/_manifest.json``).
SHA256 = {
    API_PATH: "f46823a76cb63248705329f327e1494df02b4dfa4df0898b7ee084c75c20bd52",
    BLOG_KIMI_B200_H200: "5b2c28dce14396e535ff13bb36740cba08ced2c871308034b5b8a0aa60ba308c",
    BLOG_KIMI_GB200: "a6312fa9f631c05b2994664888a4b53bcbb563ec64a7605032ebbc455fb7bb79",
    BLOG_DSR1_GB200: "aeddc95dd8f41a1392ea9c118bfc34e32ac72b5c0932de1d96062a6309b13da8",
    BLOG_DSR1_SGLANG: "e8178cc46edbb1d8418d2cdf7d12d5045155c943e8198d4d5a3ba2be11c0249f",
}

#: InferenceX model keys (``model`` in the API) -> dataset names.
MODELS = {"dsr1": "deepseek-r1", "gptoss120b": "gpt-oss-120b", "gptoss": "gpt-oss-120b",
          "kimik2.5": "kimi-k2", "kimik2": "kimi-k2"}
HARDWARE = ("h100", "h200", "b200", "gb200", "gb300")
SCENARIOS = {(1024, 1024): "1k1k", (1024, 8192): "1k8k", (8192, 1024): "8k1k"}

COLUMNS = [
    "id", "model", "hardware", "engine", "engine_version", "precision", "gpus", "tp", "ep",
    "dp_attention", "disagg", "prefill_gpus", "decode_gpus", "spec_method", "isl", "osl",
    "concurrency", "tok_s_gpu_total", "tok_s_gpu_output", "tok_s_user_median", "ttft_s_median",
    "tpot_s_median", "source_repo", "source_path", "source_commit", "date",
    # Beyond the required columns: the prefill pool's layout, worker counts, provenance.
    "prefill_tp", "prefill_ep", "prefill_dp_attention", "prefill_workers", "decode_workers",
    "source_kind", "ttft_source", "run_url",
]
EXCLUDED_COLUMNS = COLUMNS + ["reason"]


def fail(msg: str) -> None:
    print(f"inferencex_dataset: {msg}", file=sys.stderr)
    sys.exit(2)


def read_source(path: str, source: Path | None) -> bytes:
    if source is not None:
        p = source / path
        if not p.is_file():
            fail(f"{p} not found (is --source a checkout of {REPO}?)")
        data = p.read_bytes()
    else:
        url = f"https://raw.githubusercontent.com/{REPO}/{COMMIT}/{path}"
        try:
            with urllib.request.urlopen(url, timeout=120) as r:
                data = r.read()
        except OSError as e:  # urllib.error.URLError is an OSError
            fail(f"cannot download {url}: {e} (or pass --source DIR)")
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256[path]:
        fail(f"{path}: sha256 {digest} is not the pinned commit's {SHA256[path]}")
    return data


def num(x) -> str:
    """A number as the source wrote it (float repr), blank for missing."""
    if x is None:
        return ""
    if isinstance(x, bool):
        raise TypeError(x)
    return repr(x) if isinstance(x, float) else str(x)


def flag(x) -> str:
    if x is None or x == "":
        return ""
    if isinstance(x, str):
        x = x.strip().lower() == "true"
    return "true" if x else "false"


def point_id(r: dict) -> str:
    if r["disagg"] == "true":
        p_dpa = "dpa" if r["prefill_dp_attention"] == "true" else ""
        d_dpa = "dpa" if r["dp_attention"] == "true" else ""
        layout = (f"p{r['prefill_gpus'] or 'x'}tp{r['prefill_tp'] or 'x'}ep{r['prefill_ep'] or 'x'}"
                  f"{p_dpa}-d{r['decode_gpus'] or 'x'}tp{r['tp'] or 'x'}ep{r['ep'] or 'x'}{d_dpa}")
    else:
        dpa = "dpa" if r["dp_attention"] == "true" else ""
        layout = f"tp{r['tp'] or 'x'}ep{r['ep'] or 'x'}{dpa}"
    scen = SCENARIOS[(int(r["isl"]), int(r["osl"]))]
    return "_".join([r["model"], r["hardware"], r["engine"], r["precision"], r["spec_method"],
                     layout, scen, f"c{r['concurrency']}"])


# --------------------------------------------------------------------------------------------
# API rows


def api_row(src: dict) -> dict:
    m = src["metrics"]
    disagg = bool(src["disagg"])
    P, D = src["num_prefill_gpu"], src["num_decode_gpu"]
    out = m.get("output_tput_per_gpu")
    if disagg:
        gpus = P + D
        if out is not None:
            out = out * D / gpus
        tp, ep, dpa = src["decode_tp"], src["decode_ep"], src["decode_dp_attention"]
        prefill_gpus, decode_gpus = num(P), num(D)
        p_workers, d_workers = num(src["prefill_num_workers"]), num(src["decode_num_workers"])
    else:
        # Single node: InferenceX divides by tp * pp * pcp_size (pp, pcp_size default 1);
        # the API's num_*_gpu are tp * ep for these rows, not a GPU count.
        gpus = src["prefill_tp"] * int(m.get("pp", 1) or 1) * int(m.get("pcp_size", 1) or 1)
        tp, ep, dpa = src["prefill_tp"], src["prefill_ep"], src["prefill_dp_attention"]
        prefill_gpus = decode_gpus = p_workers = d_workers = ""
    return {
        "model": MODELS[src["model"]],
        "hardware": src["hardware"],
        "engine": src["framework"],
        "engine_version": src.get("image") or "",
        "precision": src["precision"],
        "gpus": num(gpus), "tp": num(tp), "ep": num(ep), "dp_attention": flag(dpa),
        "disagg": flag(disagg), "prefill_gpus": prefill_gpus, "decode_gpus": decode_gpus,
        "spec_method": src["spec_method"],
        "isl": num(src["isl"]), "osl": num(src["osl"]), "concurrency": num(src["conc"]),
        "tok_s_gpu_total": num(m.get("tput_per_gpu")),
        "tok_s_gpu_output": num(out),
        "tok_s_user_median": num(m.get("median_intvty")),
        "ttft_s_median": num(m.get("median_ttft")),
        "tpot_s_median": num(m.get("median_tpot")),
        "source_repo": REPO, "source_path": API_PATH, "source_commit": COMMIT,
        "date": src["date"],
        "prefill_tp": num(src["prefill_tp"]), "prefill_ep": num(src["prefill_ep"]),
        "prefill_dp_attention": flag(src["prefill_dp_attention"]),
        "prefill_workers": p_workers, "decode_workers": d_workers,
        "source_kind": "api",
        "ttft_source": "measured: metrics.median_ttft" if m.get("median_ttft") is not None else "",
        "run_url": src.get("run_url") or "",
    }


def api_problem(src: dict) -> str | None:
    m = src["metrics"]
    missing = [k for k in ("tput_per_gpu", "median_intvty", "median_ttft", "median_tpot")
               if m.get(k) is None]
    if missing:
        return "missing metric(s): " + ", ".join(missing)
    if src["disagg"] and not src["is_multinode"]:
        return ("legacy disaggregated row (v1 artifact schema, before 2025-12-05): the API "
                f"records tp={src['prefill_tp']} and num_prefill_gpu=num_decode_gpu="
                f"{src['num_prefill_gpu']} as placeholders, so the prefill/decode split and the "
                "GPU count behind the per-GPU numbers are unknown")
    P, D = src["num_prefill_gpu"], src["num_decode_gpu"]
    out, inp = m.get("output_tput_per_gpu"), m.get("input_tput_per_gpu")
    if out is not None and inp is not None:
        if src["disagg"]:
            total, parts = m["tput_per_gpu"] * (P + D), out * D + inp * P
        else:
            total, parts = m["tput_per_gpu"], out + inp
        if abs(parts / total - 1) > 1e-6:
            return (f"per-GPU throughputs inconsistent (total {total:.6g} vs input + output "
                    f"{parts:.6g} with the recorded GPU counts)")
    return None


# --------------------------------------------------------------------------------------------
# Blog tables


def md_tables(text: str) -> list[list[dict]]:
    """Markdown tables whose header has ``Conc`` and ``tok/s/GPU``, as lists of row dicts."""
    tables, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s\-:|]+\|$",
                                                                        lines[i + 1].strip()):
            head = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            rows, j = [], i + 2
            while j < len(lines) and lines[j].startswith("|"):
                cells = [c.strip().strip("*").strip()
                         for c in lines[j].strip().strip("|").split("|")]
                if len(cells) != len(head):
                    fail(f"table row with {len(cells)} cells under a {len(head)}-column header")
                rows.append(dict(zip(head, cells, strict=True)))
                j += 1
            if "Conc" in head and "tok/s/GPU" in head:
                tables.append(rows)
            i = j
        else:
            i += 1
    return tables


def dec(s: str) -> Decimal:
    return Decimal(s.replace(",", "").replace("$", "").replace("ms", "").strip())


def ms_to_s(s: str) -> str:
    return str(dec(s) / 1000)


def tp_ep(cell: str) -> tuple[str, str]:
    """'TP 16, EP 16' -> ('16', '16')."""
    t = re.search(r"TP\s*=?\s*(\d+)", cell)
    e = re.search(r"EP\s*=?\s*(\d+)", cell)
    return (t.group(1) if t else "", e.group(1) if e else "")


def gpus_of(cell: str) -> str:
    g = re.search(r"(\d+)\s*GPU", cell)
    return g.group(1) if g else ""


KIMI_VERSION_MAY = "vllm/vllm-openai:v0.21.0"
RUN_KIMI_MAY = "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/26118912054"
RUN_KIMI_GB200 = "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/24100518225"
RUN_DSR1_GB200 = "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/26306422380"

#: (path, table index among the file's Conc/tok/s/GPU tables, expected rows, fixed fields, note).
BLOG_TABLES = [
    (BLOG_KIMI_B200_H200, 0, 5, dict(model="kimi-k2", hardware="h200", engine="vllm",
     engine_version=KIMI_VERSION_MAY, precision="int4", tp="8", gpus="8", disagg="false",
     isl="8192", osl="1024", date="2026-05-19", run_url=RUN_KIMI_MAY), None),
    (BLOG_KIMI_B200_H200, 1, 5, dict(model="kimi-k2", hardware="b200", engine="vllm",
     engine_version=KIMI_VERSION_MAY, precision="int4", tp="8", gpus="8", disagg="false",
     isl="8192", osl="1024", date="2026-05-19", run_url=RUN_KIMI_MAY), None),
    (BLOG_KIMI_B200_H200, 2, 6, dict(model="kimi-k2", hardware="b200", engine="vllm",
     engine_version=KIMI_VERSION_MAY, precision="fp4", disagg="false",
     isl="8192", osl="1024", date="2026-05-19", run_url=RUN_KIMI_MAY), None),
    (BLOG_KIMI_GB200, 0, 5, dict(model="kimi-k2", hardware="b200", engine="vllm",
     precision="fp4", disagg="false", isl="8192", osl="1024", date="2026-03-27"),
     "superseded"),
    (BLOG_KIMI_GB200, 1, 9, dict(model="kimi-k2", hardware="gb200", engine="dynamo-vllm",
     engine_version="vllm 0.18.0", precision="fp4", disagg="true",
     spec_method="none", prefill_gpus="4", isl="8192", osl="1024", date="2026-04-07",
     run_url=RUN_KIMI_GB200), None),
    (BLOG_DSR1_GB200, 0, 9, dict(model="deepseek-r1", hardware="gb200", engine="dynamo-trt",
     precision="fp4", disagg="true", spec_method="mtp", isl="1024", osl="1024",
     date="2026-05-22", run_url=RUN_DSR1_GB200), "dsr1"),
    (BLOG_DSR1_GB200, 1, 11, dict(model="deepseek-r1", hardware="b200", engine="dynamo-trt",
     precision="fp4", disagg="true", spec_method="mtp", isl="1024", osl="1024",
     date="2026-05-22", run_url=RUN_DSR1_GB200), "dsr1"),
    (BLOG_DSR1_SGLANG, 0, 12, dict(model="deepseek-r1", hardware="b200", engine="sglang",
     precision="fp4", disagg="false", tp="4", ep="4", gpus="4", spec_method="none",
     isl="8192", osl="1024"), "dsr1-history"),
]


def blog_rows(path: str, text: str) -> list[tuple[dict, str | None]]:
    tables = md_tables(text)
    out = []
    for bpath, idx, expect, fixed, note in BLOG_TABLES:
        if bpath != path:
            continue
        rows = tables[idx]
        if len(rows) != expect:
            fail(f"{path} table {idx}: {len(rows)} rows, expected {expect}")
        for c in rows:
            r = {k: "" for k in COLUMNS}
            r.update(spec_method="none", source_repo=REPO, source_path=path,
                     source_commit=COMMIT, source_kind="blog-table")
            r.update(fixed)
            r["concurrency"] = str(int(dec(c["Conc"])))
            r["tok_s_gpu_total"] = str(dec(c["tok/s/GPU"]))
            r["tok_s_user_median"] = str(dec(c["tok/s/user"]))
            r["tpot_s_median"] = ms_to_s(c["TPOT (ms)"] if "TPOT (ms)" in c else c["TPOT"])
            if "TP" in c:  # "TP=4"
                r["tp"] = r["gpus"] = tp_ep(c["TP"])[0]
            if "Prefill" in c:
                r["prefill_tp"], r["prefill_ep"] = tp_ep(c["Prefill"])
                if gpus_of(c["Prefill"]):
                    r["prefill_gpus"] = gpus_of(c["Prefill"])
                r["tp"], r["ep"] = tp_ep(c["Decode"])
                r["decode_gpus"] = gpus_of(c["Decode"])
                if r["disagg"] == "false":  # one pool: the decode columns repeat the prefill's
                    r["prefill_tp"] = r["prefill_ep"] = ""
                elif r["prefill_gpus"] and r["decode_gpus"]:
                    r["gpus"] = str(int(r["prefill_gpus"]) + int(r["decode_gpus"]))
            if "Version" in c:
                r["engine_version"] = f"lmsysorg/sglang:v{c['Version']}-cu129-amd64"
                r["date"] = {"0.5.5": "2025-12-15", "0.5.6": "2025-12-31"}[c["Version"]]
            out.append((r, note))
    return out


# --------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help=f"a checkout of {REPO} at {COMMIT[:12]} "
                        "(default: download the files from raw.githubusercontent.com)")
    parser.add_argument("--out-dir", type=Path,
                        default=Path(__file__).resolve().parents[1] / "scoville" / "explore"
                        / "data")
    args = parser.parse_args()

    api = json.loads(read_source(API_PATH, args.source))
    kept: list[dict] = []
    excluded: list[dict] = []
    skipped: collections.Counter = collections.Counter()
    seen: dict[str, dict] = {}

    excluded_ids: set[str] = set()

    def exclude(r: dict, reason: str) -> None:
        if r["id"] in excluded_ids:  # e.g. two runs of one config in a blog table
            r = {**r, "id": f"{r['id']}_{r['date']}"}
        excluded_ids.add(r["id"])
        excluded.append({**r, "reason": reason})

    for src in api:
        model = MODELS.get(src["model"])
        if model is None:
            skipped[f"model {src['model']} (out of scope)"] += 1
            continue
        if src["hardware"] not in HARDWARE:
            kind = "AMD" if src["hardware"].startswith("mi") else "NVIDIA, out of scope"
            skipped[f"hardware {src['hardware']} ({kind})"] += 1
            continue
        if (src["isl"], src["osl"]) not in SCENARIOS:
            skipped[f"scenario {src['isl']}/{src['osl']}"] += 1
            continue
        r = api_row(src)
        r["id"] = point_id(r)
        problem = api_problem(src)
        if problem:
            exclude(r, problem)
        elif r["id"] in seen:
            exclude(r, f"duplicate of {r['id']} (same config and concurrency)")
        else:
            seen[r["id"]] = r
            kept.append(r)

    api_models = {r["model"] for r in kept}
    blog: list[tuple[dict, str | None]] = []
    for path in (BLOG_KIMI_B200_H200, BLOG_KIMI_GB200, BLOG_DSR1_GB200, BLOG_DSR1_SGLANG):
        blog += blog_rows(path, read_source(path, args.source).decode("utf-8"))
    for r, note in blog:
        r["id"] = point_id(r) + "_blog"
        if note == "superseded":
            exclude(r, "superseded: the same hardware/engine/precision/TP/scenario/concurrency "
                    "is published for the newer 2026-05-19 run (" + BLOG_KIMI_B200_H200 +
                    "); also its table says 'non disaggregated, 16 GPU pool' at TP 4, so the "
                    "GPU count is unclear")
        elif note in ("dsr1", "dsr1-history") or r["model"] in api_models:
            twin = [a for a in kept if a["model"] == r["model"] and a["hardware"] == r["hardware"]
                    and a["engine"] == r["engine"] and a["precision"] == r["precision"]
                    and a["spec_method"] == r["spec_method"] and a["isl"] == r["isl"]
                    and a["osl"] == r["osl"] and a["concurrency"] == r["concurrency"]
                    and abs(float(a["tok_s_gpu_total"]) - float(r["tok_s_gpu_total"])) < 0.051]
            if twin:
                exclude(r, f"duplicate of API row {twin[0]['id']} (same values, rounded)")
            elif note == "dsr1-history":
                exclude(r, "historical: an older SGLang image's run; the API snapshot holds the "
                        "latest run of each DeepSeek-R1 config")
            else:
                exclude(r, "blog frontier row for a model that has API rows (the API rows are the "
                        "record); not in the API fixture's concurrency sample, and the post's "
                        "stated run date does not hold for every row (its conc 16130 GB200 row "
                        "equals an API row dated 2026-03-23)")
        else:
            if r["id"] in seen:
                exclude(r, f"duplicate of {r['id']}")
                continue
            r["ttft_source"] = "not published"
            seen[r["id"]] = r
            kept.append(r)

    order = {m: i for i, m in enumerate(("deepseek-r1", "gpt-oss-120b", "kimi-k2"))}
    hw_order = {h: i for i, h in enumerate(HARDWARE)}

    def key(r: dict):
        config = r["id"].replace(f"_c{r['concurrency']}", "")
        return (order[r["model"]], hw_order[r["hardware"]], r["isl"] != "1024", r["osl"],
                r["engine"], r["precision"], r["spec_method"], r["disagg"], config,
                int(r["concurrency"]))

    kept.sort(key=key)
    excluded.sort(key=key)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows, cols in (("inferencex.csv", kept, COLUMNS),
                             ("inferencex-excluded.csv", excluded, EXCLUDED_COLUMNS)):
        with open(args.out_dir / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)

    # Summary for the README.
    print(f"snapshot {REPO}@{COMMIT} ({COMMIT_DATE})")
    print(f"kept {len(kept)}, excluded {len(excluded)}; not listed: "
          + ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items())))
    counts = collections.Counter(
        (r["model"], r["hardware"], SCENARIOS[(int(r["isl"]), int(r["osl"]))]) for r in kept)
    print("\n| model | hardware | 1k1k | 1k8k | 8k1k | total |\n|---|---|---:|---:|---:|---:|")
    for m in order:
        for h in HARDWARE:
            c = [counts[(m, h, s)] for s in ("1k1k", "1k8k", "8k1k")]
            print(f"| {m} | {h} | {c[0]} | {c[1]} | {c[2]} | {sum(c)} |")
    reasons = collections.Counter(re.split(r"[:(]| of ", e["reason"])[0].strip()
                                  for e in excluded)
    print("\nexcluded by reason:", dict(reasons))
    return 0


if __name__ == "__main__":
    sys.exit(main())
