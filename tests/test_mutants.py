"""scripts/mutants.py: every mutation still applies to the RTL as it is (no simulation), so the
mutation list cannot rot silently when the RTL changes."""

import dataclasses
import importlib.util
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from scoville.blocks import get_block, parse_params
from scoville.testbenches.failures import Failure, Kind, kind_of, stream_of

from .script import load

ROOT = Path(__file__).resolve().parent.parent


MUTANTS = load("mutants")
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


@pytest.mark.parametrize("name", NAMES)
def test_each_mutation_expects_a_kind_that_is_not_a_timeout(name):
    mu = MUTANTS.by_name()[name]
    assert isinstance(mu.expect, Kind) and mu.expect is not Kind.TIMEOUT
    assert mu.also not in (Kind.TIMEOUT, mu.expect), f"{name}: a second kind, not a timeout"
    assert not mu.streams or Kind.TIMING in (mu.expect, mu.also), \
        f"{name}: streams name handshakes"


def test_a_failure_counts_only_as_the_kind_it_expects():
    """The runner reads the kind (and a timing failure's stream) from the failing test's
    message: a timeout, a check with no kind, another kind or another stream is not the
    catch the mutation is there to show."""
    mu = MUTANTS.by_name()["gemm-o-stall-after-release"]
    assert (mu.expect, mu.streams) == (Kind.TIMING, ("o", "cmd"))
    timing = str(Failure(Kind.TIMING, "block gemm GemmConfig(rows=4) GemmWorkload(count=2) seed 1: "
                                      "test_workload: first differing handshake: "
                                      "stream o beat 3: predicted cycle 23, observed cycle 24"))
    assert mu.judge(kind_of(timing), stream_of(timing)) is None
    for message in (str(Failure(Kind.TIMEOUT, "timeout after 900 cycles: o 3/40")),
                    "AssertionError: assert 3 == 4",
                    str(Failure(Kind.DATA, "outputs: 2 mismatches; first at index [4] ")),
                    timing.replace("stream o ", "stream b ")):
        assert mu.judge(kind_of(message), stream_of(message)) is not None, message
    # A data bug that may show first as a handshake it moves: either, on the streams named.
    both = dataclasses.replace(mu, expect=Kind.DATA, also=Kind.TIMING)
    assert both.judge(Kind.DATA, None) is None and both.judge(kind_of(timing), "o") is None
    assert both.judge(Kind.TIMING, "b") is not None and both.judge(Kind.STATUS, None)
    assert both.expects() == "data or timing on `o` or `cmd`"
    # cocotb may put the exception's class before its message; the report shows it without
    # the kind or the run's description.
    assert kind_of(f"Failure: {timing}") is Kind.TIMING
    assert MUTANTS.first_line(timing, "test_workload").startswith(
        "first differing handshake: stream o beat 3")


#: Blocks whose mutations a draw runs on Verilator alone: Icarus takes minutes over their
#: runs (baseline and mutant), as the suite runs its big cases on Verilator (a decoder
#: mutation: 1,069 s on Icarus in one CI run, 278 s on Verilator in another).
VERILATOR_ONLY = ("attention", "moe", "decoder")
#: Blocks of which a draw takes at most one mutation: a decoder mutation builds the whole
#: decoder twice (baseline and mutant), 450-575 s of a CI worker's time cold.
ONE_A_DRAW = ("decoder",)


def drawn_mutations(config) -> list[tuple[str, str, int]]:
    """The ``--mutants N`` mutations a run draws, by ``--seed``: ``(name, simulator, stimulus
    seed)``, the stimulus seed one of ``scripts/mutants.py``'s defaults (1, 2, 3); never a
    known gap of the suite, at most one of a block in :data:`ONE_A_DRAW` (so N is at most
    the mutations of the other blocks, plus one)."""
    n = config.getoption("--mutants")
    if n <= 0:
        return []
    rng = random.Random(config.getoption("--seed"))
    pool = [mu for mu in MUTANTS.MUTATIONS if not mu.gap]
    drawn = []
    for mu in rng.sample(pool, len(pool)):
        if len(drawn) == n:
            break
        if mu.block in ONE_A_DRAW and any(d.block == mu.block for d in drawn):
            continue
        drawn.append(mu)
    return [(mu.name, "verilator" if mu.block in VERILATOR_ONLY
             else rng.choice(MUTANTS.SIMULATORS), rng.choice(MUTANTS.SEEDS)) for mu in drawn]


def pytest_generate_tests(metafunc):
    if "drawn" in metafunc.fixturenames:
        drawn = drawn_mutations(metafunc.config)
        if not drawn:
            skip = pytest.mark.skip(reason="no mutations drawn (--mutants N draws N)")
            metafunc.parametrize("drawn", [pytest.param(None, marks=skip)], ids=["none"])
            return
        metafunc.parametrize("drawn", drawn,
                             ids=[f"{name}-{sim}-seed{seed}" for name, sim, seed in drawn])


@pytest.mark.sim
@pytest.mark.longest
def test_drawn_mutation_is_caught_as_it_expects(drawn, tmp_path):
    """``--mutants N``: each drawn mutation, in a copy of the working tree, on its drawn
    simulator and stimulus seed (one of ``scripts/mutants.py``'s three: over CI runs each
    mutation meets each), as ``scripts/mutants.py --only NAME --sim SIM --seed SEED`` runs it:
    its baseline passes and its earliest failure is the kind it expects."""
    name, sim, seed = drawn
    mu = MUTANTS.by_name()[name]
    replay = f"replay: python scripts/mutants.py --only {name} --sim {sim} --seed {seed}"
    baselines, results = MUTANTS.run_all([mu], [sim], seeds=[seed], jobs=1, rev=None,
                                         timeout=1800, scratch=tmp_path)
    (base,) = baselines.values()
    assert base[sim].status == "passed", (
        f"{name}: baseline {base[sim].status} on {sim}: {base[sim].message}; {replay}")
    outcome = results[name][sim]
    assert outcome.status == "caught", (
        f"{name} on {sim}: {outcome.status} ({mu.expects()} expected): {outcome.message}; "
        f"{replay}")


def test_a_draw_takes_at_most_one_decoder_mutation_and_meets_every_one_on_every_seed():
    """The draw: N mutations, never two of the decoder's in a run (it is in ONE_A_DRAW), never
    a gap; over CI runs every mutation comes up on every stimulus seed of the report."""
    class Config:
        def __init__(self, seed):
            self.options = {"--mutants": 3, "--seed": seed}

        def getoption(self, name):
            return self.options[name]

    assert "decoder" in ONE_A_DRAW
    blocks = {mu.name: mu.block for mu in MUTANTS.MUTATIONS}
    every = {(mu.name, s) for mu in MUTANTS.MUTATIONS if not mu.gap for s in MUTANTS.SEEDS}
    seen = set()
    for seed in range(20_000):   # all of them by seed 1081 today; a new mutation reshuffles
        drawn = drawn_mutations(Config(seed))
        assert len(drawn) == 3 and len({name for name, _, _ in drawn}) == 3
        assert sum(blocks[name] == "decoder" for name, _, _ in drawn) <= 1
        seen |= {(name, s) for name, _, s in drawn}
        if seen == every and seed >= 200:
            break
    assert seen == every


SUITE = load("mutants_suite")


def test_suite_reads_the_first_kind_tagged_check_of_a_failing_report():
    text = ("def test_x():\n>   assert_passed(result)\n"
            "E   AssertionError: gemm on icarus, params {}, seed 1\n"
            "E   test_edges: [timing] block gemm GemmConfig(rows=4) GemmWorkload(m=0) seed 1: "
            "first differing handshake: stream o beat 6: predicted cycle 61, observed cycle 62"
            "Traceback (most recent call last): more\n"
            "E   test_workload: [data] outputs: 1 mismatch\n")
    kind, stream, line = SUITE.first_failure(text)
    assert kind is Kind.TIMING and stream == "o"
    assert line.startswith("first differing handshake: stream o beat 6") and "Traceback" not in line
    assert SUITE.first_failure("E   assert 1 == 2\n") == (None, None, "assert 1 == 2")


def test_suite_outcome_of_a_run():
    """A run where a test failed as the mutation expects is caught (naming its simulator), one
    with only other failures caught otherwise, one where every test passed survived, one that
    ran no test an error; a baseline with a failure fails."""
    expected = {"test": "u[verilator]", "sim": "verilator", "expected": True, "kind": "data",
                "stream": None, "line": "mismatch"}
    other = {"test": "t[icarus]", "sim": "icarus", "expected": False, "kind": "timeout",
             "stream": None, "line": "timeout"}
    passed = [{"test": "v[icarus]", "sim": "icarus"}]
    got = SUITE.outcome({"seconds": 1, "failures": [other, expected], "passed": passed},
                        baseline=False)
    assert got.status == "caught" and got.failed == ["u[verilator]"] and got.kind is Kind.DATA
    assert got.message == "on verilator: mismatch"
    got = SUITE.outcome({"seconds": 1, "failures": [other], "passed": passed}, baseline=False)
    assert got.status == "otherwise" and got.kind is Kind.TIMEOUT
    assert SUITE.outcome({"seconds": 1, "failures": [], "passed": passed},
                         baseline=False).status == "passed"
    assert SUITE.outcome({"seconds": 1, "failures": [], "passed": []},
                         baseline=False).status == "error"
    assert SUITE.outcome({"seconds": 1, "failures": [other], "passed": passed},
                         baseline=True).status == "caught"
    assert SUITE.caught({1: got, 2: got}) is False
    assert SUITE.first_failure("   \n") == (None, None, "no message")
