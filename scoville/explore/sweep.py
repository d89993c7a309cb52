"""The sweep: every chip, model and scenario, over concurrency and parallelism; the Pareto
frontiers; comparisons at equal interactivity.

A task is one (chip, model, scenario): every concurrency (powers of two from 1, past the
scenario's list while some parallelism still holds the KV cache, up to :data:`MAX_CONCURRENCY`)
times every parallelism (up to the scenario's ``max_batch`` requests per data-parallel
attention rank), served plainly and, for a model with MTP modules, with them; points past the
scenario's ``max_ttft_s`` are dropped. Disaggregated points follow: every layout, concurrency and
serving on the aggregated frontier as a decode worker beside a share of prefill workers of
the layout that prefills most per chip and of the one that prefills soonest
(:func:`~scoville.explore.perf.disaggregate`). Tasks
are independent: :func:`explore` runs them in turn, or on a Dask cluster (``client``), and the
result is the same, bit for bit, either way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from . import perf
from .specs import CHIPS, MODELS, SCENARIOS, Chip, Model, Scenario, SpecError

__all__ = ["MAX_CONCURRENCY", "explore", "frontier", "iso_ratio", "run_task", "value_at"]

#: The largest concurrency a sweep tries.
MAX_CONCURRENCY = 16384


def run_task(chip: Chip, model: Model, scenario: Scenario) -> dict:
    """Every point of one chip, model and scenario that fits, and their frontier."""
    pars = perf.parallelisms(chip, model)
    servings = perf.servings(model)
    points = []
    concurrency = list(scenario.concurrency)
    c = 2 * max(concurrency)
    while scenario.extend and c <= MAX_CONCURRENCY:
        concurrency.append(c)
        c *= 2
    every = []
    for c in concurrency:
        got = [p for p in (perf.evaluate(chip, model, scenario, c, par, s)
                           for s in servings for par in pars
                           if c <= scenario.max_batch * par.attention_dp) if p]
        if not got and c > max(scenario.concurrency):
            break
        every += got
    # Disaggregated: each layout, concurrency and serving on the aggregated frontier as a
    # decode worker, beside prefill workers of each of perf.prefill_layouts sized for each of
    # perf.PREFILL_LOADS (before any TTFT limit: disaggregation is what shortens TTFT).
    by_label = {par.label: par for par in pars}
    for p in frontier(every):
        serving = perf.Serving(mtp=p["mtp"]) if p["mtp"] else perf.AGGREGATED
        every += [q for q in (perf.disaggregate(chip, model, scenario, p["concurrency"],
                                                by_label[p["parallelism"]], pre, serving,
                                                load)
                              for pre in perf.prefill_layouts(chip, model, scenario)
                              for load in perf.PREFILL_LOADS) if q]
    points = [p for p in every if not 0 < scenario.max_ttft_s < p["ttft_s"]]
    return {"chip": chip.name, "model": model.name, "scenario": scenario.label,
            "points": points, "pareto": frontier(points),
            "past_ttft": len(every) - len(points)}


def frontier(points: list[dict], x: str = "tok_s_user", y: str = "tok_s_chip") -> list[dict]:
    """The points no other point beats on both ``x`` and ``y`` (ties kept once), sorted by
    ``x``."""
    best, out = float("-inf"), []
    for p in sorted(points, key=lambda p: (-p[x], -p[y])):
        if p[y] > best:
            out.append(p)
            best = p[y]
    return sorted(out, key=lambda p: (p[x], p[y]))


def value_at(front: list[dict], x0: float, x: str = "tok_s_user",
             y: str = "tok_s_chip") -> float | None:
    """``y`` on the frontier at ``x = x0``, linear between its points; None outside the
    frontier's span (never extrapolated)."""
    if not front or not front[0][x] <= x0 <= front[-1][x]:
        return None
    for a, b in zip(front, front[1:], strict=False):
        if a[x] <= x0 <= b[x]:
            if b[x] == a[x]:
                return max(a[y], b[y])
            return a[y] + (b[y] - a[y]) * (x0 - a[x]) / (b[x] - a[x])
    return front[-1][y]


def iso_ratio(points_a: list[dict], points_b: list[dict], x0: float,
              y: str = "tok_s_chip") -> float | None:
    """How many times chip A's ``y`` is chip B's at interactivity ``x0``, on each one's
    frontier of ``y`` against tokens/s per user; None where either does not reach ``x0``."""
    a = value_at(frontier(points_a, y=y), x0, y=y)
    b = value_at(frontier(points_b, y=y), x0, y=y)
    return a / b if a is not None and b else None


def _progress(done: int, total: int) -> None:
    """A progress bar on a terminal; a line at every quarter otherwise (a log)."""
    width = 30
    if sys.stderr.isatty():
        fill = width * done // total
        print(f"\rexplore: [{'#' * fill}{'.' * (width - fill)}] {done}/{total}", end="",
              file=sys.stderr, flush=True)
        if done == total:
            print(file=sys.stderr)
    elif done == total or 4 * done // total != 4 * (done - 1) // total:
        print(f"explore: {done}/{total} tasks", file=sys.stderr, flush=True)


def explore(chips: Iterable[str] = tuple(CHIPS), models: Iterable[str] = tuple(MODELS),
            scenarios: Iterable[Scenario] = SCENARIOS, *, client=None,
            progress: Callable[[int, int], None] | None = _progress) -> list[dict]:
    """Run every task (chip x model x scenario; names of built-ins or TOML files) and return
    their results in that order. ``client``: a ``dask.distributed.Client`` to run the tasks
    on (each a task of its own), else they run here, in turn."""
    from .specs import load_chip, load_model

    chip_specs = [load_chip(c) for c in chips]
    model_specs = [load_model(m) for m in models]
    tasks = [(c, m, s) for c in chip_specs for m in model_specs for s in scenarios]
    results: list[dict] = []
    if client is None:
        for i, task in enumerate(tasks):
            results.append(run_task(*task))
            if progress:
                progress(i + 1, len(tasks))
    else:
        from dask.distributed import as_completed
        futures = [client.submit(run_task, *task, pure=False) for task in tasks]
        for i, _ in enumerate(as_completed(futures)):
            if progress:
                progress(i + 1, len(tasks))
        results = client.gather(futures)
    return results


def check_fits(results: list[dict]) -> None:
    """A one-line :class:`SpecError` for the first chip and model that no parallelism of the
    sweep holds, whatever the concurrency, or whose every point is past the TTFT limit."""
    for r in results:
        if not r["points"] and r.get("past_ttft"):
            raise SpecError(f"every point of model {r['model']} on chip {r['chip']} "
                            f"({r['scenario']}) is past the TTFT limit (--max-ttft)")
        if not r["points"]:
            raise SpecError(f"model {r['model']} does not fit chip {r['chip']} at any "
                            f"parallelism (weights and one request's KV cache in HBM, "
                            f"{r['scenario']})")
