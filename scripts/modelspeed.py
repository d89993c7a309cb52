"""Speed of the composed blocks' timed models, and whether they predict what an earlier revision
predicted.

The timed models run beside every RTL test of a block (``tb.predict``), so their speed is part
of a test's time: on Verilator a model slower than the RTL doubles the test. This script runs
each composed block's timed model on seeded random cases (random configurations and
transactions, valid gaps and ready back-pressure of 0, 25 or 60%, memories of every latency
and width for ``moe``) and reports modelled cycles per second of wall time, the fastest of
``--repeat`` runs, and a digest of every prediction (each handshake's cycle on every stream,
every counter):

- ``attention`` and ``moe``: :func:`scoville.sim.cycles.attention.timing` and
  :func:`scoville.sim.cycles.moe.timing`, their unit models stepped together;
- ``kvcache``: its one-loop :func:`~scoville.sim.cycles.kvcache.timing` (what its testbench
  runs) and, as ``kvcache-units``, :func:`~scoville.sim.cycles.kvcache.units_timing` (its
  unit models; what a traced run steps): same digest, so the ratio is the units' cost.

With ``--against REV`` the same cases run through revision ``REV``'s models too (a copy of it,
in a subprocess), and the table gives now / earlier and whether the digests are equal: equal
digests mean every prediction on every case is unchanged.

Usage: ``python scripts/modelspeed.py [--cases N] [--against REV] [--repeat N] [--out FILE]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("attention", "moe", "kvcache", "kvcache-units")

#: The attention block's configurations the cases cycle through (its RTL tests' small ones).
_KV = {"kv.banks": 2, "kv.word_bits": 64, "kv.bank_words": 1024, "kv.page_tokens": 4,
       "kv.max_seqs": 2, "kv.kv_heads": 2, "kv.head_dim": 16, "array.rows": 2,
       "array.cols": 16, "q_heads": 4, "chunk": 32}
ATTENTION = [
    {**_KV, "sinks": 1, "window": 20},
    {**_KV, "kv.kv_fmt": "mxfp4", "kv.kv_heads": 1, "kv.head_dim": 32, "q_heads": 2,
     "array.cols": 32, "window": 20, "chunk": 64},
    {**_KV, "mode": "prefill", "q_tokens": 2, "array.cols": 8},
    {**_KV, "kv.kv_fmt": "fp8_e4m3", "kv.banks": 4, "kv.kv_heads": 1, "kv.head_dim": 12,
     "q_heads": 3, "array.rows": 4, "kv.page_tokens": 8},
    {**_KV, "array.cols": 8},
]
#: The MoE block's: GPT-OSS's router or DeepSeek's (grouped, with a shared expert), with one
#: of these shapes.
_GPT = {"experts": 16, "top_k": 4, "hidden": 64, "intermediate": 64, "array.rows": 4,
        "array.cols": 8, "weight_port_bits": 64}
_DEEPSEEK = {**_GPT, "router": "deepseek", "n_group": 4, "topk_group": 2, "shared": 1}
_SHAPES = [{}, {"array.cols": 16}, {"array.cols": 4}, {"weight_port_bits": 128},
           {"hidden": 128, "intermediate": 32},
           {"array.rows": 8, "array.cols": 16, "weight_port_bits": 256},
           {"hidden": 96, "intermediate": 160, "array.cols": 32, "weight_port_bits": 512},
           {"fetch_buffer": 128}]
GAPS = (0.0, 0.25, 0.6)


def _digest(timing) -> tuple[str, int]:
    """A timed model's predictions as a digest, and its cycles."""
    text = repr((sorted(timing.handshakes.items()), sorted(timing.counters.items())))
    return text, timing.cycles


def _attention_cases(n: int):
    import numpy as np

    from scoville.rtl.attention import AttentionConfig
    from scoville.rtl.lib.params import build_config
    from scoville.sim.cycles import attention
    from scoville.sim.cycles.stream import Schedule, Source
    from scoville.sim.workload import AttentionWorkload
    from scoville.testbenches.attention import workload_script

    for seed in range(n):
        rng = np.random.default_rng(seed)
        cfg = build_config(AttentionConfig, ATTENTION[seed % len(ATTENTION)])
        work = AttentionWorkload(seqs=int(rng.integers(1, 3)), context=int(rng.integers(1, 40)),
                                 steps=2, tokens=2)
        results = workload_script(cfg, work, rng).results
        gap = GAPS[seed % len(GAPS)]
        sources = {name: Source(Schedule([seed, k], gap))
                   for k, name in enumerate(("cmd", "q", "k", "v"))}
        ready = {"o": Schedule([seed, 7], gap), "resp": Schedule([seed, 8], gap)}
        yield lambda cfg=cfg, r=results, s=sources, y=ready: attention.timing(cfg, r, s, y)


def _moe_cases(n: int):
    from scoville.rtl.lib.params import build_config
    from scoville.rtl.moe import MoeConfig
    from scoville.sim.cycles import moe
    from scoville.sim.cycles.memory import MemoryAgent
    from scoville.sim.cycles.stream import Schedule, Source

    for seed in range(n):
        rng = random.Random(seed)
        tokens = rng.choice((1, 2, 8, 16))
        params = {**rng.choice((_GPT, _DEEPSEEK)), **rng.choice(_SHAPES), "tokens": tokens}
        cfg = build_config(MoeConfig, params)
        experts = sorted(rng.sample(range(cfg.experts), rng.randint(1, 6)))
        groups = tuple((e, rng.randint(1, tokens)) for e in experts)
        latency, width = rng.choice((1, 20, 40, 100)), rng.choice((1, 2, 4, 8, 64))
        gap = rng.choice(GAPS)
        batches = [moe.Batch(tokens, groups)] * rng.randint(1, 3)
        sources = {name: Source(Schedule([seed, k], gap)) for k, name in enumerate(("cmd", "x"))}
        ready = {name: Schedule([seed, 5 + k], gap) for k, name in enumerate(("o", "req"))}

        def case(cfg=cfg, b=batches, s=sources, y=ready, lat=latency, w=width):
            return moe.timing(cfg, b, s, y, MemoryAgent(lat, w, cfg.weight_port_bits))

        yield case


def _kvcache_cases(n: int, units: bool):
    import numpy as np

    from scoville.rtl.kvcache import KvCacheConfig
    from scoville.rtl.lib.params import build_config
    from scoville.sim.cycles import kvcache
    from scoville.sim.cycles.stream import Schedule, Source
    from scoville.testbenches.kvcache import random_script

    model = kvcache.units_timing if units else kvcache.timing
    for seed in range(n):
        rng = np.random.default_rng(seed)
        cfg = build_config(KvCacheConfig, {"page_tokens": int(rng.choice((2, 4, 8))),
                                           "kv_heads": 2, "head_dim": 16})
        outcomes = random_script(cfg, rng, 150).outcomes
        gap = GAPS[seed % len(GAPS)]
        sources = {name: Source(Schedule([seed, k], gap)) for k, name in enumerate(("req", "wd"))}
        ready = {name: Schedule([seed, 5 + k], gap) for k, name in enumerate(("rd", "resp"))}
        yield lambda cfg=cfg, o=outcomes, s=sources, y=ready: model(cfg, o, s, y)


def _cases(model: str, n: int):
    if model == "attention":
        return list(_attention_cases(n))
    if model == "moe":
        return list(_moe_cases(n))
    return list(_kvcache_cases(n, units=model == "kvcache-units"))


def measure(model: str, n: int, repeat: int) -> dict:
    """The model on ``n`` cases: the digest of its predictions, the cycles it modelled and
    the fastest of ``repeat`` wall times (the cases built outside the timing)."""
    best, digest, cycles = float("inf"), None, 0
    for _ in range(repeat):
        cases = _cases(model, n)
        h, cycles, wall = hashlib.sha256(), 0, 0.0
        for case in cases:
            start = time.perf_counter()
            timing = case()
            wall += time.perf_counter() - start
            text, c = _digest(timing)
            h.update(text.encode())
            cycles += c
        best, digest = min(best, wall), h.hexdigest()[:16]
    return {"digest": digest, "cycles": cycles, "wall_s": best}


def _earlier(rev: str, models, n: int, repeat: int, scratch: Path) -> dict:
    """:func:`measure` of ``models`` through revision ``rev`` (a copy of it, in a
    subprocess that imports it)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import mutants  # the copy machinery: a snapshot of a revision, importable on its own

    tree = scratch / f"rev-{rev}"
    mutants.snapshot(tree, rev)
    argv = [sys.executable, __file__, "--worker", "--cases", str(n), "--repeat", str(repeat),
            "--models", *models]
    out = subprocess.run(argv, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1])


def _rate(row: dict) -> str:
    return f"{row['cycles'] / row['wall_s']:,.0f}"


def table(now: dict, earlier: dict | None, args) -> str:
    machine = f"{platform.machine()}, {os.cpu_count()} cores"
    against = f" --against {args.against}" if args.against else ""
    lines = [
        "# Timed-model speed", "",
        f"Made by `python scripts/modelspeed.py --cases {args.cases} --repeat {args.repeat}"
        f"{against} --out {args.out}` on {machine}; do not edit by hand.", "",
        "Each composed block's timed model on the same seeded random cases (random "
        "configurations and transactions, valid gaps and back-pressure of 0, 25 or 60%, "
        "memories of 1-100 cycles and 1-64 bytes a cycle for `moe`): modelled cycles over "
        "wall time, the fastest of the runs. *digest*: every prediction (each handshake's "
        "cycle on every stream, every counter) of every case; equal digests, equal "
        "predictions. `kvcache` is the one loop its testbench runs, `kvcache-units` its unit "
        "models (what `--trace` steps).", "",
    ]
    if earlier is None:
        lines += ["| model | cases | cycles | cycles/s | digest |", "|---|---:|---:|---:|---|"]
        for model, row in now.items():
            lines.append(f"| {model} | {args.cases} | {row['cycles']:,} | {_rate(row)} | "
                         f"`{row['digest']}` |")
    else:
        lines += [f"Against revision `{args.against}` (its models, the same cases):", "",
                  "| model | cases | cycles | earlier cycles/s | now cycles/s | now / earlier | "
                  "same predictions |", "|---|---:|---:|---:|---:|---:|---|"]
        for model, row in now.items():
            old = earlier.get(model)
            if old is None:
                lines.append(f"| {model} | {args.cases} | {row['cycles']:,} | n/a | "
                             f"{_rate(row)} | n/a | n/a |")
                continue
            ratio = old["wall_s"] / row["wall_s"] if row["cycles"] == old["cycles"] else None
            same = "yes" if old["digest"] == row["digest"] else "**no**"
            lines.append(f"| {model} | {args.cases} | {row['cycles']:,} | {_rate(old)} | "
                         f"{_rate(row)} | {'n/a' if ratio is None else f'{ratio:.2f}'} | "
                         f"{same} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=40, help="random cases per model")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the fastest counts")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--against", metavar="REV", help="an earlier revision to compare with")
    parser.add_argument("--out", default="docs/modelspeed.md")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cases < 1 or args.repeat < 1:
        parser.error("--cases and --repeat: allowed 1 or more")
    if args.worker:  # in a copy of an earlier revision: the models it has
        from scoville.sim.cycles import kvcache
        have = [m for m in args.models if m != "kvcache-units" or hasattr(kvcache, "units_timing")]
        print(json.dumps({m: measure(m, args.cases, args.repeat) for m in have}))
        return 0
    now = {}
    for model in args.models:
        now[model] = row = measure(model, args.cases, args.repeat)
        print(f"{model}: {row['cycles']:,} cycles, {_rate(row)} cycles/s, {row['digest']}",
              file=sys.stderr)
    earlier = None
    if args.against:
        with tempfile.TemporaryDirectory() as scratch:
            earlier = _earlier(args.against, args.models, args.cases, args.repeat, Path(scratch))
    text = table(now, earlier, args)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
