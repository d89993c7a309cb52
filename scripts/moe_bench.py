#!/usr/bin/env python3
"""MoE layer: cycles, weight-port and array utilization, in RTL on Verilator at reduced width
(equal to the timed model) and at full GPT-OSS-120B and DeepSeek-R1 size from the fast path.

RTL cases: 16 experts of H = I = 256, top-4, GPT-OSS's router and a grouped DeepSeek-style
one with a shared expert, on an 8 x 16 array with a 256-bit weight port (so the weights fit
the harness's memory); T = 1, 8 and 64 tokens, one full batch through the block's cocotb
testbench (``test_workload``, streams that keep up), the harness's memory agent 20 cycles
away. Each row gives the run's cycles (equal to
the cycle-level timed model's: the testbench checks every handshake and counter), the fast
path's (:func:`scoville.sim.cycles.moe.layer`) for the same routing, the weight port's share
of what the memory could deliver, the array's useful MACs over its capacity while it ran
experts, pad rows (rows of partly filled row tiles: imbalance) and the cycles the array
waited on weights.

Full-size rows: the fast path on a 32 x 64 array with a 1024-bit port, the memory at 32 bytes
a cycle and 500 cycles away (a fetch buffer of 512 words covers that), the routing drawn
uniformly at random (seeded): GPT-OSS-120B (H = I = 2880, 128 experts, top-4) and DeepSeek-R1
(H = 7168, I = 2048, 256 routed experts + 1 shared, top-8), T = 1 .. 256.

Writes ``docs/moe-bench.md`` and ``docs/moe-bench.png``.

Usage: ``python scripts/moe_bench.py [--seed N] [--out FILE.md] [--no-rtl]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from scoville.blocks import get_block
from scoville.rtl.lib.params import build_config
from scoville.rtl.moe import MoeConfig
from scoville.sim import flow
from scoville.sim.cycles import moe as moe_timed
from scoville.sim.workload import MoeWorkload

SMALL = {"experts": 16, "top_k": 4, "hidden": 256, "intermediate": 256, "array.rows": 8,
         "array.cols": 16, "weight_port_bits": 256}
DEEPSEEK = {**SMALL, "router": "deepseek", "n_group": 4, "topk_group": 2, "shared": 1,
            "routed_scaling_factor": 2.5}
#: (label, params, tokens, memory bytes per cycle). 8 bytes a cycle is what the array's B
#: operand takes (16 columns x 4 bits, plus scales): "a memory no faster than the array".
CASES = [
    ("GPT-OSS-shaped decode, memory at the array's rate", SMALL, 1, 8),
    ("GPT-OSS-shaped decode, memory at the array's rate", SMALL, 8, 8),
    ("GPT-OSS-shaped prefill, memory at the port's rate", SMALL, 64, 32),
    ("DeepSeek-shaped decode (groups, shared expert)", DEEPSEEK, 8, 8),
    ("DeepSeek-shaped prefill (groups, shared expert)", DEEPSEEK, 64, 32),
]
FULL_ARRAY = {"array.rows": 32, "array.cols": 64, "weight_port_bits": 1024,
              "fetch_buffer": 512}
FULL = {
    "GPT-OSS-120B": {"experts": 128, "top_k": 4, "hidden": 2880, "intermediate": 2880},
    "DeepSeek-R1": {"router": "deepseek", "experts": 256, "top_k": 8, "n_group": 8,
                    "topk_group": 4, "shared": 1, "hidden": 7168, "intermediate": 2048},
}
FULL_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
RTL_HEADER = ("| case | T | cycles | model | fast path | memory B/cycle | weight port | array | "
              "pad rows | array waits on weights | wall s |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
FULL_HEADER = ("| model | T | experts | cycles | weight port | array | pad rows | "
               "array waits on weights | fast path s |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
FULL_MEMORY = (500, 32)        # latency (cycles), bytes a cycle: about what 64 columns take


def utilizations(cfg, cycles, words, expert_cycles, rows, bpc) -> tuple[float, float]:
    """The weight port's share of the memory's deliverable bytes; useful MACs over the
    array's capacity in the expert cycles."""
    nbytes = cfg.weight_port_bits // 8
    macs = 3 * cfg.hidden * cfg.intermediate * rows
    return (words * nbytes / (cycles * min(bpc, nbytes)),
            macs / (cfg.array.rows * cfg.array.cols * expert_cycles))


def rtl_row(label, params, tokens, bpc, seed) -> str:
    cfg = build_config(MoeConfig, {**params, "tokens": tokens})
    work = MoeWorkload(batches=1, mem_latency=20, mem_bytes_per_cycle=bpc, gap=0.0,
                       backpressure=0.0)
    start = time.perf_counter()
    result = flow.run(get_block("moe"), cfg, work, "verilator", seed=seed)
    wall = time.perf_counter() - start
    if not result.passed:
        sys.exit(f"{label}: the RTL run failed: {result.errors or result.log}")
    m = result.metrics["test_workload"]
    groups = [(e, n) for e, n in enumerate(m["tokens_per_expert"][:cfg.experts]) if n]
    fast = moe_timed.layer(cfg, tokens, groups, 20, bpc)
    row = (f"| {label} | {tokens} | {m['cycles']:,} | {m['model_cycles']:,} | "
           f"{fast['cycles']:,} ({fast['cycles'] / m['cycles'] - 1:+.1%}) | "
           f"{bpc} | {m['weight_bandwidth_utilization']:.1%} | {m['array_utilization']:.1%} | "
           f"{m['counter_pad_rows']} | {m['counter_array.stall_b']:,} | {wall:.0f} |")
    print(row, file=sys.stderr)
    return row


def full_rows(rng) -> tuple[list[str], dict]:
    latency, bpc = FULL_MEMORY
    rows, curves = [], {}
    for name, shape in FULL.items():
        cfg = build_config(MoeConfig, {**shape, **FULL_ARRAY, "tokens": max(FULL_TOKENS)})
        assert moe_timed.buffer_covers(cfg, latency, bpc)
        curve = []
        for tokens in FULL_TOKENS:
            # Each token's top_k distinct experts, uniformly at random.
            chosen = np.array([rng.choice(cfg.experts, cfg.top_k, replace=False)
                               for _ in range(tokens)])
            counts = np.bincount(chosen.ravel(), minlength=cfg.experts)
            groups = [(e, int(n)) for e, n in enumerate(counts) if n]
            start = time.perf_counter()
            f = moe_timed.layer(cfg, tokens, groups, latency, bpc)
            wall = time.perf_counter() - start
            w, a = utilizations(cfg, f["cycles"], f["weight_words"], f["expert_cycles"],
                                f["rows"], bpc)
            curve.append((tokens, w, a))
            rows.append(f"| {name} | {tokens} | {len(groups)} | {f['cycles']:,} | {w:.1%} | "
                        f"{a:.1%} | {f['pad_rows']:,} | {f['array.stall_b']:,} | "
                        f"{wall:.2f} |")
        curves[name] = curve
    return rows, curves


def plot(curves, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4))
    for (name, curve), color in zip(curves.items(), ("C0", "C1"), strict=True):
        t = [c[0] for c in curve]
        ax.plot(t, [c[1] for c in curve], "-o", color=color, label=f"{name}: weight port")
        ax.plot(t, [c[2] for c in curve], "--s", color=color, label=f"{name}: array")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens in the batch")
    ax.set_ylabel("utilization")
    ax.set_ylim(0, 1.05)
    ax.set_title("MoE layer, fast path: 32 x 64 array, 1024-bit port, 32 B/cycle")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="docs/moe-bench.md")
    parser.add_argument("--no-rtl", action="store_true", help="the full-size rows alone")
    args = parser.parse_args()
    rtl = [] if args.no_rtl else [rtl_row(*case, args.seed) for case in CASES]
    full, curves = full_rows(np.random.default_rng(args.seed))
    png = Path(args.out).with_suffix(".png")
    plot(curves, png)
    text = f"""# MoE layer, measured

Generated by `python scripts/moe_bench.py` (seed {args.seed}).

## In RTL, on Verilator

`SMALL` = {SMALL}; `DEEPSEEK` = {DEEPSEEK}. One full batch through the block's testbench,
streams that keep up, memory latency 20 cycles. *cycles* is the RTL's, *model* the cycle-level
timed model's (equal: the testbench checks every handshake and counter against it), *fast
path* the tile-level closed form's for the same routing. *weight port* is the bytes it
carried over what the memory could deliver in the run (`min(memory, port)` bytes a cycle);
*array* the useful MACs (3 H I per token and expert) over rows x cols x the cycles spent on
experts.

{RTL_HEADER}
{chr(10).join(rtl) if rtl else "| (not run: --no-rtl) |"}

## Full size, from the fast path

{FULL_ARRAY}, memory {FULL_MEMORY[0]} cycles away at {FULL_MEMORY[1]} bytes a cycle; each
token's experts drawn uniformly at random. *experts* is how many the batch touched.

{FULL_HEADER}
{chr(10).join(full)}

![utilization against batch size]({png.name})

Reading it: a decode batch streams each touched expert's weights once and uses them for one
or a few rows, so the weight port (or, with 64 columns, the array's B operand: one row of
64 x 4 bits a cycle, a quarter of the port) bounds it, and the array's useful work is a row
in `rows`. As the batch grows the experts fill their row tiles (T top_k / experts tokens
each) and the array becomes the bound: then the weight port idles and the array's share
approaches the column tiles' `K / (K + fill)`, less the pad rows of uneven routing.
"""
    Path(args.out).write_text(text)
    print(f"wrote {args.out} and {png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
