#!/usr/bin/env python3
"""The decode-step lines of the blocks chips' attention that the default sweep asks for
(``scoville.explore.blocks.attention_line``: the attention block's fast path at two context
lengths), computed once and written to ``scoville/explore/attention_lines.json``, so that a
sweep reads them instead of running the cycle model on small steps in each of its
processes. The file carries a digest of the sources the lines come from (the attention
block's timed model and every module it imports, its config's too): after a change to them
the sweep ignores the file (and recomputes) and ``tests/test_explore.py`` fails until this
script is run again.

Usage: ``python scripts/explore_attention_lines.py [--out FILE]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scoville.explore import blocks, sweep
from scoville.explore.specs import CHIPS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(blocks.LINES_FILE))
    args = parser.parse_args(argv)
    blocks.LINES = {}                   # compute every line afresh
    asked: dict[str, list[float]] = {}
    compute = blocks.attention_line

    def record(config):
        asked[blocks.line_key(config)] = list(compute(config))
        return asked[blocks.line_key(config)]

    blocks.attention_line = record
    chips = [name for name, chip in CHIPS.items() if chip.kind == "blocks"]
    sweep.explore(chips=chips)
    stored = {"digest": blocks.timed_digest(), "lines": dict(sorted(asked.items()))}
    Path(args.out).write_text(json.dumps(stored, indent=1) + "\n")
    print(f"wrote {len(asked)} lines to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
