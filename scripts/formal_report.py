"""Every block through ``scoville formal``: which properties are proved (k-induction), which
only bounded, at what depth and in how long; writes ``docs/formal.md``.

Each block at its defaults, except attention and MoE at the suite's small configurations (the
defaults are full-size layers) and the fetch engine also at a small one; each proof stopped
after ``--timeout`` seconds (a base case that finished still bounds).

Usage: ``python scripts/formal_report.py [--depth N] [--timeout S] [--out FILE]``
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

from scoville.blocks import BLOCKS, get_block, parse_params
from scoville.synth.formal import FormalError, prove

#: Parameters per block (none: its defaults); a block may appear under several names.
CASES = {
    "fetch-small": ("fetch", {"data_bits": 8, "addr_bits": 6, "len_bits": 3, "burst": 2,
                              "buffer": 4}),
    "attention": ("attention", {"kv.banks": 2, "kv.word_bits": 64, "kv.bank_words": 1024,
                                "kv.page_tokens": 4, "kv.max_seqs": 2, "kv.kv_heads": 2,
                                "kv.head_dim": 16, "array.rows": 2, "array.cols": 16,
                                "q_heads": 4, "chunk": 32}),
    "moe": ("moe", {"experts": 4, "top_k": 2, "hidden": 32, "intermediate": 32, "tokens": 2,
                    "array.rows": 2, "array.cols": 8, "weight_port_bits": 64}),
}


def cases():
    for name in BLOCKS:
        if name not in CASES:
            yield name, name, {}
    yield from ((label, block, params) for label, (block, params) in CASES.items())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--out", default="docs/formal.md")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for label, name, params in cases():
            block = get_block(name)
            config, _ = parse_params(block, params)
            shown = " ".join(f"{k}={v}" for k, v in params.items()) or "defaults"
            try:
                proof = prove(block, config, depth=args.depth, workdir=Path(scratch) / label,
                              timeout=args.timeout)
            except FormalError as err:
                rows.append(f"| `{name}` | {shown} | no verdict | | | | {err} |")
                print(rows[-1], file=sys.stderr, flush=True)
                continue
            rows.append(f"| `{name}` | {shown} | {proof.status} | {len(proof.checks)} | "
                        f"{proof.own} | {proof.seconds:.1f} | {proof.failure} |")
            print(rows[-1], file=sys.stderr, flush=True)
    lines = [
        "# Formal checks", "",
        f"Made by `python scripts/formal_report.py --depth {args.depth} --timeout "
        f"{args.timeout:g}` on {platform.machine()}, {os.cpu_count()} cores; do not edit by "
        "hand.", "",
        "`scoville formal BLOCK` (`scoville/synth/formal.py`) wraps the block's component and "
        "states, from its signature alone: on every input stream the assumption that its "
        "producer keeps the stream rules; on every output stream the same rules asserted (a "
        "beat offered without `ready` stays offered, its payload unchanged, until taken) and "
        "no beat offered in the cycle after a reset or at power-up; every field of `counters` "
        "only counting up between resets; an enum-shaped `status` holding one of its codes. "
        "The block's RTL adds its own under `if platform == \"formal\":` (as Amaranth's FIFOs "
        "do; simulation and synthesis see none of it; `scoville/rtl/lib/formal.py`'s "
        "`invariant`): the fetch engine's memory answers only what was asked, and its "
        "reservation is the words asked plus those buffered, within the buffer; the GEMM "
        "operand buffers' level stays within their depth, matches their pointers, and nothing "
        "is taken from an empty one; the attention normalizer's column tile stays within the "
        "row's tiles; and the Amaranth FIFOs' own (the fetch buffer, the reblocking queues, "
        "the K transposer's). SymbiYosys proves them with smtbmc and Boolector (the `formal` "
        "extra: "
        "PyPI's WebAssembly builds): *proved* is a k-induction that closed at the depth (every "
        "reachable state); *bounded* is the base case alone, no counterexample within the "
        "depth's cycles of reset (the induction did not close, or not within the time); "
        "*failed* names the assertion and writes its waveform.", "",
        f"Depth {args.depth}; at most {args.timeout:g} s each.", "",
        "| block | parameters | result | assertions on its ports | its RTL's own | seconds "
        "| failure |",
        "|---|---|---|---:|---:|---:|---|",
        *rows,
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
