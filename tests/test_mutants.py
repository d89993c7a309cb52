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


def test_a_run_chooses_the_named_mutations_then_the_named_blocks_each_once():
    rope = [mu.name for mu in MUTANTS.MUTATIONS if mu.block == "rope"]
    argmax = [mu.name for mu in MUTANTS.MUTATIONS if mu.block == "argmax"]
    got = [mu.name for mu in MUTANTS.choose([rope[1], "gemm-acc-24-bit", rope[1]],
                                            ["rope", "argmax"])]
    assert got == [rope[1], "gemm-acc-24-bit", rope[0], *rope[2:], *argmax]
    assert MUTANTS.choose([], []) == list(MUTANTS.MUTATIONS)


@pytest.mark.parametrize("args, message", [
    (["--block", "nope"], "unknown block nope; allowed: argmax, attention,"),
    (["--only", "nope"], "unknown mutation nope; allowed: "),
    (["--merge", "--out", "x.md"], "give --merge or --out, not both"),
])
def test_a_bad_choice_is_one_line_naming_the_allowed(args, message, capsys):
    with pytest.raises(SystemExit) as stop:
        MUTANTS.main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in err


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
DRAWN_ON_VERILATOR = ("attention", "moe", "decoder")
#: Blocks whose mutations a draw leaves to ``scripts/mutants.py``'s report: a decoder mutation
#: builds the whole decoder twice (baseline and mutant), 450-700 s of a CI worker's time cold,
#: more than the rest of a draw together (the suite's own whole-decoder case, one a run, is
#: another such build).
NOT_DRAWN = ("decoder",)


def drawn_mutations(config) -> list[tuple[str, str, int]]:
    """The ``--mutants N`` mutations a run draws, by ``--seed``: ``(name, simulator, stimulus
    seed)``, the stimulus seed one of ``scripts/mutants.py``'s defaults (1, 2, 3); never a
    known gap of the suite nor one of a block in :data:`NOT_DRAWN`."""
    n = config.getoption("--mutants")
    if n <= 0:
        return []
    rng = random.Random(config.getoption("--seed"))
    pool = [mu for mu in MUTANTS.MUTATIONS if not mu.gap and mu.block not in NOT_DRAWN]
    drawn = rng.sample(pool, min(n, len(pool)))
    return [(mu.name, "verilator" if mu.block in DRAWN_ON_VERILATOR
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


def test_a_draw_takes_no_decoder_mutation_and_meets_every_other_one_on_every_seed():
    """The draw: N mutations, never the decoder's (it is in NOT_DRAWN), never a gap; over CI
    runs every other mutation comes up on every stimulus seed of the report."""
    class Config:
        def __init__(self, seed):
            self.options = {"--mutants": 3, "--seed": seed}

        def getoption(self, name):
            return self.options[name]

    assert "decoder" in NOT_DRAWN
    blocks = {mu.name: mu.block for mu in MUTANTS.MUTATIONS}
    every = {(mu.name, s) for mu in MUTANTS.MUTATIONS if not mu.gap and mu.block != "decoder"
             for s in MUTANTS.SEEDS}
    seen = set()
    for seed in range(20_000):   # all of them by seed 725 today; a new mutation reshuffles
        drawn = drawn_mutations(Config(seed))
        assert len(drawn) == 3 and len({name for name, _, _ in drawn}) == 3
        assert not any(blocks[name] == "decoder" for name, _, _ in drawn)
        seen |= {(name, s) for name, _, s in drawn}
        if seen == every and seed >= 200:
            break
    assert seen == every


def test_the_report_is_written_from_its_stored_outcomes():
    """docs/verification.md is what scripts/mutants.py writes from docs/verification.json
    today: a mutation added, renamed or reworded shows here until the report is rewritten."""
    import json

    store = json.loads((ROOT / MUTANTS.STORE).read_text())
    assert (ROOT / MUTANTS.DEFAULT_OUT).read_text() == MUTANTS.render(store)


def test_a_merged_run_replaces_only_what_it_ran():
    """--merge: a later run of one mutation on one simulator takes that cell (naming its run);
    the other simulator's cell and the other mutations keep the earlier run's; a run whose
    every outcome was replaced leaves the list; a mutation no longer in the list is dropped."""
    a, b = MUTANTS.MUTATIONS[0], MUTANTS.MUTATIONS[1]
    base = {(a.block, MUTANTS._params_key(a.params)): {
        "params": a.params, "tests": list(a.tests), "icarus": MUTANTS.Outcome("passed"),
        "verilator": MUTANTS.Outcome("passed")}}

    def caught(test, message):
        return MUTANTS.Outcome("caught", failed=[test], message=message, sim_version="v")

    store = MUTANTS.new_store()
    both = ["icarus", "verilator"]
    MUTANTS.add_run(store, "first", "tree 1", [1, 2, 3], both, [a], base,
                    {a.name: {s: caught("test_x", f"first {s}") for s in both}}, 60)
    store["mutations"]["gone-mutation"] = {"icarus": {**MUTANTS.record(caught("t", "m")),
                                                      "run": 1}}
    MUTANTS.add_run(store, "second", "tree 2", [1], ["verilator"], [a, b], base,
                    {a.name: {"verilator": MUTANTS.Outcome("passed", message="survived it")},
                     b.name: {"verilator": caught("test_y", "second")}}, 30)
    assert [r["run"] for r in store["runs"]] == [1, 2]
    assert store["mutations"][a.name]["icarus"]["message"] == "first icarus"
    assert store["mutations"][a.name]["verilator"]["run"] == 2
    assert set(store["mutations"][b.name]) == {"verilator"}
    assert "gone-mutation" not in store["mutations"]
    text = MUTANTS.render(store)
    row = next(line for line in text.splitlines() if line.startswith(f"| `{a.name}`"))
    assert "caught by `test_x`: first icarus (run 1)" in row
    assert "**survived**: survived it (run 2)" in row
    row = next(line for line in text.splitlines() if line.startswith(f"| `{b.name}`"))
    assert row.endswith("| not run | caught by `test_y`: second (run 2) |")
    assert f"**0 of {len(MUTANTS.MUTATIONS)} mutations caught as expected" in text
    many = "python scripts/mutants.py " + " ".join(f"--only m{k}" for k in range(4))
    MUTANTS.add_run(store, many + " --merge", "tree 3", [1], both, [a], base,
                    {a.name: {s: caught("test_x", "third") for s in both}}, 10)
    assert [r["run"] for r in store["runs"]] == [2, 3]
    assert ("| 3 | `python scripts/mutants.py --merge` with `--only` for each of 4 mutations "
            "| tree 3 |") in MUTANTS.render(store)
    MUTANTS.add_run(store, "fourth", "tree 4", [1], ["icarus"], [b], base,
                    {b.name: {"icarus": caught("test_y", "fourth")}}, 10)
    assert [r["run"] for r in store["runs"]] == [2, 3, 4]
    # A run whose baseline failed leaves the mutation's earlier outcome in place.
    MUTANTS.add_run(store, "fifth", "tree 5", [1], ["icarus"], [b], base,
                    {b.name: {"icarus": MUTANTS.Outcome("skipped", message="no")}}, 10)
    assert store["mutations"][b.name]["icarus"]["run"] == 4


def test_a_run_builds_each_copy_once_stops_at_the_first_miss_and_keeps_a_faulty_copys(
        monkeypatch, tmp_path):
    """run_all with the simulations replaced: each copy's seeds run in order in one job (so
    the first builds it), a mutation's later seeds are not run once one is not caught, a
    copy whose run raises is an error of that copy alone, and a decoder mutation runs on
    Verilator alone."""
    gemm = [mu for mu in MUTANTS.MUTATIONS if mu.block == "gemm"][:2]
    dec = next(mu for mu in MUTANTS.MUTATIONS if mu.block == "decoder")
    calls = []

    def fake_job(tree, block, params, sim, seed, tests, timeout, tag):
        calls.append((tag, sim, seed))
        if tag.startswith(gemm[1].name) and sim == "icarus":
            raise RuntimeError("the copy broke")
        if tag.startswith("baseline"):
            return MUTANTS.Outcome("passed", design_key=f"base-{block}")
        mu = next(mu for mu in mutations if tag.startswith(mu.name))
        status = "passed" if (mu is gemm[0] and seed == 2) else "caught"
        return MUTANTS.Outcome(status, failed=["t"], kind=mu.expect, design_key=tag,
                               stream=(mu.streams or (None,))[0])

    mutations = [*gemm, dec]
    monkeypatch.setattr(MUTANTS, "run_job", fake_job)
    monkeypatch.setattr(MUTANTS, "prepare", lambda mus, rev, scratch: (
        tmp_path, {mu.name: tmp_path for mu in mus}))
    _, results = MUTANTS.run_all(mutations, list(MUTANTS.SIMULATORS), [1, 2, 3], 2, None, 1,
                                 tmp_path)
    for mu in mutations:
        for sim in MUTANTS.SIMULATORS:
            seeds = [s for tag, si, s in calls if tag.startswith(mu.name) and si == sim]
            assert seeds == sorted(seeds)
    assert [s for tag, si, s in calls if tag.startswith(gemm[0].name)
            and si == "verilator"] == [1, 2]
    assert results[gemm[0].name]["verilator"].status == "passed"
    assert results[gemm[0].name]["verilator"].message.startswith("seed 2: ")
    assert results[gemm[1].name]["icarus"].status == "error"
    assert "the copy broke" in results[gemm[1].name]["icarus"].message
    assert results[gemm[1].name]["verilator"].status == "caught"
    assert set(results[dec.name]) == {"verilator"}
    assert not any(si == "icarus" and (tag.startswith(dec.name) or "decoder" in tag)
                   for tag, si, _ in calls)


def test_a_stored_outcome_of_an_older_definition_is_stale_and_not_counted():
    """An outcome stored under another fingerprint (the mutation's edits, parameters, tests
    or expected kind changed since) shows as stale and counts neither as run nor as caught;
    the decoder's Icarus cells say it runs on Verilator alone; a baseline cell names the
    tests of its own run when they are fewer than the row's."""
    a = MUTANTS.MUTATIONS[0]
    dec = next(mu for mu in MUTANTS.MUTATIONS if mu.block == "decoder")
    assert dec.simulators() == ("verilator",) and a.simulators() == MUTANTS.SIMULATORS
    changed = dataclasses.replace(a, params={**a.params, "count": 1})
    assert changed.fingerprint() != a.fingerprint()
    assert dataclasses.replace(a, why="other words").fingerprint() == a.fingerprint()
    ok = {"icarus": MUTANTS.Outcome("caught", failed=["test_x"], message="m"),
          "verilator": MUTANTS.Outcome("caught", failed=["test_x"], message="m")}
    key = (a.block, MUTANTS._params_key(a.params))
    passed = {"params": a.params, "icarus": MUTANTS.Outcome("passed"),
              "verilator": MUTANTS.Outcome("passed")}
    store = MUTANTS.new_store()
    MUTANTS.add_run(store, "one", "tree 1", [1], ["icarus", "verilator"], [changed],
                    {key: {**passed, "tests": ["test_x"]}}, {a.name: ok}, 1)
    MUTANTS.add_run(store, "two", "tree 2", [1], ["icarus", "verilator"], [dec],
                    {key: {"params": a.params, "verilator": passed["verilator"],
                           "tests": ["test_y"]}},
                    {dec.name: {"verilator": ok["verilator"]}}, 1)
    assert store["runs"][-1]["sims"] == ["verilator"]      # the simulators it ran
    text = MUTANTS.render(store, [a, dec])
    row = next(line for line in text.splitlines() if line.startswith(f"| `{a.name}`"))
    assert row.count("**stale** (its definition changed after run 1): caught by") == 2
    row = next(line for line in text.splitlines() if line.startswith(f"| `{dec.name}`"))
    assert row.endswith("| not run: Verilator alone (`VERILATOR_ONLY`) | caught by `test_x`: "
                        "m (run 2) |")
    assert ("**1 of 2 mutations caught as expected on every simulator they run on** (icarus: "
            "0 of 1, 0 run, verilator: 1 of 2, 1 run; stale: 1;") in text
    row = next(line for line in text.splitlines() if line.startswith(f"| `{a.block}` |"))
    assert row.endswith("| `test_x`, `test_y` | passed (run 1 on `test_x`) | "
                        "passed (run 2 on `test_y`) |")


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
