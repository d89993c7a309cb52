#!/usr/bin/env python3
"""The README's two commands timed as a newcomer meets them: each in a fresh clone of this
repository's ``HEAD``, under a fresh home folder (so no virtual environment, pip download
cache, build cache or ccache is there to help), with nothing of this shell's environment
pointing at Scoville's caches.

For each command (``./scripts/demo``, then ``./scripts/test``) it records the wall time of the
whole command and of its phases, read off its output as it comes: the set-up (system packages,
the virtual environment and ``pip install``), the exploration and the regression of
``./scripts/demo``; and each regression run's own seconds as ``scoville regress`` reports them.

``--fresh-system`` first removes the system packages ``scripts/setup.sh`` installs when they
are missing (ccache, Yosys, nextpnr-ice40, the lz4 headers) and apt's download cache, so that
the set-up installs them as on a new machine: for throwaway machines only (root).

Writes ``docs/first-run.md`` and the measured times into the README (between the
``first-run`` markers); ``tests/test_first_run.py`` checks that the two agree and that the
measured regression ran every block's current first look.

Usage: ``python scripts/first_run.py [--fresh-system] [--only demo|test] [--out FILE]``
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {"demo": "./scripts/demo", "test": "./scripts/test"}
#: The test command's own check of this measurement is left out of the measured run: in the
#: clone, the measurement it checks is the one being replaced.
ARGS = {"demo": [], "test": ["--deselect", "tests/test_first_run.py"]}
#: What setup.sh installs when missing, beyond a stock machine of this kind's tools.
SYSTEM_PACKAGES = ("ccache", "yosys", "nextpnr-ice40", "liblz4-dev")
#: Variables (and prefixes) that would point a run at this shell's caches, tools or options.
DROPPED = ("SCOVILLE_", "PYTEST_", "CCACHE_", "PIP_", "OBJCACHE", "MAKEFLAGS", "VERILATOR_ROOT",
           "VIRTUAL_ENV", "XDG_CACHE_HOME", "PYTHONPATH")
#: Phase marks: a phase starts at the first output line matching its pattern.
PHASES = {
    "demo": [("set-up", None), ("doctor", re.compile(r"^== scoville doctor")),
             ("exploration", re.compile(r"^== scoville explore")),
             ("regression", re.compile(r"^== scoville regress"))],
    "test": [("set-up", None), ("tests", re.compile(r"^=+ test session starts"))],
}
RUN_LINE = re.compile(r"^\[\s*\d+/\d+\] (pass|FAIL|ERROR)\s+(\S+) \((\S+)\) on (\S+) in "
                      r"([\d.]+) s$")
#: ``scoville regress``'s configurations under its table: ``  BLOCK (LABEL): PARAMS``.
CONFIG_LINE = re.compile(r"^  (\w+ \(\S+\)): (.*)$")
BEGIN, END = "<!-- first-run -->", "<!-- /first-run -->"


def fresh_system() -> None:
    """Remove what setup.sh would install, so that it installs it again."""
    if os.geteuid() != 0:
        sys.exit("first_run.py: --fresh-system needs root")
    present = [p for p in SYSTEM_PACKAGES
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode == 0]
    if present:
        subprocess.run(["apt-get", "purge", "--autoremove", "-y", "-qq", *present], check=True,
                       capture_output=True, env={**os.environ,
                                                 "DEBIAN_FRONTEND": "noninteractive"})
    subprocess.run(["apt-get", "clean"], check=True)


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED)}
    env["HOME"] = str(home)
    venv_bin = os.environ.get("VIRTUAL_ENV")
    parts = env.get("PATH", "").split(os.pathsep)
    env["PATH"] = os.pathsep.join(p for p in parts
                                  if not venv_bin or not p.startswith(venv_bin))
    return env


def timed_run(name: str, work: Path) -> dict:
    """Clone, then run the command with a fresh home; its output is echoed and its phases
    and regression runs are read off it."""
    clone = work / f"{name}-clone"
    home = work / f"{name}-home"
    home.mkdir()
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    phases = PHASES[name]
    marks = {phases[0][0]: 0.0}
    runs = []
    params: dict[str, str] = {}
    start = time.monotonic()
    proc = subprocess.Popen([COMMANDS[name], *ARGS[name]], cwd=clone, env=clean_env(home),
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            bufsize=1)
    tail = []
    for line in proc.stdout:
        now = time.monotonic() - start
        sys.stdout.write(line)
        line = line.rstrip("\n")
        tail = (tail + [line])[-40:]
        for label, pattern in phases:
            if pattern is not None and label not in marks and pattern.search(line):
                marks[label] = now
        if m := CONFIG_LINE.match(line):
            params[m[1]] = m[2].strip()
        if m := RUN_LINE.match(line):
            runs.append({"result": m[1], "block": m[2], "label": m[3], "sim": m[4],
                         "seconds": float(m[5])})
    code = proc.wait()
    total = time.monotonic() - start
    if code:
        sys.exit(f"first_run.py: {COMMANDS[name]} failed (exit {code}):\n" + "\n".join(tail))
    order = [label for label, _ in phases if label in marks]
    spans = {label: (marks[nxt] if nxt else total) - marks[label]
             for label, nxt in zip(order, [*order[1:], None], strict=True)}
    summary = next((line for line in reversed(tail) if re.search(r"passed|failed", line)), "")
    return {"total": total, "phases": spans, "runs": runs, "params": params,
            "summary": summary.strip("= ")}


def minutes(seconds: float) -> str:
    whole, rest = divmod(round(seconds), 60)
    return f"{whole} min {rest:02d} s"


def cores() -> int:
    """The cores this process may use (what ``nproc`` says)."""
    return len(os.sched_getaffinity(0))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cores()} cores ({cpu}), Python {platform.python_version()}"


def write_doc(path: Path, results: dict, *, commit: str, fresh: bool) -> None:
    lines = [
        "# The two commands on a fresh machine",
        "",
        f"Made by `python scripts/first_run.py{' --fresh-system' if fresh else ''}` at commit "
        f"`{commit}` on {machine()}, {time.strftime('%Y-%m-%d')}: each command in a fresh "
        "clone, under a fresh home (no virtual environment, pip cache, build cache or ccache)"
        + (", the system packages `scripts/setup.sh` installs removed first (and apt's "
           "download cache), so it installs them." if fresh else
           "; system packages as the machine had them.") + " Wall times.",
        "",
        "| command | total | phases |",
        "|---|---:|---|",
    ]
    for name, r in results.items():
        phases = ", ".join(f"{label} {round(s)} s" for label, s in r["phases"].items())
        lines.append(f"| `{COMMANDS[name]}` | {minutes(r['total'])} | {phases} |")
    demo = results.get("demo")
    if demo and demo["runs"]:
        lines += [
            "",
            "`./scripts/demo`'s regression (`scoville regress --workers N`, N the cores: each "
            "block's first look, every test of its testbench, on both simulators; two runs at "
            "once, so each run's seconds include its share of the machine):",
            "",
            "| block | config | simulator | result | seconds | parameters |",
            "|---|---|---|---|---:|---|",
        ]
        for run in sorted(demo["runs"], key=lambda r: -r["seconds"]):
            given = demo["params"].get(f"{run['block']} ({run['label']})", "?")
            lines.append(f"| {run['block']} | {run['label']} | {run['sim']} | {run['result']} "
                         f"| {run['seconds']:.1f} | {given} |")
    if "test" in results:
        lines += ["", f"`./scripts/test`: {results['test']['summary']}."]
    path.write_text("\n".join(lines) + "\n")


def write_readme(results: dict, doc: Path, *, fresh: bool) -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"first_run.py: README.md has no {BEGIN} ... {END} markers")
    said = "; ".join(f"`{COMMANDS[n]}` {minutes(r['total'])}" for n, r in results.items())
    rel = doc.resolve().relative_to(ROOT)
    system = ("its system packages installed by the set-up" if fresh
              else "its system packages already installed")
    body = (f"{BEGIN}Measured on a fresh {cores()}-core machine, set-up included ({system}): "
            f"{said} ([{rel}]({rel}), `python scripts/first_run.py`).{END}")
    head, rest = text.split(BEGIN, 1)
    readme.write_text(head + body + rest.split(END, 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh-system", action="store_true",
                        help="remove the system packages setup.sh installs, first (root)")
    parser.add_argument("--only", choices=COMMANDS, help="time one command")
    parser.add_argument("--out", default=str(ROOT / "docs" / "first-run.md"))
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                      capture_output=True, text=True).stdout.strip():
        print("first_run.py: uncommitted changes are not measured (a clone of HEAD is)",
              file=sys.stderr)
    results = {}
    with tempfile.TemporaryDirectory(prefix="scoville-first-run-") as tmp:
        for name in [args.only] if args.only else list(COMMANDS):
            if args.fresh_system:
                fresh_system()
            results[name] = timed_run(name, Path(tmp))
            shutil.rmtree(Path(tmp) / f"{name}-home", ignore_errors=True)
    out = Path(args.out)
    write_doc(out, results, commit=commit, fresh=args.fresh_system)
    if not args.only:
        write_readme(results, out, fresh=args.fresh_system)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
