#!/usr/bin/env python3
"""Every block at its default configuration against issue #36's budget of 40 levels a cycle:
``scoville synth BLOCK --json``'s critical path in levels (fanout counted, an SRAM read a
stage of its own; ``docs/synth.md``), where it starts and ends, and the clock bound it gives.

A block whose synthesis takes longer than ``--timeout`` seconds is listed as not measured.

Writes ``docs/levels.md``.

Usage: ``python scripts/levels.py [--jobs 2] [--timeout 90] [--out FILE.md]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
from pathlib import Path

from scoville.blocks import BLOCKS
from scoville.synth.timing import BUDGET, FO4_PS, LEVEL_FO4, REGISTER_FO4

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--out", default=str(ROOT / "docs" / "levels.md"))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "scripts"))
    from area import synth  # its runner of ``scoville synth --json``, with the timeout

    node = "n5"
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        res = dict(zip(BLOCKS, pool.map(lambda b: synth(b, {}, node, timeout=args.timeout),
                                        BLOCKS), strict=True))
    lines = [
        "# Levels a cycle, every block at its defaults",
        "",
        "Made by `python scripts/levels.py`; do not edit by hand. `scoville synth BLOCK` at the "
        "block's default parameters: *depth* is Yosys's gates on the longest path (`ltp`); "
        "*levels* the critical path with fanout trees of four and an SRAM read a stage of its "
        "own ([synth.md](synth.md)); the budget of issue #36 is "
        f"**{BUDGET} levels** a cycle; *fmax bound* at {node} is (levels x {LEVEL_FO4} + "
        f"{REGISTER_FO4}) FO4 of {FO4_PS[node][0]} ps (devices alone: optimistic). A block "
        f"whose synthesis took over {args.timeout:.0f} s (`--timeout`) is not measured.",
        "",
        "| block | gate cells | flip-flops | depth | levels | levels / budget | fmax bound GHz "
        "(n5) | critical path from | to |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    over = []
    for name, r in res.items():
        if r is None:
            lines.append(f"| {name} | not measured (synthesis over {args.timeout:.0f} s) "
                         "| | | | | | | |")
            continue
        path = r["levels_path"]
        x = r["levels"] / BUDGET
        if r["levels"] > BUDGET:
            over.append(name)
        lines.append(f"| {name} | {r['cells']:,} | {r['flip_flops']:,} | {r['logic_depth']} | "
                     f"{r['levels']} | {x:.1f}x | {r['fmax_ghz']:.2f} | `{path['start']}` | "
                     f"`{path['end']}` |")
    measured = [n for n, r in res.items() if r is not None]
    left = [n for n, r in res.items() if r is None]
    lines += ["", f"{len(over)} of the {len(measured)} blocks measured are over the budget"
                  + (f": {', '.join(over)}." if over else ".")
                  + (f" Not measured: {', '.join(left)}." if left else "")]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
