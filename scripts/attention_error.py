#!/usr/bin/env python3
"""The attention golden model's error against float64 with ``fmt=mxfp8``, over many random
draws: the figure behind the bound ``tests/test_attention.py`` holds ``decode`` to.

For each seed and each case of ``test_decode_meets_its_bound_against_float64`` (every
``kv_fmt``; sinks and windows or not): 8 query heads on 2 KV heads of 64, 300 tokens, normal
values; the error is the largest absolute difference over the largest output, against
:func:`scoville.sim.golden.attention.reference` on the same quantized Q, K and V.

Usage: ``python scripts/attention_error.py [--seeds N]``
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from scoville.rtl.attention import AttentionConfig
from scoville.sim.golden.attention import decode, query_values, reference
from scoville.sim.golden.kvcache import stored_values

CASES = [(kv_fmt, sinks, window) for kv_fmt in ("bf16", "fp8_e4m3", "mxfp4")
         for sinks, window in ((False, 0), (True, 0), (True, 100), (False, 37))]


def error(seed: int, kv_fmt: str, sinks: bool, window: int, fmt: str = "mxfp8") -> float:
    """One draw, as the test draws it."""
    rng = np.random.default_rng(seed)
    q = rng.normal(0, 1, (8, 64)).astype(np.float32)
    k = rng.normal(0, 1, (2, 300, 64)).astype(np.float32)
    v = rng.normal(0, 1, (2, 300, 64)).astype(np.float32)
    sink = rng.normal(0, 2, 8) if sinks else None
    got = decode(q, k, v, sinks=sink, window=window, kv_fmt=kv_fmt, fmt=fmt,
                 config=AttentionConfig(chunk=64))
    want = reference(query_values(q, fmt), stored_values(kv_fmt, k), stored_values(kv_fmt, v),
                     sinks=sink, window=window)
    return float(np.abs(got - want).max() / np.abs(want).max())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=120)
    args = parser.parse_args()
    errors = np.array([error(s, *case) for s in range(args.seeds) for case in CASES])
    p50, p99, p999 = np.percentile(errors, [50, 99, 99.9])
    print(f"fmt=mxfp8, {len(errors)} draws ({args.seeds} seeds x {len(CASES)} cases): "
          f"median {p50:.3f}, 99th percentile {p99:.3f}, 99.9th {p999:.3f}, "
          f"largest {errors.max():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
