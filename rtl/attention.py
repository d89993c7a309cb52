"""Attention over the KV cache: the parameters of the ``attention`` block, one frozen config that
its golden model (:mod:`scoville.sim.golden.attention`) reads.

The block composes the ``kvcache`` (part ``kv``) and the ``gemm`` array (part ``array``, ``os``,
in ``bf16`` or ``mxfp8``) with the softmax (:mod:`scoville.rtl.exp2`). How a decode step
computes, to the bit, is in ``docs/attention.md``: scores ``Q K^T`` on the array, times
``scale * log2(e)`` in FP32, an online softmax over chunks of ``chunk`` tokens (running max,
running sum, rescaled partial output), ``P V`` on the array, and a final normalization.
"""

from dataclasses import dataclass

from .gemm import GemmConfig
from .kvcache import KvCacheConfig
from .params import ParamError, check_choice, check_int, check_parts, param, part

__all__ = ["MLA_K_DIM", "MLA_V_DIM", "MODES", "AttentionConfig"]

#: ``mode``: one query token per sequence, or T new tokens.
MODES = ("decode", "prefill")
#: MLA in absorbed form (DeepSeek-V3/R1, Kimi K2): a 576-element latent key per token (512
#: latent + 64 rotary) whose first 512 elements are the value.
MLA_K_DIM = 576
MLA_V_DIM = 512

#: The default cache: one KV head of 64 elements (a GPT-OSS-120B head), 8 banks of 64 bits, so
#: a line is 32 BF16 elements and a token's K (or V) two lines.
_KV = KvCacheConfig(banks=8, word_bits=64, bank_words=4096, page_tokens=16, max_seqs=2,
                    kv_heads=1, head_dim=64, kv_fmt="bf16")
#: The default array: a GPT-OSS group of 8 query heads as M, a line of 32 elements as N, so
#: the group's MACs for one line (8 x 32) are one step of the array.
_ARRAY = GemmConfig(rows=8, cols=32, fmt="bf16")


@dataclass(frozen=True)
class AttentionConfig:
    """Parameters of the ``attention`` block: its parts' configs and what attention adds.

    Attributes
    ----------
    kv : KvCacheConfig
        The KV cache (``kv.*``): ``kv_heads``, ``head_dim`` and ``kv_fmt`` are attention's.
    array : GemmConfig
        The array (``array.*``): ``fmt`` of both matmuls, ``bf16`` or ``mxfp8``; ``os``.
    q_heads : int
        Query heads; query head h reads KV head ``h // (q_heads // kv.kv_heads)``.
    window : int
        Sliding window: a query at position p attends to p - window + 1 .. p (0: all).
    sinks : int
        1: a learned logit per query head joins the softmax's denominator (GPT-OSS).
    mla : int
        1: MLA in absorbed form: one latent KV head of 576 elements, V its first 512.
    scale : float
        Scores are ``q.k * scale``; 0 means ``1 / sqrt(head_dim)``.
    mode : str
        ``decode`` or ``prefill``.
    chunk : int
        Tokens per chunk of the online softmax (the bits depend on it).
    """

    kv: KvCacheConfig = part(_KV, "the KV cache (block kvcache)")
    array: GemmConfig = part(_ARRAY, "the array (block gemm)",
                             restrict={"fmt": ("bf16", "mxfp8"), "b_fmt": ("same", "mxfp4"),
                                       "dataflow": ("os",)})
    q_heads: int = param(8, "1..128, a multiple of kv.kv_heads", "query heads")
    window: int = param(0, "0..65535 (0: unlimited)", "sliding window in tokens")
    sinks: int = param(0, "0, 1", "a learned sink logit per query head")
    mla: int = param(0, "0, 1", "MLA in absorbed form (one 576-element latent KV head)")
    scale: float = param(0.0, "0 (1/sqrt(head_dim)) or a positive number", "score scale")
    mode: str = param("decode", "decode, prefill", "one token, or T tokens, per step")
    chunk: int = param(256, "32, 64, ..., 4096", "tokens per online-softmax chunk")

    def __post_init__(self):
        check_parts(self)
        check_int("q_heads", self.q_heads, 1, 128)
        check_int("window", self.window, 0, 65535)
        check_int("sinks", self.sinks, 0, 1)
        check_int("mla", self.mla, 0, 1)
        check_choice("mode", self.mode, MODES)
        check_int("chunk", self.chunk, 32, 4096, choices=[32 << k for k in range(8)])
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)) \
                or not self.scale >= 0 or self.scale == float("inf"):
            raise ParamError(f"parameter 'scale' = {self.scale!r} is not allowed; allowed: 0 "
                             "(1/sqrt(head_dim)) or a positive number")
        if self.q_heads % self.kv.kv_heads:
            raise ParamError(f"parameter 'q_heads' = {self.q_heads} is not allowed with "
                             f"kv.kv_heads = {self.kv.kv_heads}; allowed: a multiple of "
                             f"{self.kv.kv_heads}")
        if self.mla and (self.kv.kv_heads, self.kv.head_dim) != (1, MLA_K_DIM):
            raise ParamError(f"parameter 'mla' = 1 is not allowed with kv.kv_heads = "
                             f"{self.kv.kv_heads}, kv.head_dim = {self.kv.head_dim}; allowed: "
                             f"kv.kv_heads = 1, kv.head_dim = {MLA_K_DIM}")

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.q_heads // self.kv.kv_heads

    @property
    def v_dim(self) -> int:
        """Elements of a value vector."""
        return MLA_V_DIM if self.mla else self.kv.head_dim

    @property
    def score_scale(self) -> float:
        """The scale of the scores (``scale``, or ``1 / sqrt(head_dim)`` for 0)."""
        return self.scale if self.scale else self.kv.head_dim ** -0.5
