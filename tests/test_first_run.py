"""The README's measured times of its two commands stay true: ``docs/first-run.md``
(``scripts/first_run.py``) measured the demo's regression on every block's current first
look, within the ten minutes the demo is allowed, and the README says what it measured."""

import re
from pathlib import Path

from scoville import regress
from scoville.blocks import BLOCKS
from scoville.cli import SIMULATORS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "first-run.md"
#: The demo's budget on a fresh 2-core machine, set-up included (seconds).
DEMO_BUDGET_S = 600


def _totals() -> dict[str, str]:
    rows = re.findall(r"^\| `(\./scripts/\w+)` \| (\d+ min \d+ s) \|", DOC.read_text(), re.M)
    return dict(rows)


def _seconds(text: str) -> int:
    m = re.fullmatch(r"(\d+) min (\d+) s", text)
    return int(m[1]) * 60 + int(m[2])


def test_the_measurement_ran_every_blocks_current_first_look_on_both_simulators():
    """Every (block, look, simulator) of today, with today's parameters, passed in it."""
    measured = set(re.findall(r"^\| (\w+) \| (\S+) \| (icarus|verilator) \| pass \| "
                              r"[\d.]+ \| (.*) \|$", DOC.read_text(), re.M))
    looks = {(t[0], t[1], t[3], " ".join(t[2]) or "-")
             for t in regress.tasks(BLOCKS, SIMULATORS, 1)}
    assert looks == measured, (
        "the first looks changed since docs/first-run.md was measured: rerun "
        f"python scripts/first_run.py (not measured: {sorted(looks - measured)}; "
        f"gone: {sorted(measured - looks)})")


def test_the_demo_was_measured_within_its_budget():
    """On a fresh 2-core machine, the system packages installed by the set-up."""
    head = DOC.read_text().split("\n\n")[1]
    assert "--fresh-system" in head and " 2 cores " in head, head
    totals = _totals()
    assert set(totals) == {"./scripts/demo", "./scripts/test"}
    assert _seconds(totals["./scripts/demo"]) <= DEMO_BUDGET_S


def test_the_readme_states_the_measured_times():
    readme = (ROOT / "README.md").read_text()
    said = re.search(r"<!-- first-run -->(.*?)<!-- /first-run -->", readme, re.S)[1]
    for command, total in _totals().items():
        assert f"`{command}` {total}" in said, (command, total, said)
    assert "docs/first-run.md" in said
