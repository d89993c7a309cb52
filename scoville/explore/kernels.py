"""A GPU's time per operation, by operation class and shape, from measured kernel tables.

An operation of ``flops`` operations and ``bytes`` of memory traffic, launched as ``n``
kernels, takes ``n x floor + max(flops / (peak x compute), bytes / (HBM x bandwidth))``: a
latency floor per kernel, then the longer of its compute at a fraction ``compute`` of the
chip's peak in the operation's format and its traffic at a fraction ``bandwidth`` of its HBM
bandwidth. A GEMM's and a MoE's operations are counted as if its rows M (a MoE: each touched
expert's tokens on a rank) and output columns N (a MoE: the expert's width a rank holds) were
``pad_m`` and ``pad_n`` larger, ``flops x (1 + pad_m / M) (1 + pad_n / N)`` (:func:`busy`,
:func:`shape`): the tiles a few rows leave idle, and the waves too few output tiles leave the
GPU's multiprocessors idle in, so a small or narrow GEMM reaches a smaller fraction of peak
than a large one. The numbers are the chip's own, per operation class and format
(:data:`TABLE`, ``kernels.json``), fitted by ``scripts/explore_kernels.py`` to NVIDIA
AIConfigurator 0.12's measured TensorRT-LLM kernel tables (docs/explore-kernels.md gives each
fit's error, on its own GPU and held out). A chip names the GPUs whose numbers it takes
(``Chip.kernels``, a comma-separated list: their geometric mean); a chip of no table (the
ASIC, a chip of a TOML file) names the GPUs it is taken to resemble.

The operation classes and how a shape gives its operations and bytes (:func:`cost`):

- ``gemm`` (format ``bf16``, ``fp8`` block-scaled, ``fp4`` NVFP4): ``2 m n k`` operations;
  A and B in the format (NVFP4: 4.5 bits an element with its scales), C in BF16;
- ``moe`` (grouped gate-up and down GEMMs of a MoE layer with its permutations, the format of
  the experts' weights and activations: ``bf16``, ``fp8``, ``fp4`` NVFP4, ``w4a16`` and
  ``w4a8`` MXFP4 weights with BF16 or MXFP8 activations): ``tokens x topk`` choices over
  ``experts`` spread on ``ep`` ranks, each expert's width sliced ``tp`` ways; a rank computes
  its share of the choices (``6 hidden x inter / tp`` operations each) and reads the weights
  of the experts its share touches (balanced: as many as its choices, at most its experts);
- ``decode_gqa``, ``decode_mla``: one query token a sequence against ``context`` tokens of
  its KV cache (GQA: K and V of the KV heads; MLA: the 576-value latent, absorbed: 1,088
  multiply-adds a head and token); the cache's bytes in its format;
- ``prefill_gqa``, ``prefill_mla``: ``context`` tokens of each sequence attending causally
  (half the square); MLA expanded (192-wide query-key and 128-wide value products a head).

- ``allreduce`` (``bf16``): TensorRT-LLM's all-reduce inside a node of ``n`` GPUs of a
  message of ``m`` elements (AIConfigurator's ``message_size`` counts elements): its own
  form, :func:`allreduce_seconds` (one shot or two, ``bandwidth`` a fraction of the links'
  ``link_gb_s``);
- ``a2a`` (``fp8`` dispatch, ``bf16`` combine): DeepEP's low-latency all-to-all of a MoE
  layer inside a node, ``tokens x topk`` hidden vectors a rank, over the links.

Attention's products run in BF16 (FlashAttention-3, FlashMLA, TensorRT-LLM's FMHA).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ACT_BYTES", "COMPUTE", "FAMILIES", "LINK_OPS", "OPS", "TABLE", "TABLE_FILE",
           "WEIGHT_BYTES", "OpParams",
           "allreduce_seconds", "busy", "cost", "params", "reload", "seconds", "transfer"]

TABLE_FILE = Path(__file__).parent / "kernels.json"
TABLE: dict = {}

#: Bytes an element of a GEMM's operands in each format (NVFP4: 4 bits and an FP8 scale a
#: block of 16); the MoE's ``w4a16`` and ``w4a8``: MXFP4 weights (4 bits and an 8-bit scale a
#: block of 32) with BF16 or MXFP8 activations.
ACT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 4.5 / 8, "w4a16": 2.0, "w4a8": 1.0}
WEIGHT_BYTES = ACT_BYTES | {"w4a16": 4.25 / 8, "w4a8": 4.25 / 8}
#: The array format an operation class's format computes in.
COMPUTE = {"w4a16": "bf16", "w4a8": "fp8"}
#: GPUs of one architecture: a GPU left out of a fit takes the others' numbers.
FAMILIES = {"hopper": ("h100", "h200"), "blackwell": ("b200", "gb200", "gb300")}
#: The operation classes.
OPS = ("gemm", "moe", "decode_gqa", "decode_mla", "prefill_gqa", "prefill_mla", "allreduce",
       "a2a")
#: The classes that move bytes over the chip's links, not its HBM.
LINK_OPS = ("allreduce", "a2a")
#: MLA's latent (512) and rotary (64) widths; its expanded query-key and value head widths.
_MLA_LATENT, _MLA_ROPE, _MLA_QK, _MLA_V = 512, 64, 192, 128


def reload(path: Path = TABLE_FILE) -> None:
    """Reads :data:`TABLE` from ``path`` (default ``kernels.json``, which
    ``scripts/explore_kernels.py`` writes)."""
    if not path.exists():
        raise FileNotFoundError(f"kernels: {path} is missing (python scripts/explore_kernels.py "
                                "writes it)")
    TABLE.clear()
    TABLE.update(json.loads(path.read_text()))
    params.cache_clear()


@dataclass(frozen=True)
class OpParams:
    """One operation class's numbers on one chip: the fractions of peak compute and of HBM
    bandwidth it reaches, and its latency floor a kernel; the all-reduce's also the fixed
    time its two-shot algorithm adds (:func:`allreduce_seconds`)."""

    compute: float
    bandwidth: float
    floor_us: float
    switch_us: float = 0.0
    pad_m: float = 0.0
    pad_n: float = 0.0


def transfer(name: str) -> str:
    """The GPUs whose numbers stand for ``name``'s when it is left out: the others of its
    architecture (:data:`FAMILIES`)."""
    for members in FAMILIES.values():
        if name in members:
            return ",".join(g for g in members if g != name)
    raise ValueError(f"kernels: {name!r} is in no family; known: "
                     + ", ".join(g for m in FAMILIES.values() for g in m))


@functools.cache
def params(names: str, op: str, fmt: str) -> OpParams:
    """The numbers of operation class ``op`` in ``fmt`` for a chip that takes those of the
    GPUs ``names`` (comma-separated; a GPU held out takes :func:`transfer`'s): the geometric
    mean of the fractions and floors and the mean of the pads over those that have the class
    in that format, else in the nearest
    wider format they have (``fp4`` -> ``fp8`` -> ``bf16``; ``w4a8`` -> ``w4a16``)."""
    gpus = [name.strip() for name in names.split(",")]
    chain = ("w4a8", "w4a16") if fmt.startswith("w4") else ("fp4", "fp8", "bf16")
    for f in chain[chain.index(fmt):]:
        got = [TABLE[g][op][f] for g in gpus if f in TABLE.get(g, {}).get(op, {})]
        if got:
            # Fractions and times: their geometric mean; pads (0 where a fit left one out):
            # their mean.
            return OpParams(*(_geomean([g.get(key, 0.0) for g in got])
                              for key in ("compute", "bandwidth", "floor_us", "switch_us")),
                            *(sum(g.get(key, 0.0) for g in got) / len(got)
                              for key in ("pad_m", "pad_n")))
    unknown = [g for g in gpus if g not in TABLE]
    raise ValueError(f"kernels: no measured {op} for {names!r}"
                     + (f" (unknown: {', '.join(unknown)}; known: {', '.join(sorted(TABLE))})"
                        if unknown else ""))


def _geomean(values: list[float]) -> float:
    if not any(values):
        return 0.0
    return math.exp(sum(math.log(max(v, 1e-9)) for v in values) / len(values))


def allreduce_seconds(chip, p: OpParams, n: int, message_bytes: float) -> float:
    """Seconds of an all-reduce of ``message_bytes`` over ``n`` GPUs of a node, as
    TensorRT-LLM's custom all-reduce runs it: the faster of one shot (each GPU reads every
    peer's whole message, ``(n - 1) x message``) and two shots (a reduce-scatter and an
    all-gather, a ring's ``2 (n - 1) / n x message``, after ``switch_us`` more), each at the
    fraction ``bandwidth`` of the links, after the floor."""
    if n <= 1:
        return 0.0
    link = chip.link_gb_s * 1e9 * p.bandwidth
    one = (n - 1) * message_bytes / link
    two = 2 * (n - 1) / n * message_bytes / link + p.switch_us * 1e-6
    return p.floor_us * 1e-6 + min(one, two)


def seconds(chip, op: str, fmt: str, p: OpParams, flops: float, bytes_: float,
            n: float = 1.0, shape: tuple[float, float] | None = None) -> float:
    """Seconds of an operation of class ``op`` (``n`` kernels) on ``chip``; its compute in
    ``fmt`` (attention's in BF16)."""
    return n * p.floor_us * 1e-6 + max(*busy(chip, op, fmt, p, flops, bytes_, shape))


def busy(chip, op: str, fmt: str, p: OpParams, flops: float, bytes_: float,
         shape: tuple[float, float] | None = None) -> tuple[float, float]:
    """Seconds the compute units and the memory are busy with an operation. A GEMM's or a
    MoE's ``shape`` (:func:`shape`: its rows M, a grouped GEMM's rows an expert, and its
    output columns N) pads its operations to ``(M + pad_m) (N + pad_n)`` of every ``M N``
    (tiles and waves a small GEMM leaves idle)."""
    if op in LINK_OPS:
        return 0.0, bytes_ / (chip.link_gb_s * 1e9 * p.bandwidth)
    peak = chip.peak_flops("bf16" if op.startswith(("decode", "prefill"))
                           else COMPUTE.get(fmt, fmt))
    if shape is not None and flops:
        rows, cols = shape
        flops *= (1 + p.pad_m / max(rows, 1e-9)) * (1 + p.pad_n / max(cols, 1e-9))
    return flops / (peak * p.compute), bytes_ / (chip.hbm_tb_s * 1e12 * p.bandwidth)


def shape(row: dict) -> tuple[float, float] | None:
    """A kernel table's GEMM or MoE row's rows M and output columns N a GPU computes (a MoE:
    each touched expert's tokens on a rank, and the expert's width over ``tp``); None for the
    other classes."""
    g = functools.partial(_int, row)
    if row["op"] == "gemm":
        return g("m"), g("n")
    if row["op"] == "moe":
        choices = g("tokens") * g("topk") / g("ep")
        return choices / min(g("experts") / g("ep"), choices), g("inter") / g("tp")
    return None


def _int(row, key) -> float:
    return float(row[key])


def cost(row: dict) -> tuple[float, float, float]:
    """Operations, bytes and kernels of a kernel table's row (``scripts/explore_kernels.py``
    writes them: ``op``, ``fmt``, the shape's fields)."""
    op, fmt = row["op"], row["fmt"]
    if op not in OPS:
        raise ValueError(f"kernels: op {op!r}; allowed: {', '.join(OPS)}")
    g = functools.partial(_int, row)
    if op == "allreduce":
        n = g("n")
        return 0.0, 2 * (n - 1) / n * g("m") * ACT_BYTES[fmt], 1
    if op == "a2a":
        return 0.0, g("tokens") * g("topk") * g("hidden") * ACT_BYTES[fmt], 1
    if op == "gemm":
        m, n, k = g("m"), g("n"), g("k")
        return 2 * m * n * k, (m * k + k * n) * ACT_BYTES[fmt] + 2 * m * n, 1
    if op == "moe":
        t, h, i, ep = g("tokens"), g("hidden"), g("inter") / g("tp"), g("ep")
        choices = t * g("topk") / ep
        touched = min(g("experts") / ep, choices)
        return (6 * h * i * choices,
                touched * 3 * h * i * WEIGHT_BYTES[fmt] + t * h * (ACT_BYTES[fmt] + 2), 1)
    kvb = 1.0 if row["kv_fmt"] == "fp8" else 2.0
    b, ctx, heads = g("batch"), g("context"), g("heads")
    if op == "decode_gqa":
        hd, kvh = g("head_dim"), g("kv_heads")
        return 4 * b * ctx * heads * hd, b * ctx * kvh * hd * 2 * kvb, 1
    if op == "decode_mla":
        return (2 * b * ctx * heads * (_MLA_LATENT + _MLA_ROPE + _MLA_LATENT),
                b * ctx * (_MLA_LATENT + _MLA_ROPE) * kvb, 1)
    if op == "prefill_gqa":
        hd, kvh = g("head_dim"), g("kv_heads")
        return (4 * b * heads * hd * ctx * ctx / 2,
                b * ctx * (2 * heads + 2 * kvh) * hd * 2, 1)
    return (2 * b * heads * ctx * ctx / 2 * (_MLA_QK + _MLA_V),          # prefill_mla
            b * ctx * heads * (2 * _MLA_QK + 2 * _MLA_V) * 2, 1)


reload()
