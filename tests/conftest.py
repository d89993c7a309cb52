"""Shared fixtures: the simulators and a replayable seed.

The seed is fixed by default; CI (``.ci/run``) draws a fresh one each run and prints it;
``--seed N`` replays any, and every simulation test names its seed in its failure message.

A test marked ``alternate_sims`` is a matrix of cases (formats, dataflows, sizes): each case
runs on one simulator, the two alternating along the matrix (0, 1, 1, 0, 0, 1, ...: so a pair
of neighbouring cases, one format's two dataflows say, runs on both) and flipping with the
seed, so every run covers both simulators and successive CI runs cover every case on each.
``--both-sims`` runs every case on both (a build per case and simulator: the suite's cold time).
``--block NAME`` runs only the simulation tests of one block on the suite's own configurations
(each case on the simulator it has in a whole run): ``scripts/mutants_suite.py`` runs a
mutation so.
A case marked ``verilator_unless_both`` (one whose Icarus run takes many minutes: Icarus
interprets every cycle of a wide datapath) runs on Verilator alone unless ``--both-sims``.
A test marked ``one_case_per_seed`` (cases whose builds take minutes) runs one of its cases,
the seed's (:func:`one_case_index`: half the seed mod the cases, in collection order), unless
``--both-sims``: successive CI runs cover every case (``--block decoder`` keeps the seed's
choice too: with a seed whose whole-decoder case is a tiny model, no decoder simulation).
The marker's argument names a group that spans test functions
(``one_case_per_seed("whole-decoder")``: one case of all of them a run). The group is of the
tests collected: a run of some files may choose another case than the whole suite with the
same seed (replay a CI run with the whole suite, ``./scripts/test --seed N``). (As with the
simulators, the choice comes before ``-k``: ``-k`` naming another case selects nothing;
``--both-sims`` or another seed runs it.)
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from . import simcheck

SIMULATORS = ("icarus", "verilator")


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=20261130, help="stimulus seed for simulations")
    parser.addoption("--both-sims", action="store_true",
                     help="run every case of an alternate_sims matrix on both simulators")
    parser.addoption("--coverage", action="store_true",
                     help="fail when a declared coverage bin of a block the run simulated "
                          "stays empty over all its runs (./scripts/test passes it; a run "
                          "that chooses tests is not checked)")
    parser.addoption("--block", default=None, metavar="NAME",
                     help="run only the simulation tests of block NAME (the suite's own "
                          "configurations of it)")
    parser.addoption("--mutants", type=int, default=0, metavar="N",
                     help="also draw N mutations of scripts/mutants.py (by --seed, each on a "
                          "drawn simulator and stimulus seed; none of the decoder's) "
                          "and fail if one is not caught as it expects")


def pytest_configure(config):
    if config.getoption("--coverage") and not hasattr(config, "workerinput"):
        config._coverage_dir = tempfile.mkdtemp(prefix="scoville-coverage-")
        os.environ[simcheck.COVERAGE_DIR] = config._coverage_dir
    config.addinivalue_line("markers", "alternate_sims: a matrix whose cases each run on one "
                            "simulator, alternating (all on both with --both-sims)")
    config.addinivalue_line("markers", "verilator_unless_both: a case of an alternate_sims "
                            "matrix that runs on Verilator alone unless --both-sims")
    config.addinivalue_line("markers", "longest: collected first (a build of minutes or "
                            "more: a drawn mutation's)")
    config.addinivalue_line("markers", "one_case_per_seed(group): a matrix (or a group of "
                            "them) of which one case runs, the seed's (all with --both-sims)")


def alternate_simulator(case: int, seed: int) -> str:
    """The simulator of case ``case`` of an ``alternate_sims`` matrix: 0, 1, 1, 0, 0, 1, 1,
    0, ... along the matrix (the two cases of each pair on different ones; neighbouring pairs
    start on different ones), all flipped when the seed is odd."""
    return SIMULATORS[(case + case // 2 + seed) % 2]


def pytest_collection_modifyitems(config, items):
    _alternate(config, items)
    # The longest first (a drawn mutation's two builds and the one_case_per_seed cases' take
    # minutes, a simulation's seconds to minutes, most other tests less than a second), so
    # that xdist's workers (``--dist worksteal``: an idle one takes half of another's queue)
    # do not end with one of them building a decoder while the other waits.
    items.sort(key=lambda item: 0 if item.get_closest_marker("longest") else
               1 if item.get_closest_marker("one_case_per_seed") else
               2 if item.get_closest_marker("sim") else 3)
    block = config.getoption("--block")
    simcheck.ONLY_BLOCK = block
    if block is not None:
        from scoville.blocks import BLOCKS

        if block not in BLOCKS:
            raise pytest.UsageError(f"parameter 'block' = {block!r} is not allowed; allowed: "
                                    + ", ".join(BLOCKS))
        kept = [item for item in items if item.get_closest_marker("sim") is not None
                and getattr(item.module, "simulate", None) is simcheck.simulate]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def _alternate(config, items) -> None:
    """Keep each case of an ``alternate_sims`` matrix on its one simulator (see above)."""
    if config.getoption("--both-sims"):
        return
    seed = config.getoption("--seed")
    cases: dict[str, dict[str, int]] = {}
    kept, dropped = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        if item.get_closest_marker("alternate_sims") is None or spec is None \
                or "simulator" not in spec.params:
            kept.append(item)
            continue
        if item.get_closest_marker("verilator_unless_both") is not None:
            (kept if spec.params["simulator"] == "verilator" else dropped).append(item)
            continue
        key = _case_key(item)
        matrix = cases.setdefault(item.originalname, {})
        i = matrix.setdefault(key, len(matrix))
        chosen = alternate_simulator(i, seed)
        (kept if spec.params["simulator"] == chosen else dropped).append(item)
    # One case of each one_case_per_seed group: the seed's (in collection order).
    groups: dict[str, list[tuple[str, str]]] = {}
    for item in kept:
        if (group := _one_case_group(item)) is not None:
            keys = groups.setdefault(group, [])
            if (key := (item.originalname, _case_key(item))) not in keys:
                keys.append(key)
    chosen_cases = kept
    kept = []
    for item in chosen_cases:
        group = _one_case_group(item)
        other = group is not None and groups[group].index(
            (item.originalname, _case_key(item))) != one_case_index(seed, len(groups[group]))
        (dropped if other else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def one_case_index(seed: int, cases: int) -> int:
    """The case of a ``one_case_per_seed`` group that runs with ``seed``: ``(seed // 2) mod
    cases``, so each case comes with seeds of both parities (an ``alternate_sims`` case among
    them then runs on either simulator)."""
    return seed // 2 % cases


def _one_case_group(item) -> str | None:
    """The ``one_case_per_seed`` group of a test: the marker's argument (tests of several
    functions in one group), else the test function's own name; None when not marked."""
    mark = item.get_closest_marker("one_case_per_seed")
    if mark is None:
        return None
    return mark.args[0] if mark.args else item.originalname


def _case_key(item) -> str:
    """A test's case: its parameters other than the simulator."""
    spec = getattr(item, "callspec", None)
    params = spec.params if spec is not None else {}
    return repr(sorted((k, repr(v)) for k, v in params.items() if k != "simulator"))


def pytest_report_header(config):
    seed = config.getoption("--seed")
    lines = [f"stimulus seed: {seed} (replay with --seed {seed})"]
    if config.getoption("--mutants") > 0:  # the mutation list loads only for a draw
        from .test_mutants import drawn_mutations

        drawn = drawn_mutations(config)
        lines.append("mutations drawn: " + "; ".join(f"{name} on {sim} (stimulus seed {s})"
                                                   for name, sim, s in drawn)
                     + f" (replay with --seed {seed} --mutants {len(drawn)})")
    return lines


@pytest.fixture
def seed(request) -> int:
    return request.config.getoption("--seed")


@pytest.fixture(params=SIMULATORS)
def simulator(request) -> str:
    return request.param


def empty_bins(folder: Path) -> dict[str, list[str]]:
    """Each simulated block's declared coverage bins that no run hit, from the runs' files."""
    totals: dict[str, dict[str, int]] = {}
    for path in sorted(folder.glob("*.json")):
        run = json.loads(path.read_text())
        block = totals.setdefault(run["block"], {})
        for name, count in run["coverage"].items():
            block[name] = block.get(name, 0) + count
    return {block: [name for name, n in bins.items() if n == 0]
            for block, bins in sorted(totals.items()) if any(n == 0 for n in bins.values())}


def pytest_sessionfinish(session, exitstatus):
    folder = getattr(session.config, "_coverage_dir", None)
    if folder is None:
        return
    empty = empty_bins(Path(folder))
    runs = len(list(Path(folder).glob("*.json")))
    shutil.rmtree(folder, ignore_errors=True)
    os.environ.pop(simcheck.COVERAGE_DIR, None)
    config = session.config
    whole = Path(config.rootpath, "tests").resolve()
    opt = config.option
    chose = ("keyword", "markexpr", "lf", "stepwise", "deselect", "ignore", "ignore_glob",
             "maxfail")  # (-p no:cacheprovider removes lf and stepwise)
    narrowed = (any(getattr(opt, name, None) for name in chose) or config.getoption("--block")
                or any(Path(a.split("::")[0]).resolve() != whole for a in config.args))
    if exitstatus != pytest.ExitCode.OK:
        return  # a failing or interrupted run: its bins say nothing
    if narrowed:
        print("\ncoverage: not checked (the run chose some tests: -k, -m, --block, --lf, "
              "--deselect, --ignore, -x or paths)")
    elif not runs:
        print("\ncoverage: no simulation wrote its bins (no simulator, or none ran)")
    elif empty:
        lines = [f"{block}: {', '.join(names)}" for block, names in empty.items()]
        print("\ncoverage: declared bins no run hit (docs/coverage.md lists them):\n  "
              + "\n  ".join(lines))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
