#!/usr/bin/env python3
"""The MoE router's share of a layer at full GPT-OSS-120B and DeepSeek-R1 size, from the fast
path (:func:`scoville.sim.cycles.moe.layer`), one element of ``x`` a cycle (``x_lanes`` = 1)
against a line of 32 (``x_lanes`` = 32): the numbers docs/moe.md states.

The layer as ``scripts/moe_bench.py``'s full-size rows run it (a 32 x 64 array, a 1024-bit
port, the memory 500 cycles away at 32 bytes a cycle, each token's experts drawn uniformly at
random, seeded), and with the memory at the port's full 128 bytes a cycle (a fetch buffer of
1,024 words to cover its round trip); *router* is the routing front end
(:func:`~scoville.sim.cycles.moe.route_cycles`: every token's beats, the router's latency, its
answer taken) over the layer's cycles.

Usage: ``python scripts/moe_router.py [--seed N] [--out docs/moe.md]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from decoder_error import write_between
from moe_bench import FULL, FULL_ARRAY, FULL_MEMORY

from scoville.rtl.lib.params import build_config
from scoville.rtl.moe import MoeConfig
from scoville.sim.cycles import moe as moe_timed

TOKENS = (1, 8, 64, 256)


MEMORIES = (FULL_MEMORY, (FULL_MEMORY[0], 128))


def table(seed: int) -> str:
    shape = ", ".join(f"{k} {v}" for k, v in FULL_ARRAY.items() if k != "fetch_buffer")
    lines = [f"Fast path: {shape}; fetch_buffer 512 words at 32 bytes a cycle, 1,024 at 128; "
             f"the memory {FULL_MEMORY[0]} cycles away; seed {seed}.", "",
             "| model | memory B/cycle | T | cycles, x_lanes 1 | router | cycles, x_lanes 32 | "
             "router |", "|---|---:|---:|---:|---:|---:|---:|"]
    rng = np.random.default_rng(seed)
    for (latency, bpc), (name, shape) in ((m, f) for m in MEMORIES for f in FULL.items()):
        array = {**FULL_ARRAY, "fetch_buffer": 512 if bpc <= 32 else 1024}
        for tokens in TOKENS:
            base = build_config(MoeConfig, {**shape, **array, "tokens": max(TOKENS)})
            chosen = np.array([rng.choice(base.experts, base.top_k, replace=False)
                               for _ in range(tokens)])
            counts = np.bincount(chosen.ravel(), minlength=base.experts)
            groups = [(e, int(n)) for e, n in enumerate(counts) if n]
            cells = []
            for lanes in (1, 32):
                cfg = build_config(MoeConfig, {**shape, **array, "x_lanes": lanes,
                                               "tokens": max(TOKENS)})
                assert moe_timed.buffer_covers(cfg, latency, bpc)
                cycles = moe_timed.layer(cfg, tokens, groups, latency, bpc)["cycles"]
                share = moe_timed.route_cycles(cfg, tokens) / cycles
                cells.append(f"{cycles:,} | {share:.2%}")
            lines.append(f"| {name} | {bpc} | {tokens} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="a Markdown file to write the table into")
    args = parser.parse_args(argv)
    text = table(args.seed)
    print(text)
    return write_between(args.out, "moe_router", text) if args.out else 0


if __name__ == "__main__":
    sys.exit(main())
