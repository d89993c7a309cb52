"""scripts/mutants.py: every mutation still applies to the RTL as it is (no simulation), so the
mutation list cannot rot silently when the RTL changes."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scoville.blocks import get_block, parse_params

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "mutants.py"


def _mutants():
    spec = importlib.util.spec_from_file_location("mutants", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


MUTANTS = _mutants()
NAMES = [mu.name for mu in MUTANTS.MUTATIONS]


def test_names_are_unique():
    assert len(set(NAMES)) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_source_text_occurs_exactly_once(name):
    mu = MUTANTS.by_name()[name]
    text = (ROOT / mu.file).read_text()
    for edit in mu.edits:
        assert edit.old != edit.new, f"{name}: an edit that changes nothing"
        assert text.count(edit.old) == 1, (
            f"{name}: {edit.old.strip().splitlines()[0]!r} occurs {text.count(edit.old)} "
            f"times in {mu.file}"
        )
    mutated = MUTANTS.mutate(mu, text)
    compile(mutated, mu.file, "exec")
    # A name the edit uses but the file never imports fails only when the copy is simulated.
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "F821", "--stdin-filename",
         mu.file, "-"], input=mutated, capture_output=True, text=True, cwd=ROOT,
    )
    assert proc.returncode == 0, f"{name}: {proc.stdout}"


@pytest.mark.parametrize("name", NAMES)
def test_block_parameters_and_tests_exist(name):
    mu = MUTANTS.by_name()[name]
    block = get_block(mu.block)
    parse_params(block, mu.params)
    testbench = Path(importlib.util.find_spec(block.testbench).origin).read_text()
    for test in mu.tests:
        assert f"async def {test}(" in testbench, f"{name}: no test {test} in {block.testbench}"


def test_text_found_twice_names_the_mutation():
    mu = MUTANTS.by_name()["gemm-acc-24-bit"]
    text = (ROOT / mu.file).read_text()
    with pytest.raises(MUTANTS.MutationError, match="gemm-acc-24-bit.*found it 2 times"):
        MUTANTS.mutate(mu, text + text)


def test_a_copy_is_what_python_imports(tmp_path):
    """A copy of the package first on PYTHONPATH is what a subprocess imports (the editable
    install's finder comes after Python's path finder): the mutation runner relies on it."""
    for name in MUTANTS.PACKAGES:
        folder = tmp_path.joinpath(*name.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    root = tmp_path.resolve()
    proc = subprocess.run(
        [sys.executable, "-c", "import scoville.rtl; print(scoville.rtl.__file__)"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True,
        text=True, check=True,
    )
    assert Path(proc.stdout.strip()).resolve() == root / "scoville" / "rtl" / "__init__.py"

