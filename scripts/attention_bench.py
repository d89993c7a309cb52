#!/usr/bin/env python3
"""Attention decode and prefill: cycles, KV-cache bandwidth and array utilization, in RTL and in
the timed model.

RTL (``--sim``, Verilator by default): one KV-head group of a GPT-OSS-120B layer (8 query heads
of 64, sinks; full attention and a sliding window of 128) on the block's default hardware
(8 banks of 64 bits: a line is 32 BF16 elements, two a head vector; an 8 x 64 BF16 array:
the group is M, a head is N), a sequence filled to ``context`` tokens (appends, the set-up),
then one decode step with streams that keep up (``test_keep_up``); and a prefill step of 256
tokens after 1k on the prefill hardware (``PREFILL``: 16 banks, a head vector a line; chunks
of 2048), where the array is the bound. The step's counters give
the K and V lines read over the cycles of the attention itself (``attend_cycles``), which the
timed model predicts exactly, as it does every handshake; the output is compared with float64
attention on the same stored values.

Model: the same group at longer contexts, and a whole GPT-OSS-120B layer (8 KV heads, one
after another on one block), from the fast path
(:func:`scoville.sim.cycles.attention.decode_step`, closed in the chunks and heads), beside
the cycle-level model (:func:`scoville.sim.cycles.attention.timing`, built from the cache's
and the array's) up to ``--model-max`` tokens.

Writes ``docs/attention-bench.md`` (and ``docs/attention-bench.svg`` with ``--plot``).

Usage: ``python scripts/attention_bench.py [--sim verilator|icarus] [--seed N] [--quick]
[--plot] [--out FILE.md]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from scoville.blocks import get_block
from scoville.rtl.attention import AttentionConfig, Op
from scoville.rtl.lib.params import build_config
from scoville.sim import flow
from scoville.sim.cycles import attention as timed
from scoville.sim.golden.attention import AttentionModel, Command
from scoville.sim.workload import AttentionWorkload

#: The default hardware with room for 8k tokens of one KV head (8 banks x 32768 words).
BASE = {"kv.bank_words": 32768, "sinks": 1}
#: Prefill hardware: the default with 16 banks (a head vector is one line, as fast as the array
#: takes K and V when a row tile is one token's group) and chunks of 2048 (the array's fill and
#: drain once per chunk); a Q buffer of 256 tokens.
PREFILL = {"mode": "prefill", "q_tokens": 256, "kv.banks": 16, "chunk": 2048}
#: MLA (DeepSeek-R1, Kimi K2, absorbed): the default hardware with 8 query heads on the one
#: latent KV head of 576 (V its first 512; a DeepSeek-R1 layer's 128 heads over 16 such
#: blocks), no sinks; the scale 1/sqrt(192) (DeepSeek-V3's q head of 128 + 64 rotary).
MLA = {"mla": 1, "kv.kv_heads": 1, "kv.head_dim": 576, "sinks": 0, "scale": 192 ** -0.5}
#: RTL cases: (label, hardware parameters, context tokens before the step, the step's tokens).
RTL_CASES = [
    ("GPT-OSS group, full, 1k", {}, 1023, 1),
    ("GPT-OSS group, window 128, 1k", {"window": 128}, 1023, 1),
    ("GPT-OSS group, prefill 256 after 1k", PREFILL, 1024, 256),
    ("DeepSeek-R1 MLA, 8 heads, 1k", MLA, 1023, 1),
    ("GPT-OSS group, full, 8k", {}, 8191, 1),
    ("GPT-OSS group, window 128, 8k", {"window": 128}, 8191, 1),
]
#: Model-only contexts of the cycles-against-context sweep (the fast path at every one).
SWEEP = (128, 256, 512, 1024, 2048, 4096, 8192, 32768, 131072)
#: A whole GPT-OSS-120B layer: 64 query heads, 8 KV heads.
LAYER = {"q_heads": 64, "kv.kv_heads": 8, "kv.bank_words": 65536}


SWEEP_HEADER = ("| tokens | attention cycles (fast path) | cycle model | K+V lines | "
                "KV bandwidth utilization | array utilization |\n"
                "|---:|---:|---:|---:|---:|---:|")
RTL_HEADER = ("| case | tokens | attention cycles | K+V lines | KV bandwidth utilization | "
              "array utilization | test cycles | model | error vs float64 | wall s |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def config(params: dict) -> AttentionConfig:
    return build_config(AttentionConfig, {**BASE, **params})


def model_step(cfg: AttentionConfig, context: int, seed: int = 0) -> dict:
    """The timed model of one sequence: ``context`` appends, then one step; the step's
    attention cycles, lines and array MACs."""
    rng = np.random.default_rng(seed)
    model = AttentionModel(cfg)
    kv, d = cfg.kv.kv_heads, cfg.kv.head_dim

    def vec(n):
        return rng.standard_normal((n, d)).astype(np.float32)

    for h in range(cfg.q_heads if cfg.sinks else 0):
        model.apply(Command(Op.SINK, head=h, value=float(rng.standard_normal())))
    results = [model.apply(Command(Op.ALLOC))]
    # The context only fills the cache: its appends need no K or V values to time the step.
    results += [model.apply(Command(Op.APPEND, k=vec(kv), v=vec(kv)))
                for _ in range(context)]
    step = model.apply(Command(Op.STEP, q=vec(cfg.q_heads), k=vec(kv), v=vec(kv)))
    t = timed.timing(cfg, [*results, step])
    c = t.counters
    return {"attend": c["attend_cycles"], "lines": c["kv.reads"],
            "macs": timed.macs(cfg, [step]), "cycles": t.cycles}


def rtl_rows(sim: str, seed: int, quick: bool) -> list[str]:
    block = get_block("attention")
    rows = []
    for label, params, context, tokens in RTL_CASES[:4] if quick else RTL_CASES:
        cfg = config(params)
        work = AttentionWorkload(seqs=1, context=context, steps=1, tokens=tokens, gap=0.0,
                                 backpressure=0.0)
        start = time.perf_counter()
        result = flow.run(block, cfg, work, sim, seed=seed, tests=["test_keep_up"])
        wall = time.perf_counter() - start
        if not result.passed:
            sys.exit(f"{label}: the RTL run failed: {result.errors or result.log}")
        m = result.metrics["test_keep_up"]
        attend = m["counter_attend_cycles"]
        rows.append(
            f"| {label} | {context + tokens:,} | {attend:,} | {m['counter_kv.reads']:,} | "
            f"{m['kv_bandwidth_utilization']:.1%} | {m['array_utilization']:.1%} | "
            f"{m['cycles']:,} | {m['model_cycles']:,} | {m['max_rel_err_vs_f64']:.2e} | "
            f"{wall:.0f} |")
        print(rows[-1], file=sys.stderr)
    return rows


def sweep_rows(cfg: AttentionConfig, model_max: int) -> tuple[list[str], list[tuple]]:
    """Rows of the sweep: the fast path at every context; the cycle-level model too up to
    ``model_max`` tokens (and the cache's room), where both must agree."""
    rows, points = [], []
    array = cfg.array.rows * cfg.array.cols
    for context in SWEEP:
        fast = timed.decode_step(cfg, context)
        attend, lines = fast["attend_cycles"], fast["kv.reads"]
        cycle = "-"
        if context <= min(model_max, cfg.kv.max_tokens):
            s = model_step(cfg, context - 1)
            if (s["attend"], s["lines"]) != (attend, lines):
                sys.exit(f"fast path {attend, lines} != cycle model {s['attend'], s['lines']} "
                         f"at {context} tokens")
            cycle = f"{s['attend']:,}"
        macs = cfg.q_heads * (cfg.kv.head_dim + cfg.v_dim) * _attended(cfg, context)
        rows.append(f"| {context:,} | {attend:,} | {cycle} | {lines:,} | "
                    f"{lines / attend:.1%} | {macs / (array * attend):.1%} |")
        points.append((context, attend, cycle != "-"))
    return rows, points


def _attended(cfg: AttentionConfig, length: int) -> int:
    """Positions a step's chunks cover (the array's N of ``Q K^T`` and K of ``P V``)."""
    return sum(n for _, n in cfg.chunk_plan(*cfg.attended(length)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", default="verilator", choices=("verilator", "icarus"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="the 1k RTL cases only")
    parser.add_argument("--plot", action="store_true", help="also write the SVG plot")
    parser.add_argument("--out", default="docs/attention-bench.md")
    parser.add_argument("--model-max", type=int, default=8192,
                        help="largest context run on the cycle-level model too")
    args = parser.parse_args()

    group = config({})
    rtl = rtl_rows(args.sim, args.seed, args.quick)
    sweep, points = sweep_rows(group, args.model_max)
    layer_cfg = config(LAYER)
    layer, _ = sweep_rows(layer_cfg, args.model_max)
    mla_cfg = config(MLA)
    mla, _ = sweep_rows(mla_cfg, args.model_max)
    kv = group.kv
    text = f"""# Attention decode: measured

Generated by `python scripts/attention_bench.py` ({args.sim}, seed {args.seed}); do not edit
by hand. `docs/attention.md` says how the block works.

Hardware: the block's default. The cache: {kv.banks} banks of {kv.word_bits}-bit words (a line
is {kv.line_bits // 16} BF16 elements; a head vector of {kv.head_dim} is {kv.token_lines}
lines), {kv.page_tokens}-token pages, {BASE['kv.bank_words']:,} words a bank (room for
{group.kv.max_tokens:,} tokens of one KV head). The array: {group.array.rows} x
{group.array.cols} BF16, `os` (the group of {group.group} query heads is M, a head is N:
`P V` takes one token's V a step, `Q K^T` one element of {group.array.cols} tokens). Online
softmax in chunks of {group.chunk} tokens; sinks on. The group's MACs per line
({group.group} x {kv.line_bits // 16}) are {group.group * kv.line_bits // 16 /
(group.array.rows * group.array.cols):.0%} of an array step, so the cache, one line a cycle,
is the bound.

**KV bandwidth utilization** is K and V lines read over the cycles of the attention (from the
step's append answered to its last output: `attend_cycles`); **array utilization** is the
MACs of both matmuls (masked or not) over rows x cols x those cycles. **Error** is the largest
difference from float64 attention on the same stored K, V and BF16 Q, over the largest output.

## RTL: one GPT-OSS-120B KV-head group, one step

{RTL_HEADER}
{chr(10).join(rtl)}

A window reads from its start rounded down to 32 (the MX block along the tokens), so a window
of 128 reads 128 to 159 tokens: one short chunk, where the step's fixed costs (the append, the
pipeline's fill, the last `P V` and the normalization) weigh: 83% of the line rate.

Prefill runs on `PREFILL` = {PREFILL}: the default array and group, so a row tile is one
token's 8 query heads and each token reads its own K and V. With a head vector a line (16
banks) the cache gives one token's K (or V) a cycle, as fast as `Q K^T` and `P V` take them,
and the array is the bound; chunks of 2048 pay the array's fill and drain once per token's
pass. The 256 appends come before the attention (`append_cycles`), not in its cycles.

## Model: cycles against context, one group

The fast path (`decode_step`, closed in the chunks and heads) at every context, the
cycle-level model beside it up to {args.model_max:,} tokens (the script stops if the two
differ). Contexts past the cache's {group.kv.max_tokens:,} tokens are for a cache that could
hold them (the fast path needs no values).

{SWEEP_HEADER}
{chr(10).join(sweep)}

## Model: a whole GPT-OSS-120B layer (64 query heads, 8 KV heads, one after another)

{SWEEP_HEADER}
{chr(10).join(layer)}

Per token of context a group costs its K and V lines ({2 * kv.token_lines} a token) plus, per
chunk of {group.chunk}, the cache's two cycles between reads; a step adds the append, the
pipeline's fill and the last chunk's `P V` and normalization, which short contexts feel most.

## Model: MLA, 8 query heads on the latent KV head

`MLA` = {MLA} on the default hardware: a token's latent vector is
{mla_cfg.kv.token_lines} lines, read once whole for `Q K^T` and once more as V (its first 512
elements, in {mla_cfg.v_tiles} column tiles of {mla_cfg.array.cols}, {mla_cfg.v_lines} lines of
each token per tile): {mla_cfg.kv.token_lines + mla_cfg.v_tiles * mla_cfg.v_lines} lines a
token. The cache is the bound (the array's `Q K^T` takes {mla_cfg.kv.head_dim} steps per
{mla_cfg.array.cols} tokens and `P V` {mla_cfg.v_tiles} steps per token: about
{mla_cfg.kv.head_dim / mla_cfg.array.cols + mla_cfg.v_tiles:.0f} cycles a token against
{mla_cfg.kv.token_lines + mla_cfg.v_tiles * mla_cfg.v_lines} lines). A cache at
{mla_cfg.kv.max_tokens:,} tokens; longer contexts are for a cache that could hold them.

{SWEEP_HEADER}
{chr(10).join(mla)}
"""
    if args.plot:
        text += "\n![cycles against context](attention-bench.svg)\n"
        _plot(points, rtl, Path(args.out).with_suffix(".svg"))
    Path(args.out).write_text(text)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _plot(points, rtl_rows_text, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs, ys, _ = zip(*points, strict=True)
    ax.plot(xs, ys, "-", label="fast path")
    cx, cy = zip(*[(x, y) for x, y, both in points if both], strict=True)
    ax.plot(cx, cy, "o", label="cycle-level model")
    rtl = [(int(r.split("|")[2].replace(",", "")), int(r.split("|")[3].replace(",", "")))
           for r in rtl_rows_text if "full" in r]
    if rtl:
        rx, ry = zip(*rtl, strict=True)
        ax.plot(rx, ry, "s", markersize=10, fillstyle="none", label="RTL (Verilator)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("tokens in the context")
    ax.set_ylabel("attention cycles of a decode step")
    ax.set_title("GPT-OSS-120B KV-head group, 8 x 64 BF16 array")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    raise SystemExit(main())
