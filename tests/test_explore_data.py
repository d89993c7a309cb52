"""The InferenceX validation dataset (``scoville/explore/data``, ``scripts/inferencex_dataset.py``):
one dated snapshot, every kept point complete and in scope, every left-out point with its
reason."""

import csv
import subprocess
import sys
from pathlib import Path

from scoville.explore.parallel import Parallelism
from scoville.explore.specs import EXPERT_CV

DATA = Path(__file__).resolve().parent.parent / "scoville" / "explore" / "data"
MODELS = {"deepseek-r1", "gpt-oss-120b", "kimi-k2"}
HARDWARE = {"h100", "h200", "b200", "gb200", "gb300"}
SCENARIOS = {(1024, 1024), (1024, 8192), (8192, 1024)}
REQUIRED = ("model", "hardware", "engine", "precision", "isl", "osl", "concurrency",
            "tok_s_gpu_total", "tok_s_user_median", "source_repo", "source_path",
            "source_commit", "date")


def _rows(name):
    with open(DATA / name, newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_point_is_in_scope_complete_and_from_one_snapshot():
    rows = _rows("inferencex.csv")
    assert len(rows) >= 40
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({(r["source_repo"], r["source_commit"]) for r in rows}) == 1
    for r in rows:
        assert all(r[c] for c in REQUIRED), (r["id"], [c for c in REQUIRED if not r[c]])
        assert r["model"] in MODELS and r["hardware"] in HARDWARE, r["id"]
        assert (int(r["isl"]), int(r["osl"])) in SCENARIOS, r["id"]
        assert int(r["concurrency"]) >= 1
        total, user = float(r["tok_s_gpu_total"]), float(r["tok_s_user_median"])
        assert total > 0 and user > 0, r["id"]
        if r["tok_s_gpu_output"]:
            # Output tokens are part of the total (input + output) per GPU.
            assert 0 < float(r["tok_s_gpu_output"]) <= total * (1 + 1e-9), r["id"]
        if r["disagg"] == "true" and r["prefill_gpus"] and r["decode_gpus"]:
            assert int(r["gpus"]) == int(r["prefill_gpus"]) + int(r["decode_gpus"]), r["id"]


def test_every_mtp_point_has_its_runs_draft_tokens_and_their_source():
    """inferencex-mtp.csv: for every MTP point, the draft tokens a step its run proposed
    (1-3, as InferenceX's recipes and scripts set them) and where that is written."""
    mtp = {r["id"] for r in _rows("inferencex.csv") if r["spec_method"] == "mtp"}
    drafts = _rows("inferencex-mtp.csv")
    assert {r["id"] for r in drafts} == mtp and len(drafts) == len(mtp)
    for r in drafts:
        assert 1 <= int(r["draft_tokens"]) <= 3 and r["source"].strip(), r["id"]


def test_every_point_has_its_runs_serving_limits_and_their_source(monkeypatch):
    """inferencex-serving.csv: for every point, the limits its run's recipe or script set
    (tokens and requests a prefill pass, sequences a decode worker or rank), each a count or
    left to the engine, and where that is written; the validation reads them as
    perf.Serving's limits (a per-rank limit times the worker's ranks)."""
    sys.path.insert(0, str(DATA.parent.parent.parent / "scripts"))
    import explore_validate as validate

    points = {r["id"]: r for r in _rows("inferencex.csv")}
    limits = _rows("inferencex-serving.csv")
    assert [r["id"] for r in limits] == list(points)
    for r in limits:
        assert r["source"].strip(), r["id"]
        assert r["prefill_chunk_tokens"] == "default" or int(r["prefill_chunk_tokens"]) > 0
        for column in ("prefill_max_requests", "decode_max_requests"):
            assert r[column] == "" or int(r[column]) > 0, (r["id"], column)
        assert r["decode_max_requests_scope"] in ("worker", "rank"), r["id"]
        # Expert-parallel load balancing, each pool's, where its experts are spread.
        point, ran = points[r["id"]], r["layout_ran"]
        spread = int(point["ep"] or 1) > 1 or int(point["prefill_ep"] or 1) > 1 or "dep" in ran
        for column in ("expert_balance", "prefill_expert_balance"):
            assert r[column] in (("none", "copies", "recorded", "online") if spread
                                 else ("",)), (r["id"], column)
        assert bool(r["expert_balance_source"].strip()) == spread, r["id"]
    balanced = {r["id"] for r in limits if validate.balanced(points[r["id"]])}
    assert len(balanced) == 7 and all("gb200" in p or "gb300" in p for p in balanced)
    # TensorRT-LLM's online balancer on GB300's decode pool, its prefill pool not balanced.
    row = points["deepseek-r1_gb300_dynamo-trt_fp4_mtp_p6tp2ep2dpa-d16tp16ep16dpa_1k1k_c2253"]
    assert validate.balanced(row) and not validate.balanced(row, "prefill")
    # predict: the decode pool's model balanced, the prefill pool's skewed.
    got = {}
    real = validate.perf.evaluate_disaggregated

    def spy(chip, m, sc, c, layout, serving, prefill_model):
        got.update(decode=m.expert_cv, prefill=prefill_model.expert_cv)
        return real(chip, m, sc, c, layout, serving, prefill_model)

    monkeypatch.setattr(validate.perf, "evaluate_disaggregated", spy)
    validate.predict(row)
    assert got == {"decode": 0.0, "prefill": EXPERT_CV}
    # SGLang's redundant experts placed without load statistics do not balance.
    row = points["deepseek-r1_gb200_dynamo-sglang_fp4_none_p16tp1ep1dpa-d32tp1ep1dpa_1k1k_c15000"]
    assert validate.LIMITS[row["id"]]["expert_balance"] == "copies"
    assert not validate.balanced(row)
    # H100's TensorRT-LLM decode of 16 data-parallel ranks a worker, 32 a rank: 512 a worker;
    # its context worker of 16 ranks too, 2,048 tokens and 2 requests a rank.
    row = points["deepseek-r1_h100_dynamo-trt_fp8_mtp_p16tp16ep16dpa-d16tp16ep16dpa_1k1k_c615"]
    assert validate.limits(row) == {"prefill_tokens": 16 * 2048, "prefill_requests": 16 * 2,
                                    "decode_requests": 512}
    # SGLang's limits are the worker's whatever its data parallelism.
    row = points["deepseek-r1_h100_dynamo-sglang_fp8_mtp_p16tp16ep1-d16tp16ep16dpa_1k1k_c1"]
    assert validate.limits(row) == {"prefill_tokens": 2048, "prefill_requests": 4,
                                    "decode_requests": 64}
    # Where the published layout is a placeholder, the pools that ran, of the same GPUs.
    ran = {r["id"]: r["layout_ran"] for r in limits if r["layout_ran"]}
    assert len(ran) == 12
    for point, layout in ran.items():
        pools = validate._pools(layout)
        row = points[point]
        assert pools.prefill.chips * pools.prefill_workers == int(row["prefill_gpus"])
        assert pools.decode.chips * pools.decode_workers == int(row["decode_gpus"])
    pools = validate._pools("p4xdep4-d1xdep32")
    assert (pools.prefill.mode, pools.prefill.width, pools.prefill_workers) == ("ep", 4, 4)
    assert (pools.decode.mode, pools.decode.width, pools.decode_workers) == ("ep", 32, 1)
    assert validate._pools("p1xtp4-d2xtp4").decode == Parallelism("tp", 4)


def test_every_left_out_point_says_why():
    rows = _rows("inferencex-excluded.csv")
    assert rows and all(r["reason"].strip() for r in rows)


def test_the_validation_doc_is_what_its_script_writes_today(tmp_path):
    """docs/explore-validation.md and the band every point carries (scoville/explore/bands.json)
    are the output of scripts/explore_validate.py on today's model and dataset: a change to
    either that moves an error shows here until they are regenerated."""
    root = DATA.parent.parent.parent
    out, bands = tmp_path / "explore-validation.md", tmp_path / "bands.json"
    subprocess.run([sys.executable, str(root / "scripts" / "explore_validate.py"), "--out",
                    str(out), "--bands", str(bands)], check=True, capture_output=True)
    assert out.read_text() == (root / "docs" / "explore-validation.md").read_text()
    assert bands.read_text() == (root / "scoville" / "explore" / "bands.json").read_text()


def test_explore_md_quotes_the_fitted_numbers_the_code_uses():
    """docs/explore.md repeats a few fitted numbers in its prose: a refit that changes them
    must change the prose too (the generated docs are checked against their scripts)."""
    from scoville.explore import perf
    from scoville.explore.specs import GPU_POWER
    text = (DATA.parent.parent.parent / "docs" / "explore.md").read_text()
    text = " ".join(text.split())
    assert f"`request_s` ({perf.REQUEST_S:.3f} s:" in text
    assert f"`handoff_s` ({perf.HANDOFF_S:.2f} s, fitted)" in text
    assert f"`specs.EXPERT_CV` ({EXPERT_CV:.2f}) is not fitted" in text
    assert (f"compute units ({GPU_POWER['compute']:.2f}) and its memory "
            f"({GPU_POWER['memory']:.2f})") in text
