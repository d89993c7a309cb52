"""The block table: every block the flow and the CLI know, one entry each.

Adding a block is one :class:`Block` entry in :data:`BLOCKS`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scoville.rtl.argmax import Argmax, ArgmaxConfig
from scoville.rtl.attention import Attention, AttentionConfig
from scoville.rtl.decoder import Decoder, DecoderConfig
from scoville.rtl.exp2 import Exp2, Exp2Config
from scoville.rtl.fetch import Fetch, FetchConfig
from scoville.rtl.fp4_mul import Fp4Mul, Fp4MulConfig
from scoville.rtl.fp32_add import Fp32Add, Fp32AddConfig
from scoville.rtl.gemm import Gemm, GemmConfig
from scoville.rtl.gemm_quant import GemmQuant, GemmQuantConfig
from scoville.rtl.int_mac import IntMac, IntMacConfig
from scoville.rtl.kvcache import KvCache, KvCacheConfig
from scoville.rtl.lib.params import ParamError, build_config, param_tree
from scoville.rtl.linear import Linear, LinearConfig
from scoville.rtl.moe import Moe, MoeConfig
from scoville.rtl.mx_dot import MxDot, MxDotConfig
from scoville.rtl.mx_quant import MxQuant, MxQuantConfig
from scoville.rtl.nvfp4_dot import Nvfp4Dot, Nvfp4DotConfig
from scoville.rtl.rmsnorm import RmsNorm, RmsNormConfig
from scoville.rtl.rope import Rope, RopeConfig
from scoville.sim.cycles import attention as attention_timed
from scoville.sim.cycles import decoder as decoder_timed
from scoville.sim.cycles import fetch as fetch_timed
from scoville.sim.cycles import gemm as gemm_timed
from scoville.sim.cycles import gemm_quant as gemm_quant_timed
from scoville.sim.cycles import kvcache as kvcache_timed
from scoville.sim.cycles import linear as linear_timed
from scoville.sim.cycles import moe as moe_timed
from scoville.sim.cycles import rmsnorm as rmsnorm_timed
from scoville.sim.cycles.stream import pipeline_timing
from scoville.sim.golden.argmax import argmax
from scoville.sim.golden.attention import AttentionModel
from scoville.sim.golden.decoder import DecoderModel
from scoville.sim.golden.exp2 import exp2
from scoville.sim.golden.fetch import fetch
from scoville.sim.golden.fp4_mul import fp4_mul
from scoville.sim.golden.fp32_add import fp32_add
from scoville.sim.golden.gemm import gemm
from scoville.sim.golden.gemm_quant import gemm_quant
from scoville.sim.golden.int_mac import int_mac
from scoville.sim.golden.kvcache import KvCacheModel
from scoville.sim.golden.linear import linear
from scoville.sim.golden.moe import moe
from scoville.sim.golden.mx_dot import mx_dot
from scoville.sim.golden.mx_quant import mx_quant
from scoville.sim.golden.nvfp4_dot import nvfp4_dot
from scoville.sim.golden.rmsnorm import rmsnorm
from scoville.sim.golden.rope import rope
from scoville.sim.workload import (
    AttentionWorkload,
    DecoderWorkload,
    FetchWorkload,
    GemmQuantWorkload,
    GemmWorkload,
    KvCacheWorkload,
    LinearWorkload,
    MoeWorkload,
    StreamWorkload,
)

__all__ = ["BLOCKS", "Block", "Look", "get_block", "parse_params"]


class Look(NamedTuple):
    """One configuration of a block for the first-look regression (``scoville regress`` and
    ``./scripts/demo``): a short label and the parameters it sets (``scoville sim``'s
    defaults for the rest)."""

    label: str
    params: Mapping[str, Any]


#: The first look of a block whose ``scoville sim`` defaults are already small.
DEFAULTS = (Look("default", {}),)


@dataclass(frozen=True)
class Block:
    """One registered block.

    Attributes
    ----------
    name : str
        The name used on the command line.
    summary : str
        One line saying what it is.
    config : type
        Frozen dataclass of the hardware parameters; the RTL, golden and timed models take it.
    workload : type
        Frozen dataclass of the testbench's workload parameters.
    component : callable
        ``config -> wiring.Component``: the bare component (its streams, with the harness's
        agents: :func:`scoville.sim.harness.stream_names` and ``memory_ports``).
    golden : callable
        The golden model: ``golden(config, ...)`` computes the block's outputs, bit for bit
        (a function or class of ``scoville/sim/golden``).
    timed : callable
        The timed model, a function of ``scoville/sim/cycles`` returning a
        :class:`~scoville.sim.cycles.stream.Timing` from the block's config (or, for the
        stalling pipelines, the component's latency), its transactions and the streams'
        schedules; each block's own arguments are in its docstring.
    testbench : str
        The cocotb test module.
    parts : dict of str to str
        A composed block's parts: each field of its config that holds a part's config, with
        the name of the part's block (whose entry has the part's models). Empty otherwise.
    workload_test : str
        The cocotb test that runs the random workload (what ``scoville sim`` runs).
    first_look : tuple of Look
        What ``scoville regress`` (and so ``./scripts/demo``) builds and runs of this block by
        default, on both simulators with every test of its testbench: configurations small
        enough that every block's together stay within the demo's ten minutes on two cores
        (``scripts/first_run.py`` measures it), that still exercise the block's main features.
        ``scoville regress --full`` runs ``scoville sim``'s defaults instead. By default
        :data:`DEFAULTS` (those defaults, for the blocks whose defaults are small).
    operation : tuple of (str, callable), optional
        What energy is counted per (``scoville synth --energy``): the operation's name and a
        function of the workload test's metrics that counts them.
    """

    name: str
    summary: str
    config: type
    workload: type
    component: Callable[[Any], Any]
    golden: Callable[..., Any]
    timed: Callable[..., Any]
    testbench: str
    parts: dict[str, str] = field(default_factory=dict)
    first_look: tuple[Look, ...] = DEFAULTS
    workload_test: str = "test_workload"
    operation: tuple[str, Callable[[dict], float]] | None = None

    @functools.cached_property
    def config_names(self) -> frozenset[str]:
        """The config's own field names (a part is one name)."""
        return frozenset(f.name for f in dataclasses.fields(self.config))

    def param_fields(self) -> dict[str, tuple[type, dataclasses.Field]]:
        """Every parameter by its dotted name (a part's ``array.rows``), with the class that
        declares it and its field."""
        return {p.name: (p.owner, p.field) for cls in (self.config, self.workload)
                for p in param_tree(cls)}


#: Attention's first look: two KV heads, a GQA group of two with sinks, chunks of 32. Decode
#: on a 2 x 8 BF16 array (heads of 16: ``P V`` in two column tiles), a window of 40 over 60
#: cached tokens (the step attends tokens 21..60: two chunks, the first not from its start);
#: prefill of three tokens a step after 40, a window of 20 (tokens 21..42: two chunks), in
#: causal row tiles of two tokens on a 4 x 4 array, heads of 8. The edge test crosses two chunk
#: boundaries in both. Banks of 1024 words (not 4096: each word is a line of the Verilog's
#: initializer) hold the edge test's 70-odd tokens.
_ATTENTION_SMALL = {"kv.banks": 2, "kv.word_bits": 64, "kv.bank_words": 1024,
                    "kv.page_tokens": 4, "kv.max_seqs": 2,
                    "kv.kv_heads": 2, "q_heads": 4, "chunk": 32, "sinks": 1, "window": 20,
                    "seqs": 1, "steps": 1}
ATTENTION_LOOK = (
    Look("decode", {**_ATTENTION_SMALL, "kv.head_dim": 16, "array.rows": 2, "array.cols": 8,
                    "window": 40, "context": 60}),
    Look("prefill", {**_ATTENTION_SMALL, "kv.word_bits": 32, "kv.head_dim": 8,
                     "array.rows": 4, "array.cols": 4,
                     "mode": "prefill", "q_tokens": 4, "tokens": 3, "context": 40}),
)
#: MoE's first look: six experts of 32 x 32 in two groups of three, DeepSeek's router keeping
#: one group and the top 2 of its three, a scaling factor and the shared expert, on a 2 x 8
#: array (four column tiles), two tokens a batch, MXFP4 x MXFP4 from BF16 x.
MOE_LOOK = (
    Look("deepseek", {"router": "deepseek", "experts": 6, "top_k": 2, "n_group": 2,
                      "topk_group": 1, "shared": 1, "routed_scaling_factor": 2.5,
                      "hidden": 32, "intermediate": 32, "tokens": 2, "array.rows": 2,
                      "array.cols": 8, "weight_port_bits": 64, "act_fmt": "mxfp4",
                      "x_fmt": "bf16"}),
)

#: Linear's first look: a 2 x 8 array, four tokens a command (two row tiles), K up to 64 and
#: N up to 32 (four column tiles) on a 64-bit weight port.
LINEAR_LOOK = (
    Look("2x8", {"array.rows": 2, "array.cols": 8, "tokens": 4, "k_max": 64, "n_max": 32,
                 "weight_port_bits": 64}),
)

#: The decoder engine's first look: hidden 64 (two lines a token), 128 lines of activations,
#: projections on a 2 x 8 array of up to four tokens, K and N up to 64, a 64-bit weight port
#: and 2^14 words of weight memory (the edge test's weights reach its last word); a MoE of four
#: experts of 64 x 32, top 2 (GPT-OSS's router), MXFP4 on its own 2 x 8 array.
DECODER_LOOK = (
    Look("h64", {"hidden": 64, "act_lines": 128, "linear.array.rows": 2,
                 "linear.array.cols": 8, "linear.tokens": 4, "linear.k_max": 128,
                 "linear.n_max": 128, "linear.weight_port_bits": 64, "linear.addr_bits": 14,
                 "moe.hidden": 64, "moe.intermediate": 32, "moe.experts": 4, "moe.top_k": 2,
                 "moe.tokens": 4, "moe.array.rows": 2, "moe.array.cols": 8,
                 "moe.weight_port_bits": 64, "moe.act_fmt": "mxfp4",
                 "moe.x_lanes": 1, "rope.dim": 16, "attn.kv.kv_heads": 2,
                 "attn.kv.head_dim": 16, "attn.q_heads": 4, "attn.array.rows": 4,
                 "attn.array.cols": 16, "attn.kv.banks": 2, "attn.kv.word_bits": 64,
                 "attn.kv.bank_words": 1024, "attn.kv.page_tokens": 4, "attn.kv.max_seqs": 2,
                 "attn.chunk": 32, "attn.q_tokens": 4}),
)

BLOCKS: dict[str, Block] = {
    block.name: block
    for block in [
        Block(
            name="fp4_mul",
            summary="exact FP4 (E2M1) x FP4 multiplier, products in quarters",
            config=Fp4MulConfig,
            workload=StreamWorkload,
            component=Fp4Mul,
            golden=fp4_mul,
            timed=pipeline_timing,
            testbench="scoville.testbenches.fp4_mul",
        ),
        Block(
            name="fp32_add",
            summary="IEEE-754 binary32 adder, bit-exact to NumPy float32 (canonical NaN)",
            config=Fp32AddConfig,
            workload=StreamWorkload,
            component=Fp32Add,
            golden=fp32_add,
            timed=pipeline_timing,
            testbench="scoville.testbenches.fp32_add",
        ),
        Block(
            name="exp2",
            summary="binary32 2**x for softmax: table and chord, relative error <= 1.5e-5, "
                    "flush to zero below 2**-126",
            config=Exp2Config,
            workload=StreamWorkload,
            component=Exp2,
            golden=exp2,
            timed=pipeline_timing,
            testbench="scoville.testbenches.exp2",
        ),
        Block(
            name="int_mac",
            summary="INT4/INT8 dot-product MAC with wrapping INT32 accumulation",
            config=IntMacConfig,
            workload=StreamWorkload,
            component=IntMac,
            golden=int_mac,
            timed=pipeline_timing,
            testbench="scoville.testbenches.int_mac",
        ),
        Block(
            name="mx_dot",
            summary="MXFP4 block dot products (exact block sums) with FP32 accumulation",
            config=MxDotConfig,
            workload=StreamWorkload,
            component=MxDot,
            golden=mx_dot,
            timed=pipeline_timing,
            testbench="scoville.testbenches.mx_dot",
        ),
        Block(
            name="nvfp4_dot",
            summary="NVFP4 block dot products, FP32 accumulation, per-tensor FP32 scale",
            config=Nvfp4DotConfig,
            workload=StreamWorkload,
            component=Nvfp4Dot,
            golden=nvfp4_dot,
            timed=pipeline_timing,
            testbench="scoville.testbenches.nvfp4_dot",
        ),
        Block(
            name="mx_quant",
            summary="MXFP4 quantizer: 32 FP32/BF16 values to E2M1 codes and an E8M0 scale",
            config=MxQuantConfig,
            workload=StreamWorkload,
            component=MxQuant,
            golden=mx_quant,
            timed=pipeline_timing,
            testbench="scoville.testbenches.mx_quant",
        ),
        Block(
            name="rmsnorm",
            summary="RMSNorm of FP32 tokens: sum of squares, correctly rounded rsqrt, weight "
                    "(GPT-OSS, DeepSeek-V3)",
            config=RmsNormConfig,
            workload=StreamWorkload,
            component=RmsNorm,
            golden=rmsnorm,
            timed=rmsnorm_timed.timing,
            testbench="scoville.testbenches.rmsnorm",
            # count is tokens here: 200 of 8 beats.
            first_look=(Look("200-tokens", {"count": 200}),),
        ),
        Block(
            name="rope",
            summary="rotary position embedding of a head in FP32, pairs of halves (GPT-OSS) "
                    "or neighbours (DeepSeek-V3), YaRN's table rows on the stream",
            config=RopeConfig,
            workload=StreamWorkload,
            component=Rope,
            golden=rope,
            timed=pipeline_timing,
            testbench="scoville.testbenches.rope",
        ),
        Block(
            name="argmax",
            summary="greedy sampling: the lowest index of a token's largest FP32 logit "
                    "(NaN never chosen), streaming in beats",
            config=ArgmaxConfig,
            workload=StreamWorkload,
            component=Argmax,
            golden=argmax,
            timed=pipeline_timing,
            testbench="scoville.testbenches.argmax",
            # count is tokens here: 100 of 32 beats.
            first_look=(Look("100-tokens", {"count": 100}),),
        ),
        Block(
            name="gemm",
            summary="tiled GEMM engine on an R x C systolic array (os/ws; int8, int4, mxfp4, "
                    "nvfp4, mxfp8, bf16, mxfp8 x mxfp4)",
            config=GemmConfig,
            workload=GemmWorkload,
            component=Gemm,
            golden=gemm,
            timed=gemm_timed.timing,
            testbench="scoville.testbenches.gemm",
            # The default 8 x 8 INT8 array with a quarter of its long-K test (K = 8197 of
            # extremes: sums past 2**27; the default 32773, past 2**29, takes Icarus a minute),
            # and a 4 x 4 MXFP4 weight-stationary one.
            first_look=(Look("int8-os", {"long_k": 8197}),
                        Look("mxfp4-ws", {"rows": 4, "cols": 4, "fmt": "mxfp4",
                                          "dataflow": "ws"})),
            operation=("MAC", lambda m: m["macs"]),
        ),
        Block(
            name="kvcache",
            summary="KV-cache scratchpad: banked SRAM, paged sequences, fork with copy-on-write",
            config=KvCacheConfig,
            workload=KvCacheWorkload,
            component=KvCache,
            golden=KvCacheModel,
            timed=kvcache_timed.timing,
            testbench="scoville.testbenches.kvcache",
            first_look=(Look("2k-reqs", {"count": 2000}),),
            # A line read, appended or copied (the counters' lines).
            operation=("line", lambda m: m["counter_reads"] + m["counter_writes"]
                       + m["counter_copies"]),
        ),
        Block(
            name="fetch",
            summary="read-fetch engine: commands to bursts of memory reads, words out in order",
            config=FetchConfig,
            workload=FetchWorkload,
            component=Fetch,
            golden=fetch,
            timed=fetch_timed.timing,
            testbench="scoville.testbenches.fetch",
        ),
        Block(
            name="gemm_quant",
            summary="GEMM array (MX formats, os) whose rows of C are quantized to MXFP4 or "
                    "MXFP8 along N",
            config=GemmQuantConfig,
            workload=GemmQuantWorkload,
            component=GemmQuant,
            golden=gemm_quant,
            timed=gemm_quant_timed.timing,
            testbench="scoville.testbenches.gemm_quant",
            # A 4 x 4 MXFP4 array: eight column tiles to a block of 32, two GEMMs.
            first_look=(Look("4x4", {"array.rows": 4, "array.cols": 4, "count": 2}),),
            parts={"array": "gemm", "quant": "mx_quant"},
        ),
        Block(
            name="attention",
            summary="decode and prefill attention over the KV cache on the os array: GQA, "
                    "online softmax, sinks, sliding window, causal row tiles",
            config=AttentionConfig,
            workload=AttentionWorkload,
            component=Attention,
            golden=AttentionModel,
            timed=attention_timed.timing,
            testbench="scoville.testbenches.attention",
            first_look=ATTENTION_LOOK,
            parts={"kv": "kvcache", "array": "gemm"},
        ),
        Block(
            name="moe",
            summary="Mixture-of-Experts layer: router, counting-sort dispatch, experts' MXFP4 "
                    "weights fetched into double-buffered tiles, SwiGLU on the os array, "
                    "combine",
            config=MoeConfig,
            workload=MoeWorkload,
            component=Moe,
            golden=moe,
            timed=moe_timed.timing,
            testbench="scoville.testbenches.moe",
            first_look=MOE_LOOK,
            parts={"array": "gemm"},
        ),
        Block(
            name="linear",
            summary="linear layer x W^T + b on the os array, BF16 weights fetched from memory "
                    "into double-buffered column tiles, FP32 bias (the decoder's projections "
                    "and LM head)",
            config=LinearConfig,
            workload=LinearWorkload,
            component=Linear,
            golden=linear,
            timed=linear_timed.timing,
            testbench="scoville.testbenches.linear",
            first_look=LINEAR_LOOK,
            parts={"array": "gemm"},
        ),
        Block(
            name="decoder",
            summary="the decoder layer's engine: commands over an activation memory of FP32 "
                    "lines (in, out, residual add, RMSNorm, projections, MoE), weights fetched "
                    "through one memory port",
            config=DecoderConfig,
            workload=DecoderWorkload,
            component=Decoder,
            golden=DecoderModel,
            timed=decoder_timed.timing,
            testbench="scoville.testbenches.decoder",
            first_look=DECODER_LOOK,
            parts={"linear": "linear", "moe": "moe", "rope": "rope", "attn": "attention",
                   "argmax": "argmax"},
        ),
    ]
}


def get_block(name: str) -> Block:
    """The block called ``name``, or a one-line :class:`ParamError`."""
    try:
        return BLOCKS[name]
    except KeyError:
        raise ParamError(f"unknown block {name!r}; allowed: {', '.join(BLOCKS)}") from None


def _coerce(name: str, text: Any, kind: type, allowed: str) -> Any:
    if not isinstance(text, str):
        return text
    try:
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        return kind(text)
    except ValueError:
        raise ParamError(
            f"parameter '{name}' must be {'an' if kind is int else 'a'} {kind.__name__}; "
            f"allowed: {allowed}; got {text!r}"
        ) from None


def parse_params(block: Block, items: list[str] | dict[str, Any]) -> tuple[Any, Any]:
    """Build ``(config, workload)`` of ``block`` from ``NAME=VALUE`` strings or a dict.

    Raises
    ------
    ParamError
        One line naming the parameter and the allowed values.
    """
    workload_names = {f.name for f in dataclasses.fields(block.workload)}
    values: dict[type, dict[str, Any]] = {block.config: {}, block.workload: {}}
    pairs = items.items() if isinstance(items, dict) else [_split(item) for item in items]
    for name, value in pairs:
        # A part's parameters come dotted, or (from a JSON report) as one nested dict.
        head = name.partition(".")[0]
        known = head in block.config_names or name in workload_names
        if not known:
            raise ParamError(
                f"unknown parameter '{name}' for block '{block.name}'; "
                f"allowed: {', '.join(block.param_fields())}"
            )
        values[block.workload if name in workload_names else block.config][name] = value
    return (build_config(block.config, values[block.config], _coerce),
            build_config(block.workload, values[block.workload], _coerce))


def _split(item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name:
        raise ParamError(f"--param takes NAME=VALUE; got {item!r}")
    return name.strip(), value.strip()
