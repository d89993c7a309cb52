"""Mixture-of-Experts: the parameters of the ``moe`` block, one frozen config that its golden
model (:mod:`scoville.sim.golden.moe`) reads.

The block (``docs/moe.md``) routes a batch of T tokens to ``top_k`` of ``experts`` experts
each, groups the batch by expert, streams each chosen expert's MXFP4 weights in from memory
once per batch, runs its SwiGLU on the ``gemm`` array with activations quantized on chip to
``act_fmt``, and combines the experts' outputs weighted by the router. Two routers:
``gpt_oss`` (top-k on the logits, softmax over the k chosen; Hugging Face
``GptOssTopKRouter``) and ``deepseek`` (sigmoid scores, a correction bias used only to choose,
grouped top-k, weights normalized and scaled; ``DeepseekV3TopkRouter``).
"""

import dataclasses
from dataclasses import dataclass

from .formats import MX_BLOCK
from .gemm import GemmConfig
from .moe_swiglu import ALPHA, LIMIT
from .params import ParamError, check_choice, check_int, check_parts, param, part

__all__ = ["ACT_FORMATS", "ARRAY_FORMATS", "COLS", "ROUTERS", "SWIGLU_ALPHA", "SWIGLU_LIMIT",
           "MoeConfig"]

#: ``router``: GPT-OSS (softmax over the top-k logits, biases everywhere, interleaved gate and
#: up, the clamped SwiGLU) or DeepSeek-V3 (sigmoid, grouped top-k, gate and up in halves,
#: SiLU, a shared expert).
ROUTERS = ("gpt_oss", "deepseek")
#: The array's ``(fmt, b_fmt)`` for activations in ``act_fmt`` against MXFP4 weights.
ARRAY_FORMATS = {"mxfp8": ("mxfp8", "mxfp4"), "mxfp4": ("mxfp4", "same")}
#: ``act_fmt``: the format of both matmuls' activations (weights are MXFP4).
ACT_FORMATS = tuple(ARRAY_FORMATS)
#: GPT-OSS's SwiGLU: ``gate = min(gate, limit)``, ``up = clamp(up, -limit, limit)``,
#: ``(up + 1) * gate * sigmoid(alpha * gate)`` (Hugging Face ``GptOssExperts``).
SWIGLU_LIMIT = LIMIT
SWIGLU_ALPHA = ALPHA

#: ``array.cols``: even (a column tile of the first matmul holds whole gate-up pairs) and
#: dividing 64 (a block of 32 activations fills from whole tiles).
COLS = (2, 4, 8, 16, 32, 64)

_ARRAY = GemmConfig(rows=8, cols=8, fmt="mxfp8", b_fmt="mxfp4")


@dataclass(frozen=True)
class MoeConfig:
    """Parameters of the ``moe`` block.

    Attributes
    ----------
    array : GemmConfig
        The array (``array.*``: ``rows``, ``cols``, ``os``); its formats follow ``act_fmt``.
    router : str
        ``gpt_oss`` or ``deepseek``.
    experts : int
        Routed experts E.
    top_k : int
        Experts per token.
    n_group, topk_group : int
        DeepSeek's grouped routing: experts in ``n_group`` groups of consecutive indices, the
        ``topk_group`` best groups kept (1 and 1: no grouping, as Kimi K2).
    norm_topk_prob : int
        DeepSeek: 1 normalizes the chosen weights to sum 1.
    routed_scaling_factor : float
        DeepSeek: the chosen weights are multiplied by it.
    hidden, intermediate : int
        H and I (multiples of 32: MX blocks along both reductions).
    shared : int
        DeepSeek: 1 adds a shared expert of ``intermediate`` width that every token passes.
    act_fmt : str
        ``mxfp8`` or ``mxfp4``: activations of both matmuls, quantized on chip.
    weight_port_bits : int
        Width of the port the experts' weights arrive on.
    tokens : int
        The most tokens a batch holds (the on-chip buffers' depth).
    """

    array: GemmConfig = part(_ARRAY, "the array (block gemm); its formats follow act_fmt",
                             restrict={"fmt": tuple(f for f, _ in ARRAY_FORMATS.values()),
                                       "b_fmt": tuple(b for _, b in ARRAY_FORMATS.values()),
                                       "dataflow": ("os",)})
    router: str = param("gpt_oss", "gpt_oss, deepseek", "the router")
    experts: int = param(16, "2..512", "routed experts")
    top_k: int = param(4, "1..experts", "experts per token")
    n_group: int = param(1, "a divisor of experts", "deepseek: expert groups")
    topk_group: int = param(1, "1..n_group", "deepseek: groups kept")
    norm_topk_prob: int = param(1, "0, 1", "deepseek: normalize the chosen weights")
    routed_scaling_factor: float = param(1.0, "a positive number", "deepseek: weight scale")
    hidden: int = param(256, "32..16384, a multiple of 32", "hidden size H")
    intermediate: int = param(256, "32..16384, a multiple of 32", "expert width I")
    shared: int = param(0, "0, 1 (deepseek)", "a shared expert of intermediate width")
    act_fmt: str = param("mxfp8", "mxfp8, mxfp4", "activations of both matmuls")
    weight_port_bits: int = param(256, "64, 128, 256, 512, 1024, 2048", "weight port width")
    tokens: int = param(16, "1..256", "the most tokens a batch holds")

    def __post_init__(self):
        check_parts(self)
        check_choice("router", self.router, ROUTERS)
        check_int("experts", self.experts, 2, 512)
        check_int("top_k", self.top_k, 1, 512)
        if self.top_k > self.experts:
            raise ParamError(f"parameter 'top_k' = {self.top_k} is not allowed with experts = "
                             f"{self.experts}; allowed: 1..{self.experts}")
        check_int("n_group", self.n_group, 1, 512)
        if self.experts % self.n_group:
            raise ParamError(f"parameter 'n_group' = {self.n_group} is not allowed with experts "
                             f"= {self.experts}; allowed: a divisor of {self.experts}")
        check_int("topk_group", self.topk_group, 1, self.n_group)
        check_int("norm_topk_prob", self.norm_topk_prob, 0, 1)
        scale = self.routed_scaling_factor
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) \
                or not 0 < scale < float("inf"):
            raise ParamError(f"parameter 'routed_scaling_factor' = {scale!r} is not allowed; "
                             "allowed: a positive number")
        for name in ("hidden", "intermediate"):
            value = getattr(self, name)
            check_int(name, value, MX_BLOCK, 16384)
            if value % MX_BLOCK:
                raise ParamError(f"parameter '{name}' = {value} is not allowed; allowed: a "
                                 f"multiple of {MX_BLOCK} from {MX_BLOCK} to 16384")
        check_int("shared", self.shared, 0, 1)
        check_choice("act_fmt", self.act_fmt, ACT_FORMATS)
        check_int("tokens", self.tokens, 1, 256)
        cols = self.array.cols
        if cols not in COLS or self.hidden % cols:
            raise ParamError(f"parameter 'array.cols' = {cols} is not allowed with hidden = "
                             f"{self.hidden}; allowed: {', '.join(map(str, COLS))} dividing "
                             "hidden (a column tile holds whole gate-up pairs, whole blocks of "
                             "32 activations fill from whole tiles)")
        check_int("weight_port_bits", self.weight_port_bits, 64, 2048,
                  choices=[64 << k for k in range(6)])
        if self.router == "gpt_oss":
            for name, value in (("shared", self.shared), ("n_group", self.n_group)):
                if value != (0 if name == "shared" else 1):
                    raise ParamError(f"parameter '{name}' = {value} is not allowed with router "
                                     f"= gpt_oss; allowed: {0 if name == 'shared' else 1}")
        # One source: the array's formats follow act_fmt (the part's default pair, or the
        # pair act_fmt gives, is taken as "follow"; another pair is an error).
        want = ARRAY_FORMATS[self.act_fmt]
        have = (self.array.fmt, self.array.b_fmt)
        if have != want:
            if have != (_ARRAY.fmt, _ARRAY.b_fmt):
                raise ParamError(f"parameter 'array.fmt' = {self.array.fmt!r} is not allowed "
                                 f"with act_fmt = {self.act_fmt}; allowed: {want[0]!r} (with "
                                 f"array.b_fmt = {want[1]!r}: the array's formats follow "
                                 "act_fmt)")
            object.__setattr__(self, "array", dataclasses.replace(
                self.array, fmt=want[0], b_fmt=want[1]))

    @property
    def biases(self) -> bool:
        """Whether the experts have biases (GPT-OSS's do, DeepSeek's not)."""
        return self.router == "gpt_oss"

    @property
    def all_experts(self) -> int:
        """Experts whose weights the memory holds: the routed ones, then the shared one."""
        return self.experts + self.shared

    def tile_bits(self, k: int) -> int:
        """Bits of one column tile (``array.cols`` columns) of a matrix of ``k`` rows as the
        memory holds it: per block of 32 rows, the rows' MXFP4 codes (``cols`` x 4 bits a row,
        column 0 lowest) then the block's ``cols`` E8M0 scales; then, with :attr:`biases`,
        the ``cols`` FP32 biases."""
        c = self.array.cols
        return k // MX_BLOCK * (MX_BLOCK * 4 * c + 8 * c) + (32 * c if self.biases else 0)

    def tile_words(self, k: int) -> int:
        """Words of the weight port one column tile takes (the last one zero-padded)."""
        return -(-self.tile_bits(k) // self.weight_port_bits)

    @property
    def gate_up_tiles(self) -> int:
        """Column tiles of the first matmul (``2 * intermediate`` columns, gate and up
        interleaved)."""
        return self.gated_width // self.array.cols

    @property
    def down_tiles(self) -> int:
        """Column tiles of the second matmul (``hidden`` columns)."""
        return self.hidden // self.array.cols

    @property
    def expert_words(self) -> int:
        """Words of one expert's weights: its gate-up tiles, then its down tiles."""
        return (self.gate_up_tiles * self.tile_words(self.hidden)
                + self.down_tiles * self.tile_words(self.intermediate))

    @property
    def gated_width(self) -> int:
        """Columns of the first matmul: gate and up, ``2 * intermediate``."""
        return 2 * self.intermediate
