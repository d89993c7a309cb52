"""The suite's own selection: an ``alternate_sims`` matrix covers both simulators in every run,
each pair of neighbouring cases on different ones, and every case on each over two seeds."""

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
