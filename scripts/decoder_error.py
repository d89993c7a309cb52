"""The decoder's hardware arithmetic (``fmt="hw"``) against float64 (``fmt=None``) on the same
weights and inputs, over seeds: the numbers docs/decoder.md states and the bounds
``tests/test_decoder.py`` enforces (``HW_BOUND``).

    python scripts/decoder_error.py [--seeds 20] [--prompt-len 12] [--tokens 6] [--out FILE]

For each built-in tiny model and seed: the seeded weights (``decoder.random_weights``, on their
storage grids, so both arithmetics see the same weights), a random prompt; each layer's output
of the prefill, and the logits of every step of a greedy generation, float64's tokens fed to
both; error = largest absolute difference / largest absolute float64 value. Also how many of
the generated tokens the hardware's own greedy generation shares with float64's.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

from scoville.sim.golden import decoder


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - b)) / np.max(np.abs(b)))


def measure(name: str, seed: int, prompt_len: int, steps: int) -> dict:
    config = decoder.tiny_config(name)
    weights = decoder.random_weights(config, seed)
    prompt = np.random.default_rng(seed).integers(0, config["vocab_size"], prompt_len)
    layers = decoder.shape(config).layers
    hw, _, _ = decoder.forward(config, weights, prompt, [None] * layers, "hw")
    f64, _, _ = decoder.forward(config, weights, prompt, [None] * layers, None)
    tokens, logits = decoder.generate(config, weights, prompt, steps, fmt=None)
    _, hw_logits = decoder.generate(config, weights, prompt, steps, fmt="hw",
                                    feed=tokens[:-1])
    hw_tokens, _ = decoder.generate(config, weights, prompt, steps, fmt="hw")
    return {"layers": [_rel(a, b) for a, b in zip(hw, f64, strict=True)],
            "logits": max(_rel(a, b) for a, b in zip(hw_logits, logits, strict=True)),
            "same_tokens": int(np.sum(np.cumprod(hw_tokens == tokens)))}


def table(seeds: int, prompt_len: int, steps: int) -> str:
    lines = [
        f"Seeds 1-{seeds}, a prompt of {prompt_len} random tokens, {steps} tokens generated; "
        "error = largest absolute difference / largest absolute float64 value (median and "
        "largest over the seeds).",
        "",
        "| model | layer | median | largest | logits: median | largest | tokens equal "
        "before the first difference (median of the seeds) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in decoder.TINY:
        runs = [measure(name, s, prompt_len, steps) for s in range(1, seeds + 1)]
        logits = [r["logits"] for r in runs]
        same = float(np.median([r["same_tokens"] for r in runs]))
        for i in range(len(runs[0]["layers"])):
            errs = [r["layers"][i] for r in runs]
            tail = (f"{np.median(logits):.3f} | {max(logits):.3f} | {same:g} of {steps}"
                    if i == 0 else " | | ")
            lines.append(f"| {name if i == 0 else ''} | {i} | {np.median(errs):.3f} | "
                         f"{max(errs):.3f} | {tail} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--prompt-len", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=6)
    parser.add_argument("--out", type=Path, help="a Markdown file to write the table into")
    args = parser.parse_args(argv)
    text = table(args.seeds, args.prompt_len, args.tokens)
    print(text)
    return write_between(args.out, "decoder_error", text) if args.out else 0


def write_between(path: Path, name: str, text: str) -> int:
    """Put ``text`` between the pair of markers ``<!-- name -->`` in ``path``: 0, or 2 (and
    one line) when the file has no such pair."""
    mark = f"<!-- {name} -->"
    new, count = re.subn(f"{mark}.*?{mark}", lambda _: f"{mark}\n{text}{mark}",
                         path.read_text(), flags=re.S)
    if count != 1:
        print(f"{name}: {path} has no pair of {mark} markers", file=sys.stderr)
        return 2
    path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
