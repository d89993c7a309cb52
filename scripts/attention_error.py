#!/usr/bin/env python3
"""Error of the attention golden model (a decode step) against plain float64 attention of the
same quantized Q and the same stored K and V, in each matmul format.

For each seed: random standard-normal Q (8 heads), K and V (2 KV heads, 300 tokens, head
dimension 64), every storage format, with sinks and windows on and off, chunk 64. Prints the
largest error relative to the largest output, by ``fmt`` (the numbers in
``docs/attention.md``).

Usage: ``python scripts/attention_error.py [--seeds 6]``
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from scoville.rtl.attention import AttentionConfig
from scoville.sim.golden.attention import decode, query_values, reference
from scoville.sim.golden.kvcache import stored_values

CASES = [(False, 0), (True, 0), (True, 100), (False, 37)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6)
    args = parser.parse_args(argv)
    worst = {"bf16": 0.0, "mxfp8": 0.0}
    config = AttentionConfig(chunk=64)
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        q = rng.normal(0, 1, (8, 64)).astype(np.float32)
        k = rng.normal(0, 1, (2, 300, 64)).astype(np.float32)
        v = rng.normal(0, 1, (2, 300, 64)).astype(np.float32)
        sink = rng.normal(0, 2, 8)
        for fmt in worst:
            for kv_fmt in ("bf16", "fp8_e4m3", "mxfp4"):
                for sinks, window in CASES:
                    s = sink if sinks else None
                    got = decode(q, k, v, sinks=s, window=window, kv_fmt=kv_fmt, fmt=fmt,
                                 config=config)
                    want = reference(query_values(q, fmt), stored_values(kv_fmt, k),
                                     stored_values(kv_fmt, v), sinks=s, window=window)
                    err = np.abs(got - want).max() / np.abs(want).max()
                    worst[fmt] = max(worst[fmt], float(err))
    print(f"{args.seeds} seeds x 3 kv_fmt x {len(CASES)} sink/window cases, 300 tokens, d 64")
    for fmt, err in worst.items():
        print(f"fmt={fmt}: largest error / largest output {err:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
