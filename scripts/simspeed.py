#!/usr/bin/env python3
"""Simulation speed: simulated cycles per second of each block's random-workload testbench on
Icarus and Verilator, beside a bare cocotb clock on the same build.

Writes ``docs/simspeed.md``. Builds are cached, so only the simulations are timed (the wall
time cocotb records for each test, not the build).

Usage: ``python scripts/simspeed.py [--count N] [--gemm-m M] [--gemm-m-icarus M]
[--out docs/simspeed.md]``
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
from pathlib import Path

from scoville.blocks import BLOCKS
from scoville.rtl.gemm import GemmConfig
from scoville.sim import flow
from scoville.sim.workload import GemmWorkload, StreamWorkload

SIMULATORS = ("icarus", "verilator")


def _rate(result, test: str) -> tuple[int, float]:
    outcome = next(t for t in result.tests if t.name == test)
    if not outcome.passed:
        sys.exit(f"simspeed.py: {result.block} on {result.sim}: {test} failed: {outcome.message}")
    return result.metrics[test]["cycles"], outcome.wall_s


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="items per block workload")
    parser.add_argument("--gemm-m", type=int, default=256,
                        help="rows of A of the GEMM run on Verilator")
    parser.add_argument("--gemm-m-icarus", type=int, default=32,
                        help="rows of A of the GEMM run on Icarus")
    parser.add_argument("--out", default=str(Path(__file__).parent.parent / "docs" /
                                             "simspeed.md"))
    args = parser.parse_args(argv)
    rows = []
    for block in BLOCKS.values():
        for sim in SIMULATORS:
            if block.name == "gemm":
                # The 16x16 array on a prefill shape (fewer rows of A on the slower Icarus),
                # operands that keep up.
                config = GemmConfig(rows=16, cols=16)
                m = args.gemm_m if sim == "verilator" else args.gemm_m_icarus
                workload = GemmWorkload(m=m, k=512, n=128, count=1)
            else:
                config, workload = block.config(), block.workload(count=args.count)
            run = flow.run(block, config, workload, sim, seed=1, tests=[block.workload_test])
            cycles, wall = _rate(run, block.workload_test)
            bare = dataclasses.replace(block, testbench="scoville.testbenches.bare_clock")
            base = flow.run(bare, config, StreamWorkload(count=cycles), sim, seed=1)
            bare_cycles, bare_wall = _rate(base, "test_bare_clock")
            rows.append((block.name, sim, cycles, wall, cycles / wall, bare_cycles / bare_wall))
            print(f"{block.name:<10} {sim:<10} {cycles:>7} cycles {cycles / wall:>9.0f}/s, "
                  f"bare clock {bare_cycles / bare_wall:>9.0f}/s", flush=True)
    lines = [
        "# Simulation speed",
        "",
        f"Made by `scripts/simspeed.py --count {args.count}` on {platform.machine()}, "
        f"{os.cpu_count()} cores, one simulation at a time. Each block runs its random workload",
        "(default parameters, 30% valid gaps, 30% back-pressure), except `gemm`: the 16x16",
        f"int8 array on one M x 512 x 128 GEMM (M = {args.gemm_m} on Verilator,"
        f" {args.gemm_m_icarus} on Icarus) with streams that keep up (three",
        "input streams and one output stream driven every cycle). The bare clock is a cocotb",
        "testbench that only awaits each falling edge, on the same build, for as many cycles.",
        "Rates are simulated cycles per wall second of the whole cocotb test, build excluded:",
        "a testbench's time includes making its stimulus and running the golden model.",
        "",
        "| block | simulator | cycles | testbench cycles/s | bare clock cycles/s | ratio |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, sim, cycles, _wall, rate, bare in rows:
        lines.append(f"| {name} | {sim} | {cycles} | {rate:,.0f} | {bare:,.0f} | "
                     f"{rate / bare:.2f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
