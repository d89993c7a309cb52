"""scripts/modelspeed.py: the digest of a model's predictions, and the table that compares two
revisions by it."""

from argparse import Namespace

from .script import load


def test_the_kvcache_unit_models_give_the_loops_digest_and_a_changed_prediction_does_not():
    ms = load("modelspeed")
    loop, units = (ms.measure(name, 3, 1) for name in ("kvcache", "kvcache-units"))
    assert loop["cycles"] == units["cycles"] > 0
    assert loop["digest"] == units["digest"]
    from scoville.sim.cycles import kvcache

    plain = kvcache.timing

    def late(*args):  # one handshake a cycle later
        timing = plain(*args)
        timing.handshakes["resp"][-1] += 1
        return timing

    kvcache.timing = late
    try:
        assert ms.measure("kvcache", 3, 1)["digest"] != loop["digest"]
    finally:
        kvcache.timing = plain


def test_the_table_says_which_predictions_changed():
    ms = load("modelspeed")
    args = Namespace(cases=2, repeat=1, against="abc1234", out="x.md")
    now = {"moe": {"digest": "aa", "cycles": 100, "wall_s": 1.0},
           "attention": {"digest": "bb", "cycles": 50, "wall_s": 1.0},
           "kvcache-units": {"digest": "cc", "cycles": 10, "wall_s": 1.0}}
    earlier = {"moe": {"digest": "aa", "cycles": 100, "wall_s": 0.5},
               "attention": {"digest": "xx", "cycles": 50, "wall_s": 2.0}}
    rows = {line.split(" | ")[0].strip("| "): line
            for line in ms.table(now, earlier, args).splitlines() if line.startswith("| ")}
    assert rows["moe"].endswith("| 0.50 | yes |")
    assert rows["attention"].endswith("| 2.00 | **no** |")
    assert rows["kvcache-units"].endswith("| n/a | n/a |")
