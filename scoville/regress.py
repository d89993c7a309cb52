"""The RTL regression as independent tasks: each block, parameter set, simulator and seed one
task, run here in turn or on a Dask cluster (``scoville regress --dask ADDRESS`` or
``--workers N``).

On a cluster each worker builds into a cache of its own (``$SCOVILLE_BUILD_DIR`` or
``~/.cache/scoville``, then ``worker-NAME``), so two workers never build into one folder; a
worker reuses its own builds from task to task.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["Task", "run_task", "tasks"]

Task = tuple[str, tuple[str, ...], str, int]


def tasks(blocks, sims, seed: int, params: tuple[str, ...] = ()) -> list[Task]:
    """``(block, params, simulator, seed)`` for every block and simulator."""
    return [(b, tuple(params), s, seed) for b in blocks for s in sims]


def _worker_cache() -> None:
    """Point this process's build cache at a folder of its own when it is a Dask worker."""
    try:
        from dask.distributed import get_worker
        worker = get_worker()
    except (ImportError, ValueError):
        return
    from scoville.sim.flow import cache_root

    name = str(worker.name).replace("/", "_").replace(":", "_")
    base = Path(os.environ.get("SCOVILLE_REGRESS_CACHE", cache_root()))
    os.environ["SCOVILLE_REGRESS_CACHE"] = str(base)
    os.environ["SCOVILLE_BUILD_DIR"] = str(base / f"worker-{name}")


def run_task(task: Task) -> dict:
    """Build and simulate one task; a summary: block, simulator, seed, passed, mismatches,
    cycles, model cycles, whether the build was reused, seconds, and the first error."""
    from scoville.blocks import get_block, parse_params
    from scoville.sim import flow
    from scoville.sim.tools import ToolError

    _worker_cache()
    name, params, sim, seed = task
    block = get_block(name)
    config, workload = parse_params(block, list(params))
    start = time.monotonic()
    summary = {"block": name, "sim": sim, "seed": seed, "params": list(params)}
    try:
        result = flow.run(block, config, workload, sim, seed=seed)
    except (ToolError, flow.FlowError) as err:
        return {**summary, "passed": False, "error": str(err).splitlines()[0],
                "seconds": round(time.monotonic() - start, 2)}
    main = result.metrics.get(block.workload_test, {})
    return {**summary, "passed": result.passed, "mismatches": result.total("mismatches"),
            "cycles": main.get("cycles"), "model_cycles": main.get("model_cycles"),
            "build_reused": result.build_reused, "build_dir": str(result.build_dir),
            "seconds": round(time.monotonic() - start, 2),
            "error": (result.errors[0].splitlines()[0] if result.errors else "")}
