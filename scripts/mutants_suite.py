#!/usr/bin/env python3
"""Every mutation of ``scripts/mutants.py`` against the suite's own tests, as CI runs them.

``scripts/mutants.py`` runs each mutation on parameters and cocotb tests chosen for it. This
script asks the other question: does the suite itself catch it? For each mutation and
stimulus seed it runs, in a mutated copy of the repository, ``pytest tests -m sim --block
BLOCK --seed SEED``: every simulation test of the mutation's block on the suite's own
configurations, each case on the simulator it has in a whole run (``alternate_sims``
matrices alternate along the matrix and flip with the seed's parity, so an odd and an even
seed put every case on both simulators). The suite *catches* a mutation on a seed when some
test fails with the kind of failure the mutation expects (its first failed check's
``[kind]``, and for a timing one, a handshake on a stream it names); that run stops there.
It *catches it otherwise* when tests fail but none as expected, and the mutation *survives*
when every test passes. A mutation is caught when it is on every seed (as CI runs the suite:
one seed a run). Each block is also run unmutated on each seed (the baseline), which must
pass.

A mutation that ``scripts/mutants.py`` catches and this script does not is a gap of the
suite: the suite needs the case that catches it.

Writes ``docs/verification-suite.md`` (when every mutation is run, or ``--out`` is given) and
exits non-zero when a baseline fails or a mutation (not a declared gap) is not caught as
expected.

Usage: ``python scripts/mutants_suite.py [--only NAME]... [--seed N...] [--jobs N]
[--out FILE.md] [--rev REV] [--timeout S] [--keep]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import mutants
from mutants import Mutation, Outcome

from scoville.testbenches.failures import Kind, stream_of

ROOT = mutants.ROOT
DEFAULT_OUT = "docs/verification-suite.md"

#: A kind tag as a failing check's message starts with it.
_TAG = re.compile(r"\[(" + "|".join(k.value for k in Kind) + r")\]")


def first_failure(text: str) -> tuple[Kind | None, str | None, str]:
    """A failing pytest report's first kind-tagged check: ``(kind, stream, line)``; the kind is
    None when no check names one (a plain ``assert`` of a test's own)."""
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    for line in lines:
        found = _TAG.search(line)
        if found:
            text = line[found.end():].split("Traceback (most recent call last")[0]
            text = mutants._DESCRIBE.sub("", text.strip())
            return Kind(found.group(1)), stream_of(line), text
    if lines:
        return None, None, lines[0]
    rest = text.strip().splitlines()
    return None, None, rest[-1] if rest else "no message"


@dataclass
class Watch:
    """A pytest plugin: what each simulation test gave on which simulator; ends the session at
    the first failure that is the one ``mutation`` expects."""

    mutation: Mutation | None
    sims: dict[str, str] = field(default_factory=dict)
    failures: list[dict] = field(default_factory=list)
    passed: list[dict] = field(default_factory=list)
    session: object = None

    def pytest_sessionstart(self, session):
        self.session = session

    def pytest_collection_finish(self, session):
        for item in session.items:
            spec = getattr(item, "callspec", None)
            self.sims[item.nodeid] = spec.params.get("simulator", "") if spec else ""

    def pytest_runtest_logreport(self, report):
        sim = self.sims.get(report.nodeid, "")
        if report.when == "call" and report.passed:
            self.passed.append({"test": report.nodeid, "sim": sim})
        if not report.failed:
            return
        kind, stream, line = first_failure(report.longreprtext)
        expected = self.mutation is not None and self.mutation.judge(kind, stream) is None
        self.failures.append({"test": report.nodeid, "sim": sim, "expected": expected,
                              "kind": kind.value if kind else None, "stream": stream,
                              "line": line[:300]})
        if expected:
            self.session.shouldstop = "caught as expected"


def worker(job_file: Path) -> int:
    """Run one block's simulation tests in the copy the job names (the working folder, first on
    ``PYTHONPATH``) and write what they gave beside the job."""
    import pytest

    job = json.loads(job_file.read_text())
    tree = Path(job["tree"]).resolve()
    mutation = None
    if job["mutation"]:  # the judge from the job: the mutation list may change meanwhile
        mutation = Mutation(job["mutation"], models="", file="", edits=(), block=job["block"],
                            params={}, tests=(), expect=Kind(job["expect"]), why="",
                            streams=tuple(job["streams"]),
                            also=Kind(job["also"]) if job["also"] else None)
    watch = Watch(mutation)
    code = pytest.main(["tests", "-m", "sim", "--block", job["block"], "--seed",
                        str(job["seed"]), "-q", "-p", "no:cacheprovider", "-o", "addopts="],
                       plugins=[watch])
    errors = [f"{name} was imported from {module.__file__}, not from the copy"
              for name in ("scoville", "tests") if (module := sys.modules.get(name))
              and not Path(module.__file__).resolve().is_relative_to(tree)]
    Path(job["result"]).write_text(json.dumps({
        "exit": int(code), "sims": sorted(set(watch.sims.values())), "errors": errors,
        "failures": watch.failures, "passed": watch.passed}))
    return 0


def run_job(tree: Path, mutation: Mutation | None, block: str, seed: int, timeout: float,
            tag: str) -> dict:
    """Run :func:`worker` on ``tree`` in a subprocess (:func:`mutants.run_worker`); its
    result, or ``{"error": why}``."""
    res, error, seconds, log = mutants.run_worker(
        Path(__file__).resolve(), tree,
        {"block": block, "seed": seed, "mutation": mutation.name if mutation else None,
         "expect": mutation.expect.value if mutation else None,
         "streams": list(mutation.streams) if mutation else [],
         "also": mutation.also.value if mutation and mutation.also else None}, tag, timeout)
    if res is None:
        return {"error": error, "seconds": seconds}
    res["seconds"] = seconds
    if res["errors"]:
        res["error"] = res["errors"][0]
    elif res["exit"] not in (0, 1, 2) or (res["exit"] == 2 and not res["failures"]):
        res["error"] = f"pytest exited {res['exit']} (see {log})"
    return res


def outcome(res: dict, baseline: bool) -> Outcome:
    """One job's result: a baseline ``passed`` (or ``caught``: a test failed); a mutation
    ``caught`` (a test failed as it expects), ``otherwise`` (tests failed, none so),
    ``passed`` (it survived); ``error`` when the run went wrong or ran no test. ``failed``
    names the test shown; the message starts with its simulator."""
    if "error" in res:
        return Outcome("error", message=res["error"], seconds=res["seconds"])
    fails = res["failures"]
    good = [f for f in fails if f["expected"]]
    if not fails and not res["passed"]:
        return Outcome("error", message="no simulation test ran", seconds=res["seconds"])
    if baseline:
        status = "caught" if fails else "passed"
    else:
        status = "caught" if good else "otherwise" if fails else "passed"
    shown = (good or fails)[:1]
    out = Outcome(status, failed=[f["test"] for f in shown], seconds=res["seconds"],
                  message=f"on {shown[0]['sim']}: {shown[0]['line']}" if shown else "")
    if shown and shown[0]["kind"]:
        out.kind, out.stream = Kind(shown[0]["kind"]), shown[0]["stream"]
    return out


def run_all(mutations: list[Mutation], seeds: list[int], jobs: int, rev: str | None,
            timeout: float, scratch: Path):
    """Baselines (one per block and seed) and then the mutations, each on every seed; returns
    ``(baselines, results)``: ``{block: {seed: Outcome}}`` and ``{name: {seed: Outcome}}``."""
    base, trees = mutants.prepare(mutations, rev, scratch)
    blocks = list(dict.fromkeys(mu.block for mu in mutations))
    total, done = (len(blocks) + len(mutations)) * len(seeds), 0

    def report(what: str, seed: int, got: Outcome) -> None:
        nonlocal done
        done += 1
        by = f" by {got.failed[0]}" if got.failed else ""
        note = f": {got.message}" if got.message else ""
        print(f"[{done}/{total}] {what}, seed {seed} ({got.seconds:.0f} s): {got.status}{by}"
              f"{note}", file=sys.stderr, flush=True)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        baselines: dict[str, dict[int, Outcome]] = {block: {} for block in blocks}
        futures = {pool.submit(run_job, base, None, block, seed, timeout,
                               f"baseline-{block}-seed{seed}"): (block, seed)
                   for block in blocks for seed in seeds}
        for fut in concurrent.futures.as_completed(futures):
            block, seed = futures[fut]
            got = baselines[block][seed] = outcome(fut.result(), baseline=True)
            report(f"baseline {block}", seed, got)
        results: dict[str, dict[int, Outcome]] = {mu.name: {} for mu in mutations}
        futures = {}
        for mu in mutations:
            for seed in seeds:
                if baselines[mu.block][seed].status != "passed":
                    results[mu.name][seed] = Outcome("error", message="its baseline failed")
                    done += 1
                    continue
                futures[pool.submit(run_job, trees[mu.name], mu, mu.block, seed, timeout,
                                    f"{mu.name}-seed{seed}")] = (mu, seed)
        for fut in concurrent.futures.as_completed(futures):
            mu, seed = futures[fut]
            got = outcome(fut.result(), baseline=False)
            if got.status == "otherwise":
                got.message = f"{mu.judge(got.kind, got.stream)}: {got.message}"
            results[mu.name][seed] = got
            report(mu.name, seed, got)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(mutants._RUNNING):
            mutants._end(proc)
        raise
    pool.shutdown()
    return baselines, results


def caught(outcomes: dict[int, Outcome]) -> bool:
    """Caught as expected on every seed."""
    return all(o.status == "caught" for o in outcomes.values())


def write_report(path: Path, command: str, tree: str, seeds: list[int],
                 mutations: list[Mutation], baselines: dict, results: dict,
                 wall: float) -> None:
    m = len(mutations)
    everywhere = [mu for mu in mutations if caught(results[mu.name])]
    gaps = [mu for mu in mutations if mu not in everywhere]
    by_sim = {sim: sum(o.status == "caught" and o.message.startswith(f"on {sim}:")
                       for r in results.values() for o in r.values())
              for sim in mutants.SIMULATORS}
    base_bad = [f"{block} (seed {seed})" for block, b in baselines.items()
                for seed, o in b.items() if o.status != "passed"]
    lines = [
        "# Verification: mutations against the suite's own tests",
        "",
        f"Made by `{command}` on {tree}, stimulus seeds {', '.join(map(str, seeds))}; do not "
        f"edit by hand. The run took {mutants._duration(wall)}.",
        "",
        "`docs/verification.md` runs each mutation of `scripts/mutants.py` on parameters and "
        "tests chosen for it. This report runs each on the suite as CI runs it: `pytest tests "
        "-m sim --block BLOCK --seed SEED` in a mutated copy of the repository, every "
        "simulation test of the mutation's block on the suite's own configurations, each case "
        "on the simulator it has in a whole run (the `alternate_sims` matrices flip with the "
        "seed's parity: an odd and an even seed put every case on both simulators). The suite "
        "*catches* a mutation on a seed when a test fails with the kind the mutation expects "
        "(the test's first failed check; a few name a second kind, with why; the run stops "
        "there); *caught otherwise* when tests "
        "fail but none so; the mutation *survives* when every test passes. A mutation is "
        "caught when it is on every seed. One that the tuned run catches and this one does "
        "not is a gap of the suite.",
        "",
        f"**{len(everywhere)} of {m} mutations caught as expected by the suite on every seed** "
        f"({m} mutations x {len(seeds)} seeds = {m * len(seeds)} suite runs; the catching "
        "test ran on " + ", ".join(f"{sim} in {n}" for sim, n in by_sim.items())
        + " of them; baselines: " + (f"failed: {', '.join(base_bad)}" if base_bad else
                                     f"all {len(baselines) * len(seeds)} passed") + ").",
        "",
    ]
    if gaps:
        lines += ["Not caught as expected by the suite on every seed: "
                  + ", ".join(f"`{mu.name}`" for mu in gaps) + ".", ""]
    lines += [
        "| mutation | block | expects | " + " | ".join(f"seed {s}" for s in seeds) + " |",
        "|---" * (3 + len(seeds)) + "|",
    ]
    for mu in mutations:
        cells = [mutants._cell(results[mu.name].get(seed)) for seed in seeds]
        if mu.gap:
            cells = [c if c.startswith("caught by") else f"**known gap** ({mu.gap}): {c}"
                     for c in cells]
        lines.append(f"| `{mu.name}` | `{mu.block}` | {mu.expects()} | " + " | ".join(cells)
                     + " |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", metavar="NAME",
                   help="run this mutation only (repeatable); scripts/mutants.py --list "
                        "shows the names")
    p.add_argument("--seed", type=int, nargs="+", default=list(mutants.SEEDS),
                   help="stimulus seeds; a mutation is caught only if it is on every one "
                        f"(default {' '.join(map(str, mutants.SEEDS))})")
    p.add_argument("--jobs", type=int, default=1, help="suite runs at once (default 1)")
    p.add_argument("--out", help=f"report file (default {DEFAULT_OUT} when every mutation "
                                 "runs; none with --only)")
    p.add_argument("--rev", help="run this commit's tree instead of the working tree")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per suite run")
    p.add_argument("--keep", action="store_true", help="keep the copies and logs; print where")
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    names = mutants.by_name()
    unknown = [n for n in args.only or [] if n not in names]
    if unknown:
        p.error(f"unknown mutation {', '.join(unknown)}; allowed: {', '.join(names)}")
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    chosen = [names[n] for n in dict.fromkeys(args.only)] if args.only else list(
        mutants.MUTATIONS)
    seeds = list(dict.fromkeys(args.seed))
    command = "python scripts/mutants_suite.py " + shlex.join(
        argv if argv is not None else sys.argv[1:])
    tree = mutants.describe_tree(args.rev)
    scratch = Path(tempfile.mkdtemp(prefix="scoville-suite-"))
    start = time.monotonic()
    try:
        baselines, results = run_all(chosen, seeds, args.jobs, args.rev, args.timeout,
                                     scratch)
    except mutants.MutationError as err:
        sys.exit(f"mutants_suite: {err}")
    finally:
        if args.keep:
            print(f"copies and logs kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    wall = time.monotonic() - start
    out = args.out or (None if args.only else DEFAULT_OUT)
    if out:
        write_report(Path(args.out) if args.out else ROOT / DEFAULT_OUT, command.strip(), tree,
                     seeds, chosen, baselines, results, wall)
        print(f"wrote {out}", file=sys.stderr)
    bad_base = [b for b, o in baselines.items() if any(x.status != "passed" for x in o.values())]
    missed = [mu.name for mu in chosen if not mu.gap and not caught(results[mu.name])]
    print(f"{len(chosen) - len(missed)} of {len(chosen)} mutations caught as expected by the "
          f"suite; baselines failed: {', '.join(bad_base) or 'none'}; not caught: "
          f"{', '.join(missed) or 'none'}; {mutants._duration(wall)}", file=sys.stderr)
    return 1 if bad_base or missed else 0


if __name__ == "__main__":
    sys.exit(main())
