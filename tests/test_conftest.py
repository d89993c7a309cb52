"""The suite's own selection: an ``alternate_sims`` matrix covers both simulators in every run,
each pair of neighbouring cases on different ones, and every case on each over two seeds."""

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SIMULATORS, alternate_simulator


@pytest.mark.parametrize("seed", [0, 1, 20261130, 2022813800])
def test_each_pair_of_cases_runs_on_both_simulators(seed):
    for pair in range(8):
        assert {alternate_simulator(2 * pair, seed),
                alternate_simulator(2 * pair + 1, seed)} == set(SIMULATORS)


def test_neighbouring_pairs_start_on_different_simulators():
    # So that a matrix of two pairs (a format's two dataflows, twice) puts each dataflow on
    # both simulators.
    firsts = [alternate_simulator(2 * pair, 0) for pair in range(6)]
    assert all(a != b for a, b in zip(firsts, firsts[1:], strict=False))


def test_an_odd_seed_flips_every_case():
    for case in range(16):
        assert alternate_simulator(case, 0) != alternate_simulator(case, 1)


def _collect(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent, check=True)
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_block_keeps_the_simulation_tests_alone_on_their_simulators():
    """``--block`` keeps only simulation tests (of modules that simulate through simcheck),
    each matrix case on the simulator a whole run gives it."""
    whole = set(_collect("tests", "-m", "sim", "--seed", "1"))
    chosen = _collect("tests", "--block", "fp4_mul", "--seed", "1")
    assert chosen and set(chosen) <= whole
    assert any(n.startswith("tests/test_fp4_mul.py::test_fp4_mul_rtl") for n in chosen)
    assert not any("test_mutants.py" in n or "test_regress.py" in n for n in chosen)


def test_one_whole_decoder_simulation_a_run_and_every_one_over_seeds():
    """The whole-decoder group (test_decoder's two engines, its wide-ROPE and MLA engines,
    test_generate's two tiny models) runs one case a seed; over twelve seeds each case on
    each simulator it may take (h64 and h96-heavy alternate; the rest are Verilator's)."""
    name = ("test_decoder_rtl[", "test_decoder_rtl_wide_rope[", "test_generate_rtl[")
    seen = set()
    for seed in range(12):
        got = [n.split("::")[1] for n in _collect("tests/test_decoder.py",
                                                  "tests/test_generate.py", "-m", "sim",
                                                  "--seed", str(seed))
               if n.split("::")[1].startswith(name)]
        assert len(got) == 1, (seed, got)
        seen |= set(got)
    every = {n.split("::")[1] for n in _collect("tests/test_decoder.py", "tests/test_generate.py",
                                                "-m", "sim", "--both-sims")
             if n.split("::")[1].startswith(name)}
    assert seen == {n for n in every if "icarus" not in n or "test_decoder_rtl[" in n}
    assert len(seen) == 8
