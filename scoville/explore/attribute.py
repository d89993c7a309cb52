"""Where one chip's advantage over another comes from: its ratio on a metric at equal
interactivity, split among groups of specs with Shapley values.

A coalition ``S`` of spec groups is chip B with the fields of the groups in ``S`` taken from
chip A; its value is the log of its metric (tokens/s per chip or per kW) on its own Pareto
frontier at the interactivity asked, the whole sweep re-run for it. Each group's share is its
Shapley value: its marginal effect averaged over every order of adding the groups, so the
shares add up to log(A / B) exactly and a group that does not change the answer gets zero.
Shares are reported as factors (``exp`` of the share): their product is A / B. Groups in
which the two chips agree are left out (their share is zero); the rest cost ``2^groups``
sweeps.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

from . import sweep
from .specs import Chip, Model, Scenario, SpecError

__all__ = ["GROUPS", "TARGETS", "attribute", "markdown"]

#: The spec groups and the chip fields in each.
GROUPS = {
    "compute": ("tflops",),
    "HBM bandwidth": ("hbm_tb_s",),
    "HBM capacity": ("hbm_gb",),
    "domain and links": ("domain", "link_gb_s", "link_latency_us", "a2a_latency_us",
                         "scaleout_gb_s", "scaleout_latency_us"),
    "SRAM": ("sram_mib", "sram_tb_s", "kv_sram_frac"),
    "cores and clock": ("clock_ghz", "cores", "array_rows", "array_cols"),
    "efficiency and fixed overheads": ("compute_eff", "bw_eff", "attention_eff", "kernel_us",
                                       "layer_us", "kernels", "floor_share"),
    "power": ("power_w", "energy", "allin_kw"),
}
#: Interactivities (tokens/s per user) the split is taken at.
TARGETS = (20.0, 50.0, 100.0)
METRICS = ("tok_s_chip", "tok_s_kw")


def _hybrid(a: Chip, b: Chip, groups) -> Chip:
    fields = {f: getattr(a, f) for g in groups for f in GROUPS[g]}
    return dataclasses.replace(b, name=f"{b.name}+{'+'.join(groups)}" if groups else b.name,
                               **fields)


def _differing(a: Chip, b: Chip) -> list[str]:
    return [g for g, fields in GROUPS.items()
            if any(getattr(a, f) != getattr(b, f) for f in fields)]


def attribute(a: Chip, b: Chip, model: Model, scenario: Scenario,
              targets=TARGETS) -> dict:
    """A's ratio over B and each differing group's factor, per metric and interactivity
    (None where a coalition's curve does not reach it)."""
    if a.kind != b.kind:
        raise SpecError(f"--attribute: chips {a.name} ({a.kind}) and {b.name} ({b.kind}) are "
                        "of different kinds; attribution needs two of one kind")
    groups = _differing(a, b)
    fronts = {}
    for k in range(len(groups) + 1):
        for coalition in itertools.combinations(groups, k):
            points = sweep.run_task(_hybrid(a, b, coalition), model, scenario)["points"]
            fronts[frozenset(coalition)] = {y: sweep.frontier(points, y=y) for y in METRICS}
    n = len(groups)
    out = {"chip": a.name, "against": b.name, "model": model.name, "scenario": scenario.label,
           "groups": groups, "at": []}
    for y in METRICS:
        for x in targets:
            values = {s: sweep.value_at(f[y], x, y=y) for s, f in fronts.items()}
            row = {"metric": y, "tok_s_user": x, "ratio": None, "factors": None}
            if all(v for v in values.values()):
                logs = {s: math.log(v) for s, v in values.items()}
                shares = {}
                for g in groups:
                    total = 0.0
                    for s in logs:
                        if g in s:
                            continue
                        w = math.factorial(len(s)) * math.factorial(n - len(s) - 1) / \
                            math.factorial(n)
                        total += w * (logs[s | {g}] - logs[s])
                    shares[g] = total
                row["ratio"] = math.exp(logs[frozenset(groups)] - logs[frozenset()])
                row["factors"] = {g: math.exp(v) for g, v in shares.items()}
            out["at"].append(row)
    return out


def markdown(results: list[dict]) -> str:
    """The splits as markdown tables, one per chip pair, model and scenario."""
    lines = []
    for r in results:
        lines += [f"## {r['chip']} against {r['against']}: {r['model']}, {r['scenario']}", ""]
        if not r["groups"]:
            lines += ["The two chips have the same specs in every group.", ""]
            continue
        lines += ["| metric | at tok/s per user | A / B | " + " | ".join(r["groups"]) + " |",
                  "|---|---:|---:|" + "---:|" * len(r["groups"])]
        for row in r["at"]:
            if row["ratio"] is None:
                cells = ["–"] * (1 + len(r["groups"]))
            else:
                cells = [f"{row['ratio']:.2f}x"] + [f"{row['factors'][g]:.2f}x"
                                                    for g in r["groups"]]
            lines.append(f"| {row['metric']} | {row['tok_s_user']:g} | " + " | ".join(cells)
                         + " |")
        lines.append("")
    lines += ["Each group's factor is exp of its Shapley value on the log of the metric: the "
              "factors multiply to A / B. –: some mix of the two chips' specs does not reach "
              "that interactivity.", ""]
    return "\n".join(lines)


def plot(result: dict, path) -> None:
    """Each group's share of log(A / B) as stacked bars (up: in A's favour), per metric and
    interactivity; a diamond marks the whole ratio."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(METRICS), figsize=(10, 4), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, y in zip(axes, METRICS, strict=True):
        rows = [row for row in result["at"] if row["metric"] == y]
        for i, row in enumerate(rows):
            if row["ratio"] is None:
                continue
            up = down = 0.0
            for j, g in enumerate(result["groups"]):
                v = math.log2(row["factors"][g])
                base = up if v >= 0 else down
                ax.bar(i, v, bottom=base, color=colors[j % len(colors)])
                if v >= 0:
                    up += v
                else:
                    down += v
            ax.plot(i, math.log2(row["ratio"]), "kD", ms=5)
        ax.set_xticks(range(len(rows)), [f"{row['tok_s_user']:g}" for row in rows])
        ax.set_xlabel("tokens/s per user")
        ax.set_title(y)
        ax.axhline(0, color="k", lw=0.6)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel(f"log2 of {result['chip']} / {result['against']}")
    from matplotlib.patches import Patch
    fig.legend([Patch(color=colors[j % len(colors)]) for j in range(len(result["groups"]))],
               result["groups"], fontsize=7, loc="upper right")
    fig.suptitle(f"{result['chip']} against {result['against']}: {result['model']}, "
                 f"{result['scenario']} (Shapley shares; diamond: the whole ratio)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 0.82, 1))
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
