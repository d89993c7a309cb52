"""The exploration model (``scoville.explore``): its specs and their errors, the model
sizes against the public figures, the physical bound on decode, the blocks chip's times from
the blocks' own models, the Pareto frontier, the JSON, and the Dask path."""

import dataclasses
import io
import json
import math
import shutil
import subprocess
import sys
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from scoville.cli import main
from scoville.explore import blocks, perf, shapes, sweep
from scoville.explore.bands import BANDS
from scoville.explore.die import die_mm2, die_parts
from scoville.explore.specs import (
    CHIPS,
    MODELS,
    SCENARIOS,
    SYNTH,
    Scenario,
    SpecError,
    load_chip,
    load_model,
)
from scoville.rtl.decoder import DecoderConfig, Op
from scoville.rtl.gemm import GemmConfig
from scoville.rtl.lib.params import build_config
from scoville.sim.cycles import decoder as decoder_timed
from scoville.sim.cycles import gemm as gemm_timed
from scoville.sim.cycles import moe as moe_timed
from scoville.synth.yosys import NODES


def test_model_sizes_match_the_public_figures():
    """../shared/MODELS.md: GPT-OSS-120B 116.8B parameters (65 GB with MXFP4 experts),
    about 5.0 GB active a token and 72 KiB of BF16 KV cache a token; DeepSeek-R1 671B
    parameters, about 36.6 GB active in FP8 and 70,272 B of KV a token in BF16 (half in
    FP8)."""
    gpt, ds = MODELS["gpt-oss-120b"], MODELS["deepseek-r1"]

    def active(m):
        b = shapes.model_bytes(m)
        return (b["attention"] + b["shared"] + b["dense"] + b["head"]
                + (m.layers - m.dense_layers) * m.top_k * b["expert"])

    assert abs(active(gpt) / 5.0e9 - 1) < 0.02
    assert shapes.kv_bytes(gpt, 100) / 100 == 72 * 1024
    assert abs(active(ds) / 36.6e9 - 1) < 0.02
    assert shapes.kv_bytes(ds, 10) / 10 == 70272 / 2 / 1
    assert abs(sum(v for k, v in shapes.model_bytes(ds).items() if k != "expert") / 671e9
               - 1) < 0.01
    # The windowed layers stop growing at 128 tokens.
    assert shapes.kv_bytes(gpt, 10_000) == 2 * 8 * 64 * 2 * (18 * 10_000 + 18 * 128)


def test_touched_experts_follow_the_formula():
    m = MODELS["gpt-oss-120b"]
    assert shapes.touched(m, 1) == pytest.approx(4)
    assert shapes.touched(m, 64) == pytest.approx(128 * (1 - (1 - 4 / 128) ** 64))


@pytest.mark.parametrize("chip", ["h100", "b200", "gb200", "asic-2026", "scoville-a64"])
@pytest.mark.parametrize("model", list(MODELS))
def test_no_decode_point_beats_bandwidth_over_active_bytes(chip, model):
    """Every point: tokens/s per user at most HBM bandwidth over the weight bytes a token
    activates on each chip (batch one, no KV cache, pipeline stages in turn), times the
    tokens a step gains with MTP (the sweep's servings)."""
    c, m = CHIPS[chip], MODELS[model]
    sc = Scenario(1024, 1024, (1, 8, 64))
    seen = 0
    for par in perf.parallelisms(c, m):
        for serving in perf.servings(m):
            for conc in sc.concurrency:
                p = perf.evaluate(c, m, sc, conc, par, serving)
                if p:
                    seen += 1
                    assert p["tok_s_user"] <= (perf.decode_bound(c, m, par)
                                               * serving.tokens_per_step * (1 + 1e-9)), p
    assert seen


@pytest.mark.parametrize("rows,cols", [(32, 32), (64, 64), (16, 64)])
def test_a_blocks_chip_takes_its_gemm_times_from_the_gemm_model(rows, cols):
    """With HBM fast enough, a GEMM's time on the blocks chip is exactly the gemm block's
    command cycles (one core's share of the columns) and the memory's latency to its first
    weights, over the clock: changing the array changes it as the gemm model says."""
    chip = dataclasses.replace(CHIPS["scoville-a64"], array_rows=rows, array_cols=cols)
    seconds, flops, weight = blocks._gemm_time(chip, 100, 2880, 5120, 1, "bf16", 2, 1e30)
    want = gemm_timed.command_cycles(build_config(GemmConfig, {"rows": rows, "cols": cols,
                                                              "fmt": "mxfp4"}),
                                     100, 2880, math.ceil(5120 / 2 / chip.cores))
    assert seconds == pytest.approx((want + blocks.MEM_LATENCY) / (chip.clock_ghz * 1e9))
    assert flops == 2 * 100 * 2880 * 5120 / 2 and weight == 2880 * 5120 / 2 * 2


def test_a_blocks_chip_streams_weights_at_its_fetch_paths_rate():
    """The GEMMs' weights stream at every core's whole bytes a cycle (20 of B200's 20.8 at
    1.5 GHz over 256 cores) at the utilization the MoE block's weight path reaches from one
    expert to the next (its cycle model): a little below the HBM's peak, and a memory-bound
    GEMM takes its weight bytes at that rate."""
    chip = CHIPS["scoville-a64"]
    m = MODELS["gpt-oss-120b"]
    rate = blocks.weight_rate(chip, m)
    port = chip.cores * 20 * chip.clock_ghz * 1e9
    assert 0.95 * port < rate <= port < chip.hbm_tb_s * 1e12
    seconds, _, weight = blocks._gemm_time(chip, 1, 2880, 5120, 1, "bf16", 1, rate)
    assert seconds == pytest.approx(weight / rate + blocks.MEM_LATENCY / 1.5e9)


def test_a_blocks_chip_takes_its_moe_times_from_the_moe_fast_path():
    """One core's experts: the MoE block's fast path for the same experts and tokens."""
    args = (32, 64, 2880, 2880, 128, 4, 20, 3)
    cfg = blocks._moe_config(*args[:7])
    for count in (1, 2, 5):
        want = moe_timed.layer(cfg, 3, [(e, 3) for e in range(count)], blocks.MEM_LATENCY,
                               20)["cycles"]
        assert blocks.moe_cycles(*args, count) == pytest.approx(want, abs=count)
    assert cfg.fetch_buffer > 32 and moe_timed.buffer_covers(cfg, blocks.MEM_LATENCY, 20)


CORE_LINES = 2048   # a scoville-a64 core's activation memory


@pytest.mark.parametrize("name,experts,top_k,inter", [("gpt-oss-120b", 128, 4, 2880),
                                                      ("deepseek-r1", 256, 8, 2048)])
def test_the_blocks_chips_router_load_is_the_decoder_engines_router(name, experts, top_k,
                                                                     inter):
    """A MoE layer's ``ROUTER`` on the blocks chip is the decoder engine's fast path of that
    command on an engine with the model's router, its words given a port word a cycle; Kimi
    K2's router, past one fetch command, is the same fetch of its words (about a word a
    cycle after the memory's latency)."""
    m = MODELS[name]
    assert blocks.engine_lines(CHIPS["scoville-a64"]) == CORE_LINES
    cfg = build_config(DecoderConfig, {
        "hidden": m.hidden, "act_lines": CORE_LINES, "moe.hidden": m.hidden,
        "moe.experts": experts,
        "moe.top_k": top_k, "moe.intermediate": inter, "linear.weight_port_bits": 1024,
        "moe.weight_port_bits": 1024, "linear.fetch_buffer": blocks.GLUE_BUFFER,
        "linear.addr_bits": 32, "rope.dim": 64, "glu_lanes": 32})
    want = decoder_timed.fast(cfg, [{"op": Op.ROUTER, "addr": 0}], blocks.MEM_LATENCY, 128)
    got = blocks.glue(m, CORE_LINES, 1, 1, True, False, 1, 0)
    assert got.cycles["ROUTER"] == want["cycles"]
    assert cfg.router_words + blocks.MEM_LATENCY < want["cycles"] < 1.05 * cfg.router_words + 600
    # The norms' weights besides (MLA: the q_a and latent norms' too), 32 FP32 a port word.
    a = m.attention
    extra = (a.q_lora_rank + a.kv_lora_rank) * 32 // 1024 if a.kind == "mla" else 0
    assert got.shared == want["weight_words"] + 2 * cfg.norm_words + extra
    assert "ROUTER" not in blocks.glue(m, CORE_LINES, 1, 1, True, True, 1, 0).cycles
    kimi = MODELS["kimi-k2"]
    assert not blocks._engine(kimi, CORE_LINES).router_fits
    words = (7168 // 32 + 1) * 384
    assert words + 500 < blocks.glue(kimi, CORE_LINES, 1, 1, True, False, 1, 0).cycles["ROUTER"] \
        < 1.05 * words + 600


def test_the_blocks_chips_glue_is_the_decoder_engines_commands():
    """Between the blocks a core runs the decoder engine's commands on its tokens: two norms
    and two residual adds a layer (MLA: the q_a and latent norms too); in decode a rotation
    command a sequence (with MTP, of its 1 + mtp tokens), each paying the memory's latency for
    its table rows, where prefill rotates consecutive positions in one; a residual add is a
    line a cycle; a memory too small for the tokens splits a command, each part fetching its
    weights again."""
    gpt, ds = MODELS["gpt-oss-120b"], MODELS["deepseek-r1"]

    def ops(*args):
        return [(Op(c["op"]).name, c["count"]) for c in blocks._glue_commands(*args)]

    hl = 2880 // 32
    assert ops(gpt, CORE_LINES, 3, 1, True, False, 72, 0) == [
        ("NORM", 3), ("ROPE", 1), ("ROPE", 1), ("ROPE", 1), ("ADD", 3 * hl), ("NORM", 3),
        ("ADD", 3 * hl)]
    # DeepSeek's dense layer, 3 sequences of 2 tokens (MTP): four norms, a rotation of two
    # tokens a sequence, adds of 6 x 224 lines and gated products of 6 x 576 lines in
    # commands of at most 1024 lines (their two ranges in 2048).
    got = Counter(ops(ds, CORE_LINES, 3, 2, True, True, 129, 18432))
    assert got == {("NORM", 6): 4, ("ROPE", 2): 3, ("ADD", 1024): 2, ("ADD", 320): 2,
                   ("GLU", 1024): 3, ("GLU", 384): 1}
    one = blocks.glue(gpt, CORE_LINES, 1, 1, True, False, 72, 0).cycles
    two = blocks.glue(gpt, CORE_LINES, 2, 1, True, False, 72, 0).cycles
    pre = blocks.glue(gpt, CORE_LINES, 2, 1, False, False, 72, 0).cycles
    assert two["ROPE"] - one["ROPE"] > blocks.MEM_LATENCY > pre["ROPE"] - one["ROPE"]
    assert two["ADD"] == 2 * (2 * hl + blocks.HANDOVER)
    # 100 tokens of 90 lines in 2048 lines: norms of 22 tokens, adds of 1024 lines (a and b).
    counts = ops(gpt, CORE_LINES, 100, 1, False, False, 72, 0)
    assert counts.count(("NORM", 22)) == 8 and counts.count(("ADD", 1024)) == 16
    # A token that does not fit the memory is the chip's error, in one line.
    with pytest.raises(SpecError, match="activation memory of 64 lines .* cannot hold one of "
                                        "model gpt-oss-120b's tokens \\(90 lines\\)"):
        blocks.glue(gpt, 64, 1, 1, True, False, 72, 0)
    small = blocks.glue(gpt, 256, 100, 1, False, False, 72, 0).cycles["NORM"]
    assert small > blocks.glue(gpt, CORE_LINES, 100, 1, False, False, 72, 0).cycles["NORM"] + 5000
    # Rotating fewer heads (a tensor-parallel chip's share) takes fewer cycles in prefill.
    assert (blocks.glue(gpt, CORE_LINES, 64, 1, False, False, 9, 0).cycles["ROPE"]
            < blocks.glue(gpt, CORE_LINES, 64, 1, False, False, 72, 0).cycles["ROPE"] / 4)


def test_a_model_the_engine_cannot_run_is_one_line():
    """A TOML model past the decoder engine's widths (hidden above 8192) is a SpecError."""
    big = dataclasses.replace(MODELS["gpt-oss-120b"], name="wide", hidden=12288)
    with pytest.raises(SpecError, match="model wide: a blocks chip's decoder engine cannot "
                                        "run it: parameter 'hidden'"):
        blocks.glue(big, CORE_LINES, 1, 1, True, False, 8, 0)


def test_the_blocks_chip_adds_its_glue_to_each_layer(monkeypatch):
    """A decode step on the blocks chip is its blocks' times plus every layer's glue
    (:func:`blocks.glue_cycles`) over the clock, with a core's share of the sequences (MTP:
    each of 1 + mtp tokens) and the chip's share of the rotated heads; its bytes are the
    glue's too."""
    chip, m = CHIPS["scoville-a64"], MODELS["deepseek-r1"]
    seen = []

    def glue(chip, model, seqs, per_seq, decode, dense, heads, ffn, handovers, busy):
        seen.append((seqs, per_seq, decode, dense, heads, ffn, busy))
        return (1000, 10.0) if dense else (3000, 20.0)

    def phase(par, tokens, kv_reads):
        return blocks.blocks_phase(chip, m, par, tokens, 2048, 60.0, kv_reads, decode=True)

    ep8, tp8 = perf.Parallelism("ep", 8), perf.Parallelism("tp", 8)
    with_glue = phase(ep8, 1024, 512)
    monkeypatch.setattr(blocks, "glue_cycles", glue)
    fake = phase(ep8, 1024, 512)
    phase(tp8, 64, 64)
    monkeypatch.setattr(blocks, "glue_cycles", lambda *a: (0, 0.0))
    bare = phase(ep8, 1024, 512)
    layers = (m.layers - m.dense_layers) * 3000 + m.dense_layers * 1000
    assert fake.seconds - bare.seconds == pytest.approx(layers / (chip.clock_ghz * 1e9))
    read = (m.layers - m.dense_layers) * 20 + m.dense_layers * 10
    assert fake.hbm_bytes - bare.hbm_bytes == pytest.approx(read)
    # ep8: 512 / 8 = 64 sequences a chip, one a core on 64 of the 256 cores, each of two
    # tokens (MTP), all 129 heads and gated products; tp8: 64 sequences on every chip, 16 + 1
    # heads, an eighth of the gated products.
    assert seen[:2] == [(1, 2, True, False, 129, 2048, 64), (1, 2, True, True, 129, 18432, 64)]
    assert seen[2:4] == [(1, 1, True, False, 17, 256, 64), (1, 1, True, True, 17, 2304, 64)]
    assert with_glue.seconds > bare.seconds


def test_the_blocks_chip_with_spread_experts_runs_at_its_busiest_chips_pace(monkeypatch):
    """Experts spread over the chips (ep8): the MoE's cycles are the busiest chip's, as a
    roofline chip's: its touched experts ``shapes.busiest(experts, 8)`` times the mean (a
    batch of 1,024 tokens touches all 256: none more), its tokens an expert its choices' share
    over them (the router's skew: a balanced router's are the mean's to within a token or two);
    sliced experts (tp8) see no skew."""
    chip, m = CHIPS["scoville-a64"], MODELS["deepseek-r1"]
    calls = []
    real = blocks.moe_cycles

    def spy(*args):
        if sys._getframe(1).f_code.co_name == "blocks_phase":
            calls.append(args)
        return real(*args)

    monkeypatch.setattr(blocks, "moe_cycles", spy)
    real_busiest = shapes.busiest

    def tokens_an_expert(model, par, tokens, touched):
        calls.clear()
        blocks.blocks_phase(chip, model, par, tokens, 2048, touched, max(1, tokens // 2),
                            decode=True)
        return calls[0][7]

    ep8, tp8 = perf.Parallelism("ep", 8), perf.Parallelism("tp", 8)
    flat = dataclasses.replace(m, expert_cv=0.0)
    mean = 1024 * m.top_k / m.experts                                   # 32
    balanced, skewed = tokens_an_expert(flat, ep8, 1024, 256), tokens_an_expert(m, ep8, 1024, 256)
    assert mean <= balanced <= mean * shapes.busiest(1024 * m.top_k, 8) + 1
    assert skewed == round(mean * shapes.busiest(1024 * m.top_k, 8, shapes.expert_skew(m, 8)))
    assert tokens_an_expert(m, tp8, 1024, 256) == tokens_an_expert(flat, tp8, 1024, 256) == 32
    # One token's 8 experts: the busiest chip streams ~3 of them, each with the one token, at
    # its cores' weight rate; the bytes (the energy) are the mean chip's.
    one = blocks.blocks_phase(chip, m, ep8, 1, 2048, 8.0, 1, decode=True)
    assert tokens_an_expert(m, ep8, 1, 8.0) == 1
    monkeypatch.setattr(shapes, "busiest", lambda *a: 1.0)
    even = blocks.blocks_phase(chip, m, ep8, 1, 2048, 8.0, 1, decode=True)
    assert one.hbm_bytes == pytest.approx(even.hbm_bytes)
    more = real_busiest(8.0, 8)                                         # 2.9 experts
    assert more > 2.5 and one.seconds > even.seconds


def test_a_prefill_on_the_blocks_chip_spreads_its_glue_over_the_cores(monkeypatch):
    """In prefill every core runs the glue on its share of the chip's tokens (8,192 tokens on
    256 cores: 32 each, all cores busy), and its time is the same layer's glue at those
    tokens as blocks.glue gives it."""
    chip, m = CHIPS["scoville-a64"], MODELS["gpt-oss-120b"]
    seen = []
    real = blocks.glue_cycles

    def spy(*args):
        seen.append(args)
        return real(*args)

    monkeypatch.setattr(blocks, "glue_cycles", spy)
    phase = blocks.blocks_phase(chip, m, perf.Parallelism("tp", 1), 8192, 4096, 128.0, 0,
                                decode=False)
    (_, _, seqs, per_seq, decode, dense, heads, ffn, _, busy), = seen
    assert (seqs, per_seq, decode, dense, heads, ffn, busy) == (32, 1, False, False, 72, 0,
                                                                256)
    g = blocks.glue(m, CORE_LINES, 32, 1, False, False, 72, 0)
    monkeypatch.setattr(blocks, "glue_cycles", lambda *a: (0, 0.0))
    bare = blocks.blocks_phase(chip, m, perf.Parallelism("tp", 1), 8192, 4096, 128.0, 0,
                               decode=False)
    assert phase.seconds - bare.seconds >= m.layers * sum(g.cycles.values()) / 1.5e9
    assert phase.hbm_bytes - bare.hbm_bytes == pytest.approx(
        m.layers * (g.shared + 256 * g.own) * 128)


def test_the_blocks_glue_doc_is_what_its_script_writes_today(tmp_path):
    """docs/explore-blocks.md is scripts/blocks_glue.py's output on today's engine and
    models: a change that moves a cycle shows here until it is regenerated."""
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "explore-blocks.md"
    subprocess.run([sys.executable, str(root / "scripts" / "blocks_glue.py"), "--out",
                    str(out)], check=True, capture_output=True, cwd=root)
    assert out.read_text() == (root / "docs" / "explore-blocks.md").read_text()


def test_the_stored_attention_lines_are_current(monkeypatch):
    """scoville/explore/attention_lines.json was computed with today's timed models (else the
    sweep recomputes every line: regenerate it with scripts/explore_attention_lines.py); a
    sample of its lines are the fast path's; the blocks chip reads them."""
    stored = json.loads(blocks.LINES_FILE.read_text())
    assert stored["digest"] == blocks.timed_digest(), "run scripts/explore_attention_lines.py"
    assert blocks.stored_lines() == stored["lines"]
    gpt, ds = MODELS["gpt-oss-120b"], MODELS["deepseek-r1"]
    sample = [blocks._attention_config(gpt, 8, 0), blocks._attention_config(ds, 16, 0)]
    monkeypatch.setattr(blocks, "LINES", {})
    for cfg in sample:
        assert list(blocks.attention_line(cfg)) == stored["lines"][blocks.line_key(cfg)]
    # The sweep's lines come from the table: a sentinel there comes back.
    cfg = blocks._attention_config(ds, 16, 0)
    monkeypatch.setattr(blocks, "LINES", {blocks.line_key(cfg): [1.0, 2.0]})
    blocks._attention_line.cache_clear()
    try:
        assert blocks._attention_line(ds, 16, 0) == (1.0, 2.0)
    finally:
        blocks._attention_line.cache_clear()


def test_a_bigger_array_makes_the_blocks_chip_faster_in_prefill():
    small = dataclasses.replace(CHIPS["scoville-a64"], array_rows=32, array_cols=32)
    big = CHIPS["scoville-a64"]
    m, par = MODELS["gpt-oss-120b"], perf.Parallelism("tp", 1)
    assert perf.prefill(big, m, par, 8, 1024).seconds < perf.prefill(small, m, par, 8,
                                                                      1024).seconds


def test_the_blocks_chip_takes_its_area_and_energy_from_synthesis():
    """scoville-a64: every PE the MXFP4 engine's logic per PE, the SRAM as macros, the array's
    measured energy per MAC at the synthesis node over two operations; tokens/s per mm^2
    where a chip's area is known, none where it is not."""
    chip, data = CHIPS["scoville-a64"], SYNTH
    pes = chip.cores * chip.array_rows * chip.array_cols
    assert chip.area_mm2 == pytest.approx(pes * data["logic_mm2_per_pe"]["mxfp4"]
                                          + chip.sram_mib * 2**23 * data["sram_mm2_per_bit"])
    assert data["energy_vs_45nm"] == pytest.approx(NODES[data["node"]].energy_vs_45nm)
    measured = data["array_pj_per_mac_45nm"]
    assert "mxfp4" in measured
    for fmt, array_fmt in (("fp4", "mxfp4"), ("fp8", "mxfp8"), ("bf16", "bf16")):
        if array_fmt in measured:
            assert chip.energy.pj_per_flop[fmt] == pytest.approx(
                measured[array_fmt] * data["energy_vs_45nm"] / 2)
        else:
            assert fmt not in chip.energy.pj_per_flop
    m, sc = MODELS["gpt-oss-120b"], Scenario(1024, 1024, (8,))
    for name in ("scoville-a64", "h100", "b200"):
        c = CHIPS[name]
        p = next(p for par in perf.parallelisms(c, m)
                 if (p := perf.evaluate(c, m, sc, 8, par)))
        if c.area_mm2:
            assert p["tok_s_mm2"] == pytest.approx(p["tok_s_chip"] / c.area_mm2)
            # A GPU's area is its die; the blocks chip's die estimate is more than its arrays.
            die = c.die_mm2 if name == "scoville-a64" else c.area_mm2
            assert p["tok_s_mm2_die"] == pytest.approx(p["tok_s_chip"] / die)
        else:
            assert name == "b200" and p["tok_s_mm2"] is None is p["tok_s_mm2_die"]
    # A B200's memory and links: 8 HBM stacks, 18 links.
    a64 = CHIPS["scoville-a64"]
    assert a64.die_mm2 == pytest.approx(die_mm2(a64.area_mm2, node=SYNTH["node"], hbm_stacks=8,
                                                links=18)["total"])
    # A blocks chip without a die estimate (a chip file's) has none in tokens/s per mm^2.
    bare = dataclasses.replace(a64, die_mm2=0.0)
    p = next(p for par in perf.parallelisms(bare, m) if (p := perf.evaluate(bare, m, sc, 8, par)))
    assert p["tok_s_mm2"] and p["tok_s_mm2_die"] is None


def test_the_die_estimate_adds_the_parts_we_do_not_build():
    """A die of 100 mm^2 built, 8 HBM stacks, 18 links, PCIe x16 at n5, by hand: the PHYs at
    their areas, the controllers' transistors at n5's density (171.3 MTr/mm^2 at 70%), the
    network on chip and the rest at the A100's shares of the whole."""
    parts = die_mm2(100.0, node="n5", hbm_stacks=8, links=18, pcie_lanes=16)
    per_mm2 = 171.3e6 * 0.7
    assert parts["hbm"] == pytest.approx(8 * (10.45 + 552_743_000 / per_mm2))
    assert parts["links"] == pytest.approx(18 * (0.965 + 86_628_000 / per_mm2))
    assert parts["host"] == pytest.approx(16 * (0.64 + 5_372_100 / per_mm2))
    built = 100 + parts["hbm"] + parts["links"] + parts["host"]
    assert parts["total"] == pytest.approx(built / (1 - 76.44 / 822.72 - 40 / 822.72))
    assert parts["noc"] == pytest.approx(parts["total"] * 76.44 / 822.72)
    # A chip's stacks and links from its bandwidths: 8 TB/s and 900 GB/s are a B200's.
    assert die_parts(100.0, node="n5", hbm_tb_s=8.0, link_gb_s=900) == parts
    assert die_parts(100.0, node="n5", hbm_tb_s=8.1, link_gb_s=901)["hbm"] == \
        pytest.approx(parts["hbm"] * 9 / 8)


@pytest.mark.skipif(shutil.which("yosys") is None, reason="no yosys")
def test_the_synthesis_data_is_the_commands():
    """scoville/explore/synth.json (scripts/area.py) holds what ``scoville synth`` says now: the
    int8 engine's logic per PE at 8 x 8 (an RTL change that moves it needs the script run
    again)."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["synth", "gemm", "--param", "rows=8", "--param", "cols=8",
                     "--param", "fmt=int8", "--param", "dataflow=os", "--node",
                     SYNTH["node"], "--json"]) == 0
    d = json.loads(out.getvalue())
    assert SYNTH["logic_mm2_per_pe"]["int8"] == pytest.approx(d["logic_mm2"] / 64)


def test_frontier_keeps_the_undominated_points_sorted():
    pts = [{"tok_s_user": u, "tok_s_chip": c, "i": i}
           for i, (u, c) in enumerate([(10, 100), (20, 90), (15, 80), (30, 50), (30, 40),
                                       (5, 100)])]
    f = sweep.frontier(pts)
    assert [p["i"] for p in f] == [0, 1, 3]
    assert sweep.value_at(f, 15) == pytest.approx(95)
    assert sweep.value_at(f, 31) is None and sweep.value_at(f, 9) is None
    assert sweep.iso_ratio(pts, [{"tok_s_user": 12, "tok_s_chip": 50},
                                 {"tok_s_user": 25, "tok_s_chip": 10}], 20) == pytest.approx(
        90 / (50 - 40 * 8 / 13))


def _run(argv) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


def test_json_has_the_points_and_the_sorted_frontier():
    code, text = _run(["explore", "--chip", "b200", "--model", "gpt-oss-120b", "--isl",
                       "1024", "--osl", "1024", "--concurrency", "1", "--concurrency", "64",
                       "--json"])
    assert code == 0
    d = json.loads(text)
    keys = {"concurrency", "chips", "parallelism", "tok_s_user", "tok_s_chip",
            "tok_s_chip_total", "tok_s_kw", "tok_s_mw", "ttft_s", "tpot_s", "power_w",
            "tok_s_chip_lo", "tok_s_chip_hi", "tok_s_kw_lo", "tok_s_kw_hi"}
    assert d["points"] and keys <= set(d["points"][0])
    users = [p["tok_s_user"] for p in d["pareto"]]
    assert users == sorted(users) and set(map(json.dumps, d["pareto"])) <= set(
        map(json.dumps, d["points"]))
    assert {p["concurrency"] for p in d["points"]} == {1, 64}
    for p in d["points"]:
        # TTFT is a batch's prefill, part of the request's life of osl TPOTs.
        assert 0 < p["ttft_s"] < 1024 * p["tpot_s"]
        # The band: the held-out errors' 10th and 90th percentiles around the value.
        for y in ("tok_s_chip", "tok_s_kw"):
            assert p[f"{y}_lo"] < p[y] < p[f"{y}_hi"]
            assert p[f"{y}_hi"] / p[f"{y}_lo"] == pytest.approx(
                json.loads(BANDS.read_text())["high"] / json.loads(BANDS.read_text())["low"])
        assert p["tok_s_chip_total"] == pytest.approx(2 * p["tok_s_chip"])
        assert p["tok_s_user"] == pytest.approx(1 / p["tpot_s"])
        assert p["power_w"] <= CHIPS["b200"].power_w + 1e-6


@pytest.mark.parametrize("argv,text", [
    (["--chip", "nope"], "unknown chip 'nope'"),
    (["--model", "gpt-5"], "unknown model 'gpt-5'"),
    (["--isl", "1024"], "give both --isl and --osl"),
    (["--attribute", "asic-2026"], "give both --attribute CHIP and --against CHIP"),
    (["--attribute", "tpu", "--against", "gb200"], "unknown chip 'tpu'"),
    (["--prefix-hit", "1"], "--prefix-hit 1.0: allowed: 0 <= F < 1"),
    (["--max-ttft", "-1"], "--max-ttft -1.0: allowed: seconds >= 0"),
    (["--attribute", "scoville-a64", "--against", "gb200"], "of different kinds"),
    (["--chip", "h100", "--model", "kimi-k2", "--isl", "8192", "--osl", "1024",
      "--concurrency", "1"], None),
])
def test_bad_input_is_one_line_and_exit_2(argv, text, capsys):
    code = main(["explore", *argv, "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    if text is None:
        # Kimi K2 fits H100s only over several domains: a point exists.
        assert code == 0
        return
    assert code == 2 and len(err) == 1 and text in err[0]


def test_a_model_that_fits_no_parallelism_is_an_error(tmp_path, capsys):
    chip = tmp_path / "tiny.toml"
    chip.write_text(_chip_toml(hbm_gb=1.0))
    code = main(["explore", "--chip", str(chip), "--model", "gpt-oss-120b", "--isl", "1024",
                 "--osl", "1024", "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "does not fit chip tiny" in err[-1]


def _chip_toml(**over) -> str:
    fields = {"name": '"tiny"', "kind": '"roofline"', "clock_ghz": 1.0,
              "hbm_gb": 80.0, "hbm_tb_s": 3.0, "link_gb_s": 100.0, "link_latency_us": 2.0,
              "domain": 1, "power_w": 500.0, "allin_kw": 1.0}
    fields.update(over)
    text = "".join(f"{k} = {v}\n" for k, v in fields.items())
    return (text + "[tflops]\nfp8 = 1000\n[energy]\npj_per_byte_hbm = 30.0\n"
            "pj_per_byte_sram = 0.3\npj_per_byte_link = 10.0\nstatic_w = 100.0\n"
            "[energy.pj_per_flop]\nfp8 = 0.3\n")


@pytest.mark.parametrize("mutate,text", [
    (lambda t: t.replace('name = "tiny"\n', ""), "missing field 'name'"),
    (lambda t: t.replace("hbm_gb = 80.0", 'hbm_gb = "lots"'), "field 'hbm_gb' must be a number"),
    (lambda t: t.replace("domain = 1", "domain = 1.5"), "field 'domain' must be an integer"),
    (lambda t: "colour = 1\n" + t, "unknown field 'colour'"),
    (lambda t: t + "fp2 = 0.1\n", "field 'pj_per_flop' has"),
    (lambda t: t.replace("static_w = 100.0\n", ""), "energy: missing field 'static_w'"),
    (lambda t: t.replace('kind = "roofline"', 'kind = "magic"'), "field 'kind'"),
    (lambda t: t.replace("hbm_tb_s = 3.0", "hbm_tb_s = nan"), "field 'hbm_tb_s' must be a pos"),
    (lambda t: t.replace("static_w = 100.0", "static_w = 600.0"), "'energy.static_w' must be"),
    (lambda t: t.replace("fp8 = 1000", "fp8 = -1"), "field 'tflops' must hold"),
    (lambda t: 'kernels = "b200,mi300x"\n' + t, "field 'kernels' names mi300x; allowed"),
    (lambda t: 'kernels = "b200,"\n' + t, "field 'kernels' names an empty name; allowed"),
    (lambda t: "floor_share = 3.0\n" + t, "field 'floor_share' must be in (0, 2]"),
    (lambda t: 'floor_share = "x"\n' + t, "field 'floor_share' must be a number"),
])
def test_a_bad_chip_file_names_the_field(tmp_path, mutate, text):
    path = tmp_path / "chip.toml"
    path.write_text(mutate(_chip_toml()))
    with pytest.raises(SpecError, match=text.replace("(", r"\(")):
        load_chip(str(path))


def test_a_chip_file_may_take_gpus_measured_kernels(tmp_path):
    """``kernels`` names the GPUs whose measured operations time the chip (spaces allowed);
    its floor share is the GPUs' fitted one unless the file sets its own."""
    from scoville.explore.specs import FLOOR_SHARE
    path = tmp_path / "chip.toml"
    path.write_text('kernels = "b200, gb200"\n' + _chip_toml())
    chip = load_chip(str(path))
    assert chip.kernels == "b200, gb200" and chip.floor_share == FLOOR_SHARE
    path.write_text('kernels = "b200"\nfloor_share = 0.5\n' + _chip_toml())
    assert load_chip(str(path)).floor_share == 0.5


TOY = """name = "toy"
layers = 4
dense_layers = 0
hidden = 1024
vocab = 32000
experts = 8
top_k = 2
shared = 0
moe_intermediate = 512
dense_intermediate = 0
shared_intermediate = 0
expert_fmt = "mxfp4"
weight_fmt = "bf16"
kv_fmt = "bf16"
act_fmt = "fp8"
[attention]
kind = "gqa"
q_heads = 8
kv_heads = 2
head_dim = 128
"""


@pytest.mark.parametrize("mutate,text", [
    (lambda t: t.replace("head_dim = 128\n", ""), "gqa needs 'attention.head_dim'"),
    (lambda t: t.replace("kv_heads = 2", "kv_heads = 3"), "dividing 'attention.q_heads'"),
    (lambda t: t + "window_layers = 9\n", "'attention.window_layers'"),
    (lambda t: t.replace("hidden = 1024", "hidden = 0"), "field 'hidden' must be at least 1"),
])
def test_a_bad_model_file_names_the_field_and_the_file(tmp_path, mutate, text):
    path = tmp_path / "m.toml"
    path.write_text(mutate(TOY))
    with pytest.raises(SpecError, match=f"model file {path}: .*{text}"):
        load_model(str(path))


def test_tensor_parallelism_stops_at_the_query_heads():
    kimi = MODELS["kimi-k2"]
    widths = {p.width for p in perf.parallelisms(CHIPS["asic-2026"], kimi) if p.mode == "tp"}
    assert max(widths) == kimi.attention.q_heads


def test_a_model_file_round_trips(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(TOY)
    m = load_model(str(path))
    assert m.attention.head_dim == 128 and m.experts == 8
    r = sweep.run_task(CHIPS["b200"], m, SCENARIOS[0])
    assert r["points"] and r["pareto"]


def test_dask_gives_the_same_json_as_a_serial_run():
    from dask.distributed import Client, LocalCluster

    from scoville.explore import report

    args = (["b200", "asic-2026"], ["gpt-oss-120b"], [Scenario(1024, 1024, (1, 16, 256))])
    serial = report.as_json(sweep.explore(*args, progress=None))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        remote = report.as_json(sweep.explore(*args, client=client, progress=None))
    assert remote == serial


def test_the_list_names_each_chip_and_the_kernels_that_time_it(capsys):
    assert main(["explore", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in CHIPS) and all(name in out for name in MODELS)
    asic = next(line for line in out.splitlines() if line.strip().startswith("asic-2026"))
    assert asic.endswith("operations timed by gb200's measured kernels")


def test_the_report_shows_the_blocks_chips_die_by_part():
    """Only a blocks chip has a die estimate's table; its row is the estimate's parts, and
    they add up to its total."""
    from scoville.explore import report
    from scoville.explore.specs import blocks_die

    assert report._dies(["b200", "h100"]) == []
    lines = report._dies(["b200", "scoville-a64"])
    row = next(line for line in lines if line.startswith("| scoville-a64 |"))
    cells = [float(c.replace(",", "")) for c in row.strip("| \n").split(" | ")[1:]]
    parts = blocks_die(CHIPS["scoville-a64"])
    assert parts["total"] == CHIPS["scoville-a64"].die_mm2
    assert cells == [round(parts[k]) for k in report.DIE_PARTS]
    assert sum(parts[k] for k in report.DIE_PARTS[:-1]) == pytest.approx(parts["total"])
