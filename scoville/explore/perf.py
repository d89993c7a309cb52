"""The performance and energy model of a replica serving a model: time, power and tokens per
second at one concurrency and one parallelism.

**A replica** is ``chips`` chips (``width`` of them per pipeline stage, ``pp`` stages) holding
one copy of the model, serving ``concurrency`` requests, each ``isl`` tokens in and ``osl``
out. Parallelism within a stage:

- ``tp`` (tensor parallel): every layer's matrices split over the ``width`` chips (GQA's KV
  heads too, up to their count; MLA's single latent head is replicated, so each chip reads
  every sequence's latent), experts sliced, two all-reduces of the tokens' hidden vectors a
  layer;
- ``tpep``: attention as ``tp``, routed experts spread whole over the chips (the busiest chip
  sets the pace), the same two all-reduces;
- ``ep`` (expert parallel): experts spread over the chips, attention, dense layers, shared
  experts and the head data-parallel (each chip serves ``concurrency / width`` sequences with
  a full copy of those weights), two all-to-alls a MoE layer (tokens out in FP8, back in BF16).

A stage wider than the chip's scale-up domain talks over the scale-out network. ``pp`` stages
split the layers; the requests are split into ``pp`` micro-batches, so a stage works on one
while the others work on the rest: a decode step takes ``pp`` stage times of a micro-batch
plus the hops between stages.

**Time of a layer** (one stage, one step): on a ``roofline`` chip the operations run one
after another, as a GPU's kernels do: the GEMMs outside the routed experts (in ``act_fmt``;
with measured kernels in BF16 where those weights are BF16, :func:`_gemm_format`); the routed
experts, on the busiest chip when they are spread; attention's score and value
products in BF16 against the KV cache's bytes (MLA absorbed in decode, expanded in prefill);
then communication (not overlapped). A chip with measured kernels (``Chip.kernels``, a GPU)
times each operation by its class's measured numbers (:func:`_measured`,
:mod:`scoville.explore.kernels`: a floor for each kernel it launches, then the longer of its
compute and its traffic at measured fractions of the peaks); another by global factors
(:func:`_roofline`: ``compute_eff`` and ``bw_eff`` of the peaks, ``kernel_us`` for every
kernel the step launches, :func:`scoville.explore.shapes.kernels`: 13 a GPT-OSS layer, 21 a
DeepSeek-V3 MoE layer, and ``layer_us`` a layer). On a ``blocks`` chip the layer's
blocks run one after another on the cores: the GEMMs of the attention projections, shared
experts, dense FFNs and head (:func:`scoville.sim.cycles.gemm.command_cycles` on one core's
array, the columns spread over the cores, never faster than their weights stream from HBM),
attention (:func:`scoville.sim.cycles.attention.decode_step` of one sequence on a core,
sequences spread over the cores; its KV cache on chip while ``kv_sram_frac`` of the SRAM holds
it, else never faster than HBM), the MoE layer (:func:`scoville.sim.cycles.moe.layer`, its
routed experts spread over the cores, each core's share of the HBM bandwidth), and between
them the ``decoder`` engine's commands (norms, rotations, residual adds, gated products, the
router's weights: :func:`scoville.explore.blocks.glue`); communication after them.

**A request's life**, aggregated (prefill and decode on the same chips): the replica
prefills its requests' ``isl`` tokens (in the ``pp`` micro-batches, pipelined as decode is)
and decodes ``osl`` tokens in steps of ``concurrency`` sequences at the average context
``isl + osl / 2``, so a user sees one token every ``(prefill + decode steps) / osl`` (TPOT,
the prefills' interruptions amortized). With MTP (:class:`Serving`) a step verifies ``1 +
mtp`` tokens a sequence and keeps ``1 + a + ... + a^mtp`` of them. TTFT: the requests that
arrived during the previous decode step and prefill are prefilled together after the running
step (:func:`_batched_ttft`). Disaggregated (:class:`Disaggregated`,
:func:`evaluate_disaggregated`): prefill and decode workers of their own layouts, the KV
cache moved between them, requests in a closed loop limited by the prefill pool's rate. A
request also spends ``Serving.request_s`` in the engine, and a disaggregated one
``Serving.handoff_s`` between the pools (both fitted, ``REQUEST_S``, ``HANDOFF_S``).
The KV cache is paged: a sequence holds ``isl + osl / 2`` tokens on average. Power: static
power plus the phase's dynamic energy over its time: on a ``roofline`` chip the watts of its
compute units and memory while busy (``Energy.compute_w``, ``memory_w``, for the seconds the
roofline keeps each busy) and its link bytes; on a ``blocks`` chip its operations and HBM,
SRAM and link bytes at their energies; above the chip's limit the chip slows until it is
at the limit.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from . import kernels, shapes
from .bands import band
from .blocks import blocks_phase
from .parallel import Parallelism, Phase, comm, hop, kv_split, link, parallelisms
from .specs import Chip, Model, Scenario

__all__ = ["AGGREGATED", "PREFILL_LOADS", "Disaggregated", "Parallelism", "Phase", "Serving",
           "decode_bound", "disaggregate", "evaluate", "evaluate_disaggregated", "fits",
           "parallelisms", "prefill", "prefill_layouts", "prefill_throughput", "servings",
           "step"]

#: Fraction of HBM that may hold weights and KV cache (the rest: activations, workspace).
HBM_USABLE = 0.9


def _weights_per_chip(m: Model, par: Parallelism, experts_read: float) -> float:
    """Weight bytes a chip of a stage reads in a step that touches ``experts_read`` routed
    experts per MoE layer (``None``: all of them, the weights a chip holds; spread over a
    width that does not divide them, each chip holds as many as the busiest, the slots left
    filled with copies of the busiest experts, as EPLB's redundant experts do)."""
    b = shapes.model_bytes(m)
    moe_layers = m.layers - m.dense_layers
    held = m.experts
    if par.experts_spread:
        held = math.ceil(m.experts / par.width) * par.width   # redundant copies fill the slots
    routed = b["expert"] * moe_layers * (held if experts_read is None else experts_read)
    if par.attention_dp > 1:        # every chip holds every matrix outside the experts
        rest = b["attention"] + b["shared"] + b["dense"] + b["head"]
    else:                           # split, but the replicated ones whole (MLA's down, router)
        rest = shapes.dense_params_per_chip(m, par.width) * shapes.bytes_per_param(
            m.weight_fmt)
    return (rest + routed / par.width) / par.pp


def fits(chip: Chip, m: Model, par: Parallelism, sc: Scenario, concurrency: int,
         context: float | None = None) -> bool:
    """Whether a chip holds its share of the weights (and the embedding table) and of the
    KV cache of ``concurrency`` sequences of ``context`` tokens; by default those of a paged
    cache, each holding what it has read and written so far, ``isl + osl / 2`` tokens on
    average over its life."""
    if context is None:
        context = sc.isl + sc.osl / 2
    held = _weights_per_chip(m, par, None) + shapes.model_bytes(m)["embed"] / par.chips
    kv = concurrency * shapes.kv_bytes(m, context) / kv_split(m, par) / par.pp
    sram_kv = chip.sram_mib * 2**20 * chip.kv_sram_frac if chip.kind == "blocks" else 0
    return held + max(0.0, kv - sram_kv) <= chip.hbm_gb * 1e9 * HBM_USABLE


#: The array format of attention's score and value products on a ``roofline`` chip
#: (FlashAttention-3 and FlashMLA compute them in BF16).
ATTENTION_FMT = "bf16"
#: Tokens a prefill worker batches at once when it is saturated (SGLang's
#: ``--chunked-prefill-size 16384`` in the MLCommons and InferenceX recipes).
PREFILL_TOKENS = 16384


def _op(flops: float, fmt_peak: float, bytes_: float, chip: Chip,
        compute_eff: float | None = None) -> tuple[float, float]:
    """One operation's compute and memory seconds on a ``roofline`` chip, each at the chip's
    achieved fraction of its peak (``compute_eff``: the operation's own, else the chip's);
    they overlap, so the operation takes the longer."""
    return (flops / (fmt_peak * (compute_eff or chip.compute_eff)),
            bytes_ / (chip.hbm_tb_s * 1e12 * chip.bw_eff))


def _roofline(chip: Chip, m: Model, par: Parallelism, tokens: float, context: float,
              experts_read: float, kv_reads: float, absorbed: bool = True) -> Phase:
    """One stage's phase on a roofline chip: ``tokens`` tokens (the stage's batch), each
    attending ``context`` tokens, ``kv_reads`` sequences' KV caches read. The operations run
    one after another (kernels on a GPU), each a roofline of its own: the GEMMs outside the
    experts (attention projections, shared experts, dense FFNs, head) in ``act_fmt``; the
    routed experts in their format, on the busiest chip when they are spread; attention's
    products in :data:`ATTENTION_FMT` at the chip's ``attention_eff`` against the KV cache's
    bytes."""
    b = shapes.model_bytes(m)
    wb, eb = shapes.bytes_per_param(m.weight_fmt), shapes.bytes_per_param(m.expert_fmt)
    moe_layers = m.layers - m.dense_layers
    dense_params = (b["attention"] + b["shared"] + b["dense"] + b["head"]) / wb
    expert_flops = 2 * moe_layers * m.top_k * b["expert"] / eb * tokens / par.chips
    # Data-parallel attention: each chip its tokens through every matrix; tensor-parallel:
    # every token through each chip's share, a replicated matrix whole on every chip.
    dp = par.attention_dp > 1
    dense_flops = (2 * dense_params * tokens / par.chips if dp else
                   2 * shapes.dense_params_per_chip(m, par.width) * tokens / par.pp)
    attention_flops = shapes.attention_flops(m, context, absorbed) * tokens / par.chips
    weights_all = _weights_per_chip(m, par, experts_read)
    expert_bytes = b["expert"] * moe_layers * experts_read / par.width / par.pp
    dense_bytes = weights_all - expert_bytes
    # Spread experts: every layer routes the stage's tokens, tokens x top_k choices over the
    # chips; a chip owns E / width experts, so when all are touched each reads the same. The
    # step waits for the busiest chip (its work times ``more``); the energy and the power are
    # the mean chip's.
    more = (1.0, 1.0)
    if par.experts_spread:
        more = shapes.busiest_chip(m, par.width, tokens, experts_read)
    kv = kv_reads * shapes.kv_bytes(m, context) / kv_split(m, par) / par.pp
    if chip.kernels:
        dense_shape = (tokens / par.width if dp else tokens,
                       shapes.gemm_columns(m, 1 if dp else par.width))
        expert_shape = (tokens * m.top_k / max(experts_read, 1e-9),
                        m.moe_intermediate / (1 if par.experts_spread else par.width))
        return _measured(chip, m, par, tokens, (dense_flops, dense_bytes, dense_shape),
                         (expert_flops, expert_bytes, expert_shape),
                         (attention_flops, kv, None), absorbed, more)
    ops = ((dense_flops, m.act_fmt, dense_bytes, None, (1.0, 1.0)),
           (expert_flops, m.expert_compute_fmt, expert_bytes, None, more),
           (attention_flops, ATTENTION_FMT, kv, chip.attention_eff, (1.0, 1.0)))
    busy = [_op(f * mf, chip.peak_flops(fmt), by * mb, chip, eff)
            for f, fmt, by, eff, (mf, mb) in ops]
    t = sum(max(b) for b in busy)
    t_comm, link = comm(chip, m, par, tokens)
    fixed = chip.kernel_us * (shapes.kernels(m) + shapes.STEP_KERNELS) + chip.layer_us * m.layers
    t += t_comm + fixed * 1e-6 / par.pp
    pj = sum(f * chip.pj_per_flop(fmt) for f, fmt, *_ in ops)
    return Phase(t, dense_flops + expert_flops + attention_flops, dense_bytes + expert_bytes + kv,
                 0.0, link, pj, sum(c / o[4][0] for (c, _), o in zip(busy, ops, strict=True)),
                 sum(b / o[4][1] for (_, b), o in zip(busy, ops, strict=True)))


def _gemm_kernels(m: Model) -> float:
    """GEMM kernels a step launches over all layers (of :func:`shapes.kernels`' count): a GQA
    layer's QKV and O projections, an MLA layer's fused q_a and kv_a, q_b, the absorption
    of W_UK and W_UV, and O; a MoE layer's router and its shared expert's gate-up and
    down; a dense FFN's gate-up and down; the head."""
    attention = 2 if m.attention.kind == "gqa" else 5
    moe_layers = m.layers - m.dense_layers
    return (m.layers * attention + moe_layers * (1 + 2 * m.shared) + 2 * m.dense_layers
            + 1)


#: Of :func:`shapes.kernels`' count of a MoE layer's kernels, those a measured MoE
#: operation (``kernels`` class ``moe``: TensorRT-LLM's fused MoE) holds: the top-k, the
#: permutation, the grouped GEMMs, SwiGLU and the unpermutation.
MOE_OP_KERNELS = 6


def _gemm_format(m: Model) -> str:
    """The measured GEMM class the non-expert matrices run as: BF16 weights (GPT-OSS's,
    Kimi K2's) as BF16 GEMMs, as the engines run them; else the model's ``act_fmt``."""
    return "bf16" if m.weight_fmt == "bf16" else m.act_fmt


def _moe_format(chip: Chip, m: Model) -> str:
    """The measured MoE kernel a model's routed experts run as: NVFP4 as ``fp4``; MXFP4
    weights under FP8 activations as ``w4a8`` where the chip has an FP4 array (Blackwell's
    MXFP4 x MXFP8 kernels, GPT-OSS's in TensorRT-LLM), else as ``w4a16`` (Hopper: weights
    widened to BF16); INT4 weights (Kimi K2's) as ``w4a16`` everywhere (Marlin-class kernels,
    as vLLM runs them); else their compute format."""
    if m.expert_compute_fmt == "fp8" and m.expert_fmt == "int4":
        return "w4a16"
    if m.expert_compute_fmt == "fp8" and m.expert_fmt == "mxfp4":
        return "w4a8" if "fp4" in chip.tflops else "w4a16"
    return m.expert_compute_fmt


def _measured(chip: Chip, m: Model, par: Parallelism, tokens: float, dense, expert,
              attention, absorbed: bool, more: tuple[float, float] = (1.0, 1.0)) -> Phase:
    """:func:`_roofline`'s stage with each operation class timed by the chip's measured
    numbers (:mod:`scoville.explore.kernels`): the GEMMs outside the routed experts (class
    ``gemm`` in :func:`_gemm_format`, a floor for each of :func:`_gemm_kernels`), the routed experts
    (class ``moe`` in :func:`_moe_format`, a floor a MoE layer), attention (``decode_`` or
    ``prefill_`` of the model's kind, a floor a layer), every other kernel the step
    launches (norms, RoPE, activations: at the floor of the smallest GEMM, class ``gemm``
    in BF16); each floor at the chip's ``floor_share``; communication as
    :func:`_roofline`'s. Each (operations, bytes) pair is the stage's per chip, the mean
    chip's (its energy and its busy seconds, for power); the busiest chip's routed experts are
    ``more`` times the mean's operations and bytes (spread experts), and the step waits for
    it. A prefill's attention adds its tokens' Q, K, V and output bytes
    (:func:`shapes.attention_io_bytes`)."""
    moe_layers = m.layers - m.dense_layers
    gemms = _gemm_kernels(m)
    small = (shapes.kernels(m) + shapes.STEP_KERNELS - gemms - m.layers
             - MOE_OP_KERNELS * moe_layers)
    phase = "decode" if absorbed else "prefill"
    if not absorbed:            # a prefill reads and writes its tokens' Q, K, V and output
        attention = (attention[0], attention[1]
                     + shapes.attention_io_bytes(m, tokens) / par.width / par.pp, None)
    ops = (("gemm", _gemm_format(m), *dense, gemms),
           ("moe", _moe_format(chip, m), *expert, moe_layers),
           (f"{phase}_{m.attention.kind}", ATTENTION_FMT, *attention, m.layers))
    t = compute_s = memory_s = 0.0
    for op, fmt, flops, bytes_, shape, n in ops:
        if op == "moe" and not moe_layers:
            continue
        mf, mb = more if op == "moe" else (1.0, 1.0)
        p = kernels.params(chip.kernels, op, fmt)
        c, b = kernels.busy(chip, op, fmt, p, flops * mf, bytes_ * mb, shape)
        t += n / par.pp * p.floor_us * 1e-6 * chip.floor_share + max(c, b)
        # Busy for power (the mean chip's): the operations padded to their tiles' rows (the
        # tensor cores run whole tiles), not the multiprocessors too few output tiles leave
        # idle (pad_n).
        useful = kernels.busy(chip, op, fmt, p, flops, 0.0,
                              shape and (shape[0], math.inf))[0]
        compute_s, memory_s = compute_s + useful, memory_s + b / mb
    t += (small / par.pp * kernels.params(chip.kernels, "gemm", "bf16").floor_us * 1e-6
          * chip.floor_share)
    t_comm, link_bytes = comm(chip, m, par, tokens)
    pj = sum(f * chip.pj_per_flop(kernels.COMPUTE.get(fmt, fmt)) for _, fmt, f, *_ in ops)
    return Phase(t + t_comm, sum(o[2] for o in ops), sum(o[3] for o in ops), 0.0,
                 link_bytes, pj, compute_s, memory_s)


#: :class:`Serving`'s defaults for a request's fixed seconds and a disaggregated hand-off's:
#: fitted with the GPUs' other serving numbers by ``scripts/explore_validate.py`` on
#: InferenceX's measured TTFT and throughput (docs/explore-validation.md).
REQUEST_S = 0.244
HANDOFF_S = 0.44


@dataclass(frozen=True)
class Serving:
    """How the engine serves, beyond the layout.

    Attributes
    ----------
    mtp : int
        Draft tokens a decode step proposes (multi-token prediction, DeepSeek-V3's MTP
        module: one more layer a draft token); 0: none. A step verifies ``1 + mtp`` tokens a
        sequence and keeps the accepted ones.
    accept : float
        The chance a draft token is accepted given the one before it was: DeepSeek-V3's
        report (arXiv 2412.19437, section 5.4.3) measures 85-90% for its second token.
    request_s : float
        Seconds a request spends in the engine besides its prefill and decode steps
        (tokenizing, scheduling, its prefill run without the decode step's CUDA graph,
        streaming its first token back): added to its TTFT and to its life.
    handoff_s : float
        Disaggregated serving: seconds a request's hand-off from the prefill pool to the
        decode pool takes besides moving its KV cache's bytes (the transfer's set-up, the
        decode worker's admission).
    prefill_tokens : int
        Tokens a prefill pass computes at most (SGLang's ``--chunked-prefill-size``,
        TensorRT-LLM's ``max_num_tokens``): a saturated prefill worker batches requests up to
        it, and a longer request is prefilled in passes of it, one after another.
    prefill_requests : int
        Requests a prefill pass holds at most (a prefill worker's ``max-running-requests``
        or ``max_batch_size``); 0: no limit but ``prefill_tokens``.
    decode_requests : int
        Sequences a decode worker (an aggregated replica: the engine) holds at most
        (``max-running-requests``, ``max_batch_size`` times its attention's data-parallel
        ranks); 0: no limit. Requests past it wait, their wait in TTFT.
    """

    mtp: int = 0
    accept: float = 0.85
    request_s: float = REQUEST_S
    handoff_s: float = HANDOFF_S
    prefill_tokens: int = PREFILL_TOKENS
    prefill_requests: int = 0
    decode_requests: int = 0

    def __post_init__(self):
        if self.mtp < 0 or not 0 <= self.accept <= 1:
            raise ValueError(f"serving: mtp {self.mtp} (>= 0) and accept {self.accept} "
                             "(0..1)")
        if not (self.request_s >= 0 and self.handoff_s >= 0):
            raise ValueError(f"serving: request_s {self.request_s} and handoff_s "
                             f"{self.handoff_s} must be >= 0")
        if self.prefill_tokens < 1 or self.prefill_requests < 0 or self.decode_requests < 0:
            raise ValueError(f"serving: prefill_tokens {self.prefill_tokens} (>= 1), "
                             f"prefill_requests {self.prefill_requests} and decode_requests "
                             f"{self.decode_requests} (>= 0; 0: no limit)")

    @property
    def tokens_per_step(self) -> float:
        """Tokens a sequence gains a decode step: ``1 + a + a^2 + ... + a^mtp``."""
        return sum(self.accept ** i for i in range(self.mtp + 1))


AGGREGATED = Serving()


def servings(m: Model) -> list[Serving]:
    """How the sweep serves a model: plainly, and with its MTP modules if it has any."""
    return [AGGREGATED] + ([Serving(mtp=m.mtp_modules)] if m.mtp_modules else [])


@dataclass(frozen=True)
class Disaggregated:
    """Prefill and decode on pools of their own: ``prefill_workers`` replicas of the
    ``prefill`` layout, ``decode_workers`` of the ``decode`` layout; each request's KV cache
    moves from its prefill worker to a decode worker. ``prefill_workers`` may be a fraction: a
    fleet's ratio, a prefill worker serving several decode workers."""

    prefill: Parallelism
    prefill_workers: float
    decode: Parallelism
    decode_workers: int

    @property
    def chips(self) -> int:
        return (self.prefill.chips * self.prefill_workers
                + self.decode.chips * self.decode_workers)

    @property
    def label(self) -> str:
        return (f"p{self.prefill_workers:g}x{self.prefill.label}-"
                f"d{self.decode_workers}x{self.decode.label}")


def step(chip: Chip, m: Model, par: Parallelism, batch: int, context: float,
         held: float | None = None, serving: Serving = AGGREGATED) -> Phase:
    """One decode step of one pipeline stage for ``batch`` sequences at ``context`` tokens
    (each of the ``pp`` micro-batches holding up to ``held`` tokens a sequence). With MTP the
    step verifies ``1 + mtp`` tokens a sequence (one read of the weights and the KV cache)
    after ``mtp`` draft passes, each a step of its own through the MTP module and the head
    (:func:`_mtp_module`: a whole step's fixed costs, the head's weights read again)."""
    tokens = batch * (1 + serving.mtp)
    experts = shapes.touched(m, tokens)
    if chip.kind == "blocks":
        main = blocks_phase(chip, m, par, tokens, context, experts, batch, decode=True,
                            held=context if held is None else held)
    else:
        main = _roofline(chip, m, par, tokens, context, experts, batch)
    if not serving.mtp:
        return main
    # The draft passes: each runs the MTP module (one MoE layer) and the shared head over one
    # token a sequence of the micro-batch, on one stage. Each of the pp micro-batches needs its
    # own mtp passes a step: pp x mtp passes, spread here over the pp stages' times.
    draft = step(chip, _mtp_module(m), Parallelism(par.mode, par.width), batch, context, held)
    return main.plus(draft, serving.mtp)


@functools.cache
def _mtp_module(m: Model) -> Model:
    """The model a draft pass runs: DeepSeek-V3's MTP module is one MoE layer (its
    own norms and projection of the embedding and hidden state besides a layer's, not
    counted) under the main model's embedding and head."""
    a = dataclasses.replace(m.attention, window_layers=min(m.attention.window_layers, 1))
    return dataclasses.replace(m, layers=1, dense_layers=0, attention=a)


def prefill(chip: Chip, m: Model, par: Parallelism, requests: int, isl: int,
            cached: float = 0.0) -> Phase:
    """The prefill of ``requests`` requests of ``isl`` tokens on one pipeline stage, the first
    ``cached`` of each found in the prefix cache (not computed): each computed token attends
    the cached ones and half the rest on average; every expert a batch touches read once;
    MLA expanded, not absorbed."""
    tokens = requests * (isl - cached)
    context = cached + (isl - cached) / 2
    experts = shapes.touched(m, tokens)
    if chip.kind == "blocks":
        return blocks_phase(chip, m, par, tokens, context, experts, 0, decode=False)
    return _roofline(chip, m, par, tokens, context, experts, 0, absorbed=False)


def _energy(chip: Chip, m: Model, p: Phase) -> float:
    """A phase's dynamic joules: its operations and bytes at the chip's energies, and the
    watts its compute units and memory draw while busy (``Energy.compute_w``,
    ``memory_w``)."""
    e = chip.energy
    compute = p.compute_pj if p.compute_pj is not None else \
        p.flops * e.pj_per_flop.get(m.act_fmt, max(e.pj_per_flop.values()))
    return (1e-12 * (compute
                     + p.hbm_bytes * e.pj_per_byte_hbm + p.sram_bytes * e.pj_per_byte_sram
                     + p.link_bytes * e.pj_per_byte_link)
            + e.compute_w * p.compute_s + e.memory_w * p.memory_s)


def _powered(chip: Chip, m: Model, p: Phase) -> tuple[float, float]:
    """The phase's seconds and watts once the power limit holds: a phase whose dynamic
    energy over its time would exceed the limit less static power is stretched."""
    dynamic = _energy(chip, m, p)
    budget = chip.power_w - chip.energy.static_w
    seconds = max(p.seconds, dynamic / budget) if budget > 0 else p.seconds
    return seconds, chip.energy.static_w + dynamic / seconds


def _pipelined(chip: Chip, m: Model, par: Parallelism, phase: Phase, tokens: float
               ) -> tuple[float, float]:
    """Seconds and watts of a phase through all ``pp`` stages: ``pp`` stage times plus the
    hops of ``tokens`` hidden vectors between them."""
    t, w = _powered(chip, m, phase)
    return par.pp * t + (par.pp - 1) * hop(chip, par, tokens, m.hidden), w


def _point(chip: Chip, m: Model, sc: Scenario, concurrency: int, label: str, chips: int,
           ttft: float, tpot: float, rate: float, power: float, t_step: float,
           serving: Serving) -> dict:
    """The metrics of a point: ``rate`` requests a second completed by ``chips`` chips."""
    generated = rate * sc.osl / chips
    lo, hi = band()
    power_kw = power / 1e3
    return {
        "chip": chip.name, "model": m.name, "scenario": sc.label, "isl": sc.isl,
        "osl": sc.osl, "concurrency": concurrency, "parallelism": label, "mtp": serving.mtp,
        "chips": chips, "ttft_s": ttft, "tpot_s": tpot, "tok_s_user": 1 / tpot,
        "tok_s_chip": generated,
        "tok_s_chip_total": generated * (sc.isl + sc.osl) / sc.osl,
        "tok_s_chip_lo": generated * lo, "tok_s_chip_hi": generated * hi,
        "power_w": power, "tok_s_kw": generated / power_kw,
        "tok_s_kw_lo": generated * lo / power_kw, "tok_s_kw_hi": generated * hi / power_kw,
        "tok_s_mw": generated / (chip.allin_kw / 1e3),
        "tok_s_mm2": generated / chip.area_mm2 if chip.area_mm2 else None,
        "tok_s_mm2_die": generated / die if (die := _die_mm2(chip)) else None,
        "decode_step_s": t_step, "disaggregated": False,
    }


def _die_mm2(chip: Chip) -> float:
    """The whole die's area, 0 where not known: a ``blocks`` chip's estimate (its area is its
    arrays and SRAM alone), a GPU's published die."""
    return chip.die_mm2 if chip.kind == "blocks" else chip.die_mm2 or chip.area_mm2


def _full_batch(sc: Scenario, serving: Serving = AGGREGATED) -> int:
    """Requests a saturated prefill worker batches: its ``prefill_tokens`` tokens computed
    (one request when a request is longer), at most its ``prefill_requests``."""
    r = max(1, math.ceil(serving.prefill_tokens / (sc.isl - sc.cached)))
    return min(r, serving.prefill_requests) if serving.prefill_requests else r


def _prefill_passes(chip: Chip, m: Model, par: Parallelism, r: int, sc: Scenario,
                    chunk: int) -> Phase:
    """The prefill of ``r`` requests in passes of at most ``chunk`` tokens: one pass when a
    request fits one, else each request's passes one after another, each computing its
    chunk against the tokens before it (:func:`prefill`'s ``cached``)."""
    todo = sc.isl - sc.cached
    if todo <= chunk:
        return prefill(chip, m, par, r, sc.isl, sc.cached)
    starts = range(math.ceil(sc.cached), math.ceil(sc.isl), chunk)
    passes = [prefill(chip, m, par, 1, min(s + chunk, sc.isl), s) for s in starts]
    total = passes[0].plus(passes[0], r - 1)
    for p in passes[1:]:
        total = total.plus(p, r)
    return total


def _prefill_timing(chip: Chip, m: Model, par: Parallelism, sc: Scenario,
                    serving: Serving = AGGREGATED):
    """A prefill worker's batch of ``r`` requests, as a function of ``r`` (each computed
    once): its latency through every stage (the batch's TTFT), its stage time (a busy worker
    starts a batch every stage time, the stages working on successive ones) and its
    watts; a request longer than ``serving.prefill_tokens`` in passes of that many
    (:func:`_prefill_passes`)."""
    @functools.cache
    def timing(r: int) -> tuple[float, float, float]:
        phase = _prefill_passes(chip, m, par, r, sc, serving.prefill_tokens)
        t, w = _powered(chip, m, phase)
        latency = par.pp * t + (par.pp - 1) * hop(chip, par, r * (sc.isl - sc.cached),
                                                  m.hidden)
        return latency, t, w
    return timing


def _batched_ttft(t_pre, rate: float, gap: float, most: int) -> tuple[float, int]:
    """Seconds from a request's arrival to the end of the prefill batch that holds it, and
    that batch's requests, for a worker that prefills ``t_pre(r)`` seconds a batch of ``r``
    requests, gets ``rate`` requests a second, and waits ``gap`` seconds between batches (a
    decode step, when prefill and decode share the chips): the batch is what arrived during
    the previous batch and gap (a fixed point, between 1 and ``most`` requests), and a
    request waits for half of that on average, then its own batch."""
    r = 1.0
    for _ in range(8):
        r = min(float(most), max(1.0, rate * (gap + t_pre(math.ceil(r)))))
    t = t_pre(math.ceil(r))
    busy = min(1.0, rate * (gap + t) / r)
    return t + busy * (gap + t) / 2, math.ceil(r)


def evaluate(chip: Chip, m: Model, sc: Scenario, concurrency: int, par: Parallelism,
             serving: Serving = AGGREGATED) -> dict | None:
    """One point: the metrics of ``concurrency`` requests on a replica of ``par``, or None
    when the replica cannot hold the model and their KV cache."""
    # The engine runs at most decode_requests sequences (their KV cache held); the rest wait
    # for a place.
    running = min(concurrency, serving.decode_requests or concurrency)
    if not fits(chip, m, par, sc, running):
        return None
    micro = max(1, math.ceil(running / par.pp))
    t_step, w_dec = _decode_step(chip, m, par, sc, running, serving)
    # The prefill in the same micro-batches: each stage busy with one while the others run;
    # a request longer than a pass in passes.
    t_prefill, w_pre = _pipelined(
        chip, m, par, _prefill_passes(chip, m, par, micro, sc, serving.prefill_tokens),
        micro * (sc.isl - sc.cached))
    steps = sc.osl / serving.tokens_per_step
    life = serving.request_s + t_prefill + steps * t_step
    # A request's first token: the prefill of the requests that arrived during the last
    # decode step and prefill, batched, after the running step and prefill (half of them, on
    # average, as busy as they keep the replica); and its wait for a place, if any (Little's
    # law: a request spends concurrency / rate in all).
    rate = running / life
    timing = _prefill_timing(chip, m, par, sc, serving)
    ttft = (serving.request_s + _batched_ttft(lambda r: timing(r)[0], rate, t_step, micro)[0]
            + concurrency / rate - life)
    power = (w_pre * t_prefill + w_dec * steps * t_step
             + chip.energy.static_w * serving.request_s) / life
    return _point(chip, m, sc, concurrency, par.label, par.chips, ttft, life / sc.osl,
                  rate, power, t_step, serving)


def _decode_step(chip: Chip, m: Model, par: Parallelism, sc: Scenario, sequences: int,
                 serving: Serving) -> tuple[float, float]:
    """Seconds and watts of a decode worker's step of ``sequences`` sequences at the mean
    context, through its stages."""
    micro = max(1, math.ceil(sequences / par.pp))
    return _pipelined(chip, m, par, step(chip, m, par, micro, sc.isl + sc.osl / 2,
                                         sc.isl + sc.osl, serving), micro)


def evaluate_disaggregated(chip: Chip, m: Model, sc: Scenario, concurrency: int,
                           layout: Disaggregated, serving: Serving = AGGREGATED,
                           prefill_model: Model | None = None) -> dict | None:
    """One point of disaggregated serving. The decode workers share the ``concurrency``
    requests (a step of ``concurrency / decode_workers`` sequences at the mean context); a
    request's TTFT is its prefill alone on a prefill worker, its KV cache's move (over the
    domain's links when both pools are in one domain, else the scale-out network) and half a
    decode step. Requests cycle (closed loop: each finished request is replaced) at
    ``concurrency / (TTFT + osl TPOT)`` a second unless the prefill pool, batching
    ``serving.prefill_tokens`` tokens a pass, cannot keep up, or the decode workers hold
    fewer than the requests (``serving.decode_requests`` each): then they complete at the
    slower rate and wait, the wait counted in TTFT, and only ``rate x osl x TPOT`` of them
    (Little's law) are in the decode step. ``prefill_model`` (default ``m``): the model as the
    prefill pool runs it, where it differs (a run that balanced one pool's experts only:
    ``Model.expert_cv``)."""
    dec, pre = layout.decode, layout.prefill
    pm = prefill_model or m
    batch = max(1, math.ceil(concurrency / layout.decode_workers))
    if serving.decode_requests:
        batch = min(batch, serving.decode_requests)
    slots = batch * layout.decode_workers           # sequences decoding at most
    full = _full_batch(sc, serving)
    if not (fits(chip, m, dec, sc, batch) and fits(chip, pm, pre, sc, full, context=sc.isl)):
        return None

    def decode(sequences):
        return _decode_step(chip, m, dec, sc, sequences, serving)

    t_step, w_dec = decode(batch)
    tpot = t_step / serving.tokens_per_step
    timing = _prefill_timing(chip, pm, pre, sc, serving)

    def latency(r):
        return timing(r)[0]

    # One prefill worker and the decode workers it feeds (several when it is a fraction of
    # one a decode worker): in one domain or not.
    pw = layout.prefill_workers
    unit = pre.chips * max(1.0, pw) + dec.chips * layout.decode_workers * max(1.0, 1 / pw)
    bw, lat = link(chip, unit <= chip.domain)
    move = (lat + shapes.kv_bytes(m, sc.isl) / (bw * min(pre.chips, dec.chips)) + t_step / 2
            + serving.request_s + serving.handoff_s)
    ttft, r = latency(1) + move, 1
    for _ in range(8):                  # the closed loop's rate and TTFT, to a fixed point
        rate = concurrency / (ttft + sc.osl * tpot)
        ttft, r = _batched_ttft(latency, rate / pw, 0.0, full)
        ttft += move
    rate = concurrency / (ttft + sc.osl * tpot)
    capacity = pw * full / timing(full)[1]
    if rate > capacity or concurrency > slots:
        # Prefill-bound, or more requests than the decode workers hold: requests complete at
        # the slowest of the prefill pool's rate, the rate the slots free up at, and the
        # closed loop's own (a request spends its TTFT outside a slot: a few requests past
        # the slots may find them free); by Little's law only rate x osl x TPOT of them are
        # decoding, the rest wait (for prefill or a place). The decode step is of those.
        unbound = ttft

        def bound(tpot):
            return min(capacity, slots / (sc.osl * tpot),
                       concurrency / (unbound + sc.osl * tpot))

        for _ in range(8):
            decoding = min(concurrency, slots, bound(tpot) * sc.osl * tpot)
            t_step, w_dec = decode(math.ceil(decoding / layout.decode_workers))
            tpot = t_step / serving.tokens_per_step
        rate = bound(tpot)
        ttft = concurrency / rate - sc.osl * tpot
        r = full if rate >= capacity else _batched_ttft(latency, rate / pw, 0.0, full)[1]
    # The prefill workers busy with batches of the r requests the TTFT's batching forms.
    _, stage, w_pre = timing(r)
    busy = min(1.0, rate / pw * stage / r)
    idle = chip.energy.static_w
    power = ((pw * pre.chips * (idle + busy * (w_pre - idle))
              + layout.decode_workers * dec.chips * w_dec) / layout.chips)
    return _point(chip, m, sc, concurrency, layout.label, layout.chips, ttft, tpot, rate,
                  power, t_step, serving) | {"disaggregated": True}


def prefill_throughput(chip: Chip, m: Model, par: Parallelism, sc: Scenario,
                       serving: Serving = AGGREGATED) -> float:
    """Requests a second a saturated prefill worker of ``par`` completes at ``serving``'s
    limits (batches of its ``prefill_tokens`` computed tokens, :data:`PREFILL_TOKENS` by
    default, one starting every stage time)."""
    full = _full_batch(sc, serving)
    return full / _prefill_timing(chip, m, par, sc, serving)(full)[1]


def prefill_layouts(chip: Chip, m: Model, sc: Scenario) -> list[Parallelism]:
    """The prefill layouts the sweep pairs with decode workers: the one whose saturated worker
    prefills most requests a second per chip, and the one that prefills a lone request
    soonest (the shortest TTFT); one if they are the same, none if no layout holds the
    model."""
    full = _full_batch(sc)
    held = [par for par in parallelisms(chip, m)
            if fits(chip, m, par, sc, full, context=sc.isl)]
    if not held:
        return []
    most = max(held, key=lambda par: prefill_throughput(chip, m, par, sc) / par.chips)
    soonest = min(held, key=lambda par: _prefill_timing(chip, m, par, sc)(1)[0])
    return [most] if most == soonest else [most, soonest]


#: The prefill pool's utilizations the sweep sizes disaggregated deployments for: fewer
#: prefill chips a decode worker, against a longer wait for prefill.
PREFILL_LOADS = (0.5, 0.7, 0.9)


def disaggregate(chip: Chip, m: Model, sc: Scenario, concurrency: int, decode: Parallelism,
                 prefill_par: Parallelism, serving: Serving = AGGREGATED,
                 load: float = 0.7) -> dict | None:
    """One decode worker of ``decode`` serving ``concurrency`` requests, beside the share of
    prefill workers of ``prefill_par`` that keeps them busy ``load`` of the time at the
    decode worker's rate (a fleet's ratio, so a fraction of a worker): the ratio of prefill
    to decode chips searched by the sweep over :data:`PREFILL_LOADS`. None where either pool
    cannot hold its share."""
    if not fits(chip, m, decode, sc, concurrency):
        return None
    t_step = _decode_step(chip, m, decode, sc, concurrency, serving)[0]
    rate = concurrency * serving.tokens_per_step / (sc.osl * t_step)
    capacity = prefill_throughput(chip, m, prefill_par, sc, serving)
    layout = Disaggregated(prefill_par, rate / (capacity * load), decode, 1)
    return evaluate_disaggregated(chip, m, sc, concurrency, layout, serving)


def decode_bound(chip: Chip, m: Model, par: Parallelism) -> float:
    """The most tokens a second one user can get: every chip of every stage reading its
    share of the weights a token activates at full HBM bandwidth (batch 1, no KV)."""
    weights = _weights_per_chip(m, par, m.top_k)
    return 1 / (par.pp * weights / (chip.hbm_tb_s * 1e12))

