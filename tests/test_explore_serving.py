"""The exploration model's serving features, each on a case worked by hand: layouts
(attention tensor- or data-parallel, experts sliced or spread), the busiest expert-parallel
chip, MTP, disaggregated pools, the paged KV cache, MLA prefill expanded, experts in FP4; and
the attribution of one chip's advantage over another."""

import dataclasses
import math

import pytest

from scoville.explore import attribute, perf, shapes, sweep
from scoville.explore.parallel import Parallelism, parallelisms
from scoville.explore.specs import CHIPS, MODELS, Scenario, SpecError

DS = MODELS["deepseek-r1"]
DS_FP4 = dataclasses.replace(DS, expert_fmt="nvfp4", expert_act_fmt="fp4")


def _factored(name: str):
    """A GPU timed by global factors instead of its measured kernels (a chip of a TOML file
    without ``kernels``), at round factors."""
    return dataclasses.replace(CHIPS[name], kernels="", bw_eff=0.5, compute_eff=0.2,
                               kernel_us=4.0, attention_eff=0.7)


def test_layouts_are_labelled_as_inferencex_labels_them():
    assert Parallelism("tp", 8).label == "tp8"
    assert Parallelism("tpep", 8).label == "tp8ep8"
    assert Parallelism("ep", 8, 2).label == "ep8-pp2"
    with pytest.raises(ValueError, match="allowed: tp, ep, tpep"):
        Parallelism("dp", 8)


def test_the_sweep_tries_attention_tp_with_experts_spread():
    labels = {p.label for p in parallelisms(CHIPS["b200"], DS)}
    assert {"tp8", "ep8", "tp8ep8", "tp1"} <= labels
    assert "tp1ep1" not in labels and "ep1" not in labels


def test_the_sweep_tries_the_widths_of_an_nvl72():
    """Widths of 3 x 2^k and the whole domain besides powers of two: InferenceX's GB200 runs
    spread DeepSeek-R1's experts over 48 GPUs; tensor-parallel attention only where the width
    divides the 128 query heads."""
    from scoville.explore.parallel import widths
    assert widths(CHIPS["gb200"]) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 72]
    assert widths(CHIPS["b200"]) == [1, 2, 3, 4, 6, 8]
    labels = {p.label for p in parallelisms(CHIPS["gb200"], DS)}
    assert {"ep48", "ep72", "tp64", "tp32ep32"} <= labels
    assert not {"tp48", "tp3", "tp72ep72"} & labels


def test_only_data_parallel_attention_holds_a_full_copy_of_the_dense_weights():
    """Tensor-parallel attention: a chip holds its share of the split matrices and the
    replicated ones whole, well under a full copy; data-parallel: every chip a full copy."""
    b = shapes.model_bytes(DS)
    dense = b["attention"] + b["shared"] + b["dense"] + b["head"]
    share = shapes.dense_params_per_chip(DS, 8) * shapes.bytes_per_param(DS.weight_fmt)
    assert dense / 8 < share < dense / 4
    experts = b["expert"] * (DS.layers - DS.dense_layers) * DS.experts
    for mode, held_dense in (("tp", share), ("tpep", share), ("ep", dense)):
        held = perf._weights_per_chip(DS, Parallelism(mode, 8), None)
        assert held == pytest.approx(held_dense + experts / 8)


def test_the_busiest_chip_of_spread_experts():
    assert shapes.busiest(100, 1) == 1.0
    # 8 choices over 8 chips: 1 + sqrt(2 * 7 * ln 8 / 8).
    assert shapes.busiest(8, 8) == pytest.approx(1 + math.sqrt(2 * 7 * math.log(8) / 8))
    assert shapes.busiest(1, 64) == 64                     # the one choice on one chip
    assert shapes.busiest(0.5, 64) == 64                   # never more than all on one chip
    assert 4 <= shapes.busiest(16, 64) < 64                # a whole choice on the busiest
    assert shapes.busiest(1e9, 8) == pytest.approx(1, abs=1e-3)


def test_a_skewed_router_loads_the_busiest_chip_more_however_large_the_batch():
    """Experts of uneven load (``Model.expert_cv``): a chip holding ``E / w`` of them, drawn
    without replacement, has an expected share whose relative variance is ``cv^2 (w - 1) /
    (E - 1)``, added to the uniform choices' ``(w - 1) / items``; a large batch no longer
    evens the chips out."""
    skewed = dataclasses.replace(DS, expert_cv=1.5)
    assert shapes.expert_skew(skewed, 32) == pytest.approx(1.5 ** 2 * 31 / 255)
    assert shapes.expert_skew(skewed, 1) == 0.0
    assert shapes.expert_skew(skewed, 256) == pytest.approx(1.5 ** 2)    # an expert a chip
    assert shapes.expert_skew(dataclasses.replace(DS, expert_cv=0.0), 32) == 0.0
    # By hand: 1 + sqrt(2 ln 32 (31 / 1e9 + 0.27353)) = 1 + sqrt(6.931 * 0.27353) = 2.377.
    assert shapes.busiest(1e9, 32, shapes.expert_skew(skewed, 32)) == pytest.approx(2.377,
                                                                                  abs=1e-3)
    assert shapes.busiest(64, 8, 0.1) > shapes.busiest(64, 8)
    assert shapes.busiest(4, 8, 100.0) == 8                  # never more than all on one chip
    with pytest.raises(SpecError, match="expert_cv"):
        dataclasses.replace(DS, expert_cv=-0.1)


def test_the_built_in_router_skew_gives_the_busiest_rank_tensorrt_llm_measured():
    """``specs.EXPERT_CV`` is not fitted: it is the value at which the busiest of 32 ranks
    holds the measured 2.564 times the mean (DeepSeek-R1, 32 x 1,024 choices a step)."""
    from scoville.explore.specs import EP32_BUSIEST, EXPERT_CV

    assert DS.expert_cv == EXPERT_CV == pytest.approx(1.701, abs=1e-3)
    m = dataclasses.replace(DS, experts=EP32_BUSIEST["experts"])
    got = shapes.busiest(EP32_BUSIEST["choices"], EP32_BUSIEST["ranks"],
                         shapes.expert_skew(m, EP32_BUSIEST["ranks"]))
    assert got == pytest.approx(EP32_BUSIEST["busiest"], rel=1e-9)


def test_spread_experts_cost_the_busiest_chip_and_no_more():
    """Spread experts: a step waits for the busiest chip's expert operations (the choices of
    the stage's own tokens, not divided again by the stages); its energy and power are the
    mean chip's, the same operations as sliced experts'; when every expert is touched each
    chip reads exactly its own experts, as sliced experts do. On a chip timed by its peak
    (no measured kernels), compute-bound: the step longer by the busiest chip's extra
    operations at the experts' rate."""
    chip = dataclasses.replace(CHIPS["gb200"], kernels="")
    tokens = 16384
    sliced = perf._roofline(chip, DS, Parallelism("tp", 8, 2), tokens, 1024, DS.experts, 64)
    spread = perf._roofline(chip, DS, Parallelism("tpep", 8, 2), tokens, 1024, DS.experts, 64)
    assert spread.hbm_bytes == pytest.approx(sliced.hbm_bytes)
    assert spread.flops == pytest.approx(sliced.flops)
    assert spread.compute_s == pytest.approx(sliced.compute_s)
    b = shapes.model_bytes(DS)
    experts = (2 * (DS.layers - DS.dense_layers) * DS.top_k * b["expert"]
               / shapes.bytes_per_param(DS.expert_fmt) * tokens / 16)
    busiest = shapes.busiest(tokens * DS.top_k, 8, shapes.expert_skew(DS, 8))
    rate = chip.peak_flops(DS.expert_compute_fmt) * chip.compute_eff
    gap = spread.seconds - sliced.seconds - perf.comm(chip, DS, Parallelism("tpep", 8, 2),
                                                      tokens)[0]
    gap += perf.comm(chip, DS, Parallelism("tp", 8, 2), tokens)[0]
    assert gap == pytest.approx(experts * (busiest - 1) / rate, rel=1e-6)


def test_mtp_gains_the_accepted_tokens_per_step():
    assert perf.Serving(mtp=1, accept=0.85).tokens_per_step == pytest.approx(1.85)
    assert perf.Serving(mtp=3, accept=0.5).tokens_per_step == pytest.approx(1.875)
    assert perf.Serving().tokens_per_step == 1
    with pytest.raises(ValueError, match="accept"):
        perf.Serving(mtp=1, accept=1.5)


def test_mtp_at_batch_one_nearly_doubles_a_users_tokens():
    """At batch 1 a step reads the weights (memory-bound, or bound by its small GEMMs'
    padded compute, which a second row hardly adds to): verifying two tokens costs about
    what one does (the second token's experts added), plus a draft pass (the MTP module, one
    layer, and the head: a step of its own, its fixed costs included), so with every draft
    accepted a user gets well over 1.5x the tokens a second, short of 2x by the draft pass;
    the weights are read once, not twice (only the experts the second token adds)."""
    chip, sc, par = CHIPS["b200"], Scenario(1024, 1024), Parallelism("tp", 8)
    plain = perf.evaluate(chip, DS, sc, 1, par)
    sure = perf.evaluate(chip, DS, sc, 1, par, perf.Serving(mtp=1, accept=1.0))
    one = perf.step(chip, DS, par, 1, 1536)
    two = perf.step(chip, DS, par, 1, 1536, serving=perf.Serving(mtp=1))
    draft = perf.step(chip, perf._mtp_module(DS), par, 1, 1536)
    verify = two.seconds - draft.seconds
    assert one.seconds < verify < 1.2 * one.seconds
    assert draft.seconds < 0.15 * one.seconds
    ratio = sure["tok_s_user"] / plain["tok_s_user"]
    assert 1.5 < ratio < 2 * one.seconds / (one.seconds + draft.seconds)
    assert one.hbm_bytes < two.hbm_bytes - draft.hbm_bytes < 2 * one.hbm_bytes
    # The draft pass reads the head's weights as a whole step does.
    head = shapes.model_bytes(DS)["head"] / par.width
    assert draft.hbm_bytes > head


def _disagg(prefill_workers):
    return perf.Disaggregated(Parallelism("tp", 8), prefill_workers, Parallelism("ep", 8), 2)


def test_a_disaggregated_point_is_a_closed_loop():
    """Light load: each of the requests cycles through its TTFT and osl TPOTs, so the
    deployment completes concurrency / (TTFT + osl TPOT) requests a second."""
    chip, sc = CHIPS["b200"], Scenario(1024, 1024)
    p = perf.evaluate_disaggregated(chip, DS, sc, 4, _disagg(1))
    assert p["chips"] == 24 and p["parallelism"] == "p1xtp8-d2xep8"
    rate = p["tok_s_chip"] * p["chips"] / sc.osl
    assert rate == pytest.approx(4 / (p["ttft_s"] + sc.osl * p["tpot_s"]))
    # The decode workers share the requests: a step of 2 sequences each.
    step = perf.step(chip, DS, Parallelism("ep", 8), 2, 1024 + 512, 2048)
    assert p["decode_step_s"] == pytest.approx(perf._powered(chip, DS, step)[0])


def test_a_saturated_prefill_pool_sets_the_rate_and_the_wait():
    """Heavy load on one prefill worker: requests complete at its rate (twice the rate with
    two workers), and the TTFT holds the wait: concurrency / rate - osl TPOT."""
    chip, sc = CHIPS["b200"], Scenario(8192, 1024)
    one = perf.evaluate_disaggregated(chip, DS, sc, 1024, _disagg(1))
    two = perf.evaluate_disaggregated(chip, DS, sc, 1024, _disagg(2))
    rate_one = one["tok_s_chip"] * one["chips"] / sc.osl
    rate_two = two["tok_s_chip"] * two["chips"] / sc.osl
    assert rate_two == pytest.approx(2 * rate_one)
    # The prefill worker's rate, from its own prefill of PREFILL_TOKENS (two 8k requests).
    full = perf.PREFILL_TOKENS // sc.isl
    t_full = perf._powered(chip, DS, perf.prefill(chip, DS, Parallelism("tp", 8), full,
                                                  sc.isl))[0]
    assert rate_one == pytest.approx(full / t_full)
    assert one["ttft_s"] == pytest.approx(1024 / rate_one - sc.osl * one["tpot_s"])
    assert two["ttft_s"] == pytest.approx(1024 / rate_two - sc.osl * two["tpot_s"])
    # Below saturation the wait is gone: TTFT is a prefill, well under a second, with the
    # request's and the hand-off's fixed seconds.
    light = perf.evaluate_disaggregated(chip, DS, sc, 128, _disagg(2))
    fixed = perf.REQUEST_S + perf.HANDOFF_S
    assert fixed < light["ttft_s"] < fixed + 1 < two["ttft_s"] < one["ttft_s"]


def test_each_pool_runs_its_own_experts_balance(monkeypatch):
    """``prefill_model``: a run that balanced its decode pool's experts only (TensorRT-LLM's
    online balancer) times its prefill pool with the skewed model, its decode steps with the
    balanced one, saturated or not; its prefill is slower than a balanced run's."""
    chip, sc = CHIPS["b200"], Scenario(8192, 1024)
    flat = dataclasses.replace(DS, expert_cv=0.0)
    layout = perf.Disaggregated(Parallelism("ep", 8), 1, Parallelism("ep", 8), 2)
    seen = {"decode": set(), "prefill": set()}
    step, timing = perf._decode_step, perf._prefill_timing

    def decode(chip, m, *args):
        seen["decode"].add(m.expert_cv)
        return step(chip, m, *args)

    def prefill(chip, m, *args):
        seen["prefill"].add(m.expert_cv)
        return timing(chip, m, *args)

    monkeypatch.setattr(perf, "_decode_step", decode)
    monkeypatch.setattr(perf, "_prefill_timing", prefill)
    for c in (4, 1024):
        both = perf.evaluate_disaggregated(chip, flat, sc, c, layout)
        mixed = perf.evaluate_disaggregated(chip, flat, sc, c, layout, prefill_model=DS)
        assert mixed["ttft_s"] > both["ttft_s"]
        assert mixed["tok_s_chip"] <= both["tok_s_chip"]
    assert seen == {"decode": {0.0}, "prefill": {0.0, DS.expert_cv}}
    assert perf.evaluate_disaggregated(chip, DS, sc, 4, layout, prefill_model=DS) == \
        perf.evaluate_disaggregated(chip, DS, sc, 4, layout)


def test_a_request_longer_than_a_prefill_pass_is_prefilled_in_passes():
    """prefill_tokens 2048 and an 8k request: four passes one after another, each its 2,048
    tokens against those before it; a saturated worker's batch is one request. Shorter
    requests batch up to the pass's tokens, at most prefill_requests of them."""
    chip, par = CHIPS["b200"], Parallelism("tp", 8)
    sc, serving = Scenario(8192, 1024), perf.Serving(prefill_tokens=2048)
    passes = [perf.prefill(chip, DS, par, 1, s + 2048, s) for s in (0, 2048, 4096, 6144)]
    got = perf._prefill_passes(chip, DS, par, 1, sc, 2048)
    assert got.seconds == pytest.approx(sum(p.seconds for p in passes))
    assert got.flops == pytest.approx(sum(p.flops for p in passes))
    # More work than one pass of the whole request: the later passes attend more, and each
    # pays its kernels' floors.
    whole = perf.prefill(chip, DS, par, 1, 8192)
    assert got.seconds > whole.seconds
    assert perf._full_batch(sc, serving) == 1
    assert perf._prefill_timing(chip, DS, par, sc, serving)(1)[0] == pytest.approx(
        perf._powered(chip, DS, got)[0])
    short = Scenario(1024, 1024)
    assert perf._full_batch(short, perf.Serving(prefill_tokens=8192)) == 8
    assert perf._full_batch(short, perf.Serving(prefill_tokens=8192, prefill_requests=2)) == 2
    assert perf._full_batch(short) == perf.PREFILL_TOKENS // 1024
    with pytest.raises(ValueError, match="prefill_tokens 0 \\(>= 1\\)"):
        perf.Serving(prefill_tokens=0)


def test_a_decode_worker_holds_at_most_its_sequences():
    """decode_requests 16 a worker, 2 workers, 256 requests: 32 decode at once, each a step
    of 16 a worker; requests complete as the 32 places free up (32 / (osl TPOT)) and the
    rest wait, the wait in TTFT (Little's law: concurrency / rate in all)."""
    chip, sc = CHIPS["b200"], Scenario(1024, 1024)
    serving = perf.Serving(decode_requests=16)
    p = perf.evaluate_disaggregated(chip, DS, sc, 256, _disagg(2), serving)
    step = perf.step(chip, DS, Parallelism("ep", 8), 16, 1024 + 512, 2048)
    assert p["decode_step_s"] == pytest.approx(perf._powered(chip, DS, step)[0])
    rate = p["tok_s_chip"] * p["chips"] / sc.osl
    assert rate == pytest.approx(32 / (sc.osl * p["tpot_s"]))
    assert p["ttft_s"] == pytest.approx(256 / rate - sc.osl * p["tpot_s"])
    # Without the limit the 256 share the two workers' steps.
    free = perf.evaluate_disaggregated(chip, DS, sc, 256, _disagg(2))
    assert free["decode_step_s"] > p["decode_step_s"] and free["ttft_s"] < p["ttft_s"]
    # Just past the places, a request's TTFT outside a slot leaves them free at times: the
    # rate is at most the slots' and the closed loop's, no TTFT is shorter than a lone
    # request's, and more requests never complete fewer or wait less.
    lone = perf.evaluate_disaggregated(chip, DS, sc, 1, _disagg(2), serving)
    last = None
    for c in (33, 40, 64, 256):
        q = perf.evaluate_disaggregated(chip, DS, sc, c, _disagg(2), serving)
        rate = q["tok_s_chip"] * q["chips"] / sc.osl
        assert rate <= 32 / (sc.osl * q["tpot_s"]) * (1 + 1e-9), c
        assert rate == pytest.approx(c / (q["ttft_s"] + sc.osl * q["tpot_s"]))
        assert q["ttft_s"] >= lone["ttft_s"] * (1 - 1e-9), c
        if last is not None:
            assert q["ttft_s"] >= last["ttft_s"] and rate >= last["rate"] * (1 - 1e-9), c
        last = q | {"rate": rate}


def test_an_engine_runs_at_most_its_sequences():
    """Aggregated, 64 requests on an engine that runs 16: the replica serves 16 at a time
    (their step, their life), completes 16 a life, and the others wait: TTFT adds
    concurrency / rate - life."""
    chip, sc, par = CHIPS["b200"], Scenario(1024, 1024), Parallelism("tp", 8)
    capped = perf.evaluate(chip, DS, sc, 64, par, perf.Serving(decode_requests=16))
    sixteen = perf.evaluate(chip, DS, sc, 16, par)
    assert capped["decode_step_s"] == pytest.approx(sixteen["decode_step_s"])
    assert capped["tok_s_chip"] == pytest.approx(sixteen["tok_s_chip"])
    life = sc.osl * sixteen["tpot_s"]
    rate = 16 / life
    assert capped["ttft_s"] == pytest.approx(sixteen["ttft_s"] + 64 / rate - life)


def test_a_paged_cache_holds_the_mean_context():
    """The largest concurrency that fits is the HBM left after the weights over the KV of a
    sequence at isl + osl / 2 tokens, not isl + osl."""
    chip, sc, par = CHIPS["h200"], Scenario(1024, 8192), Parallelism("tp", 8)
    held = perf._weights_per_chip(DS, par, None) + shapes.model_bytes(DS)["embed"] / 8
    room = chip.hbm_gb * 1e9 * perf.HBM_USABLE - held
    most = math.floor(room / shapes.kv_bytes(DS, 1024 + 4096))     # MLA: every chip a copy
    assert perf.fits(chip, DS, par, sc, most) and not perf.fits(chip, DS, par, sc, most + 1)
    assert most > room / shapes.kv_bytes(DS, 1024 + 8192) * 1.5


def test_mla_prefill_is_counted_expanded_and_decode_absorbed():
    a = DS.attention
    per_token = a.q_heads * (2 * (a.qk_nope + a.qk_rope) + 2 * a.v_head_dim)
    assert shapes.attention_flops(DS, 100, absorbed=False) == per_token * 100 * DS.layers
    absorbed = a.q_heads * (4 * a.kv_lora_rank + 2 * a.qk_rope)
    assert shapes.attention_flops(DS, 100) == absorbed * 100 * DS.layers
    assert absorbed / per_token == pytest.approx(3.4, abs=0.05)
    gpt = MODELS["gpt-oss-120b"]
    assert shapes.attention_flops(gpt, 64, absorbed=False) == shapes.attention_flops(gpt, 64)


def test_fp4_experts_use_gb300s_fp4_peak():
    """GB300 and GB200 have the same FP8 peak and HBM bandwidth, GB300 1.5x the FP4 peak: a
    compute-bound prefill is as fast on both with FP8 experts and faster on GB300 with FP4
    experts."""
    par = Parallelism("tp", 4)
    t = {(chip, m.expert_compute_fmt): perf.prefill(_factored(chip), m, par, 16, 8192).seconds
         for chip in ("gb200", "gb300") for m in (DS, DS_FP4)}
    assert t["gb300", "fp8"] == pytest.approx(t["gb200", "fp8"])
    assert t["gb300", "fp4"] < 0.95 * t["gb200", "fp4"]
    assert t["gb200", "fp4"] < t["gb200", "fp8"]


def _front_value(chip, model, sc, y, x):
    points = sweep.run_task(chip, model, sc)["points"]
    return sweep.value_at(sweep.frontier(points, y=y), x, y=y)


def test_attribution_of_two_groups_is_their_shapley_values():
    """B is GB200; A is GB200 with the ASIC's HBM bandwidth and its power specs. Two groups
    differ: each one's share, worked from the definition (half its effect alone, half its
    effect on top of the other), and the factors multiply to A / B (DeepSeek-R1 1k/1k at 100
    tokens/s per user)."""
    asic, gb200 = CHIPS["asic-2026"], CHIPS["gb200"]
    a = dataclasses.replace(gb200, name="a", hbm_tb_s=asic.hbm_tb_s, power_w=asic.power_w,
                            energy=asic.energy, allin_kw=asic.allin_kw)
    sc = Scenario(1024, 1024)
    got = attribute.attribute(a, gb200, DS, sc, targets=(100.0,))
    assert got["groups"] == ["HBM bandwidth", "power"]
    bw = dataclasses.replace(gb200, hbm_tb_s=asic.hbm_tb_s)
    power = dataclasses.replace(gb200, power_w=asic.power_w, energy=asic.energy,
                                allin_kw=asic.allin_kw)
    for row in got["at"]:
        y = row["metric"]
        v0, v1, v2, v12 = (math.log(_front_value(c, DS, sc, y, 100.0))
                           for c in (gb200, bw, power, a))
        assert math.log(row["factors"]["HBM bandwidth"]) == pytest.approx(
            ((v1 - v0) + (v12 - v2)) / 2)
        assert math.log(row["factors"]["power"]) == pytest.approx(((v2 - v0) + (v12 - v1)) / 2)
        assert row["ratio"] == pytest.approx(math.prod(row["factors"].values()))
        assert row["ratio"] == pytest.approx(math.exp(v12 - v0))
    # At 100 tokens/s per user a decode step is mostly its kernels' fixed time and its
    # experts' compute padded to their tiles (a few tokens an expert), partly memory-bound:
    # more HBM bandwidth raises throughput per chip a little; power specs alone do not (no
    # cap here).
    chip_row = next(r for r in got["at"] if r["metric"] == "tok_s_chip")
    assert chip_row["factors"]["HBM bandwidth"] > 1.005
    assert chip_row["factors"]["power"] == pytest.approx(1.0)


def test_a_chip_against_itself_has_nothing_to_attribute():
    got = attribute.attribute(CHIPS["b200"], CHIPS["b200"], DS, Scenario(1024, 1024))
    assert got["groups"] == [] and all(r["ratio"] == pytest.approx(1) for r in got["at"]
                                       if r["ratio"] is not None)
    with pytest.raises(SpecError, match="different kinds"):
        attribute.attribute(CHIPS["scoville-a64"], CHIPS["b200"], DS, Scenario(1024, 1024))


def test_attention_runs_at_its_own_fraction_of_the_peak():
    """0 means the chip's GEMM fraction; a higher one speeds up only the attention of a
    compute-bound long-context step (a prefill), not a GEMM-only batch-1 decode."""
    chip, par = _factored("b200"), Parallelism("tp", 8)
    same = dataclasses.replace(chip, attention_eff=0.0)
    as_gemm = dataclasses.replace(chip, attention_eff=chip.compute_eff)
    fast = dataclasses.replace(chip, attention_eff=1.0)
    assert perf.prefill(same, DS, par, 4, 8192).seconds == pytest.approx(
        perf.prefill(as_gemm, DS, par, 4, 8192).seconds)
    assert perf.prefill(fast, DS, par, 4, 8192).seconds < \
        0.95 * perf.prefill(as_gemm, DS, par, 4, 8192).seconds
    assert perf.step(fast, DS, par, 1, 16).seconds == pytest.approx(
        perf.step(as_gemm, DS, par, 1, 16).seconds, rel=1e-3)
    with pytest.raises(SpecError, match="attention_eff"):
        dataclasses.replace(chip, attention_eff=1.5)


def test_the_sweep_serves_deepseek_with_and_without_its_mtp_module():
    """DeepSeek-R1 ships one MTP module: the sweep has each point plainly and with one draft
    token, and at batch 1 the MTP point gives a user more tokens a second; GPT-OSS has none."""
    sc = Scenario(1024, 1024, (1,), extend=False)
    points = sweep.run_task(CHIPS["b200"], DS, sc)["points"]
    by = {(p["parallelism"], p["mtp"]): p for p in points}
    assert {m for _, m in by} == {0, 1}
    plain, mtp = by["tp8", 0], by["tp8", 1]
    assert mtp["tok_s_user"] > 1.5 * plain["tok_s_user"]
    gpt = sweep.run_task(CHIPS["b200"], MODELS["gpt-oss-120b"], sc)["points"]
    assert {p["mtp"] for p in gpt} == {0}


def test_an_instance_stops_at_its_maximum_batch():
    """Tensor-parallel attention: one engine batch of at most max_batch requests; data-parallel
    attention: max_batch on each of its ranks."""
    sc = Scenario(1024, 1024, max_batch=64)
    points = sweep.run_task(CHIPS["b200"], DS, sc)["points"]
    for p in points:
        layout = p["parallelism"].split("-d1x")[-1]         # a disaggregated point's decode
        dp = int(layout[2:].split("-")[0]) if layout.startswith("ep") else 1
        assert p["concurrency"] <= 64 * dp
    assert max(p["concurrency"] for p in points if p["parallelism"] == "tp8") == 64
    assert max(p["concurrency"] for p in points if p["parallelism"] == "ep8") > 64


def test_a_step_launches_the_kernels_its_layers_are_made_of():
    """GPT-OSS: 36 layers of 2 norms + 4 attention + 7 MoE kernels; DeepSeek-R1: 61 layers of
    2 norms + 9 MLA kernels, 58 of them MoE with a shared expert (7 + 3), 3 dense FFNs (3)."""
    assert shapes.kernels(MODELS["gpt-oss-120b"]) == 36 * 13
    assert shapes.kernels(DS) == 61 * 11 + 58 * 10 + 3 * 3
    # Each kernel costs the chip's kernel_us, a stage's share of them.
    chip = _factored("b200")
    slower = dataclasses.replace(chip, kernel_us=chip.kernel_us + 1.0)
    par = Parallelism("tp", 8, 2)
    dt = (perf._roofline(slower, DS, par, 16, 1024, 64, 16).seconds
          - perf._roofline(chip, DS, par, 16, 1024, 64, 16).seconds)
    assert dt == pytest.approx((shapes.kernels(DS) + shapes.STEP_KERNELS) * 1e-6 / 2)


def test_an_all_reduce_across_domains_takes_nccls_latency():
    """Inside a domain: the chip's link latency. Over two 8-GPU domains NCCL's LL cost model
    by hand: tree 6.8 + 2 (7 x 0.6 + 1 x 5.0) = 25.2 us; ring (its NVLink steps floored at
    1.0 us across nodes) 6.6 + 2 (16 - 2) x 1.0 + 2 x 2.7 = 40.0 us; the tree wins. At 64
    over 8 domains: tree 6.8 + 2 (4.2 + 15)."""
    from scoville.explore.parallel import allreduce_latency
    h100 = CHIPS["h100"]
    assert allreduce_latency(h100, 8) == pytest.approx(h100.link_latency_us * 1e-6)
    assert allreduce_latency(h100, 16) == pytest.approx(25.2e-6)
    assert allreduce_latency(h100, 64) == pytest.approx((6.8 + 2 * (4.2 + 15.0)) * 1e-6)
    # Two domains of 2: ring 6.6 + 2 x 2 x 1.0 + 2 x 2.7 = 16.0 beats tree 6.8 + 2 x 5.6.
    small = dataclasses.replace(h100, domain=2)
    assert allreduce_latency(small, 4) == pytest.approx(16.0e-6)


def test_an_all_to_all_across_domains_sends_to_its_own_domain_over_the_links():
    """ep16 over two 8-GPU domains: 7 of a chip's 15 peers are in its domain (NVLink), 8 are
    not (the NIC); both at once, so the NIC's share sets the time. Each of the two phases
    pays the chip's in-domain all-to-all latency and one network step (two domains). With
    its measured kernels the domain's share goes at DeepEP's measured rates (dispatch in FP8,
    combine in BF16), each phase after its measured floor."""
    from scoville.explore import kernels
    from scoville.explore.parallel import a2a_latency, comm
    h100 = dataclasses.replace(CHIPS["h100"], kernels="")
    assert a2a_latency(h100, 8) == pytest.approx(h100.a2a_latency_us * 1e-6)
    assert a2a_latency(h100, 16) == pytest.approx((h100.a2a_latency_us + 5.0) * 1e-6)
    assert a2a_latency(h100, 64) == pytest.approx((h100.a2a_latency_us + 15.0) * 1e-6)
    tokens = 16 * 128
    t, link = comm(h100, DS, Parallelism("ep", 16), tokens)
    per = 15 / 16 * 128 * DS.top_k * DS.hidden * 3
    moe = DS.layers - DS.dense_layers
    assert link == pytest.approx(moe * per)
    slowest = max(per * 7 / 15 / (h100.link_gb_s * 1e9),
                  per * 8 / 15 / (h100.scaleout_gb_s * 1e9))
    assert t == pytest.approx(moe * (slowest + 2 * (h100.a2a_latency_us + 5.0) * 1e-6))
    # Inside one domain every peer is over the links.
    t8, _ = comm(h100, DS, Parallelism("ep", 8), tokens)
    per8 = 7 / 8 * tokens / 8 * DS.top_k * DS.hidden * 3
    assert t8 == pytest.approx(moe * (per8 / (h100.link_gb_s * 1e9)
                                      + 2 * h100.a2a_latency_us * 1e-6))
    # Measured: inside one domain, dispatch's and combine's floors and rates.
    measured = CHIPS["h100"]
    d, c = kernels.params("h100", "a2a", "fp8"), kernels.params("h100", "a2a", "bf16")
    mine = tokens / 8 * DS.top_k * DS.hidden        # all of a rank's vectors, as DeepEP's
    bw = measured.link_gb_s * 1e9
    want = mine / (bw * d.bandwidth) + 2 * mine / (bw * c.bandwidth) \
        + (d.floor_us + c.floor_us) * 1e-6
    assert comm(measured, DS, Parallelism("ep", 8), tokens)[0] == pytest.approx(moe * want)
    # Tensor-parallel: two of TensorRT-LLM's measured all-reduces a layer.
    ar = kernels.params("h100", "allreduce", "bf16")
    message = 64 * DS.hidden * 2
    one_shot = 7 * message / (bw * ar.bandwidth)
    assert comm(measured, DS, Parallelism("tp", 8), 64)[0] == pytest.approx(
        DS.layers * 2 * (ar.floor_us * 1e-6 + one_shot))


def test_a_gpu_draws_idle_power_plus_its_busy_units_shares():
    """Power from utilisation, by hand: an H100 idles at 75 W (measured); a phase of one
    second whose compute units are busy half of it and memory a quarter draws 75 + (0.5
    compute + 0.25 memory) x (700 - 75) W; one that keeps both busy all along would pass the
    700 W limit, so it is slowed until it draws exactly 700 W."""
    from scoville.explore.parallel import Phase
    from scoville.explore.specs import GPU_POWER
    h100 = CHIPS["h100"]
    e = h100.energy
    assert e.static_w == 75.0
    assert e.compute_w == pytest.approx(GPU_POWER["compute"] * 625)
    assert e.memory_w == pytest.approx(GPU_POWER["memory"] * 625)
    assert CHIPS["gb200"].energy.static_w == pytest.approx(194 / 1000 * 1200)
    seconds, watts = perf._powered(h100, DS, Phase(1.0, 0, 0, 0, 0, 0.0, 0.5, 0.25))
    assert seconds == 1.0
    assert watts == pytest.approx(75 + 0.5 * e.compute_w + 0.25 * e.memory_w)
    busy = Phase(1.0, 0, 0, 0, 0, 0.0, 1.0, 1.0)
    dynamic = e.compute_w + e.memory_w
    assert dynamic > 625                                  # both fractions together pass it
    seconds, watts = perf._powered(h100, DS, busy)
    assert seconds == pytest.approx(dynamic / 625) and watts == pytest.approx(700)


def test_the_roofline_counts_the_seconds_its_units_are_busy():
    """Compute and memory busy times are each operation's time at the achievable rate:
    halving compute_eff (and attention_eff) doubles the compute seconds and leaves the
    memory's; doubling bw_eff halves the memory seconds. Neither is longer than the phase."""
    chip = _factored("b200")
    par = Parallelism("tp", 8)
    base = perf._roofline(chip, DS, par, 256, 2048, 200, 256)
    assert 0 < base.compute_s <= base.seconds and 0 < base.memory_s <= base.seconds
    slow = perf._roofline(dataclasses.replace(chip, compute_eff=chip.compute_eff / 2,
                                              attention_eff=chip.attention_eff / 2),
                          DS, par, 256, 2048, 200, 256)
    assert slow.compute_s == pytest.approx(2 * base.compute_s)
    assert slow.memory_s == pytest.approx(base.memory_s)
    wide = perf._roofline(dataclasses.replace(chip, bw_eff=min(1.0, 2 * chip.bw_eff)),
                          DS, par, 256, 2048, 200, 256)
    assert wide.memory_s == pytest.approx(base.memory_s * chip.bw_eff
                                          / min(1.0, 2 * chip.bw_eff))
    # MTP's draft pass adds its busy times as it does its seconds.
    draft = perf.step(chip, perf._mtp_module(DS), par, 16, 2048)
    mtp = perf.step(chip, DS, par, 16, 2048, serving=perf.Serving(mtp=1))
    main = perf._roofline(chip, DS, par, 32, 2048, shapes.touched(DS, 32), 16)
    assert mtp.compute_s == pytest.approx(main.compute_s + draft.compute_s)
    assert mtp.seconds == pytest.approx(main.seconds + draft.seconds)


def test_the_power_doc_is_what_its_script_writes_today(tmp_path):
    """docs/explore-power.md is scripts/explore_power.py's output on today's model, and the
    built-in GPU_POWER is the fit it reports."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "explore-power.md"
    subprocess.run([sys.executable, str(root / "scripts" / "explore_power.py"), "--out",
                    str(out)], check=True, capture_output=True)
    text = out.read_text()
    assert text == (root / "docs" / "explore-power.md").read_text()
    from scoville.explore.specs import GPU_POWER
    assert (f"compute {GPU_POWER['compute']:.2f}, memory\n{GPU_POWER['memory']:.2f} of the "
            "limit less idle") in text


def test_a_prefix_cache_hit_is_not_prefilled():
    """Half of each 8k input in the prefix cache: the prefill computes the other 4k tokens a
    request, so its GEMMs do half the operations of a cold prefill, and its attention is of
    those 4k tokens over 6k each (the 4k cached and half of their own 4k) against 8k tokens
    over 4k; the request's TTFT falls and its decode is unchanged."""
    chip, par = CHIPS["b200"], Parallelism("tp", 8)
    warm = perf.prefill(chip, DS, par, 3, 8192, cached=4096)
    cold = perf.prefill(chip, DS, par, 3, 8192)

    def gemms(phase, tokens, context):
        return phase.flops - shapes.attention_flops(DS, context, absorbed=False) * tokens / 8

    assert gemms(warm, 3 * 4096, 6144) == pytest.approx(gemms(cold, 3 * 8192, 4096) / 2)
    assert warm.seconds < cold.seconds
    cold_point = perf.evaluate(chip, DS, Scenario(8192, 1024), 16, par)
    warm_point = perf.evaluate(chip, DS, Scenario(8192, 1024, prefix_hit=0.5), 16, par)
    assert warm_point["ttft_s"] < cold_point["ttft_s"]
    assert warm_point["decode_step_s"] == cold_point["decode_step_s"]
    with pytest.raises(SpecError, match="prefix_hit"):
        Scenario(1024, 1024, prefix_hit=1.0)


def test_a_ttft_limit_drops_the_points_past_it():
    """The sweep keeps exactly the points whose TTFT is within the limit, disaggregated ones
    included: those grow from every aggregated layout, whatever its own TTFT, since
    disaggregation is what shortens it."""
    chip, m = CHIPS["h200"], MODELS["gpt-oss-120b"]
    every = sweep.run_task(chip, m, Scenario(8192, 1024))["points"]
    limit = sorted(p["ttft_s"] for p in every)[len(every) // 2]
    got = sweep.run_task(chip, m, Scenario(8192, 1024, max_ttft_s=limit))
    assert got["points"] == [p for p in every if p["ttft_s"] <= limit]
    assert 0 < len(got["points"]) < len(every) and got["past_ttft"] > 0
    # DeepSeek-R1 8k/1k on H100 within 2 s: a decode layout far too slow to first token
    # when it also prefills is kept, split from its prefill.
    every = sweep.run_task(CHIPS["h100"], DS, Scenario(8192, 1024))["points"]
    kept = sweep.run_task(CHIPS["h100"], DS, Scenario(8192, 1024, max_ttft_s=2.0))["points"]
    grown = {(p["concurrency"], p["mtp"], p["parallelism"].split("-d1x")[-1]) for p in kept
             if p["disaggregated"]}
    slow = {(p["concurrency"], p["mtp"], p["parallelism"]) for p in every
            if not p["disaggregated"] and p["ttft_s"] > 2.0}
    assert grown & slow
    with pytest.raises(SpecError, match="past the TTFT limit"):
        sweep.check_fits([sweep.run_task(chip, m, Scenario(8192, 1024, max_ttft_s=1e-6))])


def test_the_sweep_sizes_prefill_workers_for_each_load():
    """A disaggregated point of the sweep: one decode worker at its step's rate (concurrency x
    tokens a step / (osl x step)), beside prefill workers of the best prefill layout (most
    requests a second per chip), as many (a fraction) as keep them busy ``load`` of the
    time."""
    chip, m, sc = CHIPS["gb200"], DS, Scenario(1024, 1024)
    full = perf.PREFILL_TOKENS // 1024
    held = [par for par in perf.parallelisms(chip, m)
            if perf.fits(chip, m, par, sc, full, context=1024)]
    layouts = perf.prefill_layouts(chip, m, sc)
    best = layouts[0]
    assert all(perf.prefill_throughput(chip, m, par, sc) / par.chips
               <= perf.prefill_throughput(chip, m, best, sc) / best.chips for par in held)
    assert all(perf._prefill_timing(chip, m, par, sc)(1)[0]
               >= perf._prefill_timing(chip, m, layouts[-1], sc)(1)[0] for par in held)
    dec, mtp = Parallelism("ep", 16), perf.Serving(mtp=1)
    got = perf.disaggregate(chip, m, sc, 256, dec, best, mtp, load=0.5)
    t_step = perf.step(chip, m, dec, 256, 1024 + 512, 2048, mtp).seconds
    rate = 256 * mtp.tokens_per_step / (1024 * t_step)
    workers = rate / (perf.prefill_throughput(chip, m, best, sc) * 0.5)
    assert got["disaggregated"] and got["parallelism"].startswith(f"p{workers:g}x")
    assert got["chips"] == pytest.approx(workers * best.chips + dec.chips)
    idle = chip.energy.static_w
    assert idle < got["power_w"] <= chip.power_w
    # A busier prefill pool: fewer chips for the same decode worker.
    busier = perf.disaggregate(chip, m, sc, 256, dec, best, mtp, load=0.9)
    assert busier["chips"] < got["chips"]
    points = sweep.run_task(chip, MODELS["gpt-oss-120b"], sc)["points"]
    assert any(p["disaggregated"] for p in points)


def test_a_pipelined_prefill_worker_starts_a_batch_every_stage_time():
    """Two stages work on successive batches: a saturated worker completes a batch every
    stage time, about twice as often as one batch takes through both."""
    chip, sc = CHIPS["h100"], Scenario(8192, 1024)
    par = Parallelism("ep", 8, 2)
    full = perf._full_batch(sc)
    latency, stage, _ = perf._prefill_timing(chip, DS, par, sc)(full)
    assert perf.prefill_throughput(chip, DS, par, sc) == pytest.approx(full / stage)
    assert latency == pytest.approx(2 * stage + perf.hop(chip, par, full * 8192, DS.hidden))


def test_the_attribution_groups_cover_every_spec_that_times_a_chip():
    """Every Chip field but its name, kind, description and areas (which only tokens/s per
    mm^2 reads) is in one group, so the coalition of all groups is chip A itself."""
    from scoville.explore.specs import Chip
    grouped = [f for fields in attribute.GROUPS.values() for f in fields]
    assert len(grouped) == len(set(grouped))
    rest = {f.name for f in dataclasses.fields(Chip)} - set(grouped)
    assert rest == {"name", "kind", "description", "area_mm2", "die_mm2"}
    a, b = CHIPS["asic-2026"], CHIPS["b200"]
    whole = attribute._hybrid(a, b, list(attribute.GROUPS))
    assert dataclasses.replace(whole, name=a.name, description=a.description,
                               area_mm2=a.area_mm2, die_mm2=a.die_mm2) == a
