#!/usr/bin/env python3
"""FP32 adder: a million random pairs over the whole exponent range, bit-exact on Verilator.

Runs the ``test_workload`` test of the ``fp32_add`` testbench through the flow with ``count``
random operand pairs (:func:`scoville.testbenches.fp32_add.random_pairs`: uniform bit
patterns, close and far exponents, cancellation, subnormals and specials), under random valid
gaps and ready back-pressure. The testbench compares every sum with the golden model bit for
bit and the cycle of every handshake with the timed model; this script reports what it
recorded and, from the same seeded pairs
(:func:`~scoville.testbenches.fp32_add.workload_pairs`), what they cover.

Writes ``docs/fp32-add-bench.md``.

Usage: ``python scripts/fp32_add_bench.py [--sim verilator|icarus] [--seed N] [--count N]
[--lanes N] [--latency N] [--out FILE.md]``
"""

from __future__ import annotations

import argparse
import inspect
import os
import platform
import sys
import textwrap
from pathlib import Path

import numpy as np

from scoville.blocks import get_block
from scoville.rtl.fp32_add import Fp32AddConfig
from scoville.sim import flow
from scoville.sim.golden.fp32_add import fp32_add
from scoville.sim.tools import require
from scoville.sim.workload import StreamWorkload
from scoville.testbenches.fp32_add import random_pairs, workload_pairs
from scoville.testbenches.kit import RunContext

#: Operand and result classes, in the order :func:`classify` numbers them.
CLASSES = ("zero", "subnormal", "normal", "Inf", "NaN")

#: First biased exponent of each row of the exponent table (the last row ends at 255).
EXPONENT_ROWS = (0, 1, 3, 32, 64, 96, 128, 160, 192, 224, 254, 255)

#: (label, smallest, largest) exponent difference of each row of the difference table.
DIFFERENCES = [("0", 0, 0), ("1", 1, 1), ("2..24", 2, 24), ("25..30", 25, 30),
               ("31..254", 31, 254)]

#: (label, smallest, largest) bits lost to cancellation of each row of the cancellation table.
CANCELLATION = [("none (result exponent not below the larger operand's)", -255, 0),
                ("1", 1, 1), ("2..7", 2, 7), ("8..23", 8, 23), ("24", 24, 24)]


def classify(bits: np.ndarray) -> np.ndarray:
    """The index into :data:`CLASSES` of every binary32 encoding."""
    exp, man = bits >> 23 & 0xFF, bits & 0x7F_FFFF
    return np.select([(exp == 0) & (man == 0), exp == 0, exp < 0xFF, man == 0], [0, 1, 2, 3], 4)


def exponent(bits: np.ndarray) -> np.ndarray:
    """The biased exponent a value is scaled by: its exponent field, 1 for subnormals and
    zeros."""
    return np.maximum(bits >> 23 & 0xFF, 1).astype(np.int64)


def rounding(a: np.ndarray, b: np.ndarray, total: np.ndarray) -> tuple[int, int, int]:
    """Of the pairs of finite operands whose sum is finite: how many sums are exact, how many
    are rounded, and how many of those were ties (the exact sum halfway between two binary32
    values)."""
    keep = (classify(a) < 3) & (classify(b) < 3) & (classify(total) < 3)
    x = a[keep].view(np.float32).astype(np.float64)
    y = b[keep].view(np.float32).astype(np.float64)
    r32 = total[keep].view(np.float32)
    r = r32.astype(np.float64)
    s = x + y
    v = s - x
    err = (x - (s - v)) + (y - v)  # TwoSum: x + y == s + err exactly
    exact = (s == r) & (err == 0)
    toward = np.where(s > r, np.float32(np.inf), np.float32(-np.inf))
    with np.errstate(over="ignore"):
        neighbour = np.nextafter(r32, toward).astype(np.float64)
    tie = ~exact & (err == 0) & ((r + neighbour) / 2 == s)
    return int(exact.sum()), int((~exact).sum()), int(tie.sum())


def _table(columns: list[str], rows: list[list]) -> list[str]:
    def cell(v):
        return f"{v:,}" if isinstance(v, int | np.integer) else str(v)

    out = ["| " + " | ".join(columns) + " |", "|---" + "|---:" * (len(columns) - 1) + "|"]
    return out + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def _para(text: str) -> str:
    """``text`` filled to 96 columns, never breaking inside a code span (a line starting with
    ``+ b`` would be a Markdown list)."""
    parts = text.split("`")
    parts[1::2] = [part.replace(" ", "\0") for part in parts[1::2]]
    return textwrap.fill("`".join(parts), 96, break_long_words=False).replace("\0", " ")


def _share(k: int, n: int) -> str:
    return f"{k / n:.2%}"


def coverage(a: np.ndarray, b: np.ndarray) -> list[str]:
    """Markdown tables of what the pairs ``a``, ``b`` exercise."""
    n = len(a)
    total = fp32_add(a, b)
    ops = np.concatenate([a, b])
    op_class = classify(ops)
    negative = ops >> 31 == 1
    lines = ["### Operands by class", ""]
    lines += _table(
        ["class", "operands", "share", "positive", "negative"],
        [[name, int((op_class == k).sum()), _share(int((op_class == k).sum()), 2 * n),
          int(((op_class == k) & ~negative).sum()), int(((op_class == k) & negative).sum())]
         for k, name in enumerate(CLASSES)],
    )
    per_exp = np.bincount(ops >> 23 & 0xFF, minlength=256)
    rows = []
    for lo, hi in zip(EXPONENT_ROWS, (*EXPONENT_ROWS[1:], 256), strict=True):
        part = per_exp[lo:hi]
        label = str(lo) if hi == lo + 1 else f"{lo}..{hi - 1}"
        rows.append([label, int(part.sum()), int(part.min()), int(part.max())])
    lines += ["", "### Operands by biased exponent field", "",
              _para(f"Every field value 0..255 is drawn; the fewest operands at one value are "
                    f"{int(per_exp.min()):,} (field {int(per_exp.argmin())}). Field 0 holds "
                    "zeros and subnormals, 255 Inf and NaN."), ""]
    lines += _table(["field", "operands", "fewest at one field", "most at one field"], rows)
    finite = (classify(a) < 3) & (classify(b) < 3)
    diff = np.abs(exponent(a) - exponent(b))
    opposite = (a ^ b) >> 31 == 1
    rows = []
    for label, lo, hi in DIFFERENCES:
        sel = finite & (diff >= lo) & (diff <= hi)
        rows.append([label, int(sel.sum()), int((sel & ~opposite).sum()),
                     int((sel & opposite).sum())])
    lines += ["", "### Pairs of finite operands by exponent difference", "",
              _para(f"{int(finite.sum()):,} pairs have two finite operands; zeros and "
                    "subnormals count as exponent 1."), ""]
    lines += _table(["difference", "pairs", "same sign", "opposite signs"], rows)
    res_class = classify(total)
    subtract = finite & opposite
    lost = np.maximum(exponent(a), exponent(b)) - exponent(total)
    spans = [diff == 0, diff == 1, diff >= 2]

    def split(sel):
        return [int(sel.sum()), *(int((sel & span).sum()) for span in spans)]

    rows = [["exact zero", *split(subtract & (res_class == 0))]]
    for label, lo, hi in CANCELLATION:
        rows.append([label, *split(subtract & (res_class != 0) & (lost >= lo) & (lost <= hi))])
    lines += ["", "### Cancellation", "",
              _para(f"The {int(subtract.sum()):,} pairs of finite operands with opposite "
                    "signs, by how far the result's exponent falls below the larger operand's, "
                    "and by the operands' exponent difference."), ""]
    lines += _table(["bits lost", "pairs", "difference 0", "difference 1", "difference 2+"],
                    rows)
    nan_in = (classify(a) == 4) | (classify(b) == 4)
    inf_in = (classify(a) == 3) | (classify(b) == 3)
    rows = [
        ["+0", int(((res_class == 0) & (total >> 31 == 0)).sum())],
        ["-0", int(((res_class == 0) & (total >> 31 == 1)).sum())],
        ["subnormal", int((res_class == 1).sum())],
        ["normal", int((res_class == 2).sum())],
        ["Inf, overflow of finite operands", int(((res_class == 3) & finite).sum())],
        ["Inf, from an Inf operand", int(((res_class == 3) & ~finite).sum())],
        ["NaN, from a NaN operand", int(((res_class == 4) & nan_in).sum())],
        ["NaN, Inf - Inf", int(((res_class == 4) & ~nan_in & inf_in).sum())],
    ]
    lines += ["", "### Results", ""]
    lines += _table(["result", "pairs", "share"], [[*r, _share(r[1], n)] for r in rows])
    exact, rounded, ties = rounding(a, b, total)
    lines += ["", "### Rounding", "",
              _para("Pairs of finite operands with a finite sum; a tie is an exact sum halfway "
                    "between two binary32 values (rounded to the even one)."), ""]
    lines += _table(["sum", "pairs"], [["exact", exact], ["rounded", rounded],
                                       ["of which ties", ties]])
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sim", default="verilator", choices=("verilator", "icarus"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=1_000_000, help="random pairs")
    p.add_argument("--lanes", type=int, default=1)
    p.add_argument("--latency", type=int, default=1)
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" /
                                        "fp32-add-bench.md"))
    args = p.parse_args(argv)
    block = get_block("fp32_add")
    config = Fp32AddConfig(lanes=args.lanes, latency=args.latency)
    workload = StreamWorkload(count=args.count)
    test = block.workload_test
    result = flow.run(block, config, workload, args.sim, seed=args.seed, tests=[test])
    outcome = next((t for t in result.tests if t.name == test), None)
    if not result.passed or outcome is None:
        why = outcome.message if outcome else "; ".join(result.errors)
        sys.exit(f"fp32_add {test} failed on {args.sim} (seed {args.seed}): {why}\n"
                 f"log: {result.log}")
    m = result.metrics[test]
    wall = outcome.wall_s
    a, b = workload_pairs(RunContext(block.name, config, workload, args.seed))
    version = ".".join(map(str, require(args.sim).version or ()))
    command = (f"python scripts/fp32_add_bench.py --sim {args.sim} --seed {args.seed} "
               f"--count {args.count} --lanes {args.lanes} --latency {args.latency}")
    measured = _table(
        ["simulator", "lanes", "latency", "pairs", "mismatches", "cycles", "model cycles",
         "wall s", "cycles/s", "pairs/s"],
        [[f"{args.sim} {version}", args.lanes, args.latency, m["pairs"], m["mismatches"],
          m["cycles"], m["model_cycles"], f"{wall:.1f}", f"{m['cycles'] / wall:,.0f}",
          f"{m['pairs'] / wall:,.0f}"]],
    )
    mixes = " ".join(inspect.getdoc(random_pairs).split("\n\n")[1].split())
    text = "\n\n".join([
        f"# FP32 adder: {args.count:,} random pairs on {args.sim}",
        _para(f"Made by `{command}` on {platform.machine()}, {os.cpu_count()} cores; do not "
              "edit by hand. What the adder computes: [numerics.md](numerics.md)."),
        _para(f"The `fp32_add` block (`lanes` = {args.lanes}, `latency` = {args.latency}) runs "
              f"its testbench's `{test}` test with `count` = {args.count:,}: pairs drawn from "
              f"the seed by `random_pairs` in `scoville/testbenches/fp32_add.py`. {mixes} They are "
              f"driven with {workload.gap:.0%} valid gaps and {workload.backpressure:.0%} ready "
              "back-pressure."),
        _para("Every sum is compared bit for bit with the golden model "
              "(`scoville/sim/golden/fp32_add.py`: "
              "NumPy float32 `a + b`, every NaN the canonical 0x7FC00000; the model is itself "
              "checked against float64 sums rounded once to float32), and the cycle of every "
              "handshake with the timed model's. Wall seconds are cocotb's time for the test: "
              "making the pairs and the golden sums, and the simulation; the cached build is "
              "excluded. The test suite runs the same test with smaller counts on both simulators "
              "(`tests/test_fp32_add.py`)."),
    ]) + "\n\n"
    text += "\n".join(measured) + "\n"
    text += "\n## What the pairs cover\n\n" + _para(
        "Counted by the script on the same seeded pairs the test drew (`workload_pairs` in "
        "`scoville/testbenches/fp32_add.py`), with the golden model's sums.") + "\n\n"
    text += "\n".join(coverage(a, b)) + "\n"
    Path(args.out).write_text(text)
    print(f"{m['pairs']:,} pairs, {m['mismatches']} mismatches, {m['cycles']:,} cycles "
          f"(model {m['model_cycles']:,}) in {wall:.1f} s; wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
