"""Shared fixtures: the simulators and a replayable seed.

The seed is fixed by default so that CI is repeatable; ``--seed N`` replays another, and every
simulation test names its seed in its failure message.
"""

import pytest

SIMULATORS = ("icarus", "verilator")


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=20261130, help="stimulus seed for simulations")


@pytest.fixture
def seed(request) -> int:
    return request.config.getoption("--seed")


@pytest.fixture(params=SIMULATORS)
def simulator(request) -> str:
    return request.param
