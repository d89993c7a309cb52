#!/usr/bin/env python3
"""Build time of the GEMM array: Amaranth elaboration to Verilog, and the Verilator (and Icarus)
build of the cocotb simulation, from an empty build cache and with ccache off.

Writes ``docs/buildtime.md``. The 16x16 array has a target of 30 s or less on Verilator.

Usage: ``python scripts/buildtime.py [--out docs/buildtime.md]``
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from scoville.blocks import get_block
from scoville.rtl.gemm import GemmConfig
from scoville.sim import flow
from scoville.sim.tools import patched_environ, require

#: (rows, cols, fmt, dataflow, simulators)
CASES = [
    (16, 16, "int8", "os", ("verilator", "icarus")),
    (16, 16, "int8", "ws", ("verilator", "icarus")),
    (16, 16, "mxfp4", "os", ("verilator",)),
    (16, 16, "mxfp4", "ws", ("verilator",)),
    (32, 32, "int8", "os", ("verilator",)),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent.parent / "docs" /
                                             "buildtime.md"))
    args = parser.parse_args(argv)
    block = get_block("gemm")
    rows = []
    for r, c, fmt, dataflow, sims in CASES:
        config = GemmConfig(rows=r, cols=c, fmt=fmt, dataflow=dataflow)
        start = time.perf_counter()
        text = flow.to_verilog(block.component(config), "gemm")
        elaborate = time.perf_counter() - start
        for sim in sims:
            tool = require(sim)
            with tempfile.TemporaryDirectory() as cache, patched_environ(
                SCOVILLE_BUILD_DIR=cache, CCACHE_DISABLE="1"
            ):
                start = time.perf_counter()
                flow.build(block, config, sim, tool=tool)
                seconds = time.perf_counter() - start
            rows.append((f"{r}x{c}", fmt, dataflow, sim, len(text.splitlines()), elaborate,
                         seconds))
            print(f"{r}x{c} {fmt} {dataflow} {sim}: {len(text.splitlines())} lines of Verilog, "
                  f"elaborate {elaborate:.1f} s, build {seconds:.1f} s", flush=True)
    lines = [
        "# Build time of the GEMM array",
        "",
        f"Made by `scripts/buildtime.py` on {platform.machine()}, {os.cpu_count()} cores, one",
        "build at a time, each into an empty build cache with ccache off. *Elaborate* is",
        "Amaranth to Verilog (one flat module: the PEs are not separate modules); *build*",
        "is the whole `scoville` build step as `scoville sim` runs it the first time: writing",
        "the Verilog again, Verilator's lint, and the simulator's build of the design with",
        "cocotb's harness (Verilator: `-O3`, C++ compiled by g++). Target: 30 s or less for",
        "the 16x16 array on Verilator.",
        "",
        "| array | format | dataflow | simulator | Verilog lines | elaborate (s) | build (s) |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for shape, fmt, dataflow, sim, n_lines, elaborate, seconds in rows:
        lines.append(f"| {shape} | {fmt} | {dataflow} | {sim} | {n_lines:,} | {elaborate:.1f} | "
                     f"{seconds:.1f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
