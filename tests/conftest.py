"""Shared fixtures: the simulators and a replayable seed.

The seed is fixed by default; CI (``.ci/run``) draws a fresh one each run and prints it;
``--seed N`` replays any, and every simulation test names its seed in its failure message.

A test marked ``alternate_sims`` is a matrix of cases (formats, dataflows, sizes): each case
runs on one simulator, the two alternating along the matrix (0, 1, 1, 0, 0, 1, ...: so a pair
of neighbouring cases, one format's two dataflows say, runs on both) and flipping with the
seed, so every run covers both simulators and successive CI runs cover every case on each.
``--both-sims`` runs every case on both (a build per case and simulator: the suite's cold time).
``--block NAME`` runs only the simulation tests of one block on the suite's own configurations
(each case on the simulator it has in a whole run): ``scripts/mutants.py --suite`` runs a
mutation so.
A case marked ``verilator_unless_both`` (one whose Icarus run takes many minutes: Icarus
interprets every cycle of a wide datapath) runs on Verilator alone unless ``--both-sims``.
"""

import pytest

from . import simcheck

SIMULATORS = ("icarus", "verilator")


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=20261130, help="stimulus seed for simulations")
    parser.addoption("--both-sims", action="store_true",
                     help="run every case of an alternate_sims matrix on both simulators")
    parser.addoption("--block", default=None, metavar="NAME",
                     help="run only the simulation tests of block NAME (the suite's own "
                          "configurations of it)")
    parser.addoption("--mutants", type=int, default=0, metavar="N",
                     help="also draw N mutations of scripts/mutants.py (by --seed, each on a "
                          "drawn simulator) and fail if one is not caught as it expects")


def pytest_configure(config):
    config.addinivalue_line("markers", "alternate_sims: a matrix whose cases each run on one "
                            "simulator, alternating (all on both with --both-sims)")
    config.addinivalue_line("markers", "verilator_unless_both: a case of an alternate_sims "
                            "matrix that runs on Verilator alone unless --both-sims")


def alternate_simulator(case: int, seed: int) -> str:
    """The simulator of case ``case`` of an ``alternate_sims`` matrix: 0, 1, 1, 0, 0, 1, 1,
    0, ... along the matrix (the two cases of each pair on different ones; neighbouring pairs
    start on different ones), all flipped when the seed is odd."""
    return SIMULATORS[(case + case // 2 + seed) % 2]


def pytest_collection_modifyitems(config, items):
    _alternate(config, items)
    block = config.getoption("--block")
    simcheck.ONLY_BLOCK = block
    if block is not None:
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
        key = repr(sorted((k, repr(v)) for k, v in spec.params.items() if k != "simulator"))
        matrix = cases.setdefault(item.originalname, {})
        i = matrix.setdefault(key, len(matrix))
        chosen = alternate_simulator(i, seed)
        (kept if spec.params["simulator"] == chosen else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_report_header(config):
    seed = config.getoption("--seed")
    lines = [f"stimulus seed: {seed} (replay with --seed {seed})"]
    if config.getoption("--mutants") > 0:  # the mutation list loads only for a draw
        from .test_mutants import drawn_mutations

        drawn = drawn_mutations(config)
        lines.append("mutations drawn: " + ", ".join(f"{name} on {sim}" for name, sim in drawn)
                     + f" (replay with --seed {seed} --mutants {len(drawn)})")
    return lines


@pytest.fixture
def seed(request) -> int:
    return request.config.getoption("--seed")


@pytest.fixture(params=SIMULATORS)
def simulator(request) -> str:
    return request.param
