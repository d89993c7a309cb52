"""The RTL regression as independent tasks: each block, configuration, simulator and seed one
task, run here in turn or on a Dask cluster (``scoville regress --dask ADDRESS`` or
``--workers N``).

A block's configurations are its first look (``Block.first_look``: small, each block's main
features) unless ``full``, which runs ``scoville sim``'s defaults. Each task runs every test
of the block's testbench.

The workers of a local cluster (``--workers N``) share the build cache, as pytest-xdist's do
(builds are locked, their stamps written whole). On a cluster elsewhere (``--dask``) each
worker builds into a cache of its own (``$SCOVILLE_BUILD_DIR`` or ``~/.cache/scoville``, then
``worker-NAME``), so two machines never build into one folder; a worker reuses its own builds
from task to task.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["PROGRESS", "Task", "failed", "replay", "run_task", "tasks"]

#: ``(block, label, params, simulator, seed)``: params as ``NAME=VALUE`` strings.
Task = tuple[str, str, tuple[str, ...], str, int]

#: The Dask event topic on which a worker says that a task starts.
PROGRESS = "scoville-regress"


def tasks(blocks, sims, seed: int, *, full: bool = False) -> list[Task]:
    """A task for every block's configuration (its first look, or with ``full`` its
    defaults, labelled ``full``) and simulator, in that order."""
    from scoville.blocks import get_block

    out = []
    for name in blocks:
        looks = [("full", {})] if full else get_block(name).first_look
        for label, params in looks:
            text = tuple(f"{k}={v}" for k, v in params.items())
            out += [(name, label, text, s, seed) for s in sims]
    return out


def failed(task: Task, error: BaseException) -> dict:
    """The summary of a task that raised ``error`` (a bug, not a failed simulation): an
    error row of the table rather than the end of the regression."""
    name, label, params, sim, seed = task
    line = f"{type(error).__name__}: {error}".splitlines()[0]
    return {"block": name, "label": label, "sim": sim, "seed": seed, "params": list(params),
            "passed": False, "error": line, "seconds": 0.0}


def replay(task: Task) -> str:
    """The ``scoville sim`` command that runs ``task`` again (every test, same seed)."""
    name, _, params, sim, seed = task
    return " ".join([f"scoville sim {name} --sim {sim} --seed {seed} --all-tests",
                     *(f"--param {p}" for p in params)])


def _dask_worker():
    """The Dask worker running this task, or None (run here, or Dask not installed)."""
    try:
        from dask.distributed import get_worker
        return get_worker()
    except (ImportError, ValueError):
        return None


def _announce(task: Task) -> None:
    """On a Dask worker, tell the client that ``task`` starts (:data:`PROGRESS`)."""
    worker = _dask_worker()
    if worker is not None:
        worker.log_event(PROGRESS, list(task))


def _worker_cache() -> None:
    """Point this process's build cache at a folder of its own when it is a Dask worker of a
    cluster elsewhere (``--dask``; the workers of a local cluster share the build cache, as
    pytest-xdist's do: builds are locked and their stamps written whole)."""
    worker = _dask_worker()
    if worker is None:
        return
    from scoville.sim.flow import cache_root

    name = str(worker.name).replace("/", "_").replace(":", "_")
    base = Path(os.environ.get("SCOVILLE_REGRESS_CACHE", cache_root()))
    os.environ["SCOVILLE_REGRESS_CACHE"] = str(base)
    os.environ["SCOVILLE_BUILD_DIR"] = str(base / f"worker-{name}")


def run_task(task: Task, *, own_cache: bool = False) -> dict:
    """Build and simulate one task (every test of the testbench); a summary: block, label,
    simulator, seed, params, passed, mismatches, cycles and model cycles of the workload
    test, whether the build was reused, seconds, and the first error."""
    from scoville.blocks import get_block, parse_params
    from scoville.rtl.lib.params import ParamError
    from scoville.sim import flow
    from scoville.sim.tools import ToolError

    if own_cache:
        _worker_cache()
    _announce(task)
    name, label, params, sim, seed = task
    start = time.monotonic()
    summary = {"block": name, "label": label, "sim": sim, "seed": seed, "params": list(params)}
    try:
        block = get_block(name)
        config, workload = parse_params(block, list(params))
        result = flow.run(block, config, workload, sim, seed=seed)
    except (ToolError, flow.FlowError, ParamError) as err:
        return {**summary, "passed": False, "error": str(err).splitlines()[0],
                "seconds": round(time.monotonic() - start, 2)}
    main = result.metrics.get(block.workload_test, {})
    return {**summary, "passed": result.passed, "mismatches": result.total("mismatches"),
            "cycles": main.get("cycles"), "model_cycles": main.get("model_cycles"),
            "build_reused": result.build_reused, "build_dir": str(result.build_dir),
            "seconds": round(time.monotonic() - start, 2),
            "error": (result.errors[0].splitlines()[0] if result.errors else "")}
