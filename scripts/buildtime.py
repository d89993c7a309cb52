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

``--blocks B [B ...] --against REV`` compares, for each first look of those blocks (what
``scoville regress`` and CI build) on both simulators, elaboration and build (harness cached)
at revision REV and now, each revision in its own copy (the fastest of ``--repeat`` runs of
each);
it writes the section "Before and after" of the doc (the table above it is kept).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
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


ROOT = Path(__file__).resolve().parent.parent

#: One revision's elaboration and build of a block's first looks, run in its copy: prints a
#: JSON list of (look, simulator, Verilog lines, elaborate s, build s) per build.
_REVISION_BUILDS = """
import json, sys, tempfile, time
from scoville.blocks import get_block, parse_params
from scoville.sim import flow
from scoville.sim.tools import patched_environ, require
block = get_block(sys.argv[1])
out = []
for look in block.first_look:
    config, _ = parse_params(block, dict(look.params))
    elaborate = None
    for _ in range(int(sys.argv[2])):
        start = time.perf_counter()
        text = flow.simulated_verilog(block, config, block.name)
        took = time.perf_counter() - start
        elaborate = took if elaborate is None else min(elaborate, took)
    for sim in ("verilator", "icarus"):
        best = None
        for _ in range(int(sys.argv[2])):
            with tempfile.TemporaryDirectory() as cache, patched_environ(SCOVILLE_BUILD_DIR=cache):
                start = time.perf_counter()
                flow.build(block, config, sim, tool=require(sim))
                took = time.perf_counter() - start - elaborate
            best = took if best is None else min(best, took)
        out.append((look.label, sim, len(text.splitlines()), elaborate, best))
print(json.dumps(out))
"""


def compare_revisions(blocks: list[str], rev: str, repeat: int, out: Path) -> None:
    """Each first look of ``blocks`` built at ``rev`` and now (the working tree), in copies,
    the harness's C++ already in a shared ccache; writes the doc's section "Before and
    after"."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import mutants  # the copy machinery: a snapshot of a revision, importable on its own

    results = {}
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as ccache:
        env = {**os.environ, "CCACHE_DIR": ccache}
        for side, commit in (("before", rev), ("after", None)):
            tree = Path(scratch) / side
            mutants.snapshot(tree, commit)
            for name in blocks:
                proc = subprocess.run(
                    [sys.executable, "-c", _REVISION_BUILDS, name, str(repeat)], cwd=tree,
                    env={**env, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
                if proc.returncode:
                    sys.exit(f"buildtime.py: {name} at {commit or 'the working tree'} did not "
                             f"build:\n{proc.stderr[-2000:]}")
                for look, sim, n_lines, elaborate, build in json.loads(
                        proc.stdout.splitlines()[-1]):
                    results[(name, look, sim, side)] = (n_lines, elaborate, build)
                    print(f"{side} {name} {look} {sim}: {n_lines} lines, elaborate "
                          f"{elaborate:.1f} s, build {build:.1f} s", flush=True)
    lines = [
        f"## Before and after: {', '.join(blocks)} at `{rev}` and now",
        "",
        f"Made by `scripts/buildtime.py --blocks {' '.join(blocks)} --against {rev} --repeat "
        f"{repeat}` on {platform.machine()}, {os.cpu_count()} cores: each first look (what "
        "`scoville regress` and CI build) elaborated and built at revision "
        f"`{rev}` and now, each revision in "
        "its own copy, into an empty build cache, with the harness's C++ already in ccache; "
        f"the fastest of {repeat} elaborations and of {repeat} builds. *Build* is what follows "
        "elaboration: on Verilator verilating and compiling, on Icarus Verilator's lint and "
        "`iverilog`.",
        "",
        "| block | look | simulator | Verilog lines before | after | elaborate before (s) | "
        "after (s) | build before (s) | after (s) | build after / before |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (name, look, sim, side), (n_lines, elaborate, build) in results.items():
        if side != "before":
            continue
        a_lines, a_elab, a_build = results[(name, look, sim, "after")]
        lines.append(f"| {name} | {look} | {sim} | {n_lines:,} | {a_lines:,} | {elaborate:.1f} "
                     f"| {a_elab:.1f} | {build:.1f} | {a_build:.1f} | {a_build / build:.2f} |")
    text = out.read_text()
    head, sep, rest = text.partition("\n## Before and after")
    tail = rest.split("\n## ", 1)[1] if sep and "\n## " in rest else ""
    body = head.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    if tail:
        body += "\n## " + tail
    out.write_text(body)
    print(f"wrote {out}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent.parent / "docs" /
                                             "buildtime.md"))
    parser.add_argument("--quick", action="store_true",
                        help="only the 16x16 Verilator cases (int8 os and ws, mxfp4 ws)")
    parser.add_argument("--only", metavar="FMT:DATAFLOW", action="append", default=[],
                        help="only the cases of this format (A or A/B) and dataflow, printed "
                             "and not written to the table (repeatable)")
    parser.add_argument("--blocks", nargs="+", metavar="BLOCK",
                        help="compare these blocks' first looks at --against REV and now")
    parser.add_argument("--against", metavar="REV", help="the earlier revision (with --blocks)")
    parser.add_argument("--repeat", type=int, default=1, help="builds of each, the fastest kept")
    args = parser.parse_args(argv)
    if args.blocks or args.against:
        if not (args.blocks and args.against):
            parser.error("--blocks and --against go together")
        compare_revisions(args.blocks, args.against, args.repeat, Path(args.out))
        return 0
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
