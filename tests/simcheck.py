"""Running a block through the flow from pytest, with the failure made readable."""

import json
import os
import uuid
from pathlib import Path

import pytest

from scoville.blocks import get_block, parse_params
from scoville.sim import flow

#: Where each simulation writes its coverage when ``--coverage`` collects it (an environment
#: variable: the xdist workers inherit it from the controller that sums them).
COVERAGE_DIR = "SCOVILLE_COVERAGE_DIR"

#: Set by ``--block NAME`` (tests/conftest.py): only the suite's own configurations of this
#: block are simulated; every other simulation, a test's own variant of a block included, skips.
ONLY_BLOCK: str | None = None


def simulate(block_name: str, sim: str, seed: int, block=None, **params):
    """Run every test of a block's testbench; return the :class:`RunResult` (its coverage
    written for ``--coverage`` when the block is the registry's own)."""
    if ONLY_BLOCK is not None and (block is not None or block_name != ONLY_BLOCK):
        pytest.skip(f"--block {ONLY_BLOCK}")
    block = block or get_block(block_name)
    config, workload = parse_params(block, params)
    result = flow.run(block, config, workload, sim, seed=seed)
    folder = os.environ.get(COVERAGE_DIR)
    if folder and result.coverage and block is get_block(block_name):
        (Path(folder) / f"{uuid.uuid4().hex}.json").write_text(json.dumps(
            {"block": block_name, "coverage": result.coverage}))
    return result


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
