#!/usr/bin/env python3
"""The functional coverage bins every block's testbench declares: writes ``docs/coverage.md``.

Each block's bins are its testbench's ``BINS`` and a stall bin per stream of its default
configuration (:func:`scoville.testbenches.coverage.declared`). ``./scripts/test`` fails when
a declared bin of a block it simulates stays empty over all the suite's runs of that block.

Usage: ``python scripts/coverage_bins.py [--out FILE.md] [--check]`` (``--check``: exit 1 when
the file differs from what would be written)
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from pathlib import Path

from scoville.blocks import BLOCKS
from scoville.testbenches.coverage import STALL, declared

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "coverage.md"


def text() -> str:
    lines = [
        "# Functional coverage",
        "",
        "Made by `python scripts/coverage_bins.py`; do not edit by hand.",
        "",
        "Each block's testbench declares named bins (`BINS` in its module under "
        "`scoville/testbenches/`) and its runs hit them; every block also has a bin per stream, "
        f"`{STALL}NAME`, hit when a beat waits (valid high, ready low; the harness counts the "
        "cycles): an input's wait is the block's back-pressure, an output's the testbench's. "
        "A run reports its bins' hits in its JSON (`scoville sim BLOCK --json`: `coverage`, "
        "every bin with its count, zeros included), and `./scripts/test` (pytest "
        "`--coverage`) fails when a declared bin of a block it simulated stays empty over "
        "all its runs of that block: the configurations a run simulates together must reach "
        "every bin (a bin a configuration cannot reach, which its testbench's `unreachable` "
        "names, is left out of that configuration's runs; where a run simulates one case of "
        "several, as of the whole decoders, that case alone reaches all of its bins).",
        "",
    ]
    for name, block in BLOCKS.items():
        bins = declared(block)
        lines += [f"## `{name}`", "", "| bin | hit by |", "|---|---|"]
        lines += [f"| `{bin_}` | {what} |" for bin_, what in bins.items()]
        never = getattr(importlib.import_module(block.testbench), "NEVER_WAITS", {})
        if never:
            lines += ["", "No stall bin (a beat of it cannot wait): " + "; ".join(
                f"`{stream}`: {why}" for stream, why in never.items()) + "."]
        unreachable = getattr(importlib.import_module(block.testbench), "unreachable", None)
        if unreachable is not None:
            lines += ["", " ".join(
                inspect.getdoc(unreachable).split()) + f" (`{block.testbench}.unreachable`)"]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    new = text()
    if args.check:
        same = args.out.is_file() and args.out.read_text() == new
        if not same:
            print(f"{args.out} is out of date: run python scripts/coverage_bins.py",
                  file=sys.stderr)
        return 0 if same else 1
    args.out.write_text(new)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
