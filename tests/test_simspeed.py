"""scripts/simspeed.py's Icarus reference: the test's own harness build replayed under ``vvp``
with no cocotb, from the rings the test first loaded."""

import importlib.util
import sys
from pathlib import Path

import pytest

from scoville.blocks import get_block, parse_params

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "simspeed.py"


def _simspeed():
    spec = importlib.util.spec_from_file_location("simspeed", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.sim
def test_icarus_replay_runs_the_same_cycles(tmp_path):
    """A workload short enough that no ring wraps replays cycle for cycle: the same valid
    gaps, back-pressure and payloads, so the run ends in the cycle the cocotb test saw."""
    simspeed = _simspeed()
    block = get_block("fp4_mul")
    config, workload = parse_params(block, {"count": 600})
    cycles, _, _, run = simspeed.harness_run(block, config, workload, "icarus")
    replayed, rate = simspeed.icarus_replay(run, block.name, tmp_path)
    assert replayed == cycles
    assert rate > 0
