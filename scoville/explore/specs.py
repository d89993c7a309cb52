"""What the exploration model explores: chips, models and serving scenarios, as frozen
dataclasses, built in or read from TOML files.

A TOML file holds the fields of one :class:`Chip` or :class:`Model` at its top level (tables for
the nested ones); a missing or ill-typed field, or one the class does not have, is an error of
one line naming it (:class:`SpecError`). Every built-in number carries its public source in a
comment; ``../shared/MODELS.md`` collects most of them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path

from scoville.synth.yosys import sram_pj_per_bit

from .die import die_parts
from .kernels import TABLE

__all__ = ["CHIPS", "MODELS", "Chip", "Model", "Scenario", "SpecError", "bytes_per_param",
           "load_chip", "load_model"]

#: Bytes a parameter takes in each weight format, scales included: MXFP4 4 bits + an E8M0
#: scale per 32; NVFP4 4 bits + an E4M3 scale per 16; INT4 with a BF16 scale per group of 32
#: (Kimi K2.5); FP8 E4M3 with an FP32 scale per 128 x 128 block (DeepSeek-V3); BF16.
_PARAM_BITS = {"mxfp4": 4 + 8 / 32, "nvfp4": 4 + 8 / 16, "int4": 4 + 16 / 32,
               "fp8": 8 + 32 / (128 * 128), "bf16": 16}
#: The array formats a chip's peak is quoted for.
COMPUTE_FORMATS = ("fp4", "fp8", "bf16")


def bytes_per_param(fmt: str) -> float:
    """Bytes one parameter takes in weight format ``fmt``, scales included."""
    return _PARAM_BITS[fmt] / 8


class SpecError(ValueError):
    """A bad chip, model or scenario: one line naming the field or the reason."""


@dataclass(frozen=True)
class Energy:
    """Energy per operation and static power of a chip.

    Attributes
    ----------
    pj_per_flop : dict
        Picojoules per dense operation (a MAC is two) by array format (``fp4``, ``fp8``,
        ``bf16``).
    pj_per_byte_hbm, pj_per_byte_sram, pj_per_byte_link : float
        Picojoules per byte moved from HBM, from on-chip SRAM, over a chip-to-chip link.
    static_w : float
        Watts drawn whatever the load (idle, the model loaded).
    compute_w, memory_w : float
        Watts drawn above static while the compute units (the memory) are busy at their
        achievable rate: a ``roofline`` chip's power from utilisation, in place of energies
        per operation and byte.
    """

    pj_per_flop: dict
    pj_per_byte_hbm: float
    pj_per_byte_sram: float
    pj_per_byte_link: float
    static_w: float
    compute_w: float = 0.0
    memory_w: float = 0.0

    def __post_init__(self):
        bad = set(self.pj_per_flop) - set(COMPUTE_FORMATS)
        if bad or not self.pj_per_flop:
            raise SpecError(f"energy: field 'pj_per_flop' has {sorted(bad)}; allowed: "
                            f"{', '.join(COMPUTE_FORMATS)}")
        values = [*self.pj_per_flop.values(), self.pj_per_byte_hbm, self.pj_per_byte_sram,
                  self.pj_per_byte_link, self.static_w, self.compute_w, self.memory_w]
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise SpecError("energy: every field must be a number >= 0")


#: The share of its measured kernels' latency floors a step pays on a chip with ``kernels``
#: (fitted with the serving numbers by scripts/explore_validate.py; :data:`GPU_FACTORS`): a
#: chip of a TOML file that names ``kernels`` takes it unless it sets its own.
FLOOR_SHARE = 0.72


@dataclass(frozen=True)
class Chip:
    """One accelerator chip and the domain it scales up in.

    Attributes
    ----------
    name : str
    kind : str
        ``roofline``: a chip we have no RTL for, timed by its peaks and its measured kernels
        (``kernels``) or the efficiency factors;
        ``blocks``: a chip assembled from Scoville's blocks, timed by their closed-form models.
    clock_ghz : float
    tflops : dict
        Dense peak TFLOPS by array format (``fp4``, ``fp8``, ``bf16``; missing: not supported,
        the next wider one is used). A ``blocks`` chip's follow from its arrays.
    hbm_gb, hbm_tb_s : float
        HBM capacity (GB, 1e9 bytes) and bandwidth (TB/s).
    sram_mib, sram_tb_s : float
        On-chip SRAM and its bandwidth; ``kv_sram_frac`` of it holds KV cache (a ``blocks``
        chip reads KV from SRAM while it fits, else from HBM).
    link_gb_s, link_latency_us : float
        Chip-to-chip bandwidth per chip and direction, and the latency of a hop and of a
        small all-reduce inside the domain.
    a2a_latency_us : float
        The latency of one phase (dispatch or combine) of a MoE all-to-all of a few tokens
        inside the domain; 0: ``link_latency_us``.
    domain : int
        Chips in one scale-up domain (the most a tensor- or expert-parallel stage spans).
    scaleout_gb_s, scaleout_latency_us : float
        The network between domains, per chip and direction (pipeline stages beyond a
        domain).
    power_w : float
        The chip's power limit; ``allin_kw`` the all-in provisioned power per chip (facility
        included), for tokens per provisioned MW.
    energy : Energy
    compute_eff, bw_eff : float
        Achieved fractions of the compute peak and of the HBM bandwidth (``roofline`` chips;
        calibrated, docs/explore.md). ``attention_eff``: the fraction of the peak attention's
        score and value products reach (0: ``compute_eff``). ``kernel_us``: fixed time per
        kernel a step launches (launch, fill and drain; ``shapes.kernels`` counts them per
        model); ``layer_us``: fixed time per layer and step besides (synchronization).
        These are the model of a ``roofline`` chip without ``kernels``.
    kernels : str
        The GPUs whose measured numbers per operation (:mod:`scoville.explore.kernels`) time
        this chip's operations, comma-separated (their geometric mean): a GPU names itself,
        another chip the GPUs it is taken to resemble; empty: the factors above (their
        defaults, the peaks and no fixed time, make an ideal roofline: an upper bound).
    floor_share : float
        With ``kernels``: the share of its kernels' measured latency floors a step pays (a
        step's kernels, launched from one graph, overlap their prologues; measured alone
        each pays its own).
    cores, array_rows, array_cols : int
        A ``blocks`` chip's cores, each with one array of rows x cols processing elements.
    area_mm2 : float
        Silicon area, 0 where not known: a ``blocks`` chip's from synthesis (its arrays and
        SRAM, ``scoville synth``: a lower bound of its die), a GPU's die where published.
        Gives tokens/s per mm^2.
    die_mm2 : float
        A ``blocks`` chip's die estimate: ``area_mm2`` and the parts we do not build (memory
        and link PHYs and controllers, host interface, network on chip;
        :func:`scoville.explore.die.die_mm2`). 0: ``area_mm2`` is the whole die (a GPU's).
        Gives tokens/s per mm^2 of die.
    """

    name: str
    kind: str
    clock_ghz: float
    tflops: dict
    hbm_gb: float
    hbm_tb_s: float
    link_gb_s: float
    link_latency_us: float
    domain: int
    power_w: float
    allin_kw: float
    energy: Energy
    scaleout_gb_s: float = 50.0
    scaleout_latency_us: float = 5.0
    a2a_latency_us: float = 0.0
    sram_mib: float = 0.0
    sram_tb_s: float = 0.0
    kv_sram_frac: float = 0.0
    compute_eff: float = 1.0
    bw_eff: float = 1.0
    layer_us: float = 0.0
    kernel_us: float = 0.0
    attention_eff: float = 0.0
    kernels: str = ""
    floor_share: float = FLOOR_SHARE
    cores: int = 0
    array_rows: int = 0
    array_cols: int = 0
    area_mm2: float = 0.0
    die_mm2: float = 0.0
    description: str = ""

    def __post_init__(self):
        if self.kind not in ("roofline", "blocks"):
            raise SpecError(f"chip {self.name}: field 'kind' = {self.kind!r}; allowed: "
                            "roofline, blocks")
        bad = set(self.tflops) - set(COMPUTE_FORMATS)
        if bad:
            raise SpecError(f"chip {self.name}: field 'tflops' has {sorted(bad)}; allowed: "
                            f"{', '.join(COMPUTE_FORMATS)}")
        for name in ("clock_ghz", "hbm_gb", "hbm_tb_s", "link_gb_s", "link_latency_us",
                     "power_w", "allin_kw", "scaleout_gb_s", "scaleout_latency_us"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise SpecError(f"chip {self.name}: field '{name}' must be a positive number")
        for name in ("sram_mib", "sram_tb_s", "layer_us", "kernel_us", "a2a_latency_us"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise SpecError(f"chip {self.name}: field '{name}' must be a number >= 0")
        if not 0 <= self.kv_sram_frac <= 1:
            raise SpecError(f"chip {self.name}: field 'kv_sram_frac' must be in [0, 1]")
        if not self.tflops or not all(math.isfinite(t) and t > 0
                                      for t in self.tflops.values()):
            raise SpecError(f"chip {self.name}: field 'tflops' must hold a positive peak for "
                            f"at least one of {', '.join(COMPUTE_FORMATS)}")
        if not self.energy.static_w < self.power_w:
            raise SpecError(f"chip {self.name}: field 'energy.static_w' must be below "
                            f"'power_w' ({self.power_w})")
        for name in ("compute_eff", "bw_eff"):
            if not 0 < getattr(self, name) <= 1:
                raise SpecError(f"chip {self.name}: field '{name}' must be in (0, 1]")
        if not 0 < self.floor_share <= 2:
            raise SpecError(f"chip {self.name}: field 'floor_share' must be in (0, 2]")
        if not 0 <= self.attention_eff <= 1:
            raise SpecError(f"chip {self.name}: field 'attention_eff' must be in [0, 1] (0: "
                            "compute_eff)")
        if self.domain < 1:
            raise SpecError(f"chip {self.name}: field 'domain' must be at least 1")
        names = [g.strip() for g in self.kernels.split(",")] if self.kernels else []
        bad = [g or "an empty name" for g in names if g not in TABLE]
        if bad:
            raise SpecError(f"chip {self.name}: field 'kernels' names {', '.join(bad)}; "
                            "allowed: GPUs with measured kernels, comma-separated, "
                            f"{', '.join(sorted(TABLE))}")
        if self.kind == "blocks" and min(self.cores, self.array_rows, self.array_cols) < 1:
            raise SpecError(f"chip {self.name}: a blocks chip needs 'cores', 'array_rows' and "
                            "'array_cols' of at least 1")

    def peak_flops(self, fmt: str) -> float:
        """Dense operations a second in array format ``fmt`` (or the next wider one the chip
        has)."""
        f = _wider(fmt, self.tflops)
        if f is None:
            raise SpecError(f"chip {self.name}: no peak for {fmt} or wider in 'tflops'")
        return self.tflops[f] * 1e12

    def pj_per_flop(self, fmt: str) -> float:
        """Picojoules an operation takes in array format ``fmt`` (or the next wider one the
        energy table has, as :meth:`peak_flops` picks; the costliest if none)."""
        table = self.energy.pj_per_flop
        f = _wider(fmt, table)
        return max(table.values()) if f is None else table[f]


def _wider(fmt: str, table: dict) -> str | None:
    """The first of ``fmt`` and the wider array formats that ``table`` has, or None."""
    return next((f for f in COMPUTE_FORMATS[COMPUTE_FORMATS.index(fmt):] if f in table), None)


@dataclass(frozen=True)
class Attention:
    """A model's attention.

    Attributes
    ----------
    kind : str
        ``gqa`` or ``mla`` (DeepSeek's multi-head latent attention, absorbed in decode).
    q_heads, kv_heads, head_dim : int
        GQA's heads and their width (MLA: ``kv_heads`` 1).
    window, window_layers : int
        A sliding window of ``window`` tokens on ``window_layers`` of the layers (0: none).
    q_lora_rank, kv_lora_rank, qk_nope, qk_rope, v_head_dim : int
        MLA's ranks and head widths.
    """

    kind: str
    q_heads: int
    kv_heads: int = 1
    head_dim: int = 0
    window: int = 0
    window_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope: int = 0
    qk_rope: int = 0
    v_head_dim: int = 0


#: The busiest rank's routed tokens over the mean that TensorRT-LLM measured serving
#: DeepSeek-R1 without load balancing, experts spread over 32 GB200s with data-parallel
#: attention: NVIDIA/TensorRT-LLM ``docs/source/blogs/tech_blog/
#: blog4_Scaling_Expert_Parallelism_in_TensorRT-LLM.md`` (at 1d263f15a9), "The effect of EP
#: Load Balancer", table 1: ``(max - mean) / mean`` = 1.564, averaged over MoE layers 3-60 and
#: iterations 100-200 of the blog's reproduction run (its steps: a ``trtllm-bench``
#: throughput run, presumably on its machine-translation dataset), 1,024 routed tokens a rank
#: an iteration on average. The same table: per expert slot a standard deviation of 164.1 over
#: a mean of 128 (a coefficient of variation of 1.28); with its load balancer the busiest rank
#: 1.109 times the mean.
EP32_BUSIEST = {"ranks": 32, "experts": 256, "choices": 32 * 1024, "busiest": 2.564}
#: The experts' expected loads' coefficient of variation over a batch (``Model.expert_cv``) of
#: every built-in model and of a model file that does not set it: the value at which
#: ``shapes.busiest`` gives :data:`EP32_BUSIEST`'s measured busiest rank, 1.70. An effective
#: number, exact at that point only: the measured per-expert CV is 1.28 (its busiest rank,
#: by ``shapes.busiest``'s normal tail, 2.19); how it carries to other widths, to the other
#: models and from that dataset to InferenceX's random prompts is not measured. Not fitted to
#: InferenceX (``scripts/explore_validate.py`` tests it there, a run that balanced its
#: experts at 0).
EXPERT_CV = math.sqrt(((EP32_BUSIEST["busiest"] - 1) ** 2 / (2 * math.log(EP32_BUSIEST["ranks"]))
                       - (EP32_BUSIEST["ranks"] - 1) / EP32_BUSIEST["choices"])
                      * (EP32_BUSIEST["experts"] - 1) / (EP32_BUSIEST["ranks"] - 1))


@dataclass(frozen=True)
class Model:
    """A transformer's shapes and formats.

    Attributes
    ----------
    name : str
    layers, dense_layers : int
        All layers, and the first ``dense_layers`` of them with a dense FFN instead of experts.
    hidden, vocab : int
    attention : Attention
    experts, top_k, shared : int
        Routed experts, experts per token, shared experts.
    moe_intermediate, dense_intermediate, shared_intermediate : int
        FFN widths (SwiGLU: three matrices each).
    expert_fmt, weight_fmt, kv_fmt : str
        Weight format of the routed experts and of everything else; the KV cache's format.
    act_fmt : str
        The array format the matmuls run in (``fp4``, ``fp8``, ``bf16``).
    mtp_modules : int
        Multi-token-prediction modules the checkpoint ships (``num_nextn_predict_layers``):
        the sweep serves with and without them (each a layer proposing one draft token).
    expert_act_fmt : str
        The array format of the routed experts' matmuls; empty: ``act_fmt``. (Attention's
        score and value products run in BF16 on a ``roofline`` chip, as FlashAttention and
        FlashMLA do.)
    expert_cv : float
        How unevenly its router loads the experts over a batch: the coefficient of variation
        (standard deviation over mean) of the experts' expected shares of a layer's choices
        (the router's, not a batch's counts, whose draws ``shapes.busiest`` adds). Spread
        experts (expert parallelism) put the busiest chip's share above the mean by it
        (``shapes.expert_skew``); 0: every expert equally loaded (as expert-parallel load
        balancing makes the chips). Default :data:`EXPERT_CV`.
    """

    name: str
    layers: int
    dense_layers: int
    hidden: int
    vocab: int
    attention: Attention
    experts: int
    top_k: int
    shared: int
    moe_intermediate: int
    dense_intermediate: int
    shared_intermediate: int
    expert_fmt: str
    weight_fmt: str
    kv_fmt: str
    act_fmt: str
    description: str = ""
    expert_act_fmt: str = ""
    mtp_modules: int = 0
    expert_cv: float = EXPERT_CV

    @property
    def expert_compute_fmt(self) -> str:
        return self.expert_act_fmt or self.act_fmt

    def __post_init__(self):
        if self.mtp_modules < 0:
            raise SpecError(f"model {self.name}: field 'mtp_modules' must be >= 0")
        if not 0 <= self.expert_cv <= 10:
            raise SpecError(f"model {self.name}: field 'expert_cv' = {self.expert_cv}; "
                            "allowed: 0..10")
        if self.expert_act_fmt not in ("", *COMPUTE_FORMATS):
            raise SpecError(f"model {self.name}: field 'expert_act_fmt' = "
                            f"{self.expert_act_fmt!r}; allowed: {', '.join(COMPUTE_FORMATS)}")
        for name in ("expert_fmt", "weight_fmt"):
            if getattr(self, name) not in _PARAM_BITS:
                raise SpecError(f"model {self.name}: field '{name}' = {getattr(self, name)!r}; "
                                f"allowed: {', '.join(_PARAM_BITS)}")
        if self.kv_fmt not in ("bf16", "fp8"):
            raise SpecError(f"model {self.name}: field 'kv_fmt' = {self.kv_fmt!r}; allowed: "
                            "bf16, fp8")
        if self.act_fmt not in COMPUTE_FORMATS:
            raise SpecError(f"model {self.name}: field 'act_fmt' = {self.act_fmt!r}; allowed: "
                            f"{', '.join(COMPUTE_FORMATS)}")
        if self.attention.kind not in ("gqa", "mla"):
            raise SpecError(f"model {self.name}: field 'attention.kind' = "
                            f"{self.attention.kind!r}; allowed: gqa, mla")
        if not 1 <= self.top_k <= self.experts:
            raise SpecError(f"model {self.name}: field 'top_k' = {self.top_k}; allowed: "
                            f"1..experts ({self.experts})")
        if not 0 <= self.dense_layers <= self.layers:
            raise SpecError(f"model {self.name}: field 'dense_layers' = {self.dense_layers}; "
                            f"allowed: 0..layers ({self.layers})")
        for name in ("layers", "hidden", "vocab", "experts", "moe_intermediate"):
            if getattr(self, name) < 1:
                raise SpecError(f"model {self.name}: field '{name}' must be at least 1")
        for count, width in (("shared", "shared_intermediate"),
                             ("dense_layers", "dense_intermediate")):
            if getattr(self, count) < 0 or (getattr(self, count) and getattr(self, width) < 1):
                raise SpecError(f"model {self.name}: field '{width}' must be at least 1 with "
                                f"{count} = {getattr(self, count)}")
        a = self.attention
        if a.q_heads < 1 or not 0 <= a.window_layers <= self.layers or a.window < 0:
            raise SpecError(f"model {self.name}: fields 'attention.q_heads' (at least 1), "
                            "'attention.window' (>= 0) and 'attention.window_layers' "
                            f"(0..layers) = {a.q_heads}, {a.window}, {a.window_layers}")
        if a.kind == "gqa" and (a.head_dim < 1 or not 1 <= a.kv_heads <= a.q_heads
                                or a.q_heads % a.kv_heads):
            raise SpecError(f"model {self.name}: gqa needs 'attention.head_dim' >= 1 and "
                            "'attention.kv_heads' dividing 'attention.q_heads'")
        if a.kind == "mla" and min(a.q_lora_rank, a.kv_lora_rank, a.qk_nope, a.qk_rope,
                                   a.v_head_dim) < 1:
            raise SpecError(f"model {self.name}: mla needs 'attention.q_lora_rank', "
                            "'kv_lora_rank', 'qk_nope', 'qk_rope' and 'v_head_dim' >= 1")


@dataclass(frozen=True)
class Scenario:
    """A serving scenario: every request ``isl`` input tokens and ``osl`` output tokens,
    ``concurrency`` requests in flight on a replica."""

    isl: int
    osl: int
    concurrency: tuple[int, ...] = field(
        default=tuple(2 ** i for i in range(11)))
    #: Whether a sweep goes on past ``concurrency`` while memory allows (the default list),
    #: or keeps to it (a list the user gave).
    extend: bool = True
    #: The most requests an instance runs at once per data-parallel attention rank (an
    #: engine's maximum batch): the sweep skips a layout past it. 512, the largest batch of
    #: an instance among the InferenceX points of scoville/explore/data (its sweeps stop there).
    max_batch: int = 512
    #: The longest time to first token a point may have, seconds (0: no limit): the sweep
    #: drops the points past it, as a service-level objective does.
    max_ttft_s: float = 0.0
    #: The share of each request's input found in the prefix cache (a shared system prompt, a
    #: conversation's earlier turns): held in the KV cache, not prefilled.
    prefix_hit: float = 0.0

    def __post_init__(self):
        for name in ("isl", "osl", "max_batch"):
            if getattr(self, name) < 1:
                raise SpecError(f"scenario: '{name}' must be at least 1")
        if not (math.isfinite(self.max_ttft_s) and self.max_ttft_s >= 0):
            raise SpecError(f"scenario: 'max_ttft_s' = {self.max_ttft_s}; allowed: a number "
                            ">= 0 (0: no limit)")
        if not 0 <= self.prefix_hit < 1:
            raise SpecError(f"scenario: 'prefix_hit' = {self.prefix_hit}; allowed: 0 <= "
                            "prefix_hit < 1")

    @property
    def cached(self) -> float:
        """Input tokens a request finds in the prefix cache."""
        return self.prefix_hit * self.isl

    @property
    def label(self) -> str:
        def k(n):
            return f"{n // 1024}k" if n % 1024 == 0 else str(n)
        return f"{k(self.isl)}/{k(self.osl)}"


# ---- Loading from TOML, with one-line errors.

def _build(cls, data: dict, where: str):
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise SpecError(f"{where}: unknown field '{sorted(unknown)[0]}'")
    values = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SpecError(f"{where}: missing field '{name}'")
            continue
        value, hint = data[name], hints[name]
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                raise SpecError(f"{where}: field '{name}' must be a table")
            value = _build(hint, value, f"{where}: {name}")
        elif hint is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SpecError(f"{where}: field '{name}' must be a number, got {value!r}")
            value = float(value)
        elif hint is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise SpecError(f"{where}: field '{name}' must be an integer, got {value!r}")
        elif hint is str:
            if not isinstance(value, str):
                raise SpecError(f"{where}: field '{name}' must be a string, got {value!r}")
        elif hint is dict:
            if not isinstance(value, dict) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool)
                    for v in value.values()):
                raise SpecError(f"{where}: field '{name}' must be a table of numbers")
            value = {k: float(v) for k, v in value.items()}
        values[name] = value
    try:
        return cls(**values)
    except SpecError as err:
        if str(err).startswith(where):
            raise
        raise SpecError(f"{where}: {err}") from None


def _load(cls, path: str, kind: str):
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as err:
        raise SpecError(f"{kind} file {path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{kind} file {path}: {err}") from None
    return _build(cls, data, f"{kind} file {path}")


def load_chip(name_or_path: str) -> Chip:
    """A built-in chip by name, or a chip's TOML file."""
    if name_or_path in CHIPS:
        return CHIPS[name_or_path]
    if name_or_path.endswith(".toml"):
        return _load(Chip, name_or_path, "chip")
    if name_or_path == "scoville-a64" and SYNTH is None:
        raise SpecError("chip 'scoville-a64' needs scoville/explore/synth.json; fix: python "
                        "scripts/area.py")
    raise SpecError(f"unknown chip {name_or_path!r}; built in: {', '.join(CHIPS)} (or a .toml "
                    "file)")


def load_model(name_or_path: str) -> Model:
    """A built-in model by name, or a model's TOML file."""
    if name_or_path in MODELS:
        return MODELS[name_or_path]
    if name_or_path.endswith(".toml"):
        return _load(Model, name_or_path, "model")
    raise SpecError(f"unknown model {name_or_path!r}; built in: {', '.join(MODELS)} (or a "
                    ".toml file)")


# ---- Built-ins.

#: Scale-out, every chip: a 400 Gb/s NIC per chip (50 GB/s; ConnectX-7 on HGX H100/B200) and
#: 5 us a hop (the default of Chip.scaleout_*).
#:
#: GPU power, from utilisation: idle with the model loaded, measured with nvidia-smi (H100 75 W,
#: splitwise-sim's ``configs/power_model/constant.yaml`` at 378088013a54; H200 115 W,
#: sgl-project/sglang issue 3196; B200 194 W, NVIDIA/TensorRT-LLM issue 10278); GB200, GB300
#: and the ASIC (not published) at B200's share of its limit. Above idle, busy compute units
#: and busy memory draw :data:`GPU_POWER`'s fractions of the rest of the limit. Link bytes
#: at NVLink-C2C's 1.3 pJ/bit; on-chip SRAM (the blocks chip) about 10 pJ per 64-bit read of an
#: 8 KB array at 45 nm (Horowitz, ISSCC 2014) scaled by 1/4 to a 5 nm-class node: 0.3 pJ/byte;
#: HBM3E 3.9 pJ/bit (Samsung).
_IDLE_W = {"h100": 75.0, "h200": 115.0, "b200": 194.0}
_IDLE_SHARE = _IDLE_W["b200"] / 1000
_HBM_PJ_B, _LINK_PJ_B, _SRAM_PJ_B = 3.9 * 8, 1.3 * 8, 0.3
#: The watts of busy compute units and of busy memory (each at its achievable rate), as
#: fractions of a GPU's power limit less its idle power, shared by every GPU: fitted to
#: ML.ENERGY's measured H100 power serving Llama 3.1 and tested on its B200 DeepSeek-R1
#: points and InferenceX's H100 GPT-OSS-120B ones by ``scripts/explore_power.py``
#: (docs/explore-power.md).
GPU_POWER = {"compute": 1.03, "memory": 0.56}


def gpu_energy(name: str, tflops: dict, power_w: float, power: dict | None = None) -> Energy:
    """A GPU's energy: its idle power, and ``power``'s fractions (:data:`GPU_POWER`) of the
    rest of its limit while its compute units and its memory are busy."""
    power = power or GPU_POWER
    idle = _IDLE_W.get(name, _IDLE_SHARE * power_w)
    return Energy({f: 0.0 for f in tflops}, 0.0, _SRAM_PJ_B, _LINK_PJ_B, idle,
                  compute_w=power["compute"] * (power_w - idle),
                  memory_w=power["memory"] * (power_w - idle))


#: Collective latencies inside a domain, measured with CUDA graphs at a few tokens
#: (AIConfigurator 0.12's tables, ``aiconfigurator_core/systems/data/<system>/comm/``):
#: ``link_latency_us`` TensorRT-LLM's custom all-reduce of 8 KB (``trtllm/1.3.0rc20/
#: custom_allreduce_perf``: H100 and H200 3.5 us over 8 GPUs, B200 5.6, GB200 4.9 over 4);
#: ``a2a_latency_us`` a dispatch or combine phase of DeepSeek-V3's all-to-all at 1-2 tokens a
#: rank (DeepEP's low-latency kernels, ``sglang/0.5.12/wideep_deepep_ll_perf``, EP8: H100
#: 13.2 / 14.4 us, H200 11.9 / 12.6, B200 22.1 / 22.1; GB200 TensorRT-LLM's NVLink all-to-all
#: over EP8-64 of the NVL72, ``trtllm/1.3.0rc10/trtllm_alltoall_perf``, 13.5-14.1). GB300
#: and the ASIC (no data) as GB200.
_COLLECTIVE_US = {"h100": (3.5, 13.8), "h200": (3.5, 12.3), "b200": (5.6, 22.1),
                  "gb200": (4.9, 13.8), "gb300": (4.9, 13.8), "asic-2026": (4.9, 13.8)}


def _gpu(name, tflops, hbm_gb, hbm_tb_s, power_w, allin_kw, link_gb_s, domain, description,
         **kw) -> Chip:
    energy = gpu_energy(name, tflops, power_w)
    return Chip(name=name, kind="roofline", clock_ghz=1.8, tflops=tflops, hbm_gb=hbm_gb,
                hbm_tb_s=hbm_tb_s, link_gb_s=link_gb_s, link_latency_us=_COLLECTIVE_US[name][0],
                a2a_latency_us=_COLLECTIVE_US[name][1], domain=domain,
                power_w=power_w, allin_kw=allin_kw, energy=energy, description=description,
                **({"kernels": name} if name in TABLE else {}) | kw)


#: The GPUs' serving number besides their measured operations (``Chip.kernels``): the share
#: of their kernels' measured latency floors a step pays; fitted, with ``perf.Serving``'s
#: request and hand-off seconds, to the InferenceX points of scoville/explore/data that the
#: model describes by scripts/explore_validate.py, which
#: reports them rounded and the errors with each hardware and model held out
#: (docs/explore-validation.md); ../shared/MODELS.md's points are not in the fit
#: (docs/explore-calibration.md).
GPU_FACTORS = {"floor_share": FLOOR_SHARE}

CHIPS: dict[str, Chip] = {
    # FP8 1,979 dense TFLOPS, BF16 989, 80 GB at 3.35 TB/s, 700 W (InferenceX-app
    # gpu-specs.ts, MODELS.md); NVLink 4 900 GB/s both ways, 8 per HGX board; all-in 1.73 kW
    # (InferenceX-app constants.ts).
    # Die: GH100, 814 mm^2 (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022).
    "h100": _gpu("h100", {"fp8": 1979, "bf16": 989}, 80, 3.35, 700, 1.73, 450, 8,
                 "NVIDIA H100 SXM", area_mm2=814, **GPU_FACTORS),
    # As H100 with 141 GB at 4.8 TB/s (MODELS.md).
    "h200": _gpu("h200", {"fp8": 1979, "bf16": 989}, 141, 4.8, 700, 1.73, 450, 8,
                 "NVIDIA H200 SXM", area_mm2=814, **GPU_FACTORS),
    # FP4 9,000, FP8 4,500, 180 GB at 8 TB/s, 1,000 W (MODELS.md); NVLink 5 1.8 TB/s both
    # ways, 8 per HGX board; all-in 2.17 kW.
    "b200": _gpu("b200", {"fp4": 9000, "fp8": 4500, "bf16": 2250}, 180, 8.0, 1000, 2.17, 900,
                 8, "NVIDIA B200 (HGX)", **GPU_FACTORS),
    # Per GPU: FP4 10,000, FP8 5,000, 192 GB at 8 TB/s, 1,200 W (MODELS.md); NVL72: 72 GPUs
    # on NVLink 5; all-in 2.1 kW.
    "gb200": _gpu("gb200", {"fp4": 10000, "fp8": 5000, "bf16": 2500}, 192, 8.0, 1200, 2.1,
                  900, 72, "NVIDIA GB200 NVL72, per GPU", **GPU_FACTORS),
    # Per GPU: FP4 15,000, FP8 5,000, 288 GB at 8 TB/s, 1,400 W (MODELS.md); NVL72.
    "gb300": _gpu("gb300", {"fp4": 15000, "fp8": 5000, "bf16": 2500}, 288, 8.0, 1400, 2.1,
                  900, 72, "NVIDIA GB300 NVL72, per GPU", **GPU_FACTORS),
    # The reported 2026 inference ASIC (MODELS.md: press reports of a Hot Chips 2026 talk):
    # MXFP4 13,400 TFLOPS, 216 GiB HBM4 at 15.4 TB/s, 700 W rated (<= 550 W measured), 128
    # chips a rack. Not reported, assumed: FP8 at half the FP4 rate, BF16 a quarter; links as
    # NVLink 5; all-in power per chip at GB200's facility ratio (2.1 / 1.2) x 700 W; its
    # operations as efficient as GB200's measured kernels (``kernels``), the GPUs' serving
    # numbers.
    "asic-2026": _gpu("asic-2026", {"fp4": 13400, "fp8": 6700, "bf16": 3350},
                      216 * 2**30 / 1e9, 15.4, 700, 2.1 / 1.2 * 0.7, 900, 128,
                      "reported custom inference ASIC, 2026", kernels="gb200", **GPU_FACTORS),
}


#: What synthesis measured of our blocks (``python scripts/area.py`` writes it from
#: ``scoville synth --json``): logic area per PE of the 8 x 8 engine and the array's energy
#: per MAC at 45 nm, by format; SRAM area per bit; the node and its energy factor.
#: None (and no blocks chip) while the file is missing: the script that writes it runs the
#: command, which must not need it.
_SYNTH_FILE = Path(__file__).parent / "synth.json"
SYNTH = json.loads(_SYNTH_FILE.read_text()) if _SYNTH_FILE.exists() else None
#: The array format of each compute format of a ``blocks`` chip.
_ARRAY_FMT = {"fp4": "mxfp4", "fp8": "mxfp8", "bf16": "bf16"}


def _blocks_chip() -> Chip:
    """``scoville-a64``: 256 cores, each a 64 x 64 array of Scoville's MXFP4 processing
    elements at 1.5 GHz (an assumed clock, above the bound ``scoville synth`` gives the
    unpipelined MXFP4 engine even at devices' delays, docs/area.md: it assumes the arrays
    pipelined to a clock, issue #36, whose flip-flops the area and energy do not hold), with
    the MoE block's weight path and the attention block's KV cache; a B200's HBM and links.
    Area and energy per MAC from synthesis (:data:`SYNTH`); the die estimated from it
    (:func:`blocks_die`)."""
    cores, rows, cols, ghz, sram_mib = 256, 64, 64, 1.5, 256
    fp4 = 2 * cores * rows * cols * ghz * 1e9 / 1e12
    # Energy per operation: the array's measured energy per MAC (gate-level toggles over
    # random GEMMs, 45 nm) scaled to the synthesis node, over two operations a MAC. SRAM: a
    # byte read from a 1 MiB macro (a core's share) at that node. Static 20% of the power
    # limit (assumed).
    # A format not measured (scripts/area.py --energy-formats) takes the dearest measured one.
    scale = SYNTH["energy_vs_45nm"]
    measured = SYNTH["array_pj_per_mac_45nm"]
    pj = {f: measured[a] * scale / 2 for f, a in _ARRAY_FMT.items() if a in measured}
    sram_pj_b = 8 * sram_pj_per_bit(sram_mib / cores * 2**20, SYNTH["node"])
    energy = Energy(pj, _HBM_PJ_B, sram_pj_b, _LINK_PJ_B, 0.2 * 700)
    # Area: the MXFP4 engine's logic per PE at 8 x 8 (its buffers and sequencer shared over
    # 64 PEs) for every PE, and the SRAM as macros; no I/O, HBM PHYs or network on chip.
    area = (cores * rows * cols * SYNTH["logic_mm2_per_pe"]["mxfp4"]
            + sram_mib * 2**23 * SYNTH["sram_mm2_per_bit"])
    chip = Chip(name="scoville-a64", kind="blocks", clock_ghz=ghz,
                tflops={"fp4": fp4, "fp8": fp4 / 2, "bf16": fp4 / 4}, hbm_gb=180, hbm_tb_s=8.0,
                link_gb_s=900, link_latency_us=2.0, domain=64, power_w=700,
                allin_kw=2.1 / 1.2 * 0.7, energy=energy, sram_mib=sram_mib, sram_tb_s=64,
                kv_sram_frac=0.75, cores=cores, array_rows=rows, array_cols=cols,
                area_mm2=area,
                description="256 cores of Scoville's 64 x 64 MXFP4 array, 256 MiB SRAM, "
                            "B200-class HBM and links")
    return dataclasses.replace(chip, die_mm2=blocks_die(chip)["total"])


def blocks_die(chip: Chip) -> dict[str, float]:
    """A ``blocks`` chip's die estimate by part (:func:`~.die.die_parts`): its synthesized
    area, the PHYs and controllers of its memory and links (as many HBM stacks and links as
    its bandwidths take), a PCIe 5 x16 host interface, the network on chip and the rest."""
    return die_parts(chip.area_mm2, node=SYNTH["node"], hbm_tb_s=chip.hbm_tb_s,
                     link_gb_s=chip.link_gb_s)


if SYNTH is not None:
    CHIPS["scoville-a64"] = _blocks_chip()

MODELS: dict[str, Model] = {
    # openai/gpt-oss config.json and gpt_oss/torch/model.py (MODELS.md): 36 layers, hidden
    # 2880, GQA 64/8 heads of 64, a 128-token window on half the layers, 128 experts top-4 of
    # width 2880, vocab 201,088; experts MXFP4, the rest BF16; KV cache BF16.
    "gpt-oss-120b": Model(
        name="gpt-oss-120b", layers=36, dense_layers=0, hidden=2880, vocab=201088,
        attention=Attention("gqa", q_heads=64, kv_heads=8, head_dim=64, window=128,
                            window_layers=18),
        experts=128, top_k=4, shared=0, moe_intermediate=2880, dense_intermediate=0,
        shared_intermediate=0, expert_fmt="mxfp4", weight_fmt="bf16", kv_fmt="bf16",
        act_fmt="fp8", description="OpenAI GPT-OSS-120B"),
    # deepseek-ai/DeepSeek-R1 config.json (MODELS.md): 61 layers (first 3 dense, width
    # 18432), hidden 7168, MLA 128 heads (q_lora 1536, kv_lora 512, nope 128, rope 64, v 128),
    # 256 routed experts top-8 + 1 shared, width 2048, vocab 129,280; weights FP8 in 128 x 128
    # blocks; KV cache (the latent) FP8. The MTP layer is left out (it serves speculation).
    "deepseek-r1": Model(
        name="deepseek-r1", layers=61, dense_layers=3, hidden=7168, vocab=129280,
        attention=Attention("mla", q_heads=128, q_lora_rank=1536, kv_lora_rank=512,
                            qk_nope=128, qk_rope=64, v_head_dim=128),
        experts=256, top_k=8, shared=1, moe_intermediate=2048, dense_intermediate=18432,
        shared_intermediate=2048, expert_fmt="fp8", weight_fmt="fp8", kv_fmt="fp8",
        act_fmt="fp8", description="DeepSeek-R1 (V3 architecture)",
        mtp_modules=1),                 # config.json num_nextn_predict_layers
    # MoonshotAI/Kimi-K2 config.json (MODELS.md): as DeepSeek-V3 with 64 heads, 384 experts,
    # the first layer dense, vocab 163,840; K2.5's routed experts INT4 (group 32), the rest
    # BF16 (MODELS.md: "about 29 GB ... INT4 experts, bf16 attention"); KV cache BF16.
    "kimi-k2": Model(
        name="kimi-k2", layers=61, dense_layers=1, hidden=7168, vocab=163840,
        attention=Attention("mla", q_heads=64, q_lora_rank=1536, kv_lora_rank=512,
                            qk_nope=128, qk_rope=64, v_head_dim=128),
        experts=384, top_k=8, shared=1, moe_intermediate=2048, dense_intermediate=18432,
        shared_intermediate=2048, expert_fmt="int4", weight_fmt="bf16", kv_fmt="bf16",
        act_fmt="fp8", description="Moonshot Kimi K2 (K2.5 INT4 experts)"),
}

#: The default scenarios (InferenceX's input/output lengths).
SCENARIOS = (Scenario(1024, 1024), Scenario(1024, 8192), Scenario(8192, 1024))
