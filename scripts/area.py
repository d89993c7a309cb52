#!/usr/bin/env python3
"""Area, logic depth and energy of the blocks, from ``scoville synth --json``.

Writes ``docs/area.md``, its plot ``docs/area.png`` (the int8 array's area against its PEs)
and ``scoville/explore/synth.json`` (what the exploration model's blocks chip takes: logic area per
PE and energy per MAC by format, SRAM per bit). Every number is the command's:

- the arithmetic units (``fp4_mul``, ``int_mac``, ``fp32_add``, ``mx_dot``, ``nvfp4_dot``,
  ``mx_quant``);
- the GEMM engine at 8 x 8 in every format and pair, both dataflows, the operand buffers as
  SRAM macros;
- the int8 ``os`` engine from 4 x 4 to 32 x 32;
- the KV cache at several sizes (its banks as SRAM macros);
- energy per operation (``--energy``): the 4 x 4 ``os`` engine in every format over random
  GEMMs of 16 x 64 x 16, and the KV cache, at 45 nm (Horowitz's node) and ``--node``.

Usage: ``python scripts/area.py [--node n5] [--jobs 2] [--sizes 4,8,16,32] [--quick]``
(``--quick``: the 8 x 8 formats in ``os`` only and arrays up to 16 x 16).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from scoville.rtl.gemm_arith import PAIRS
from scoville.synth.timing import BUDGET
from scoville.synth.yosys import NODES

ROOT = Path(__file__).resolve().parent.parent

#: (label, block, parameters) of the arithmetic units.
UNITS = [
    ("FP4 x FP4 multiplier, 4 lanes", "fp4_mul", {"lanes": 4}),
    ("INT4 MAC, 8 lanes", "int_mac", {"fmt": "int4", "lanes": 8}),
    ("INT8 MAC, 4 lanes", "int_mac", {"fmt": "int8", "lanes": 4}),
    ("FP32 adder, 1 lane", "fp32_add", {"lanes": 1}),
    ("MX dot unit, 32 lanes", "mx_dot", {"lanes": 32}),
    ("NVFP4 dot unit, 16 lanes", "nvfp4_dot", {"lanes": 16}),
    ("MXFP4 quantizer (FP32 in)", "mx_quant", {"in_fmt": "fp32"}),
]
#: The KV cache's sizes: (banks, word bits, words a bank).
KV_SIZES = [(4, 32, 1024), (4, 32, 4096), (8, 64, 4096)]
#: The energy workload of the GEMM engine: random GEMMs of this shape.
GEMM_WORK = {"m": 16, "k": 64, "n": 16, "count": 2}
#: The KV cache's energy workload (random requests; the default 10,000 take minutes).
KV_WORK = {"count": 2000}
#: Horowitz (ISSCC 2014, 45 nm, ../shared/MODELS.md): a MAC is a multiply and an add into
#: the accumulator's width. No figure for the 4- and 8-bit float formats.
HOROWITZ_MAC = {"int8": (0.2 + 0.1, "INT8 multiply 0.2 + INT32 add 0.1"),
                "bf16": (1.1 + 0.9, "FP16 multiply 1.1 + FP32 add 0.9")}


def synth(block: str, params: dict, node: str, energy: bool = False,
          timeout: float | None = None, retime: bool = False,
          mapping: str = "area") -> dict | None:
    """``scoville synth BLOCK --param ... --node NODE --json [--energy] [--retime] [--map
    MAPPING]``, parsed; None past ``timeout`` seconds (the command and the Yosys it started
    stopped: they run in a process group of their own)."""
    cmd = [sys.executable, "-m", "scoville.cli", "synth", block, "--node", node, "--json"]
    cmd += [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
    if energy:
        cmd.append("--energy")
    if retime:
        cmd.append("--retime")
    if mapping != "area":
        cmd += ["--map", mapping]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        print(f"{block} {params}: over {timeout:.0f} s", flush=True)
        return None
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[3:])} failed: {stderr.strip()[-800:]}")
    out = json.loads(stdout)
    out["seconds"] = time.monotonic() - start
    print(f"{block} {params} {'energy ' if energy else ''}{'retimed ' if retime else ''}"
          f"{mapping + ' ' if mapping != 'area' else ''}{out['seconds']:.0f} s", flush=True)
    return out


def gemm_params(size: int, fmt: str, b_fmt: str, dataflow: str) -> dict:
    p = {"rows": size, "cols": size, "fmt": fmt, "dataflow": dataflow}
    if b_fmt != fmt:
        p["b_fmt"] = b_fmt
    return p


def label(fmt: str, b_fmt: str) -> str:
    return fmt if fmt == b_fmt else f"{fmt} x {b_fmt}"


def um2(mm2: float) -> str:
    return f"{mm2 * 1e6:,.0f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", default="n5", choices=list(NODES))
    parser.add_argument("--jobs", type=int, default=2, help="commands run at once")
    parser.add_argument("--sizes", default="4,8,16,32", help="int8 os array sizes")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--energy-formats", default="",
                        help="the energy table's formats, as --array-formats")
    parser.add_argument("--array-formats", default="",
                        help="the 8 x 8 table's formats, comma-separated labels (mxfp8 x "
                             "mxfp4 as mxfp8xmxfp4; default: every pair)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "area.md"))
    parser.add_argument("--data", default=str(ROOT / "scoville" / "explore" / "synth.json"))
    args = parser.parse_args(argv)
    started = time.monotonic()
    node = args.node
    sizes = [int(s) for s in args.sizes.split(",")]
    dataflows = ("os",) if args.quick else ("os", "ws")
    if args.quick:
        sizes = [s for s in sizes if s <= 16]
    def chosen(text: str) -> list[tuple[str, str]]:
        wanted = {f.replace("xmx", " x mx") for f in text.split(",") if f}
        return [p for p in PAIRS if not wanted or label(*p) in wanted]

    pairs8, pairs_e = chosen(args.array_formats), chosen(args.energy_formats)
    jobs = {}
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        # The longest first, so that two cores finish together.
        for size in sorted(sizes, reverse=True):
            jobs[("size", size)] = pool.submit(synth, "gemm",
                                               gemm_params(size, "int8", "int8", "os"), node)
        for fmt, b_fmt in PAIRS:
            if (fmt, b_fmt) in pairs_e:
                jobs[("energy", fmt, b_fmt)] = pool.submit(
                    synth, "gemm", {**gemm_params(4, fmt, b_fmt, "os"), **GEMM_WORK}, "45nm",
                    True)
            for df in dataflows if (fmt, b_fmt) in pairs8 else ():
                jobs[("fmt", fmt, b_fmt, df)] = pool.submit(
                    synth, "gemm", gemm_params(8, fmt, b_fmt, df), node)
        jobs[("energy", "kvcache")] = pool.submit(synth, "kvcache", KV_WORK, "45nm", True)
        for kv in KV_SIZES:
            banks, word, words = kv
            jobs[("kv", kv)] = pool.submit(synth, "kvcache", {
                "banks": banks, "word_bits": word, "bank_words": words}, node)
        for lab, block, params in UNITS:
            jobs[("unit", lab)] = pool.submit(synth, block, params, node)
        res = {k: f.result() for k, f in jobs.items()}
    scale = NODES[node].energy_vs_45nm
    lines = [
        "# Area, logic depth and energy",
        "",
        f"Made by `python scripts/area.py` from `scoville synth --json` ([synth.md](synth.md)): "
        f"Yosys's simple gates, memories as SRAM macros, area at **{node}** (logic at 70% "
        "utilization). Energy (`--energy`) is measured at 45 nm, Horowitz's node, and scaled "
        f"to {node} by {scale:.4f} (Stillmaker and Baas; [synth.md](synth.md)).",
        "",
        "*depth*: Yosys's longest path in gates (`ltp`, through memories as if they were "
        "gates); *levels*: the critical path with each net's fanout as a tree of four a "
        "level and an SRAM read a stage of its own; *fmax GHz bound*: those levels and a "
        f"register at {node}'s FO4 delay, devices alone (optimistic; "
        f"[synth.md](synth.md)). The issue's budget (#36): at most {BUDGET} levels a cycle.",
        "",
        f"This run: {time.monotonic() - started:,.0f} s on {args.jobs} processes (results "
        "are cached by the Verilog's hash); Yosys's own time over every table's synthesis, "
        f"when each ran: {sum(r.get('yosys_s', 0) for r in res.values()):,.0f} s.",
        "",
        "## Arithmetic units",
        "",
        "| unit | block and parameters | gate cells | flip-flops | transistors | depth | "
        f"levels | fmax GHz bound ({node}) | area um^2 ({node}) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lab, block, params in UNITS:
        r = res[("unit", lab)]
        spec = " ".join(f"{k}={v}" for k, v in params.items())
        lines.append(f"| {lab} | `{block} {spec}` | {r['cells']:,} | {r['flip_flops']:,} | "
                     f"{r['transistors']:,} | {r['logic_depth']} | {r['levels']} | "
                     f"{r['fmax_ghz']:.2f} | {um2(r['area_mm2'])} |")
    lines += [
        "",
        "## The GEMM engine by format (8 x 8)",
        "",
        "`scoville synth gemm --param rows=8 --param cols=8 --param fmt=F [--param b_fmt=G] "
        "--param dataflow=D`: the whole engine (operand buffers of 64 beats as SRAM macros, "
        "sequencer, array, the `ws` accumulator); *flow* is its `flow` component (the array "
        "and its sequencer; in `ws` the accumulator too), per PE divided by the 64 PEs. In "
        "the block formats the `os` array holds its columns' block converters and FP32 "
        "adders, `ws` has them in the accumulator: compare engines across dataflows.",
        "",
        "| format | dataflow | gate cells | flip-flops | transistors | depth | levels | "
        "fmax GHz bound | logic um^2 | SRAM um^2 | flow transistors per PE | flow um^2 per PE | "
        "Yosys s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    left = [label(*p) for p in PAIRS if p not in pairs8]
    if left:
        lines.insert(-3, f"Not in this run (`--array-formats`): {', '.join(left)}.")
        lines.insert(-3, "")
    per_pe = {}
    for fmt, b_fmt in pairs8:
        for df in dataflows:
            r = res[("fmt", fmt, b_fmt, df)]
            flow = r["components"]["flow"]
            if df == "os":
                per_pe[label(fmt, b_fmt)] = r["logic_mm2"] / 64
            lines.append(
                f"| {label(fmt, b_fmt)} | {df} | {r['cells']:,} | {r['flip_flops']:,} | "
                f"{r['transistors']:,} | {r['logic_depth']} | {r['levels']} | "
                f"{r['fmax_ghz']:.2f} | {um2(r['logic_mm2'])} | "
                f"{um2(r['sram_mm2'])} | {flow['transistors'] / 64:,.0f} | "
                f"{flow['logic_mm2'] / 64 * 1e6:,.1f} | {r['yosys_s']:,.0f} |")
    lines += [
        "",
        "## The int8 engine by size",
        "",
        "`scoville synth gemm --param rows=N --param cols=N` (int8, `os`), plotted in "
        "[area.png](area.png).",
        "",
        "| array | PEs | gate cells | flip-flops | transistors | depth | levels | logic um^2 | "
        "SRAM um^2 | logic over the smallest's | Yosys s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = res[("size", min(sizes))]["logic_mm2"]
    for size in sizes:
        r = res[("size", size)]
        lines.append(f"| {size} x {size} | {size * size} | {r['cells']:,} | "
                     f"{r['flip_flops']:,} | {r['transistors']:,} | {r['logic_depth']} | "
                     f"{r['levels']} | {um2(r['logic_mm2'])} | {um2(r['sram_mm2'])} | "
                     f"{r['logic_mm2'] / base:.2f} | {r['yosys_s']:,.0f} |")
    lines += [
        "",
        "## The KV cache by size",
        "",
        "`scoville synth kvcache --param banks=B --param word_bits=W --param bank_words=D`: "
        "its banks are SRAM macros (one a bank), the page table and reference counts small "
        "ones.",
        "",
        "| banks x bits x words | KiB | SRAM macros | gate cells | flip-flops | logic um^2 | "
        "SRAM um^2 | SRAM share |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kv in KV_SIZES:
        r = res[("kv", kv)]
        banks, word, words = kv
        lines.append(f"| {banks} x {word} x {words} | {banks * word * words / 8192:,.0f} | "
                     f"{len(r['memories'])} | {r['cells']:,} | {r['flip_flops']:,} | "
                     f"{um2(r['logic_mm2'])} | {um2(r['sram_mm2'])} | "
                     f"{r['sram_mm2'] / r['area_mm2']:.0%} |")
    lines += [
        "",
        "## Energy per operation",
        "",
        "`scoville synth gemm --param rows=4 --param cols=4 --param fmt=F --param m=16 "
        "--param k=64 --param n=16 --param count=2 --node 45nm --energy`: the gate netlist on "
        "Verilator over random GEMMs at full rate (no gaps), toggles of every net weighted by "
        "its load, the flip-flops' clock, and the operand buffers' SRAM accesses "
        "([synth.md](synth.md)). *flow*: the array and sequencer alone (their switching and "
        "their flip-flops' share of the clock), what the exploration model takes per MAC. "
        "Horowitz's figure is a multiply and an accumulating add, at 45 nm.",
        "",
        f"| format | pJ/MAC 45 nm | switching | clock | SRAM | flow | Horowitz "
        f"45 nm | measured / Horowitz | pJ/MAC {node} |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    energy, array = {}, {}
    for fmt, b_fmt in pairs_e:
        r = res[("energy", fmt, b_fmt)]
        e, ops = r["energy_pj"], r["ops"]
        # The array and sequencer: their switching and their flip-flops' share of the clock.
        share = r["components"]["flow"]["flip_flops"] / r["flip_flops"]
        flow = r["energy_components"].get("flow", 0.0) + e["clock"] * share
        h = HOROWITZ_MAC.get(label(fmt, b_fmt))
        energy[label(fmt, b_fmt)] = r["energy_pj_per_op"]
        array[label(fmt, b_fmt)] = flow / ops
        lines.append(
            f"| {label(fmt, b_fmt)} | {r['energy_pj_per_op']:.3f} | {e['switching'] / ops:.3f} "
            f"| {e['clock'] / ops:.3f} | {e['sram'] / ops:.3f} | {flow / ops:.3f} | "
            + (f"{h[0]:.2f} ({h[1]}) | {r['energy_pj_per_op'] / h[0]:.1f}x |" if h else
               "no figure | |")
            + f" {r['energy_pj_per_op'] * scale:.4f} |")
    left = [label(*p) for p in PAIRS if p not in pairs_e]
    if left:
        lines += ["", f"Not in this run (`--energy-formats`): {', '.join(left)} (a 4 x 4 "
                      "engine's gate netlist takes Verilator minutes to build in the wide "
                      "formats)."]
    kv = res[("energy", "kvcache")]
    e, ops = kv["energy_pj"], kv["ops"]
    mem = kv["sram_accesses"]
    reads = sum(m["reads"] for m in mem if m["name"].startswith("banks."))
    writes = sum(m["writes"] for m in mem if m["name"].startswith("banks."))
    lines += [
        "",
        f"The KV cache (default: 4 banks x 32 bits x 1024 words, bf16 lines of 32 x 2 heads), "
        f"{KV_WORK['count']:,} random requests at full rate: **{kv['energy_pj_per_op']:.2f} pJ "
        f"per line** moved at 45 nm ({kv['energy_pj_per_op'] * scale:.3f} at {node}) over "
        f"{ops:,} lines: switching {e['switching'] / ops:.2f}, clock {e['clock'] / ops:.2f}, "
        f"SRAM {e['sram'] / ops:.2f}. Its banks were read {reads:,} times and written "
        f"{writes:,} times in {kv['cycles']:,} cycles.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    data = {"node": node, "source": "python scripts/area.py (scoville synth --json)",
            "logic_mm2_per_pe": per_pe, "engine_pj_per_mac_45nm": energy,
            "array_pj_per_mac_45nm": array,
            "energy_vs_45nm": scale,
            "sram_mm2_per_bit": res[("kv", KV_SIZES[-1])]["sram_mm2"]
            / res[("kv", KV_SIZES[-1])]["sram_bits"],
            "kvcache_pj_per_line_45nm": kv["energy_pj_per_op"]}
    Path(args.data).write_text(json.dumps(data, indent=1) + "\n")
    _plot(sizes, res, node, Path(args.out).with_suffix(".png"))
    print(f"wrote {args.out} and {args.data}")
    return 0


def _plot(sizes, res, node, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pes = [s * s for s in sizes]
    logic = [res[("size", s)]["logic_mm2"] * 1e6 for s in sizes]
    sram = [res[("size", s)]["sram_mm2"] * 1e6 for s in sizes]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(pes, logic, "o-", label="logic")
    ax.plot(pes, sram, "s--", label="SRAM (operand buffers)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("PEs (int8, os)")
    ax.set_ylabel(f"area, um^2 at {node}")
    ax.set_title("GEMM engine area against PEs (scoville synth)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
