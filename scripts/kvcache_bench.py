#!/usr/bin/env python3
"""KV-cache scratchpad: capacity of a few configurations, and read bandwidth measured in RTL.

Capacity comes from the configuration alone (:class:`scoville.rtl.kvcache.KvCacheConfig`): the
bits of a head vector in each storage format, the lines it takes once padded, the pages that
fit, and the tokens one layer's cache holds. Bandwidth is measured: the ``test_long_read`` test
of the KV-cache testbench fills a sequence to the whole cache and reads every head of it end
to end with streams that keep up; its counters give the lines read and the read engine's busy
cycles, which the cycle model predicts exactly, as it does the whole test's cycle count.

Writes ``docs/kvcache-bench.md``.

Usage: ``python scripts/kvcache_bench.py [--sim verilator|icarus] [--seed N] [--out FILE.md]``
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from scoville.blocks import get_block
from scoville.rtl.kvcache import KvCacheConfig
from scoville.sim import flow
from scoville.sim.cycles.kvcache import read_cycles, read_utilization
from scoville.sim.workload import KvCacheWorkload

#: A GPT-OSS-120B attention layer (../shared/MODELS.md): 8 KV heads of dimension 64.
GPT_OSS = dict(kv_heads=8, head_dim=64, page_tokens=16)

def _sram(banks: int, word_bits: int, bank_words: int, kv_fmt: str) -> tuple[str, KvCacheConfig]:
    """A labelled GPT-OSS-120B layer cache on ``banks`` banks of ``word_bits``-bit words."""
    config = KvCacheConfig(banks=banks, word_bits=word_bits, bank_words=bank_words,
                           kv_fmt=kv_fmt, **GPT_OSS)
    return f"{banks} x {word_bits}-bit banks, {kv_fmt}", config


#: (label, config) of the capacity table: one 4 MiB SRAM in each format, then banks whose
#: line fits each format's head vector exactly.
CAPACITY = [
    _sram(16, 64, 32768, "bf16"),
    _sram(16, 64, 32768, "fp8_e4m3"),
    _sram(16, 64, 32768, "mxfp4"),
    _sram(8, 64, 65536, "fp8_e4m3"),
    _sram(17, 16, 65536, "mxfp4"),
    _sram(8, 32, 4096, "bf16"),
]

#: Simulated: a line per head vector in each format, 32 pages (512 tokens).
MEASURED = [
    _sram(16, 64, 8192, "bf16"),
    _sram(8, 64, 8192, "fp8_e4m3"),
    _sram(17, 16, 8192, "mxfp4"),
]

#: Clock assumed to turn lines per cycle into bytes per second.
CLOCK_HZ = 1e9


CAPACITY_COLUMNS = ["banks", "SRAM (MiB)", "bits / head vector", "line bits", "lines / vector",
                    "packing", "page lines", "pages", "tokens", "KiB / token (K+V, all heads)"]
MEASURED_COLUMNS = ["config", "tokens a read", "reads", "lines", "read engine cycles", "model",
                    "utilization", "back to back (model)", "test cycles", "model",
                    "peak GB/s", "GB/s"]


def _header(columns: list[str]) -> str:
    return "| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|"


def capacity_rows() -> list[str]:
    rows = []
    for label, c in CAPACITY:
        sram = c.banks * c.word_bits * c.bank_words / 8 / 2**20
        per_token = 2 * c.kv_heads * c.token_lines * c.line_bits / 8
        rows.append(
            f"| {label} | {sram:.3g} | {c.token_bits} | {c.line_bits} | {c.token_lines} | "
            f"{c.packing:.1%} | {c.page_lines} | {c.pages} | {c.max_tokens:,} | "
            f"{per_token / 1024:.3g} |"
        )
    return rows


def measured_rows(sim: str, seed: int) -> list[str]:
    block = get_block("kvcache")
    rows = []
    for label, c in MEASURED:
        result = flow.run(block, c, KvCacheWorkload(), sim, seed=seed, tests=["test_long_read"])
        if not result.passed:
            sys.exit(f"{label}: test_long_read failed on {sim}; see {result.log}")
        m = result.metrics["test_long_read"]
        lines, cycles = m["counter_reads"], m["counter_read_cycles"]
        heads = 2 * c.kv_heads
        model = m["engine_model_cycles"]
        util = lines / cycles
        chained = read_utilization(c, c.max_tokens)
        peak = c.line_bits / 8 * CLOCK_HZ / 1e9
        rows.append(
            f"| {label} | {c.max_tokens} | {heads} | {lines:,} | {cycles:,} | {model:,} | "
            f"{util:.2%} | {chained:.2%} | {m['cycles']:,} | {m['model_cycles']:,} | "
            f"{peak:.0f} | {peak * chained:.1f} |"
        )
        print(f"{label}: {lines} lines in {cycles} cycles ({util:.2%})", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sim", default="verilator", choices=("verilator", "icarus"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" /
                                        "kvcache-bench.md"))
    args = p.parse_args(argv)
    measured = measured_rows(args.sim, args.seed)
    text = textwrap.dedent(f"""\
        # KV-cache scratchpad: capacity and read bandwidth

        Made by `python scripts/kvcache_bench.py --sim {args.sim} --seed {args.seed}`; do not
        edit by hand. Layout and requests: [kvcache.md](kvcache.md).

        ## Capacity of one GPT-OSS-120B layer's cache

        8 KV heads of dimension 64, 16 tokens per page. A head vector is padded to whole lines
        (a line is one word of every bank), so the line width decides how much of the SRAM a
        format can use: fp8 and mxfp4 in lines sized for bf16 hold no more tokens than bf16.

        """)
    text += "\n".join([_header(CAPACITY_COLUMNS), *capacity_rows()]) + "\n"
    text += textwrap.dedent(f"""
        ## Read bandwidth, measured on {args.sim}

        A sequence filled to the whole cache (appends) is read end to end, K and V of every
        head in turn, with every stream keeping up (the test `test_long_read`). The read
        engine is busy N + 1 cycles a read of N lines (its `read_cycles` counter; the cycle
        model's sum beside it); reads follow each other 2 cycles apart, so a stream of them
        delivers N / (N + 2) of the banks' peak (the model's figure, which the whole test's
        measured cycle count, equal to the model's time line, confirms). A single read on an
        idle engine takes `read_cycles(config, L) = {read_cycles(MEASURED[0][1], 0)} + L *
        token_lines` cycles from request to last line. Bandwidth at an assumed
        {CLOCK_HZ / 1e9:g} GHz clock, back to back.

        """)
    text += "\n".join([_header(MEASURED_COLUMNS), *measured]) + "\n"
    Path(args.out).write_text(text)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
