"""scripts/simspeed.py's reference runs: the test's own harness build replayed with no cocotb
(under ``vvp``, or built by Verilator with ``--binary``), from the rings the test first
loaded."""

from pathlib import Path

import pytest

from scoville.blocks import get_block, parse_params

from .script import load


@pytest.mark.sim
@pytest.mark.parametrize(("name", "params"), [("fp4_mul", {"count": 600}),
                                              ("fetch", {"count": 30, "max_len": 20})])
def test_the_replay_without_cocotb_runs_the_same_cycles(simulator, tmp_path, name, params):
    """A workload short enough that no ring wraps replays cycle for cycle: the same valid
    gaps, back-pressure and payloads (and, for ``fetch``, the memory agent's memory, latency
    and bandwidth), so the run ends in the cycle the cocotb test saw."""
    simspeed = load("simspeed")
    block = get_block(name)
    config, workload = parse_params(block, params)
    cycles, _, _, run = simspeed.harness_run(block, config, workload, simulator)
    replayed, _ = simspeed.replay(run, block.name, simulator, tmp_path)
    assert replayed == cycles


@pytest.mark.sim
def test_a_short_ring_file_is_an_error_not_a_run(tmp_path):
    """The harness checks what ``$fread`` read: a truncated schedule file sets ``ioerr``, and
    the replay stops with an error instead of running on a part-loaded ring."""
    simspeed = load("simspeed")
    block = get_block("fp4_mul")
    config, workload = parse_params(block, {"count": 100})
    *_, run = simspeed.harness_run(block, config, workload, "icarus")
    sched = Path(run.run_dir) / "rings" / "sched_i.bin"
    sched.write_bytes(sched.read_bytes()[:-4])
    with pytest.raises(RuntimeError, match="short ring file"):
        simspeed.replay(run, block.name, "icarus", tmp_path)
