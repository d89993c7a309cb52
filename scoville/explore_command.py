"""``scoville explore``: the design-space exploration from the command line."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

from scoville.cluster import close_client, open_client
from scoville.explore.specs import CHIPS, MODELS, SCENARIOS, Scenario, SpecError

__all__ = ["add_parser", "run"]

#: Where the default run writes its report.
DEFAULT_OUT = "explore-out"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("explore", help="latency-vs-efficiency Pareto curves of chips serving "
                                       "models (the design-space exploration)")
    p.add_argument("--list", action="store_true", help="list the built-in chips and models")
    p.add_argument("--chip", action="append", metavar="NAME|FILE.toml",
                   help=f"a chip (repeatable; default: all built in: {', '.join(CHIPS)})")
    p.add_argument("--model", action="append", metavar="NAME|FILE.toml",
                   help=f"a model (repeatable; default: {', '.join(MODELS)})")
    p.add_argument("--isl", type=int, help="input tokens per request (with --osl; default: "
                                           + ", ".join(s.label for s in SCENARIOS) + ")")
    p.add_argument("--osl", type=int, help="output tokens per request (with --isl)")
    p.add_argument("--concurrency", type=int, action="append", metavar="N",
                   help="requests in flight (repeatable; only these; default: 1, 2, 4, ..., "
                        "1024, and further while memory allows)")
    p.add_argument("--max-batch", type=int, metavar="N", default=512,
                   help="the most requests an instance runs at once per data-parallel "
                        "attention rank (default: %(default)s)")
    p.add_argument("--max-ttft", type=float, metavar="S", default=0.0,
                   help="drop points whose time to first token passes S seconds (default: "
                        "no limit)")
    p.add_argument("--prefix-hit", type=float, metavar="F", default=0.0,
                   help="share of each request's input found in the prefix cache, not "
                        "prefilled (0 <= F < 1; default: %(default)s)")
    p.add_argument("--out", help=f"folder for the report, plots and CSV (default: "
                                 f"{DEFAULT_OUT}; with --json: none unless given)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (points and pareto) on stdout")
    p.add_argument("--workers", type=int, metavar="N",
                   help="run the sweep's tasks on a local Dask cluster of N workers")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run the sweep's tasks on the Dask cluster at ADDRESS")
    p.add_argument("--attribute", metavar="CHIP",
                   help="split CHIP's advantage over --against at 20, 50 and 100 tokens/s per "
                        "user among groups of its specs (Shapley values), per --model and "
                        "scenario")
    p.add_argument("--against", metavar="CHIP", help="the chip --attribute compares with")
    p.add_argument("--verify", action="store_true",
                   help="run the blocks a blocks chip is timed by in RTL on Verilator at "
                        "reduced size and compare their cycles with the models")
    return p


def _list() -> int:
    print("chips:")
    for name, c in CHIPS.items():
        peak = ", ".join(f"{f} {t:,.0f}" for f, t in c.tflops.items())
        timed = f"; operations timed by {c.kernels}'s measured kernels" if c.kernels else ""
        print(f"  {name:<14} {c.kind:<8} {c.description}: TFLOPS {peak}; HBM {c.hbm_gb:.0f} GB "
              f"at {c.hbm_tb_s} TB/s; {c.power_w:.0f} W; {c.domain} a domain{timed}")
    print("models:")
    for name, m in MODELS.items():
        print(f"  {name:<14} {m.description}: {m.layers} layers, hidden {m.hidden}, "
              f"{m.attention.kind}, {m.experts} experts top-{m.top_k}"
              + (f" + {m.shared} shared" if m.shared else "")
              + f", experts {m.expert_fmt}, KV {m.kv_fmt}")
    print("scenarios (default): " + ", ".join(s.label for s in SCENARIOS))
    return 0


def _scenarios(args) -> tuple[Scenario, ...]:
    if (args.isl is None) != (args.osl is None):
        raise SpecError("give both --isl and --osl, or neither")
    conc = tuple(sorted(set(args.concurrency))) if args.concurrency else None
    if conc and min(conc) < 1:
        raise SpecError("--concurrency must be at least 1")
    if args.max_batch < 1:
        raise SpecError("--max-batch must be at least 1")
    if args.isl is None:
        base = SCENARIOS
    else:
        base = (Scenario(args.isl, args.osl),)
    if not (math.isfinite(args.max_ttft) and args.max_ttft >= 0):
        raise SpecError(f"--max-ttft {args.max_ttft}: allowed: seconds >= 0 (0: no limit)")
    if not 0 <= args.prefix_hit < 1:
        raise SpecError(f"--prefix-hit {args.prefix_hit}: allowed: 0 <= F < 1")
    base = tuple(dataclasses.replace(s, max_batch=args.max_batch, max_ttft_s=args.max_ttft,
                                     prefix_hit=args.prefix_hit) for s in base)
    if conc:
        base = tuple(dataclasses.replace(s, concurrency=conc, extend=False) for s in base)
    return base


def _attribute(args, scenarios) -> int:
    """``--attribute A --against B``: the split per model and scenario, as markdown on stdout
    (or JSON with ``--json``), and with ``--out`` a report and a plot each."""
    import json

    from scoville.explore import attribute
    from scoville.explore.specs import load_chip, load_model

    if not (args.attribute and args.against):
        raise SpecError("give both --attribute CHIP and --against CHIP")
    a, b = load_chip(args.attribute), load_chip(args.against)
    results = [attribute.attribute(a, b, load_model(m), sc)
               for m in (args.model or list(MODELS)) for sc in scenarios]
    text = attribute.markdown(results)
    print(json.dumps(results, sort_keys=True, indent=1) if args.json else text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "attribution.md").write_text(f"# Attribution\n\n{text}")
        for r in results:
            attribute.plot(r, out / f"attribution-{r['model']}-"
                                    f"{r['scenario'].replace('/', '-')}.png")
        print(f"explore: wrote {1 + len(results)} files to {out}/", file=sys.stderr)
    return 0


def run(args) -> int:
    """The command; :class:`SpecError` (one line, exit 2) for bad input."""
    from scoville.explore import report, sweep

    if args.list:
        return _list()
    if args.verify:
        from scoville.explore_verify import verify
        return verify()
    scenarios = _scenarios(args)
    if args.attribute or args.against:
        return _attribute(args, scenarios)
    chips = args.chip or list(CHIPS)
    models = args.model or list(MODELS)
    client = open_client(args.workers, args.dask)
    try:
        results = sweep.explore(chips, models, scenarios, client=client,
                                progress=None if args.json else sweep._progress)
    finally:
        close_client(client)
    named = args.chip is not None and args.model is not None
    if named:
        sweep.check_fits(results)
    for r in results:
        if not r["points"]:
            print(f"explore: {r['model']} does not fit {r['chip']} ({r['scenario']})",
                  file=sys.stderr)
    if args.json:
        print(report.as_json(results))
    out = args.out or (None if args.json else DEFAULT_OUT)
    if out:
        files = report.write_all(results, Path(out))
        print(f"explore: wrote {len(files)} files to {out}/ (report: {out}/report.md)",
              file=sys.stderr if args.json else sys.stdout)
    return 0
