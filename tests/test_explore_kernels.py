"""The exploration's time per operation from measured kernels (scoville.explore.kernels):
each operation's cost worked by hand, the table's lookup and transfer, the table as the fit of
its committed sample, and a decode step built from the operations."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scoville.explore import kernels, perf, shapes
from scoville.explore.parallel import Parallelism
from scoville.explore.specs import CHIPS, MODELS, SpecError

ROOT = Path(__file__).resolve().parent.parent


def test_a_gemms_cost_is_its_multiply_adds_and_its_operands():
    flops, bytes_, n = kernels.cost({"op": "gemm", "fmt": "fp8", "m": "4", "n": "256",
                                     "k": "512"})
    assert (flops, n) == (2 * 4 * 256 * 512, 1)
    assert bytes_ == 4 * 512 + 512 * 256 + 2 * 4 * 256          # A, B in FP8; C in BF16
    _, fp4, _ = kernels.cost({"op": "gemm", "fmt": "fp4", "m": "4", "n": "256", "k": "512"})
    assert fp4 == (4 * 512 + 512 * 256) * 4.5 / 8 + 2 * 4 * 256


def test_a_moe_ranks_cost_is_its_share_of_the_choices_and_the_experts_they_touch():
    """256 experts over 8 ranks, 4 tokens x 8 choices: a rank computes 4 of them and reads
    the 4 experts they land on (balanced); at 1,000 tokens every one of its 32 experts."""
    row = {"op": "moe", "fmt": "fp8", "tokens": "4", "hidden": "7168", "inter": "2048",
           "topk": "8", "experts": "256", "tp": "1", "ep": "8"}
    flops, bytes_, _ = kernels.cost(row)
    assert flops == 6 * 7168 * 2048 * 4
    assert bytes_ == 4 * 3 * 7168 * 2048 + 4 * 7168 * 3
    _, many, _ = kernels.cost(row | {"tokens": "1000"})
    assert many == 32 * 3 * 7168 * 2048 + 1000 * 7168 * 3


def test_mla_decode_reads_the_latent_and_multiplies_it_absorbed():
    row = {"op": "decode_mla", "fmt": "bf16", "kv_fmt": "fp8", "batch": "2",
           "context": "1000", "heads": "16"}
    flops, bytes_, _ = kernels.cost(row)
    assert bytes_ == 2 * 1000 * 576
    assert flops == 2 * 2 * 1000 * 16 * (576 + 512)
    with pytest.raises(ValueError, match="op 'conv'; allowed: gemm, moe"):
        kernels.cost({"op": "conv", "fmt": "bf16"})


def test_the_other_classes_costs_by_hand():
    """GQA decode reads K and V of the KV heads, 4 operations a head, dimension and token;
    prefill half the square of the context; an all-reduce of m BF16 elements moves a ring's
    2 (n - 1) / n of its bytes; an all-to-all's phase sends tokens x topk hidden vectors."""
    gqa = {"op": "decode_gqa", "fmt": "bf16", "kv_fmt": "bf16", "batch": "2",
           "context": "100", "heads": "8", "kv_heads": "1", "head_dim": "64"}
    assert kernels.cost(gqa)[:2] == (4 * 2 * 100 * 8 * 64, 2 * 100 * 1 * 64 * 2 * 2)
    pre = gqa | {"op": "prefill_gqa"}
    assert kernels.cost(pre)[0] == 4 * 2 * 8 * 64 * 100 * 100 / 2
    mla = {"op": "prefill_mla", "fmt": "bf16", "kv_fmt": "fp8", "batch": "1",
           "context": "10", "heads": "4"}
    assert kernels.cost(mla)[0] == 2 * 4 * 10 * 10 / 2 * (192 + 128)
    ar = {"op": "allreduce", "fmt": "bf16", "m": "1000", "n": "8"}
    assert kernels.cost(ar)[:2] == (0.0, 2 * 7 / 8 * 1000 * 2)
    a2a = {"op": "a2a", "fmt": "fp8", "tokens": "16", "topk": "8", "hidden": "7168"}
    assert kernels.cost(a2a)[:2] == (0.0, 16 * 8 * 7168)
    assert kernels.cost(a2a | {"fmt": "bf16"})[1] == 2 * 16 * 8 * 7168


def _rows(chip, op, fmt, **where):
    import csv
    import gzip
    import io
    with gzip.open(ROOT / "scoville" / "explore" / "data" / "kernels.csv.gz", "rt") as f:
        rows = list(csv.DictReader(io.StringIO(f.read())))
    return [r for r in rows if (r["chip"], r["op"], r["fmt"]) == (chip, op, fmt)
            and all(r[k] == str(v) for k, v in where.items())]


@pytest.mark.parametrize("tokens", [1, 64, 1024])
def test_a_tensor_parallel_layers_all_reduce_takes_what_it_measured(tokens):
    """The exploration's all-reduce of a tp8 H100 stage (parallel.comm: two a layer) against
    the measured all-reduce of the message nearest its tokens' hidden vectors over 8 GPUs,
    scaled to the same bytes: within 25% (one shot at a few tokens, two shots at many)."""
    from scoville.explore.parallel import comm
    ds = MODELS["deepseek-r1"]
    want = tokens * ds.hidden
    row = min(_rows("h100", "allreduce", "bf16", n=8), key=lambda r: abs(int(r["m"]) - want))
    got = comm(CHIPS["h100"], ds, Parallelism("tp", 8), int(row["m"]) / ds.hidden)[0]
    assert got / (2 * ds.layers) == pytest.approx(float(row["us"]) * 1e-6, rel=0.25)


def test_an_expert_parallel_layers_all_to_all_takes_what_it_measured():
    """An ep8 H100 stage's dispatch and combine of 128 tokens a rank against DeepEP's
    measured phases at 128 tokens: within 10% (the fit's error there)."""
    from scoville.explore.parallel import comm
    ds = MODELS["deepseek-r1"]
    measured = sum(float(_rows("h100", "a2a", f, tokens=128)[0]["us"])
                   for f in ("fp8", "bf16")) * 1e-6
    got = comm(CHIPS["h100"], ds, Parallelism("ep", 8), 8 * 128)[0] / (ds.layers
                                                                     - ds.dense_layers)
    assert got == pytest.approx(measured, rel=0.10)


def test_an_operation_takes_its_floors_and_the_longer_of_compute_and_memory():
    chip = CHIPS["b200"]
    p = kernels.OpParams(compute=0.5, bandwidth=0.8, floor_us=10.0)
    flops, bytes_ = 1e12, 4e9
    c, m = flops / (4500e12 * 0.5), bytes_ / (8e12 * 0.8)
    assert kernels.busy(chip, "gemm", "fp8", p, flops, bytes_) == pytest.approx((c, m))
    assert kernels.seconds(chip, "gemm", "fp8", p, flops, bytes_, 3) == pytest.approx(
        30e-6 + max(c, m))
    # Attention's products run in BF16 whatever the model's format.
    assert kernels.busy(chip, "decode_mla", "fp8", p, flops, 0)[0] == pytest.approx(
        flops / (2250e12 * 0.5))


def test_a_small_gemm_is_padded_to_its_tiles():
    """A GEMM's or a MoE's operations count as if its rows and columns were ``pad_m`` and
    ``pad_n`` larger: a GEMM of 16 rows with pad_m 48 computes 4x its operations, one of 64
    columns with pad_n 64 twice; a large one nearly its own."""
    chip = CHIPS["b200"]
    p = kernels.OpParams(compute=0.5, bandwidth=0.8, floor_us=10.0, pad_m=48.0, pad_n=64.0)
    flops = 1e12
    plain = flops / (4500e12 * 0.5)
    assert kernels.busy(chip, "gemm", "fp8", p, flops, 0, (16, 1e12))[0] == pytest.approx(
        4 * plain)
    assert kernels.busy(chip, "gemm", "fp8", p, flops, 0, (1e12, 64))[0] == pytest.approx(
        2 * plain)
    assert kernels.busy(chip, "gemm", "fp8", p, flops, 0, (16, 64))[0] == pytest.approx(
        8 * plain)
    assert kernels.busy(chip, "gemm", "fp8", p, flops, 0)[0] == pytest.approx(plain)
    # A table's rows: a GEMM's m and n; a MoE's tokens a touched expert on a rank (8 tokens
    # x top-2 over 4 ranks: 4 choices a rank on its 2 experts) and its width over tp.
    assert kernels.shape({"op": "gemm", "m": "16", "n": "512"}) == (16, 512)
    moe = {"op": "moe", "tokens": "8", "topk": "2", "experts": "8", "ep": "4",
           "inter": "2048", "tp": "2"}
    assert kernels.shape(moe) == (2, 1024)
    # Fewer choices than experts: each choice its own expert.
    assert kernels.shape(moe | {"tokens": "1"}) == (1, 1024)
    assert kernels.shape({"op": "decode_mla"}) is None


def test_the_gemms_outside_the_experts_are_the_models_dense_weights():
    """shapes.dense_gemms lists every matrix outside the routed experts once: their
    parameters add up to the model's attention, shared, router, dense and head weights; the
    columns a chip's GEMMs weigh in split with the column-parallel matrices only."""
    for m in MODELS.values():
        b = shapes.model_bytes(m)
        params = (b["attention"] + b["shared"] + b["dense"] + b["head"]) / \
            shapes.bytes_per_param(m.weight_fmt)
        assert sum(n * k * c for n, k, c, _ in shapes.dense_gemms(m)) == params
    gpt = MODELS["gpt-oss-120b"]
    a, H = gpt.attention, gpt.hidden
    qkv = (a.q_heads + 2 * a.kv_heads) * a.head_dim
    assert shapes.dense_gemms(gpt) == [(qkv, H, gpt.layers, "n"),
                                       (H, a.q_heads * a.head_dim, gpt.layers, "k"),
                                       (gpt.experts, H, gpt.layers, "-"),
                                       (gpt.vocab, H, 1, "n")]
    rows = (H + a.q_heads * a.head_dim + H) * gpt.layers + H
    # At tp8: QKV and the head split their columns, O its rows, the router whole on every
    # chip (replicated, as the engines hold it).
    ops8 = ((qkv / 8) * H + H * a.q_heads * a.head_dim / 8 + gpt.experts * H) * gpt.layers \
        + gpt.vocab / 8 * H
    rows8 = (H + a.q_heads * a.head_dim / 8 + H) * gpt.layers + H
    assert shapes.dense_params_per_chip(gpt, 8) == pytest.approx(ops8)
    assert shapes.gemm_columns(gpt, 8) == pytest.approx(ops8 / rows8)
    assert shapes.gemm_columns(gpt, 1) == pytest.approx(
        sum(n * k * c for n, k, c, _ in shapes.dense_gemms(gpt)) / rows)


def test_replicated_matrices_are_whole_on_every_tensor_parallel_chip():
    """DeepSeek-R1 at tp8: each chip holds and multiplies an eighth of the split matrices
    and the whole of MLA's down-projections and the routers (SGLang's and TensorRT-LLM's
    replicated layers); with data-parallel attention every chip holds them all. The weights
    a decode step reads are those, and its GEMMs' operations those times the tokens."""
    ds = MODELS["deepseek-r1"]
    a, H = ds.attention, ds.hidden
    moe_layers = ds.layers - ds.dense_layers
    replicated = (H * a.q_lora_rank + H * (a.kv_lora_rank + a.qk_rope)) * ds.layers \
        + ds.experts * H * moe_layers
    total = sum(n * k * c for n, k, c, _ in shapes.dense_gemms(ds))
    assert shapes.dense_params_per_chip(ds, 8) == pytest.approx(
        (total - replicated) / 8 + replicated)
    assert shapes.dense_params_per_chip(ds, 1) == total
    wb = shapes.bytes_per_param(ds.weight_fmt)
    b = shapes.model_bytes(ds)
    experts = b["expert"] * moe_layers * 8
    tp = perf._weights_per_chip(ds, Parallelism("tp", 8), 8)
    assert tp == pytest.approx(shapes.dense_params_per_chip(ds, 8) * wb + experts / 8)
    dp = perf._weights_per_chip(ds, Parallelism("ep", 8), 8)
    assert dp == pytest.approx(total * wb + experts / 8)
    step = perf._roofline(CHIPS["h200"], ds, Parallelism("tp", 8), 4, 1024, 8, 4)
    dense = 2 * shapes.dense_params_per_chip(ds, 8) * 4
    expert = 2 * moe_layers * ds.top_k * b["expert"] / shapes.bytes_per_param(
        ds.expert_fmt) * 4 / 8
    attention = shapes.attention_flops(ds, 1024) * 4 / 8
    assert step.flops == pytest.approx(dense + expert + attention)


def test_a_chip_takes_the_geometric_mean_of_the_gpus_it_names():
    a, b = kernels.params("h100", "gemm", "fp8"), kernels.params("h200", "gemm", "fp8")
    both = kernels.params("h100,h200", "gemm", "fp8")
    assert both.compute == pytest.approx((a.compute * b.compute) ** 0.5)
    assert both.floor_us == pytest.approx((a.floor_us * b.floor_us) ** 0.5)
    # Held out, a GPU takes the other GPUs of its architecture's numbers, none of its own.
    assert kernels.transfer("h100") == "h200"
    assert kernels.transfer("gb300") == "b200,gb200"
    assert kernels.params(kernels.transfer("h100"), "gemm", "fp8") == b
    # Hopper has no FP4: its FP4 operations take its FP8 numbers.
    assert kernels.params("h100", "gemm", "fp4") == a
    with pytest.raises(ValueError, match="unknown: mi300x; known: b200, gb200"):
        kernels.params("mi300x", "gemm", "fp8")
    with pytest.raises(ValueError, match="'asic' is in no family"):
        kernels.transfer("asic")


def test_a_chip_may_name_only_gpus_with_measured_kernels():
    with pytest.raises(SpecError, match="field 'kernels' names mi300x; allowed: GPUs with "
                                        "measured kernels, comma-separated, b200, gb200, "
                                        "gb300, h100, h200"):
        dataclasses.replace(CHIPS["b200"], kernels="mi300x")
    assert CHIPS["h200"].kernels == "h200" and CHIPS["asic-2026"].kernels == "gb200"


def test_the_table_is_the_fit_of_its_committed_sample(tmp_path):
    """scripts/explore_kernels.py refits every (GPU, operation, format) from
    scoville/explore/data/kernels.csv.gz: the numbers the exploration reads and the doc are
    what it writes today."""
    table, doc = tmp_path / "kernels.json", tmp_path / "explore-kernels.md"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "explore_kernels.py"), "--table",
                    str(table), "--out", str(doc)], check=True, capture_output=True)
    assert json.loads(table.read_text()) == json.loads(kernels.TABLE_FILE.read_text())
    assert doc.read_text() == (ROOT / "docs" / "explore-kernels.md").read_text()


def test_a_decode_step_is_the_sum_of_its_operations():
    """GPT-OSS-120B on one H200, batch 4: the GEMMs outside the experts (2 a layer and the
    router, the head; BF16 weights, so BF16 GEMMs), the routed experts (one MoE operation a
    layer: MXFP4 weights under FP8 activations run on Hopper as W4A16), attention (one a
    layer) and the small kernels, each floor at the chip's share; no communication."""
    chip, m, par = CHIPS["h200"], MODELS["gpt-oss-120b"], Parallelism("tp", 1)
    tokens, context = 4, 1536
    b = shapes.model_bytes(m)
    touched = shapes.touched(m, tokens)
    moe_layers = m.layers - m.dense_layers
    dense_params = (b["attention"] + b["shared"] + b["dense"] + b["head"]) / \
        shapes.bytes_per_param(m.weight_fmt)
    expert_bytes = b["expert"] * moe_layers * touched
    # The GEMMs' shapes: the batch's rows, and the columns of one chip's matrices as their
    # operations weigh them; each touched expert's rows, an expert's whole width (tp1).
    columns = sum(n * k * c for n, k, c, _ in shapes.dense_gemms(m)) / sum(
        k * c for _, k, c, _ in shapes.dense_gemms(m))
    ops = [("gemm", "bf16", 2 * dense_params * tokens,
            b["attention"] + b["shared"] + b["dense"] + b["head"], (tokens, columns),
            3 * m.layers + 1),
           ("moe", "w4a16", 2 * moe_layers * m.top_k * b["expert"]
            / shapes.bytes_per_param(m.expert_fmt) * tokens, expert_bytes,
            (tokens * m.top_k / touched, m.moe_intermediate), moe_layers),
           ("decode_gqa", "bf16", shapes.attention_flops(m, context) * tokens,
            tokens * shapes.kv_bytes(m, context), None, m.layers)]
    want = 0.0
    for op, fmt, flops, bytes_, shape, n in ops:
        p = kernels.params("h200", op, fmt)
        want += n * p.floor_us * 1e-6 * chip.floor_share + max(
            kernels.busy(chip, op, fmt, p, flops, bytes_, shape))
    small = shapes.kernels(m) + shapes.STEP_KERNELS - (3 * m.layers + 1) - m.layers \
        - perf.MOE_OP_KERNELS * moe_layers
    assert small == 3 * m.layers + shapes.STEP_KERNELS - 1     # 2 norms and RoPE a layer
    want += small * kernels.params("h200", "gemm", "bf16").floor_us * 1e-6 * chip.floor_share
    got = perf._roofline(chip, m, par, tokens, context, touched, tokens)
    assert got.seconds == pytest.approx(want)
    assert perf._moe_format(chip, m) == "w4a16"
    assert perf._moe_format(CHIPS["b200"], m) == "w4a8"
    assert perf._moe_format(chip, MODELS["deepseek-r1"]) == "fp8"
    assert perf._moe_format(CHIPS["b200"], MODELS["kimi-k2"]) == "w4a16"      # INT4
    # A held-out H200 (H100's numbers) is timed otherwise.
    other = dataclasses.replace(chip, kernels=kernels.transfer("h200"))
    held = perf._roofline(other, m, par, tokens, context, touched, tokens).seconds
    assert abs(held / want - 1) > 0.01


def test_a_prefill_attention_costs_what_its_measured_class_counts():
    """A prefill's attention on a GPU is timed as the measured class times a table row of the
    same shape: DeepSeek-R1's 16 sequences of 1,024 tokens on one B200 stage of tp8 (16 of
    128 heads a chip), its operations and its Q, K, V and output bytes."""
    ds, chip, par = MODELS["deepseek-r1"], CHIPS["b200"], Parallelism("tp", 8)
    row = {"op": "prefill_mla", "fmt": "bf16", "kv_fmt": "fp8", "batch": "16",
           "context": "1024", "heads": "16"}
    flops, bytes_, _ = kernels.cost(row)
    p = kernels.params("b200", "prefill_mla", "bf16")
    per_layer = max(kernels.busy(chip, "prefill_mla", "bf16", p, flops, bytes_))
    # The model's per-layer attention, from its operations and bytes per chip: the same.
    tokens = 16 * 1024
    model_flops = shapes.attention_flops(ds, 512, absorbed=False) * tokens / par.chips
    model_bytes = shapes.attention_io_bytes(ds, tokens) / par.width
    got = max(kernels.busy(chip, "prefill_mla", "bf16", p, model_flops, model_bytes))
    assert got / ds.layers == pytest.approx(per_layer, rel=0.02)


def test_a_width_that_does_not_divide_the_experts_holds_redundant_copies():
    """Expert parallelism over 48 chips of DeepSeek-R1's 256 experts: each chip holds the
    busiest's 6 (288 slots, 32 copies), as EPLB's redundant experts fill them."""
    ds = MODELS["deepseek-r1"]
    b = shapes.model_bytes(ds)
    rest = b["attention"] + b["shared"] + b["dense"] + b["head"]
    moe = ds.layers - ds.dense_layers
    for width, slots in ((48, 6), (64, 4)):
        held = perf._weights_per_chip(ds, Parallelism("ep", width), None)
        assert held == pytest.approx((rest * width + b["expert"] * moe * slots * width)
                                     / width)


def test_an_mtp_module_of_a_windowed_model_is_one_layer():
    """A windowed model with an MTP module: its draft pass is one layer, windowed or not, and
    the model still checks (GPT-OSS's 18 sliding layers do not outlive the one)."""
    gpt = dataclasses.replace(MODELS["gpt-oss-120b"], mtp_modules=1)
    draft = perf._mtp_module(gpt)
    assert draft.layers == 1 and draft.attention.window_layers == 1
    chip, par = CHIPS["b200"], Parallelism("tp", 1)
    two = perf.step(chip, gpt, par, 4, 1536, serving=perf.Serving(mtp=1))
    assert two.seconds > perf.step(chip, gpt, par, 4, 1536).seconds


def test_each_micro_batch_runs_its_own_draft_passes():
    """With pp stages a step holds pp micro-batches, each verifying 1 + mtp tokens after its
    own mtp draft passes: a stage's share of a step is its main pass plus mtp draft passes
    (the pipelined step pays pp x mtp of them)."""
    ds, chip = MODELS["deepseek-r1"], CHIPS["h200"]
    for pp in (1, 2, 4):
        par = Parallelism("tp", 8, pp)
        plain = perf.step(chip, ds, par, 16, 1536)
        two = perf.step(chip, ds, par, 16, 1536, serving=perf.Serving(mtp=2))
        draft = perf.step(chip, perf._mtp_module(ds), Parallelism("tp", 8), 16, 1536)
        main = perf._roofline(chip, ds, par, 48, 1536, shapes.touched(ds, 48), 16)
        assert two.seconds == pytest.approx(main.seconds + 2 * draft.seconds)
        assert plain.seconds < main.seconds
