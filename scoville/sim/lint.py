"""Verilator lint of every generated design, with the waived warning classes and why.

Amaranth's Verilog output is machine-written; the classes below are properties of that output,
not of our designs. Every other ``-Wall`` warning fails the flow.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .tools import Tool

__all__ = ["WAIVED", "LintError", "lint"]

#: Waived Verilator warning classes, each with its reason.
WAIVED: dict[str, str] = {
    "DECLFILENAME": "Amaranth writes every submodule into the one file named after the top",
    "UNUSEDSIGNAL": "Amaranth keeps unused bits of sliced intermediates and the unused reset "
    "of purely combinational designs",
    "WIDTHEXPAND": "Yosys' backend zero-extends operands implicitly in emitted expressions",
    "WIDTHTRUNC": "Yosys' backend truncates results implicitly in emitted expressions",
    "PROCASSINIT": "Amaranth gives registers an initial value and also assigns them in processes",
    "CASEINCOMPLETE": "Amaranth writes FSMs and m.Switch as case statements without a default; "
    "every signal they drive is assigned its default just before the case",
}


class LintError(RuntimeError):
    """Lint found a warning that is not waived; the message lists the first ones."""


def lint(tool: Tool, verilog: Path, top: str, env: dict[str, str]) -> str:
    """Run ``verilator --lint-only -Wall`` on ``verilog``; return the log, raise on a warning."""
    argv = [tool.path, "--lint-only", "-Wall", "--top-module", top]
    argv += [f"-Wno-{name}" for name in WAIVED]
    argv.append(str(verilog))
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=verilog.parent)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        first = [line for line in log.splitlines() if line.startswith("%")][:5]
        raise LintError(f"Verilator lint of {verilog.name} failed: " + " | ".join(first))
    return log
