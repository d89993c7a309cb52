"""Running a block through the flow from pytest, with the failure made readable."""

import pytest

from scoville.blocks import get_block, parse_params
from scoville.sim import flow

#: Set by ``--block NAME`` (tests/conftest.py): only the suite's own configurations of this
#: block are simulated; every other simulation, a test's own variant of a block included, skips.
ONLY_BLOCK: str | None = None


def simulate(block_name: str, sim: str, seed: int, block=None, **params):
    """Run every test of a block's testbench; return the :class:`RunResult`."""
    if ONLY_BLOCK is not None and (block is not None or block_name != ONLY_BLOCK):
        pytest.skip(f"--block {ONLY_BLOCK}")
    block = block or get_block(block_name)
    config, workload = parse_params(block, params)
    return flow.run(block, config, workload, sim, seed=seed)


def explain(result) -> str:
    """Everything a failing simulation test should show: seed, params, failing tests, log."""
    lines = [f"{result.block} on {result.sim}, params {result.params}, seed {result.seed}"]
    lines += [f"{t.name}: {t.message}" for t in result.tests if not t.passed]
    lines += result.errors
    lines.append(f"log: {result.log}")
    return "\n".join(lines)


def assert_passed(result) -> None:
    """The run passed: every test, no mismatch, every handshake where the timed model put it,
    and a clean lint of the design."""
    assert result.passed, explain(result)
    assert result.lint == "clean", f"lint: {result.lint}: {explain(result)}"
    for test, metrics in result.metrics.items():
        assert metrics["mismatches"] == 0, f"{test}: {explain(result)}"
        assert metrics["timing_errors"] == 0, f"{test}: {explain(result)}"
        assert metrics["cycles"] == metrics["model_cycles"], f"{test}: {explain(result)}"
