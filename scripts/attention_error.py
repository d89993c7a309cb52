#!/usr/bin/env python3
"""The attention golden model's error against float64, over many random draws: the figures
behind the bounds ``tests/test_attention.py`` holds ``decode`` to.

For each seed and each case of ``test_decode_meets_its_bound_against_float64`` (every
``kv_fmt``; sinks and windows or not): 8 query heads on 2 KV heads of 64, 300 tokens, normal
values; the error is the largest absolute difference over the largest output, against
:func:`scoville.sim.golden.attention.reference`, float64 attention fed either the same
quantized Q and stored K and V (``--against stored``: the arithmetic's own error, ``fmt=mxfp8``
alone by default) or the unquantized inputs (``--against unquantized``: end to end, Q's
quantization and the cache's storage included, every ``fmt``).

Usage: ``python scripts/attention_error.py [--seeds N] [--against stored|unquantized]``
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from scoville.rtl.attention import AttentionConfig
from scoville.sim.golden.attention import decode, query_values, reference
from scoville.sim.golden.kvcache import stored_values

KV_FORMATS = ("bf16", "fp8_e4m3", "mxfp4")
CASES = [(sinks, window) for sinks, window in ((False, 0), (True, 0), (True, 100), (False, 37))]


def error(seed: int, kv_fmt: str, sinks: bool, window: int, fmt: str = "mxfp8",
          against: str = "stored") -> float:
    """One draw, as the tests draw it."""
    rng = np.random.default_rng(seed)
    q = rng.normal(0, 1, (8, 64)).astype(np.float32)
    k = rng.normal(0, 1, (2, 300, 64)).astype(np.float32)
    v = rng.normal(0, 1, (2, 300, 64)).astype(np.float32)
    sink = rng.normal(0, 2, 8) if sinks else None
    got = decode(q, k, v, sinks=sink, window=window, kv_fmt=kv_fmt, fmt=fmt,
                 config=AttentionConfig(chunk=64))
    if against == "stored":
        q, k, v = query_values(q, fmt), stored_values(kv_fmt, k), stored_values(kv_fmt, v)
    want = reference(q, k, v, sinks=sink, window=window)
    return float(np.abs(got - want).max() / np.abs(want).max())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=120)
    parser.add_argument("--against", choices=("stored", "unquantized"), default="stored")
    args = parser.parse_args()
    formats = ("mxfp8",) if args.against == "stored" else ("bf16", "mxfp8")
    print(f"against float64 on the {args.against} inputs, {args.seeds} seeds x {len(CASES)} "
          "cases (sinks, windows) each")
    print("| fmt | kv_fmt | draws | median | 99th percentile | largest |")
    print("|---|---|---:|---:|---:|---:|")
    for fmt in formats:
        for kv_fmt in KV_FORMATS:
            errors = np.array([error(s, kv_fmt, *case, fmt=fmt, against=args.against)
                               for s in range(args.seeds) for case in CASES])
            p50, p99 = np.percentile(errors, [50, 99])
            print(f"| {fmt} | {kv_fmt} | {len(errors)} | {p50:.4f} | {p99:.4f} | "
                  f"{errors.max():.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
