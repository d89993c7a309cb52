"""How a replica splits over its chips: the parallelism, the phases' traffic, and the
communication between chips (:mod:`scoville.sim.explore.perf` states the model)."""

from __future__ import annotations

from dataclasses import dataclass

from .specs import Chip, Model

__all__ = ["MODES", "Parallelism", "Phase", "comm", "hop", "kv_split", "parallelisms"]


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
    """Every parallelism the sweep tries: each of :data:`MODES` over 1, 2, 4, ... chips of one
    scale-up domain, times 1, 2 or 4 pipeline stages (stages beyond the domain talk over the
    scale-out network); expert parallelism needs at least two chips and no more than the
    experts, tensor-parallel attention no more chips than query heads."""
    out = []
    width = 1
    while width <= chip.domain:
        for mode in MODES:
            if mode != "tp" and not 2 <= width <= model.experts:
                continue
            if mode != "ep" and width > model.attention.q_heads:
                continue
            if mode == "tpep" and chip.kind == "blocks":
                continue                # a blocks chip spreads whole experts in tp already
            for pp in (1, 2, 4):
                if pp <= model.layers:
                    out.append(Parallelism(mode, width, pp))
        width *= 2
    return out


def hop(chip: Chip, par: Parallelism, tokens: float, hidden: int) -> float:
    """Seconds to pass ``tokens`` hidden vectors of ``hidden`` BF16 values from one stage to
    the next: over the domain's links while the replica fits in a domain, else over the
    scale-out network."""
    inside = par.chips <= chip.domain
    bw = (chip.link_gb_s if inside else chip.scaleout_gb_s) * 1e9
    lat = (chip.link_latency_us if inside else chip.scaleout_latency_us) * 1e-6
    return lat + tokens * hidden * 2 / bw


@dataclass(frozen=True)
class Phase:
    """One stage's time and traffic for a step (decode) or a batch's prefill: seconds, and
    per chip the operations, HBM, SRAM and link bytes behind them; ``compute_pj``, where
    set, the operations' energy counted per array format (else every operation is charged
    at the model's ``act_fmt``)."""

    seconds: float
    flops: float
    hbm_bytes: float
    sram_bytes: float
    link_bytes: float
    compute_pj: float | None = None


def kv_split(m: Model, par: Parallelism) -> int:
    """Ways the KV cache (and its reads) split over a stage's chips."""
    if par.attention_dp > 1:
        return par.width
    return min(par.width, m.attention.kv_heads) if m.attention.kind == "gqa" else 1


def comm(chip: Chip, m: Model, par: Parallelism, tokens: float) -> tuple[float, float]:
    """Seconds and link bytes per chip of one stage's communication for ``tokens`` tokens (the
    stage's whole batch): tensor-parallel attention (``tp``, ``tpep``) two ring all-reduces of
    BF16 hidden vectors a layer (after attention, and after the experts, whose partial sums
    every chip holds for every token); ``ep`` a dispatch (FP8) and a combine (BF16)
    all-to-all a MoE layer, each chip sending its share's tokens to the others."""
    w = par.width
    if w == 1:
        return 0.0, 0.0
    layers = m.layers / par.pp
    bw, lat = chip.link_gb_s * 1e9, chip.link_latency_us * 1e-6
    if w > chip.domain:                 # a stage wider than the domain: over the scale-out
        bw, lat = chip.scaleout_gb_s * 1e9, chip.scaleout_latency_us * 1e-6
    if par.attention_dp == 1:
        per = 2 * (w - 1) / w * tokens * m.hidden * 2
        return layers * 2 * (per / bw + lat), layers * 2 * per
    moe_layers = (m.layers - m.dense_layers) / par.pp
    per = (w - 1) / w * tokens / w * m.top_k * m.hidden * (1 + 2)
    return moe_layers * (per / bw + 2 * lat), moe_layers * per
