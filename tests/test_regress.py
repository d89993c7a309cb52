"""``scoville regress``: each block's first look (or with ``--full`` its defaults) on each
simulator a task, here in turn or on a Dask ``LocalCluster`` whose workers share the build
cache; the first looks keep each block's main features."""

import pytest

from scoville import regress
from scoville.blocks import BLOCKS, get_block, parse_params
from scoville.cli import main


@pytest.mark.sim
def test_regress_runs_its_tasks_on_a_local_cluster(capsys, tmp_path, monkeypatch):
    """Two workers share the build cache; every run is announced as it starts (from the
    worker) and as it ends; the table keeps the block table's order."""
    monkeypatch.setenv("SCOVILLE_BUILD_DIR", str(tmp_path))
    code = main(["regress", "--block", "fp4_mul", "--block", "int_mac", "--sim", "icarus",
                 "--workers", "2"])
    out = capsys.readouterr().out
    assert code == 0 and out.rstrip().endswith("all passed")
    rows = [line.split() for line in out.splitlines() if line.startswith(("fp4_mul", "int_mac"))]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [("fp4_mul", "default", "icarus", "pass"),
                                                        ("int_mac", "default", "icarus", "pass")]
    for name in ("fp4_mul", "int_mac"):
        assert f"start {name} (default) on icarus" in out
        assert f"pass  {name} (default) on icarus in" in out
    assert {p.name.split("-")[0] for p in tmp_path.iterdir() if p.name.endswith(
        tuple("0123456789abcdef"))} >= {"fp4_mul", "int_mac"}
    assert not any(p.name.startswith("worker-") for p in tmp_path.iterdir())


def test_tasks_are_every_first_look_and_simulator():
    looks = regress.tasks(["fp4_mul", "attention"], ["icarus", "verilator"], 3)
    assert [(t[0], t[1], t[3]) for t in looks] == [
        ("fp4_mul", "default", "icarus"), ("fp4_mul", "default", "verilator"),
        ("attention", "decode", "icarus"), ("attention", "decode", "verilator"),
        ("attention", "prefill", "icarus"), ("attention", "prefill", "verilator")]
    assert looks[0][2] == () and "mode=prefill" in looks[4][2]
    assert {t[4] for t in looks} == {3}
    full = regress.tasks(["attention"], ["icarus"], 3, full=True)
    assert full == [("attention", "full", (), "icarus", 3)]


def test_every_block_states_a_first_look_that_parses():
    for block in BLOCKS.values():
        assert block.first_look, f"{block.name} has no first look (Block.first_look)"
        labels = [look.label for look in block.first_look]
        assert len(set(labels)) == len(labels), block.name
        for look in block.first_look:
            parse_params(block, {k: str(v) for k, v in look.params.items()})


def _looks(name):
    block = get_block(name)
    return [parse_params(block, {k: str(v) for k, v in look.params.items()})
            for look in block.first_look]


def test_attention_first_look_has_its_main_features():
    """A GQA group, sinks, a window that starts past 0, a step over two chunks, decode and
    prefill (several row and column tiles)."""
    looks = _looks("attention")
    assert {cfg.mode for cfg, _ in looks} == {"decode", "prefill"}
    for cfg, work in looks:
        assert cfg.group >= 2 and cfg.sinks
        last = work.context + (work.tokens if cfg.mode == "prefill" else 1) - 1
        first = last - cfg.window + 1
        assert 0 < first and last // cfg.chunk > first // cfg.chunk, (first, last)
    prefill = next(cfg for cfg, _ in looks if cfg.mode == "prefill")
    work = next(w for cfg, w in looks if cfg.mode == "prefill")
    assert prefill.array.rows // prefill.group >= 2 and work.tokens > 1
    assert prefill.kv.head_dim > prefill.array.cols  # P V in column tiles


def test_moe_first_look_has_its_main_features():
    """Top-k of at least 2, several column tiles, the shared expert."""
    looks = _looks("moe")
    assert all(cfg.top_k >= 2 for cfg, _ in looks)
    # The top k is a choice within the kept groups, not all of them.
    assert all(cfg.experts // cfg.n_group * cfg.topk_group > cfg.top_k for cfg, _ in looks)
    assert all(cfg.intermediate > cfg.array.cols for cfg, _ in looks)
    assert any(cfg.shared for cfg, _ in looks)


def test_unknown_block_is_one_line_and_exit_2(capsys):
    assert main(["regress", "--block", "nope"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_task_that_raises_is_an_error_row_and_the_rest_run(capsys, monkeypatch):
    """A bug in one task (an exception, not a failed simulation) is that task's ERROR row;
    the regression goes on and exits 1."""
    calls = []

    def fake(task, **_):
        calls.append(task)
        if task[0] == "fp4_mul":
            raise KeyError("boom")
        return {"block": task[0], "label": task[1], "sim": task[3], "seed": task[4],
                "params": list(task[2]), "passed": True, "mismatches": 0, "cycles": 5,
                "model_cycles": 5, "build_reused": True, "seconds": 0.1, "error": ""}

    monkeypatch.setattr(regress, "run_task", fake)
    code = main(["regress", "--block", "fp4_mul", "--block", "exp2", "--sim", "icarus"])
    out = capsys.readouterr().out
    assert code == 1 and len(calls) == 2
    assert "fp4_mul    default   icarus     ERROR   KeyError: 'boom'" in out
    assert "exp2       default   icarus     pass" in out and out.rstrip().endswith("1 failed")
