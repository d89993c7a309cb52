#!/usr/bin/env python3
"""Build time of the GEMM array: Amaranth elaboration to Verilog, and the Verilator (and Icarus)
build of the cocotb simulation, from an empty build cache: with ccache off, and with the
design-independent C++ already in ccache.

Writes the table of ``docs/buildtime.md`` (its sections after the table, which compare
revisions of the RTL, are kept). Targets on Verilator: 30 s or less for the 16x16 int8 array;
120 s or less, elaboration included, for the 16x16 array in every format.

Usage: ``python scripts/buildtime.py [--out docs/buildtime.md] [--quick] [--only FMT:DATAFLOW]``;
``--quick`` builds only the three 16x16 Verilator cases, to compare two revisions of the RTL on
one machine; ``--only`` (repeatable, e.g. ``--only mxfp8/mxfp4:os``) builds the cases named and
prints them without writing the table.
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

#: The cases of ``--quick``.
QUICK = [
    (16, 16, "int8", "os", ("verilator",)),
    (16, 16, "int8", "ws", ("verilator",)),
    (16, 16, "mxfp4", "ws", ("verilator",)),
]

#: (rows, cols, fmt, dataflow, simulators); ``fmt`` ``A/B`` is fmt=A with b_fmt=B.
CASES = [
    (16, 16, "int8", "os", ("verilator", "icarus")),
    (16, 16, "int8", "ws", ("verilator", "icarus")),
    (16, 16, "int4", "os", ("verilator",)),
    (16, 16, "int4", "ws", ("verilator",)),
    (16, 16, "mxfp4", "os", ("verilator",)),
    (16, 16, "mxfp4", "ws", ("verilator",)),
    (16, 16, "mxfp8", "os", ("verilator",)),
    (16, 16, "mxfp8", "ws", ("verilator",)),
    (16, 16, "mxfp8/mxfp4", "os", ("verilator",)),
    (16, 16, "mxfp8/mxfp4", "ws", ("verilator",)),
    (16, 16, "nvfp4", "os", ("verilator",)),
    (16, 16, "nvfp4", "ws", ("verilator",)),
    (16, 16, "bf16", "os", ("verilator",)),
    (16, 16, "bf16", "ws", ("verilator",)),
    (32, 32, "int8", "os", ("verilator",)),
]


def _build(block, config, sim: str, tool, **env: str) -> float:
    """Seconds of one build into an empty build cache, with ``env`` set."""
    with tempfile.TemporaryDirectory() as cache, patched_environ(SCOVILLE_BUILD_DIR=cache, **env):
        start = time.perf_counter()
        flow.build(block, config, sim, tool=tool)
        return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent.parent / "docs" /
                                             "buildtime.md"))
    parser.add_argument("--quick", action="store_true",
                        help="only the 16x16 Verilator cases (int8 os and ws, mxfp4 ws)")
    parser.add_argument("--only", metavar="FMT:DATAFLOW", action="append", default=[],
                        help="only the cases of this format (A or A/B) and dataflow, printed "
                             "and not written to the table (repeatable)")
    args = parser.parse_args(argv)
    block = get_block("gemm")
    rows = []
    with tempfile.TemporaryDirectory() as ccache_dir:
        # Fill a private ccache with the design-independent C++ (Verilator's runtime and
        # cocotb's VPI glue) by building a small design once.
        warm = {"CCACHE_DIR": ccache_dir}
        _build(block, GemmConfig(rows=2, cols=2), "verilator", require("verilator"), **warm)
        cases = QUICK if args.quick else CASES
        if args.only:
            cases = [case for case in cases if f"{case[2]}:{case[3]}" in args.only]
        for r, c, fmt, dataflow, sims in cases:
            a_fmt, _, b_fmt = fmt.partition("/")
            config = GemmConfig(rows=r, cols=c, fmt=a_fmt, b_fmt=b_fmt or "same",
                                dataflow=dataflow)
            start = time.perf_counter()
            text = flow.simulated_verilog(block, config, "gemm")
            elaborate = time.perf_counter() - start
            for sim in sims:
                tool = require(sim)
                cold = _build(block, config, sim, tool, CCACHE_DISABLE="1") - elaborate
                cached = None
                if sim == "verilator":
                    cached = _build(block, config, sim, tool, **warm) - elaborate
                rows.append((f"{r}x{c}", fmt, dataflow, sim, len(text.splitlines()), elaborate,
                             cold, cached))
                print(f"{r}x{c} {fmt} {dataflow} {sim}: {len(text.splitlines())} lines, "
                      f"elaborate {elaborate:.1f} s, build {cold:.1f} s cold"
                      + (f", {cached:.1f} s with the harness cached" if cached else ""),
                      flush=True)
    if args.only:
        return 0
    lines = [
        "# Build time of the GEMM array",
        "",
        f"Made by `scripts/buildtime.py` on {platform.machine()}, {os.cpu_count()} cores, one",
        "build at a time, each into an empty build cache. *Elaborate* is Amaranth to Verilog",
        "(a few modules: the shell, the operand buffers, the dataflow's sequencer, array and",
        "accumulator; the PEs are flat inside the array), which every `scoville sim` does to",
        "find its cached build. *Build* is the rest of the first `scoville sim` of a design: for",
        "Verilator, verilating with `-Wall` (the lint) and compiling the model with cocotb's",
        "harness (`make -j`); for Icarus, Verilator's lint and `iverilog`. *Cold*: ccache off.",
        "*Harness cached*: Verilator's runtime and cocotb's VPI glue are the same C++ for every",
        "design, so after any earlier build on the machine ccache has them and only the design's",
        "own C++ compiles. Targets on Verilator: 30 s or less for the 16x16 int8 array; 120 s",
        "or less, elaboration and cold build together, for the 16x16 array in every format.",
        "",
        "| array | format | dataflow | simulator | Verilog lines | elaborate (s) | build, cold (s) "
        "| build, harness cached (s) |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for shape, fmt, dataflow, sim, n_lines, elaborate, cold, cached in rows:
        lines.append(f"| {shape} | {fmt} | {dataflow} | {sim} | {n_lines:,} | {elaborate:.1f} | "
                     f"{cold:.1f} | {'' if cached is None else f'{cached:.1f}'} |")
    # The sections after the table compare revisions of the RTL (measured with ``--quick`` or
    # ``--only`` at each): they are kept.
    out = Path(args.out)
    kept = out.read_text().split("\n## ", 1) if out.exists() else []
    if len(kept) == 2:
        lines += ["", "## " + kept[1].rstrip("\n")]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
