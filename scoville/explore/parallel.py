"""How a replica splits over its chips: the parallelism, the phases' traffic, and the
communication between chips (:mod:`scoville.explore.perf` states the model)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import kernels
from .specs import Chip, Model

__all__ = ["MODES", "NCCL_LL", "Parallelism", "Phase", "a2a_latency", "allreduce_latency",
           "comm", "hop", "kv_split", "link", "parallelisms", "widths"]


#: The layouts of a stage: attention (and the dense layers, shared experts and head) tensor-
#: or data-parallel, routed experts sliced or spread.
MODES = {"tp": "attention and experts tensor-parallel",
         "ep": "attention data-parallel, experts expert-parallel",
         "tpep": "attention tensor-parallel, experts expert-parallel"}


@dataclass(frozen=True)
class Parallelism:
    """``mode`` (one of :data:`MODES`) over ``width`` chips per stage, ``pp`` stages.
    Labels follow InferenceX's: ``tp8``, ``tp8ep8`` (attention tensor-parallel, experts
    spread), ``ep8`` (InferenceX's ``tp8ep8dpa``: attention data-parallel)."""

    mode: str
    width: int
    pp: int = 1

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"parallelism: mode {self.mode!r}; allowed: {', '.join(MODES)}")
        if self.width < 1 or self.pp < 1:
            raise ValueError(f"parallelism: width {self.width} and pp {self.pp} must be >= 1")

    @property
    def chips(self) -> int:
        return self.width * self.pp

    @property
    def attention_dp(self) -> int:
        """Data-parallel ways of attention (each way a full copy of its weights)."""
        return self.width if self.mode == "ep" else 1

    @property
    def experts_spread(self) -> bool:
        """Whether routed experts are spread whole over the chips (else sliced)."""
        return self.mode != "tp"

    @property
    def label(self) -> str:
        base = f"tp{self.width}ep{self.width}" if self.mode == "tpep" else \
            f"{self.mode}{self.width}"
        return base + (f"-pp{self.pp}" if self.pp > 1 else "")


def parallelisms(chip: Chip, model: Model) -> list[Parallelism]:
    """Every parallelism the sweep tries: each of :data:`MODES` over :func:`widths` chips of
    one scale-up domain, times 1, 2 or 4 pipeline stages (stages beyond the domain talk over
    the scale-out network); expert parallelism needs at least two chips and no more than the
    experts, tensor-parallel attention a width that divides the query heads."""
    out = []
    for width in widths(chip):
        for mode in MODES:
            if mode != "tp" and not 2 <= width <= model.experts:
                continue
            if mode != "ep" and model.attention.q_heads % width:
                continue
            if mode == "tpep" and chip.kind == "blocks":
                continue                # a blocks chip spreads whole experts in tp already
            for pp in (1, 2, 4):
                if pp <= model.layers:
                    out.append(Parallelism(mode, width, pp))
    return out


def widths(chip: Chip) -> list[int]:
    """The stage widths the sweep tries on a chip: 1, 2, 4, ... and 3, 6, 12, ... chips up to
    its scale-up domain, and the whole domain (72 on an NVL72: InferenceX's GB200 runs use
    widths such as 48 and 72, data-parallel attention over them)."""
    out = {chip.domain}
    for base in (1, 3):
        w = base
        while w <= chip.domain:
            out.add(w)
            w *= 2
    return sorted(out)


def hop(chip: Chip, par: Parallelism, tokens: float, hidden: int) -> float:
    """Seconds to pass ``tokens`` hidden vectors of ``hidden`` BF16 values from one stage to
    the next: over the domain's links while the replica fits in a domain, else over the
    scale-out network."""
    bw, lat = link(chip, par.chips <= chip.domain)
    return lat + tokens * hidden * 2 / bw


def link(chip: Chip, inside: bool) -> tuple[float, float]:
    """Bytes a second per chip and seconds of latency of a transfer inside the scale-up
    domain (its links) or between domains (the scale-out network)."""
    if inside:
        return chip.link_gb_s * 1e9, chip.link_latency_us * 1e-6
    return chip.scaleout_gb_s * 1e9, chip.scaleout_latency_us * 1e-6


@dataclass(frozen=True)
class Phase:
    """One stage's time and traffic for a step (decode) or a batch's prefill: seconds, and
    per chip the operations, HBM, SRAM and link bytes behind them; ``compute_pj``, where
    set, the operations' energy counted per array format (else every operation is charged
    at the model's ``act_fmt``); ``compute_s`` and ``memory_s`` the seconds the compute
    units and the memory are busy at their achievable rates (a ``roofline`` chip's, for its
    power)."""

    seconds: float
    flops: float
    hbm_bytes: float
    sram_bytes: float
    link_bytes: float
    compute_pj: float | None = None
    compute_s: float = 0.0
    memory_s: float = 0.0

    def plus(self, other: Phase, f: float) -> Phase:
        """This phase followed by ``f`` times ``other`` (times, traffic and energy added)."""
        pj = None if self.compute_pj is None else self.compute_pj + f * other.compute_pj
        return Phase(self.seconds + f * other.seconds, self.flops + f * other.flops,
                     self.hbm_bytes + f * other.hbm_bytes,
                     self.sram_bytes + f * other.sram_bytes,
                     self.link_bytes + f * other.link_bytes, pj,
                     self.compute_s + f * other.compute_s, self.memory_s + f * other.memory_s)


def kv_split(m: Model, par: Parallelism) -> int:
    """Ways the KV cache (and its reads) split over a stage's chips."""
    if par.attention_dp > 1:
        return par.width
    return min(par.width, m.attention.kv_heads) if m.attention.kind == "gqa" else 1


#: NCCL's own cost model of a small all-reduce (the LL protocol, which NCCL picks for the
#: kilobytes of a decode step's hidden vectors), microseconds: NVIDIA/nccl
#: ``src/graph/tuning.cc`` (v2.29.7-1), ``baseLat`` of the tree and ring algorithms,
#: ``hwLat`` a step over NVLink and over the network, and the floor (``netOverhead``, x86
#: Intel) NCCL puts under a ring's NVLink steps when it spans several nodes.
NCCL_LL = {"tree_base": 6.8, "ring_base": 6.6, "nvlink": 0.6, "tree_net": 5.0,
           "ring_net": 2.7, "net_overhead": 1.0}


def _domains(chip: Chip, width: int) -> int:
    return math.ceil(width / chip.domain)


def allreduce_latency(chip: Chip, width: int) -> float:
    """Seconds of latency of an all-reduce of a few kilobytes over ``width`` chips: inside a
    scale-up domain the chip's ``link_latency_us`` (the engines' one-shot all-reduce over
    the switch); over several domains NCCL's cost model (:data:`NCCL_LL`), the faster of a
    tree (``2 ((per domain - 1) nvlink + log2(domains) tree_net)``) and a ring (``2 (width -
    domains)`` NVLink steps, each at least ``net_overhead``, and ``2 (domains - 1)`` network
    steps), each after its base."""
    if width <= chip.domain:
        return chip.link_latency_us * 1e-6
    n = NCCL_LL
    domains = _domains(chip, width)
    per = width / domains
    tree = n["tree_base"] + 2 * ((per - 1) * n["nvlink"] + math.log2(domains) * n["tree_net"])
    ring_intra = max(n["nvlink"], n["net_overhead"])    # rings across nodes: the floor
    ring = (n["ring_base"] + 2 * (width - domains) * ring_intra
            + 2 * (domains - 1) * n["ring_net"])
    return min(tree, ring) * 1e-6


def a2a_latency(chip: Chip, width: int, inside_us: float | None = None) -> float:
    """Seconds of latency of one phase (dispatch or combine) of a MoE all-to-all of a few
    tokens over ``width`` chips: the chip's ``a2a_latency_us`` (else ``link_latency_us``)
    inside a domain, plus a network step (NCCL's tree, :data:`NCCL_LL`) for every doubling
    of the domains it spans: 19 us a phase at EP16 and 24 at EP32 on H100, where DeepEP's
    low-latency kernels measure about 23-26 and 27-28 (AIConfigurator 0.12's legacy table,
    against 14 at EP8): the model is short by 4-7 us a phase across nodes. ``inside_us``
    replaces the chip's own latency inside a domain (a chip with measured kernels: DeepEP's
    measured floor of the phase, :func:`comm`)."""
    inside = inside_us if inside_us is not None else (chip.a2a_latency_us
                                                      or chip.link_latency_us)
    return (inside + math.log2(_domains(chip, width)) * NCCL_LL["tree_net"]) * 1e-6


def comm(chip: Chip, m: Model, par: Parallelism, tokens: float) -> tuple[float, float]:
    """Seconds and link bytes per chip of one stage's communication for ``tokens`` tokens (the
    stage's whole batch): tensor-parallel attention (``tp``, ``tpep``) two ring all-reduces of
    BF16 hidden vectors a layer (after attention, and after the experts, whose partial sums
    every chip holds for every token), each after :func:`allreduce_latency`; ``ep`` a
    dispatch (FP8) and a combine (BF16) all-to-all a MoE layer, each chip sending its share's
    tokens to the others, to those of its own domain over the links and to the rest over the
    scale-out network at once, each phase after :func:`a2a_latency`. A chip with measured
    kernels (``Chip.kernels``) takes, inside its domain, TensorRT-LLM's measured all-reduce
    and DeepEP's measured dispatch and combine (:mod:`scoville.explore.kernels`: a floor and
    a fraction of the links' bandwidth each) instead of the latencies and the links' whole
    bandwidth."""
    w = par.width
    if w == 1:
        return 0.0, 0.0
    layers = m.layers / par.pp
    bw, out_bw = chip.link_gb_s * 1e9, chip.scaleout_gb_s * 1e9
    if par.attention_dp == 1:
        per = 2 * (w - 1) / w * tokens * m.hidden * 2
        if w <= chip.domain and chip.kernels:
            t = kernels.allreduce_seconds(chip, kernels.params(chip.kernels, "allreduce",
                                                               "bf16"),
                                          w, tokens * m.hidden * 2)
        else:
            t = per / (bw if w <= chip.domain else out_bw) + allreduce_latency(chip, w)
        return layers * 2 * t, layers * 2 * per
    moe_layers = (m.layers - m.dense_layers) / par.pp
    mine = tokens / w * m.top_k * m.hidden          # a rank's vectors
    share = (w - 1) / w * mine                      # those to its peers
    per = share * (1 + 2)                           # dispatched in FP8, combined in BF16
    inside = (min(w, chip.domain) - 1) / (w - 1)    # of the peers, those in the domain
    if chip.kernels:
        # DeepEP's measured phases inside the domain, each its floor and its bytes at its
        # fraction of the links (all of a rank's vectors, its own included, as the fit
        # counts them); beyond the domain the network, and NCCL's steps.
        phases = [(f, kernels.params(chip.kernels, "a2a", f)) for f in ("fp8", "bf16")]
        t_in = sum(kernels.busy(chip, "a2a", f, p, 0.0,
                                mine * inside * kernels.ACT_BYTES[f])[1] for f, p in phases)
        latency = sum(a2a_latency(chip, w, p.floor_us) for _, p in phases)
    else:
        t_in, latency = per * inside / bw, 2 * a2a_latency(chip, w)
    t = max(t_in, per * (1 - inside) / out_bw)
    return moe_layers * (t + latency), moe_layers * per
