"""The performance and energy model of a replica serving a model: time, power and tokens per
second at one concurrency and one parallelism.

**A replica** is ``chips`` chips (``width`` of them per pipeline stage, ``pp`` stages) holding
one copy of the model, serving ``concurrency`` requests, each ``isl`` tokens in and ``osl``
out. Parallelism within a stage:

- ``tp`` (tensor parallel): every layer's matrices split over the ``width`` chips (GQA's KV
  heads too, up to their count; MLA's single latent head is replicated, so each chip reads
  every sequence's latent), experts sliced, two all-reduces of the tokens' hidden vectors a
  layer;
- ``ep`` (expert parallel): experts spread over the chips, attention, dense layers, shared
  experts and the head data-parallel (each chip serves ``concurrency / width`` sequences with
  a full copy of those weights), two all-to-alls a MoE layer (tokens out in FP8, back in BF16).

``pp`` stages split the layers; the requests are split into ``pp`` micro-batches, so a stage
works on one while the others work on the rest: a decode step takes ``pp`` stage times of a
micro-batch plus the hops between stages.

**Time of a layer** (one stage, one step), overlap rules: on a ``roofline`` chip, compute and
memory traffic overlap fully, ``max(flops / (peak compute_eff), bytes / (HBM bw_eff))``, then
communication (not overlapped) and the fixed ``layer_us``. On a ``blocks`` chip the layer's
blocks run one after another on the cores: the GEMMs of the attention projections, shared
experts, dense FFNs and head (:func:`scoville.sim.cycles.gemm.command_cycles` on one core's
array, the columns spread over the cores, never faster than their weights stream from HBM),
attention (:func:`scoville.sim.cycles.attention.decode_step` of one sequence on a core,
sequences spread over the cores; its KV cache on chip while ``kv_sram_frac`` of the SRAM holds
it, else never faster than HBM), the MoE layer (:func:`scoville.sim.cycles.moe.layer`, its
routed experts spread over the cores, each core's share of the HBM bandwidth); communication
after them.

**A request's life** (aggregated serving, prefill and decode on the same chips): the replica
prefills its requests' ``isl`` tokens (in the ``pp`` micro-batches, pipelined as decode is)
and decodes ``osl`` steps of ``concurrency`` tokens at the average context ``isl + osl / 2``,
so a user sees one token every ``(prefill + osl decode step) / osl`` (TPOT, the prefill's
interruptions amortized); TTFT is that prefill (a request waits for its batch's). Power: the
step's energy (operations, HBM and SRAM bytes, link bytes) over its time plus static power;
above the chip's limit the chip slows until it is at the limit.
"""

from __future__ import annotations

import math

from . import shapes
from .blocks import blocks_phase
from .parallel import Parallelism, Phase, comm, hop, kv_split, parallelisms
from .specs import Chip, Model, Scenario

__all__ = ["Parallelism", "Phase", "decode_bound", "evaluate", "fits", "parallelisms", "prefill",
           "step"]

#: Fraction of HBM that may hold weights and KV cache (the rest: activations, workspace).
HBM_USABLE = 0.9


def _weights_per_chip(m: Model, par: Parallelism, experts_read: float) -> float:
    """Weight bytes a chip of a stage reads in a step that touches ``experts_read`` routed
    experts per MoE layer (``None``: all of them, the weights a chip holds)."""
    b = shapes.model_bytes(m)
    moe_layers = m.layers - m.dense_layers
    routed = b["expert"] * moe_layers * (m.experts if experts_read is None else experts_read)
    rest = b["attention"] + b["shared"] + b["dense"] + b["head"]
    if par.mode == "tp":
        return (rest + routed) / par.width / par.pp
    return (rest + routed / par.width) / par.pp


def fits(chip: Chip, m: Model, par: Parallelism, sc: Scenario, concurrency: int) -> bool:
    """Whether a chip holds its share of the weights (and the embedding table) and of the
    KV cache of ``concurrency`` full-length sequences."""
    held = _weights_per_chip(m, par, None) + shapes.model_bytes(m)["embed"] / par.chips
    kv = concurrency * shapes.kv_bytes(m, sc.isl + sc.osl) / kv_split(m, par) / par.pp
    sram_kv = chip.sram_mib * 2**20 * chip.kv_sram_frac if chip.kind == "blocks" else 0
    return held + max(0.0, kv - sram_kv) <= chip.hbm_gb * 1e9 * HBM_USABLE


def _roofline(chip: Chip, m: Model, par: Parallelism, tokens: float, context: float,
              experts_read: float, kv_reads: float) -> Phase:
    """One stage's phase on a roofline chip: ``tokens`` tokens (the stage's batch), each
    attending ``context`` tokens, ``kv_reads`` sequences' KV caches read."""
    b = shapes.model_bytes(m)
    active = (b["attention"] / shapes.bytes_per_param(m.weight_fmt)
              + (m.layers - m.dense_layers) * m.top_k * b["expert"]
              / shapes.bytes_per_param(m.expert_fmt)
              + (b["shared"] + b["dense"] + b["head"]) / shapes.bytes_per_param(m.weight_fmt))
    flops = (2 * active + shapes.attention_flops(m, context)) * tokens / par.chips
    weights = _weights_per_chip(m, par, experts_read)
    kv = kv_reads * shapes.kv_bytes(m, context) / kv_split(m, par) / par.pp
    hbm = weights + kv
    t = max(flops / (chip.peak_flops(m.act_fmt) * chip.compute_eff),
            hbm / (chip.hbm_tb_s * 1e12 * chip.bw_eff))
    t_comm, link = comm(chip, m, par, tokens)
    t += t_comm + chip.layer_us * 1e-6 * m.layers / par.pp
    return Phase(t, flops, hbm, 0.0, link)


def step(chip: Chip, m: Model, par: Parallelism, batch: int, context: float,
         held: float | None = None) -> Phase:
    """One decode step of one pipeline stage for ``batch`` sequences at ``context`` tokens
    (each of the ``pp`` micro-batches holding up to ``held`` tokens a sequence)."""
    experts = shapes.touched(m, batch)
    if chip.kind == "blocks":
        return blocks_phase(chip, m, par, batch, context, experts, batch, decode=True,
                            held=context if held is None else held)
    return _roofline(chip, m, par, batch, context, experts, batch)


def prefill(chip: Chip, m: Model, par: Parallelism, requests: int, isl: int) -> Phase:
    """The prefill of ``requests`` requests of ``isl`` tokens on one pipeline stage (each
    token attends half the input on average; every expert a batch touches read once)."""
    tokens = requests * isl
    experts = shapes.touched(m, tokens)
    if chip.kind == "blocks":
        return blocks_phase(chip, m, par, tokens, isl / 2, experts, 0, decode=False)
    return _roofline(chip, m, par, tokens, isl / 2, experts, 0)


def _energy(chip: Chip, m: Model, p: Phase) -> float:
    e = chip.energy
    return 1e-12 * (p.flops * e.pj_per_flop.get(m.act_fmt, max(e.pj_per_flop.values()))
                    + p.hbm_bytes * e.pj_per_byte_hbm + p.sram_bytes * e.pj_per_byte_sram
                    + p.link_bytes * e.pj_per_byte_link)


def _powered(chip: Chip, m: Model, p: Phase) -> tuple[float, float]:
    """The phase's seconds and watts once the power limit holds: a phase whose dynamic
    energy over its time would exceed the limit less static power is stretched."""
    dynamic = _energy(chip, m, p)
    budget = chip.power_w - chip.energy.static_w
    seconds = max(p.seconds, dynamic / budget) if budget > 0 else p.seconds
    return seconds, chip.energy.static_w + dynamic / seconds


def evaluate(chip: Chip, m: Model, sc: Scenario, concurrency: int, par: Parallelism
             ) -> dict | None:
    """One point: the metrics of ``concurrency`` requests on a replica of ``par``, or None
    when the replica cannot hold the model and their KV cache."""
    if not fits(chip, m, par, sc, concurrency):
        return None
    micro = max(1, math.ceil(concurrency / par.pp))
    context = sc.isl + sc.osl / 2
    dec = step(chip, m, par, micro, context, sc.isl + sc.osl)
    t_dec, w_dec = _powered(chip, m, dec)
    t_step = par.pp * t_dec + (par.pp - 1) * hop(chip, par, micro, m.hidden)
    # The prefill in the same micro-batches: each stage busy with one while the others run.
    pre = prefill(chip, m, par, micro, sc.isl)
    t_pre, w_pre = _powered(chip, m, pre)
    t_prefill = par.pp * t_pre + (par.pp - 1) * hop(chip, par, micro * sc.isl, m.hidden)
    ttft = t_prefill
    life = t_prefill + sc.osl * t_step
    tpot = life / sc.osl
    generated = concurrency * sc.osl / life / par.chips
    power = (w_pre * t_prefill + w_dec * sc.osl * t_step) / life
    return {
        "chip": chip.name, "model": m.name, "scenario": sc.label, "isl": sc.isl,
        "osl": sc.osl, "concurrency": concurrency, "parallelism": par.label,
        "chips": par.chips, "ttft_s": ttft, "tpot_s": tpot, "tok_s_user": 1 / tpot,
        "tok_s_chip": generated,
        "tok_s_chip_total": generated * (sc.isl + sc.osl) / sc.osl,
        "power_w": power, "tok_s_kw": generated / (power / 1e3),
        "tok_s_mw": generated / (chip.allin_kw / 1e3),
        "tok_s_mm2": generated / chip.area_mm2 if chip.area_mm2 else None,
        "decode_step_s": t_step,
    }


def decode_bound(chip: Chip, m: Model, par: Parallelism) -> float:
    """The most tokens a second one user can get: every chip of every stage reading its
    share of the weights a token activates at full HBM bandwidth (batch 1, no KV)."""
    weights = _weights_per_chip(m, par, m.top_k)
    return 1 / (par.pp * weights / (chip.hbm_tb_s * 1e12))

