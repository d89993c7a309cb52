"""``scoville formal``: a block's stream protocol and its own invariants, proved with
SymbiYosys (:mod:`scoville.synth.formal`)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path

from scoville.blocks import BLOCKS, get_block, parse_params

__all__ = ["add_parser", "run"]

#: The k-induction depth unless ``--depth`` says.
DEPTH = 8


def add_parser(sub):
    p = sub.add_parser("formal", help="prove a block's stream protocol and invariants with "
                                      "SymbiYosys (k-induction; bounded where it does not "
                                      "close)")
    p.add_argument("block", help=f"one of: {', '.join(BLOCKS)}")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameter (repeatable)")
    p.add_argument("--depth", type=int, default=DEPTH,
                   help=f"k-induction depth, and the bound where it does not close "
                        f"(default {DEPTH})")
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds the solver may take (default 600)")
    p.add_argument("--out", type=Path, help="keep the proof's files here (the RTLIL, the "
                                            "SymbiYosys run, a counterexample's waveform)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def run(args) -> int:
    from scoville.synth.formal import FormalError, prove

    if not 1 <= args.depth <= 200:
        raise FormalError(f"--depth {args.depth}: allowed 1..200")
    if args.out is not None and args.out.exists() and any(args.out.iterdir()):
        raise FormalError(f"--out {args.out}: allowed a new or empty folder (a proof starts "
                          "afresh in it)")
    block = get_block(args.block)
    config, _ = parse_params(block, args.param)
    with tempfile.TemporaryDirectory(prefix="scoville-formal-") as scratch:
        work = args.out or Path(scratch) / "proof"
        proof = prove(block, config, depth=args.depth, workdir=work, timeout=args.timeout)
        if args.out is None and proof.trace:
            # The counterexample outlives the scratch folder: beside the current one.
            keep = Path(f"{block.name}-counterexample.vcd")
            keep.write_bytes(Path(proof.trace).read_bytes())
            proof.trace = str(keep)
        if args.out is None:
            proof.log = ""
    report = {"params": dict(p.split("=", 1) for p in args.param), **asdict(proof)}
    if args.json:
        print(json.dumps(report))
    else:
        what = {"proved": f"proved by k-induction at depth {proof.depth}",
                "bounded": f"no counterexample within {proof.depth} cycles of reset (the "
                           "induction did not close: bounded, not proved)",
                "failed": f"FAILED: {proof.failure}; counterexample: {proof.trace}"}
        print(f"{block.name}: {what[proof.status]} ({len(proof.checks)} assertions on its "
              f"streams, counters and status, {proof.own} of its RTL's own; "
              f"{proof.seconds:.1f} s)")
    return 1 if proof.status == "failed" else 0
