#!/usr/bin/env python3
"""Simulation speed of the free-running harness, as ratios against references run in the same
script: the simulator's own speed on the bare design, and (optionally) the testbench of an
earlier revision.

For each block and simulator:

- **harness alone**: the test's own harness Verilog with no cocotb, clocked by the harness's
  clock, with a minimal Verilog testbench that loads the rings the test first loaded (once:
  payloads and schedules repeat past a ring's end) and waits for the end: under ``vvp`` on
  Icarus, built with ``--binary`` on Verilator (:func:`replay`);
- **limit**: on Icarus, the harness alone (the issue's reference); on Verilator, the bare
  component's Verilog (what ``scoville verilog`` writes) built with the flow's options and
  clocked from a small C++ ``main`` with its inputs held at values that keep it busy (every
  input stream offering, every output stream ready);
- **run**: simulated cycles over the wall time from releasing the design in the harness to
  reading back its records (``run_wall_s`` of the workload test);
- **end to end** (``gemm`` on Verilator): cycles over the wall time of a whole ``scoville sim``
  run, less a run of a one-tile GEMM, so that start-up cancels;
- **earlier** (with ``--against REV``): the same workload through the testbench of revision
  REV (its whole cocotb test), in a copy of that revision.

Every run is repeated (``--repeat``, 3 by default) and the fastest kept, on both sides of a
ratio: the machines are shared, and a neighbour's load only ever slows a run down.

Writes ``docs/simspeed.md``. Builds are cached; the limit's builds go to a temporary folder.

Usage: ``python scripts/simspeed.py [--count N] [--gemm-m M] [--against REV] [--repeat N]
[--out FILE]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scoville.blocks import BLOCKS, parse_params
from scoville.rtl.gemm import GemmConfig
from scoville.sim import flow
from scoville.sim.harness import ports
from scoville.sim.tools import find_verilator, require, simulator_env
from scoville.sim.workload import GemmWorkload
from scoville.testbenches.codec import codecs

ROOT = Path(__file__).resolve().parent.parent
SIMULATORS = ("icarus", "verilator")
#: Blocks whose speed against an earlier testbench the issues ask for.
AGAINST = ("gemm", "kvcache", "mx_dot", "attention", "moe")


#: Blocks measured on their first look with a longer workload (their defaults are full-size
#: layers, too slow to simulate here): the workload's parameters.
LOOKS = {"attention": {"seqs": 2, "context": 120, "steps": 6},
         "moe": {"batches": 12}}


#: Blocks whose test the replay cannot stand for, and why.
NO_REPLAY = {"moe": "its test runs the harness twice (the router's weights on `wr`, then the "
                    "batches) and the rings kept are the first run's"}


def _given(args, parser) -> str:
    """The options of this run that differ from their defaults, as typed."""
    words = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if action.option_strings and action.dest != "help" and value != action.default:
            value = " ".join(value) if isinstance(value, list) else value
            words.append(f" {action.option_strings[0]} {value}")
    return "".join(words)


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _ratio(a: float, b: float | None) -> str:
    return "n/a" if b is None else f"{a / b:.2f}"


def _case(block, sim: str, args):
    """The configuration and workload of a block's measurement."""
    if block.name == "gemm":
        m = args.gemm_m if sim == "verilator" else args.gemm_m_icarus
        return GemmConfig(rows=16, cols=16), GemmWorkload(m=m, k=512, n=128, count=1)
    if block.name == "fetch":  # commands of up to 255 words: a tenth as many
        return block.config(), block.workload(count=max(args.count // 10, 1))
    if block.name in LOOKS:
        return parse_params(block, {**dict(block.first_look[0].params), **LOOKS[block.name]})
    return block.config(), block.workload(count=args.count)


def _held(component) -> dict[str, int]:
    """Input values that keep the design busy: every input stream offering (a GEMM command
    of 256 x 512 x 128, a fetch command of the most words from address 0, other payloads all
    ones), every output stream ready."""
    values = {}
    for s in ports(component)[0]:
        if s.source:
            values[f"{s.name}__valid"] = 1
            payload = (1 << s.width) - 1
            fields = codecs(component)[s.name].fields
            if {"m", "k", "n"} <= set(fields):  # a GEMM command
                payload = codecs(component)[s.name].pack(m=[256], k=[512], n=[128])[0]
            elif {"addr", "len"} <= set(fields):  # a fetch command of the most words
                payload = codecs(component)[s.name].pack(addr=[0], len=[-1])[0]
            values[f"{s.name}__payload"] = payload
        else:
            values[f"{s.name}__ready"] = 1
    return values


def _cpp_assign(name: str, value: int, width: int) -> str:
    name = name.replace("__", "___05F")  # Verilator's C++ name for "__"
    if width <= 64:
        return f"    top.{name} = {value}ULL;"
    words = [(value >> (32 * k)) & 0xFFFFFFFF for k in range(-(-width // 32))]
    return "\n".join(f"    top.{name}[{k}] = {w}U;" for k, w in enumerate(words))


def _make_flags() -> list[str]:
    """The flow's make variables for a Verilator build of its own (the model's C++ optimized
    as in the flow's builds, the coroutine flag ``--timing`` needs), as ``-MAKEFLAGS``
    arguments: all but the precompiled-header settings, which only speed up the flow's
    builds."""
    return [arg for var in flow.VERILATOR_MAKE_VARS if not var.startswith(("CFG_CXXFLAGS_PCH",
                                                                           "VK_PCH"))
            for arg in ("-MAKEFLAGS", var)]


def verilator_limit(component, cycles: int, work: Path) -> float:
    """Cycles per second of the bare component clocked from a C++ loop, inputs held."""
    text = flow.to_verilog(component, "bare")
    (work / "bare.v").write_text(text)
    widths = {f"{s.name}__payload": s.width for s in ports(component)[0]}
    held = "\n".join(_cpp_assign(name, value, widths.get(name, 1))
                     for name, value in _held(component).items())
    (work / "main.cpp").write_text(f"""#include "Vbare.h"
#include "verilated.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {{
    VerilatedContext ctx;
    Vbare top{{&ctx}};
    long n = std::atol(argv[1]);
    top.rst = 1;
    for (int i = 0; i < 4; ++i) {{ top.clk = 0; top.eval(); top.clk = 1; top.eval(); }}
    top.rst = 0;
{held}
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) {{ top.clk = 0; top.eval(); top.clk = 1; top.eval(); }}
    std::chrono::duration<double> s = std::chrono::steady_clock::now() - t0;
    std::printf("%.6f\\n", s.count());
    return 0;
}}
""")
    tool = find_verilator()
    args = [tool.path, "--cc", "--exe", "--build", "-j", "2", *flow.VERILATOR_BUILD_ARGS,
            "-Wno-fatal", "--top-module", "bare", "bare.v", "main.cpp", "-o", "bare"]
    args += _make_flags()
    with simulator_env(tool):
        proc = subprocess.run(args, cwd=work, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"simspeed.py: the bare Verilator build failed:\n{proc.stdout[-2000:]}"
                 f"{proc.stderr[-2000:]}")
    walls = [float(subprocess.run([str(work / "obj_dir" / "bare"), str(cycles)], check=True,
                                  capture_output=True, text=True).stdout.split()[-1])
             for _ in range(3)]
    return cycles / min(walls)


def harness_run(block, config, workload, sim: str):
    """The workload test in the harness: its cycles, run wall time and whole-test wall time,
    and the run (its folder keeps the rings as first loaded, for :func:`replay`)."""
    os.environ[flow.ENV_KEEP_RINGS] = "1"
    try:
        run = flow.run(block, config, workload, sim, seed=1, tests=[block.workload_test])
    finally:
        del os.environ[flow.ENV_KEEP_RINGS]
    outcome = next(t for t in run.tests if t.name == block.workload_test)
    if not run.passed:
        sys.exit(f"simspeed.py: {block.name} on {sim} failed: {outcome.message or run.errors}")
    metrics = run.metrics[block.workload_test]
    return metrics["cycles"], metrics["run_wall_s"], outcome.wall_s, run


def _replay_tb(top: str, rings: dict) -> str:
    """A minimal Verilog testbench around the harness ``top``: it loads the rings of
    ``rings.json`` once (never refilled: payloads and schedules repeat past a ring's end), then,
    with the plusarg ``+go``, releases the design and finishes when every stream has its
    handshakes, or, if a source's beats did not fit in its ring, when every source has handed
    over its beats (without ``+go``, it finishes at once: the start-up to subtract)."""
    streams = rings["streams"]
    words = rings["sched_words"]
    # Past a ring's end the payloads repeat, so the outputs need not be the test's (a reducing
    # unit's ``last`` flags fall elsewhere): then the run ends when every source has handed
    # over its beats, and the sinks are not waited for.
    exact = all(s["loaded"] == s["total"] for s in streams.values()
                if s["source"] and "memory" not in s)
    regs, conns, raise_, lower = [], [".clk(clk)", ".rst(rst)", ".run(run)",
                                      ".sched_loaded(32'hffffffff)", ".done(done)",
                                      ".ioerr(ioerr)", ".hdump(1'b0)", ".hlo(32'd0)",
                                      ".hhi(32'd0)"], [], []
    for name, s in streams.items():
        regs.append(f"  reg sload_{name} = 1'b0;")
        total = s["total"] if s["source"] or exact else 0
        conns += [f".total_{name}(32'd{total})", f".sload_{name}(sload_{name})",
                  f".slo_{name}(32'd0)", f".shi_{name}(32'd{words - 1})"]
        if not s["source"] and "memory" not in s:  # a sink: its payload records
            conns += [f".dump_{name}(1'b0)", f".dlo_{name}(32'd0)", f".dhi_{name}(32'd0)"]
        raise_.append(f"sload_{name} = 1'b1;")
        lower.append(f"sload_{name} = 1'b0;")
        if "memory" in s:
            mem = s["memory"]
            regs.append(f"  reg mload_{name} = 1'b0;")
            conns += [f".lat_{name}(32'd{mem['latency']})",
                      f".bpc_{name}(32'd{mem['bytes_per_cycle']})",
                      f".mload_{name}(mload_{name})", f".mlo_{name}(32'd0)",
                      f".mhi_{name}(32'd{max(mem['words'], 1) - 1})"]
            if mem["words"]:
                raise_.append(f"mload_{name} = 1'b1;")
                lower.append(f"mload_{name} = 1'b0;")
        elif s["source"]:
            regs.append(f"  reg load_{name} = 1'b0;")
            conns += [f".load_{name}(load_{name})", f".lo_{name}(32'd0)",
                      f".hi_{name}(32'd{max(s['loaded'], 1) - 1})",
                      f".loaded_{name}(32'hffffffff)"]
            if s["loaded"]:
                raise_.append(f"load_{name} = 1'b1;")
                lower.append(f"load_{name} = 1'b0;")
    go = ["    if ($test$plusargs(\"go\")) begin",
          "      @(negedge clk) run = 1'b1;", "      @(posedge done);",
          "      @(negedge clk) $display(\"cycles %0d\", cycle);", "    end"]
    return "\n".join([
        "module speed_tb;",
        "  reg rst = 1'b1, run = 1'b0;",
        "  wire clk, done, ioerr;",
        "  wire [31:0] cycle;",
        *regs,
        f"  {top} h({', '.join(conns)}, .cycle(cycle));",
        "  initial begin",
        "    repeat (4) @(negedge clk);",
        "    rst = 1'b0;",
        f"    {' '.join(raise_)}",
        "    #1;",
        f"    {' '.join(lower)}",
        "    if (ioerr) begin $display(\"ioerr\"); $finish; end",
        *go,
        "    $finish;",
        "  end",
        "endmodule",
        "",
    ])


def replay(run: flow.RunResult, top: str, sim: str, work: Path) -> tuple[int, float]:
    """Cycles and cycles per second of the test's harness build with no cocotb: the same
    Verilog (the build folder's source; on Icarus its options too, on Verilator the flow's
    build options with ``--binary``) clocked by the harness's own clock, its rings loaded once
    by :func:`_replay_tb` from the files the cocotb run first loaded. The wall time of a run
    that only loads the rings is subtracted, so start-up cancels."""
    build = Path(run.build_dir)
    rings = Path(run.run_dir) / "rings"
    spec = json.loads((rings / "rings.json").read_text())
    for file in rings.glob("*.bin"):
        shutil.copyfile(file, work / file.name)
    (work / "tb.v").write_text("`timescale 1ns/1ps\n" + _replay_tb(top, spec))
    if sim == "icarus":
        subprocess.run(["iverilog", "-g2012", "-o", "tb.vvp", "-s", "speed_tb",
                        "-f", str(build / "cmds.f"), str(build / f"{top}.v"), "tb.v"],
                       cwd=work, check=True, capture_output=True)
        command = ["vvp", "-n", "tb.vvp", "-none"]
    else:
        tool = find_verilator()
        args = [tool.path, "--binary", "-j", "2", *flow.VERILATOR_BUILD_ARGS, "-Wno-fatal",
                "--top-module", "speed_tb", str(build / f"{top}.v"), "tb.v", "-o", "replay"]
        args += _make_flags()
        with simulator_env(tool):
            subprocess.run(args, cwd=work, check=True, capture_output=True)
        command = [str(work / "obj_dir" / "replay")]
    walls = {False: [], True: []}
    for go in ([], [], [], ["+go"], ["+go"], ["+go"]):  # each the quickest of three
        start = time.perf_counter()
        out = subprocess.run([*command, *go], cwd=work, check=True, capture_output=True,
                             text=True, timeout=600)
        walls[bool(go)].append(time.perf_counter() - start)
        if "ioerr" in out.stdout:
            raise RuntimeError(f"the replay of {top} read a short ring file in {rings}")
    cycles = int(out.stdout.split("cycles")[-1].split()[0])
    return cycles, cycles / max(min(walls[True]) - min(walls[False]), 1e-9)


def scoville_sim_wall(params: dict) -> tuple[int, float]:
    """Cycles and wall time of a whole ``scoville sim gemm`` run on Verilator."""
    argv = [sys.executable, "-m", "scoville.cli", "sim", "gemm", "--sim", "verilator",
            "--seed", "1", "--json"]
    for name, value in params.items():
        argv += ["--param", f"{name}={value}"]
    start = time.perf_counter()
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    return json.loads(out.stdout)["cycles"], wall


def earlier_run(rev: str, block, params: dict, sim: str,
                scratch: Path) -> tuple[int, float, float]:
    """Cycles, run wall time (the harness's, as ``run_wall_s``) and whole-test wall time of the
    workload test through revision ``rev``'s testbench, in a copy of that revision."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import mutants  # the copy machinery: a snapshot of a revision, importable on its own

    tree = scratch / f"rev-{rev}"
    if not tree.exists():  # a revision since the tree move imports as it is (#33)
        mutants.snapshot(tree, rev)
    code = (
        "import json, sys\n"
        "from scoville.blocks import get_block, parse_params\n"
        "from scoville.sim import flow\n"
        f"b = get_block({block.name!r}); c, w = parse_params(b, {params!r})\n"
        f"r = flow.run(b, c, w, {sim!r}, seed=1, tests=[b.workload_test])\n"
        "t = next(t for t in r.tests if t.name == b.workload_test)\n"
        "m = r.metrics[b.workload_test]\n"
        "print(json.dumps([r.passed, m['cycles'], m['run_wall_s'], t.wall_s]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True,
                         capture_output=True, text=True)
    passed, cycles, run_wall, wall = json.loads(out.stdout.splitlines()[-1])
    if not passed:
        sys.exit(f"simspeed.py: {block.name} on {sim} at {rev} failed")
    return cycles, run_wall, wall


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000, help="items per block workload")
    parser.add_argument("--gemm-m", type=int, default=256,
                        help="rows of A of the GEMM run on Verilator")
    parser.add_argument("--gemm-m-icarus", type=int, default=32,
                        help="rows of A of the GEMM run on Icarus")
    parser.add_argument("--against", metavar="REV",
                        help="also run gemm, kvcache, mx_dot, attention and moe through "
                             "revision REV's testbench")
    parser.add_argument("--blocks", nargs="*", default=list(BLOCKS), metavar="BLOCK",
                        help="the blocks to measure (all by default)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each measurement, the fastest kept")
    parser.add_argument("--out", default=str(ROOT / "docs" / "simspeed.md"))
    args = parser.parse_args(argv)
    rows, earlier = [], []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        for block in (BLOCKS[name] for name in args.blocks):
            for sim in SIMULATORS:
                require(sim)
                config, workload = _case(block, sim, args)
                tries = [harness_run(block, config, workload, sim) for _ in range(args.repeat)]
                cycles, run = tries[0][0], tries[0][3]
                run_wall = min(t[1] for t in tries)
                test_wall = min(t[2] for t in tries)
                work = scratch / f"{block.name}-{sim}"
                work.mkdir()
                alone = None if block.name in NO_REPLAY else replay(run, block.name, sim,
                                                                     work)[1]
                if sim == "verilator":
                    limit = verilator_limit(block.component(config), cycles, work)
                else:
                    limit = alone
                shutil.rmtree(work)
                rows.append((block.name, sim, cycles, cycles / run_wall, cycles / test_wall,
                             limit, alone))
                print(f"{block.name:<10} {sim:<10} {cycles:>8} cycles: run "
                      f"{cycles / run_wall:>9,.0f}/s, test {cycles / test_wall:>9,.0f}/s, "
                      f"limit {_rate(limit)}/s, harness alone {_rate(alone)}/s", flush=True)
                if args.against and block.name in AGAINST and sim == "verilator":
                    params = {**flow._params_dict(config, workload)}
                    olds = [earlier_run(args.against, block, params, sim, scratch)
                            for _ in range(args.repeat)]
                    old_cycles = olds[0][0]
                    old_run, old_wall = min(o[1] for o in olds), min(o[2] for o in olds)
                    earlier.append((block.name, sim, old_cycles, old_cycles / old_run,
                                    cycles / run_wall, old_cycles / old_wall,
                                    cycles / test_wall))
        gemm_limit = next((r[5] for r in rows if r[0] == "gemm" and r[1] == "verilator"), 0)
        if gemm_limit:
            big = {"rows": 16, "cols": 16, "m": args.gemm_m, "k": 512, "n": 128, "count": 1}
            small = {**big, "m": 16, "n": 16, "k": 16}
            big_cycles, big_wall = min((scoville_sim_wall(big) for _ in range(args.repeat)),
                                       key=lambda r: r[1])
            small_cycles, small_wall = min((scoville_sim_wall(small)
                                            for _ in range(args.repeat)), key=lambda r: r[1])
            end_to_end = (big_cycles - small_cycles) / (big_wall - small_wall)
    lines = [
        "# Simulation speed",
        "",
        f"Made by `python scripts/simspeed.py{_given(args, parser)}` on {platform.machine()}, "
        f"{os.cpu_count()} cores, one simulation at a time; do not edit by hand.",
        "",
        "Every block runs its random workload (default parameters: the block's own valid gaps "
        f"and back-pressure, 20-30%; {args.count} items, `fetch` {max(args.count // 10, 1)} "
        "commands of up to 255 words) in the free-running harness, except `gemm`: the "
        f"16x16 int8 array on one M x 512 x 128 GEMM (M = {args.gemm_m} on Verilator, "
        f"{args.gemm_m_icarus} on Icarus) with streams that keep up, and `attention` and "
        "`moe`: their first look (a full layer is too slow here) with a longer workload ("
        + "; ".join(f"{name}: " + ", ".join(f"{k}={v}" for k, v in w.items())
                    for name, w in LOOKS.items())
        + "). Every figure is the "
        f"fastest of {args.repeat} runs.",
        "",
        "- *harness alone*: the test's own harness Verilog with no cocotb, clocked by the "
        "harness's clock, with a minimal Verilog testbench that loads the rings the test first "
        "loaded (once; they repeat past their end) and waits for the run's end: under `vvp` "
        "(the build's options) on Icarus, built with `--binary` and the flow's options on "
        "Verilator;",
        "- *limit*: on Icarus, the harness alone; on Verilator, the bare component (what "
        "`scoville verilog` writes) clocked from a C++ loop with its inputs held busy (the "
        "flow's build options), with no harness and no cocotb;",
        "- *run*: simulated cycles over the wall time from releasing the design to reading back "
        "its records (stimulus in and records out included);",
        "- *test*: simulated cycles over the whole cocotb test (stimulus, golden model, timed "
        "model and checks included; the build excluded).",
        "",
        "| block | simulator | cycles | run cycles/s | test cycles/s | harness alone cycles/s "
        "| limit cycles/s | run / alone | run / limit | test / limit |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, sim, cycles, run_rate, test_rate, limit, alone in rows:
        lines.append(f"| {name} | {sim} | {cycles:,} | {run_rate:,.0f} | {test_rate:,.0f} | "
                     f"{_rate(alone)} | {_rate(limit)} | {_ratio(run_rate, alone)} | "
                     f"{_ratio(run_rate, limit)} | {_ratio(test_rate, limit)} |")
    for name, why in NO_REPLAY.items():
        if any(row[0] == name for row in rows):
            lines += ["", f"No *harness alone* for `{name}`: {why}."]
    if gemm_limit:
        lines += [
            "",
            f"End to end, `gemm` on Verilator: whole `scoville sim` runs of the {args.gemm_m} x "
            f"512 x 128 GEMM ({big_cycles:,} cycles, {big_wall:.2f} s) less a 16 x 16 x 16 one "
            f"({small_cycles:,} cycles, {small_wall:.2f} s): {end_to_end:,.0f} cycles/s, "
            f"{end_to_end / gemm_limit:.2f} of the limit.",
        ]
    if earlier:
        lines += [
            "",
            f"Against revision `{args.against}` (the same workload on Verilator, its RTL and "
            "testbench): *run*, the RTL in the harness; *test*, the whole cocotb test (golden "
            "and timed models included):",
            "",
            "| block | simulator | cycles | earlier run cycles/s | now run cycles/s | run now / "
            "earlier | earlier test cycles/s | now test cycles/s | test now / earlier |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, sim, cycles, old_run, new_run, old, new in earlier:
            lines.append(f"| {name} | {sim} | {cycles:,} | {old_run:,.0f} | {new_run:,.0f} | "
                         f"{new_run / old_run:.2f} | {old:,.0f} | {new:,.0f} | "
                         f"{new / old:.2f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
