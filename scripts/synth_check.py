#!/usr/bin/env python3
"""Yosys with and without its ``share`` pass, cell for cell, on the blocks ``docs/area.md``
reports: the check behind :data:`scoville.synth.yosys.SCRIPT`'s ``-noshare``.

``share`` looks for arithmetic cells behind exclusive multiplexers that one cell could serve
(a SAT problem per pair of candidates). On our arrays it finds none, and its pairs grow as the
square of the PEs: 40% of a 4 x 4 bf16 engine's synthesis, 20 minutes and more of an 8 x 8's.
This runs both scripts on every 4 x 4 GEMM engine (each format and pair, both dataflows), the
arithmetic units of ``scripts/area.py`` and the KV cache, and compares every total and
component: cells by type, flip-flops, memories, logic depth, levels. Results are cached (the build
cache's ``synth/``); the seconds are Yosys's own, when each ran.

Writes ``docs/synth-check.md``; exit status 1 if any block differs.

Usage: ``python scripts/synth_check.py [--jobs 2] [--out FILE.md]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import sys
from pathlib import Path

from scoville.blocks import get_block, parse_params
from scoville.rtl.gemm_arith import PAIRS
from scoville.sim.flow import to_verilog
from scoville.synth.yosys import synthesize

ROOT = Path(__file__).resolve().parent.parent
#: What is compared, in the totals and in every component.
KEYS = ("cells_by_type", "flip_flops", "memories", "logic_depth", "levels", "sram_bits")


def _area():
    spec = importlib.util.spec_from_file_location("area", ROOT / "scripts" / "area.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def designs() -> list[tuple[str, str, dict]]:
    """(label, block, parameters) of every design compared."""
    area = _area()
    out = []
    for fmt, b_fmt in PAIRS:
        for df in ("os", "ws"):
            out.append((f"gemm 4 x 4 {area.label(fmt, b_fmt)} {df}", "gemm",
                        area.gemm_params(4, fmt, b_fmt, df)))
    out += [(lab, block, params) for lab, block, params in area.UNITS]
    out.append(("kvcache (default)", "kvcache", {}))
    return out


def _facts(result: dict) -> dict:
    return {"total": {k: result[k] for k in KEYS},
            **{name: {k: c[k] for k in KEYS} for name, c in result["components"].items()}}


def compare(block_name: str, params: dict) -> dict:
    """Both runs of one design: whether every fact agrees, the cells, and each run's seconds."""
    block = get_block(block_name)
    config, _ = parse_params(block, params)
    verilog = to_verilog(block.component(config), block.name)
    without = synthesize(verilog, block.name)
    with_share = synthesize(verilog, block.name, share=True)
    a, b = _facts(without), _facts(with_share)
    differ = sorted(name for name in {*a, *b} if a.get(name) != b.get(name))
    return {"same": not differ, "differ": differ, "cells": without["cells"],
            "depth": without["logic_depth"], "noshare_s": without["yosys_s"],
            "share_s": with_share["yosys_s"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "docs" / "synth-check.md"))
    args = parser.parse_args(argv)
    todo = designs()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(compare, block, params) for _, block, params in todo]
        results = [f.result() for f in futures]
    lines = [
        "# Yosys's share pass: what leaving it out changes",
        "",
        "Made by `python scripts/synth_check.py`; do not edit by hand. `scoville synth` runs "
        "Yosys's `synth` without its `share` pass (`-noshare`, "
        "[synth.md](synth.md)); `--share` runs it. Each design below synthesized both ways, "
        "compared in its totals and every component (cells by type, flip-flops, memories, "
        "logic depth, levels, SRAM bits). Seconds: Yosys's own, on this machine when each "
        "ran (two at once: the ratio is rough).",
        "",
        "| design | gate cells | depth | same with share | Yosys s with share | "
        "without | with / without |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for (lab, _, _), r in zip(todo, results, strict=True):
        same = "yes" if r["same"] else "no: " + ", ".join(r["differ"])
        lines.append(f"| {lab} | {r['cells']:,} | {r['depth']} | {same} | "
                     f"{r['share_s']:.1f} | {r['noshare_s']:.1f} | "
                     f"{r['share_s'] / max(r['noshare_s'], 0.1):.2f} |")
    total = sum(r["share_s"] for r in results), sum(r["noshare_s"] for r in results)
    differ = [lab for (lab, _, _), r in zip(todo, results, strict=True) if not r["same"]]
    lines += ["", f"All {len(todo)} designs: Yosys {total[0]:,.0f} s with share, "
                  f"{total[1]:,.0f} s without; "
                  + (f"**{len(differ)} differ**: {', '.join(differ)}." if differ else
                     "every design the same cell for cell.")]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
