"""``scoville regress`` on a Dask ``LocalCluster``: each block and simulator a task, each
worker building into a cache of its own; the same table as a serial run."""

import pytest

from scoville import regress
from scoville.cli import main


@pytest.mark.sim
def test_regress_runs_its_tasks_on_a_local_cluster(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SCOVILLE_BUILD_DIR", str(tmp_path))
    code = main(["regress", "--block", "fp4_mul", "--block", "int_mac", "--sim", "icarus",
                 "--workers", "2"])
    out = capsys.readouterr().out
    assert code == 0 and out.rstrip().endswith("all passed")
    rows = [line.split() for line in out.splitlines() if line.startswith(("fp4_mul", "int_mac"))]
    assert [(r[0], r[1], r[2]) for r in rows] == [("fp4_mul", "icarus", "pass"),
                                                  ("int_mac", "icarus", "pass")]
    # Each worker built into a folder of its own.
    assert {p.name.startswith("worker-") for p in tmp_path.iterdir()} == {True}


def test_tasks_are_every_block_and_simulator():
    assert regress.tasks(["a", "b"], ["icarus", "verilator"], 3) == [
        ("a", (), "icarus", 3), ("a", (), "verilator", 3), ("b", (), "icarus", 3),
        ("b", (), "verilator", 3)]


def test_unknown_block_is_one_line_and_exit_2(capsys):
    assert main(["regress", "--block", "nope"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
