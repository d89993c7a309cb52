"""The code passes the project's ruff rules (pyproject.toml)."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "scoville", "tests",
         "scripts"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _calls(node) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            names.add(ast.unparse(sub.func))
    return names


def _marked_sim(fn) -> bool:
    return any(ast.unparse(d).startswith("pytest.mark.sim") for d in fn.decorator_list)


def test_every_simulator_test_carries_the_sim_mark():
    """A test that runs an HDL simulator (through ``simulate`` or ``flow.run``, or on the
    ``simulator`` fixture) is marked ``sim``, so ``-m 'not sim'`` runs the rest alone."""
    unmarked = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text())
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test_"):
                continue
            args = {a.arg for a in fn.args.args}
            runs = "simulator" in args or _calls(fn) & {"simulate", "flow.run"}
            if runs and not _marked_sim(fn):
                unmarked.append(f"{path.name}::{fn.name}")
    assert not unmarked, unmarked
