#!/usr/bin/env python3
"""Yosys with and without its ``share`` pass on the blocks ``docs/area.md`` reports: the check
behind :data:`scoville.synth.yosys.SCRIPT`'s ``-noshare``.

``share`` looks for arithmetic cells behind exclusive multiplexers that one cell could serve
(a SAT problem per pair of candidates), pairs that grow as the square of the PEs: over 20
minutes of an 8 x 8 wide-format engine's synthesis, minutes without it (``docs/area.md``).
This runs both scripts on every 4 x 4 GEMM engine (each format and pair, both
dataflows), the arithmetic units of ``scripts/area.py`` and the KV cache, and compares the
totals: gate cells, transistors, flip-flops, SRAM bits, depth, levels. ABC maps the netlist
``share`` touched a little differently, so they move a little; past :data:`TOLERANCE` of the
transistors or :data:`LEVELS` of the levels the script fails. Results are cached (the build
cache's ``synth/``); the seconds are Yosys's own, when each ran.

Writes ``docs/synth-check.md``; exit status 1 if any design is past the bounds.

Usage: ``python scripts/synth_check.py [--jobs 2] [--out FILE.md]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
from pathlib import Path

from scoville.blocks import get_block, parse_params
from scoville.rtl.gemm_arith import PAIRS
from scoville.sim.flow import to_verilog
from scoville.synth.yosys import synthesize

ROOT = Path(__file__).resolve().parent.parent
#: What is compared: the block's totals.
KEYS = ("cells", "transistors", "flip_flops", "sram_bits", "logic_depth", "levels")
#: Where the script fails (exit status 1): the transistors moving by more than this share, or
#: the levels by more than this share of them (and more than two). ABC maps a netlist that
#: ``share`` touched a little differently, so the two are rarely equal to the cell.
TOLERANCE, LEVELS = 0.01, 0.05


def designs() -> list[tuple[str, str, dict]]:
    """(label, block, parameters) of every design compared."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import area  # the tables' designs

    out = []
    for fmt, b_fmt in PAIRS:
        for df in ("os", "ws"):
            out.append((f"gemm 4 x 4 {area.label(fmt, b_fmt)} {df}", "gemm",
                        area.gemm_params(4, fmt, b_fmt, df)))
    out += [(lab, block, params) for lab, block, params in area.UNITS]
    out.append(("kvcache (default)", "kvcache", {}))
    return out


def compare(block_name: str, params: dict) -> dict:
    """Both runs of one design: the totals each gives and each run's seconds."""
    block = get_block(block_name)
    config, _ = parse_params(block, params)
    verilog = to_verilog(block.component(config), block.name)
    without = synthesize(verilog, block.name)
    with_share = synthesize(verilog, block.name, share=True)
    return {"without": {k: without[k] for k in KEYS}, "with": {k: with_share[k] for k in KEYS},
            "noshare_s": without["yosys_s"], "share_s": with_share["yosys_s"]}


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
        "Yosys's `synth` without its `share` pass (`-noshare`, [synth.md](synth.md)); `--share` "
        "runs it. Each design below synthesized both ways: its totals (gate cells, "
        "transistors, flip-flops, SRAM bits, Yosys's depth, levels), without then with. In the "
        "logs we read (the int4 and bf16 engines) `share` merged nothing (every pair of "
        "candidates 'can not be shared'; the cells it removes as never active, later passes "
        "remove too), but ABC maps the netlist it touched a little differently: the totals "
        "move a little either way. The script "
        f"fails past {TOLERANCE:.0%} of the transistors or {LEVELS:.0%} of the levels. "
        "Seconds: Yosys's own, on this machine when each ran (beside other work: the ratio "
        "is rough).",
        "",
        "| design | gate cells without | with | transistors, with / without - 1 | flip-flops "
        "and SRAM bits | depth without / with | levels without / with | Yosys s without | "
        "with |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    differ, worst, moved = [], 0.0, []
    for (lab, _, _), r in zip(todo, results, strict=True):
        a, b = r["without"], r["with"]
        dt = b["transistors"] / a["transistors"] - 1
        worst = max(worst, abs(dt))
        state = (a["flip_flops"], a["sram_bits"]) == (b["flip_flops"], b["sram_bits"])
        dl = abs(a["levels"] - b["levels"])
        if dl:
            moved.append(dl)
        if abs(dt) > TOLERANCE or dl > max(2, LEVELS * a["levels"]) or not state:
            differ.append(lab)
        lines.append(f"| {lab} | {a['cells']:,} | {b['cells']:,} | {dt:+.2%} | "
                     f"{'equal' if state else 'differ'} | "
                     f"{a['logic_depth']} / {b['logic_depth']} | {a['levels']} / {b['levels']} | "
                     f"{r['noshare_s']:.1f} | {r['share_s']:.1f} |")
    total = sum(r["share_s"] for r in results), sum(r["noshare_s"] for r in results)
    lines += ["", f"All {len(todo)} designs: Yosys {total[1]:,.0f} s without share, "
                  f"{total[0]:,.0f} s with; the transistors within {worst:.2%}; the levels "
                  f"equal in {len(todo) - len(moved)}"
                  + (f", {max(moved)} apart at most in the rest" if moved else "") + "; "
                  + (f"**{len(differ)} past the bounds**: {', '.join(differ)}." if differ else
                     "none past the bounds.")]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
