"""Shared fixtures: the simulators and a replayable seed.

The seed is fixed by default; CI (``.ci/run``) draws a fresh one each run and prints it;
``--seed N`` replays any, and every simulation test names its seed in its failure message.
"""

import pytest

SIMULATORS = ("icarus", "verilator")


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=20261130, help="stimulus seed for simulations")


def pytest_report_header(config):
    seed = config.getoption("--seed")
    return f"stimulus seed: {seed} (replay with --seed {seed})"


@pytest.fixture
def seed(request) -> int:
    return request.config.getoption("--seed")


@pytest.fixture(params=SIMULATORS)
def simulator(request) -> str:
    return request.param
