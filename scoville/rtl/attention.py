"""Attention over the KV cache: the parameters of the ``attention`` block, one frozen config that
its golden model (:mod:`scoville.sim.golden.attention`) reads.

The block composes the ``kvcache`` (part ``kv``) and the ``gemm`` array (part ``array``, ``os``,
in ``bf16`` or ``mxfp8``) with the softmax (:mod:`scoville.rtl.exp2`). How a decode step
computes, to the bit, is in ``docs/attention.md``: scores ``Q K^T`` on the array, times
``scale * log2(e)`` in FP32, an online softmax over chunks of ``chunk`` tokens (running max,
running sum, rescaled partial output), ``P V`` on the array, and a final normalization.
"""

import dataclasses
import math
from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .attention_feeder import AppendFeeder
from .attention_query import QueryBuffer
from .attention_transpose import LinesToBeats
from .attention_walk import ChunkWalk, CommandIssuer, ReadIssuer, window_start
from .gemm import COUNTERS as GEMM_COUNTERS
from .gemm import Gemm, GemmConfig
from .kvcache import COUNTER_BITS, SEQ_BITS, TOKEN_BITS, KvCache, KvCacheConfig, Status
from .kvcache import COUNTERS as CACHE_COUNTERS
from .kvcache import Op as CacheOp
from .lib.codes import names
from .lib.comb import max_tree, wire
from .lib.counters import count, counter_layout
from .lib.formats import MX_BLOCK
from .lib.fp32 import (
    ONE,
    fp32_add,
    fp32_bits,
    fp32_exp2,
    fp32_key,
    fp32_mul,
    fp32_recip,
    fp32_to_bf16,
)
from .lib.params import ParamError, check_choice, check_int, check_parts, param, part

__all__ = ["COUNTERS", "MLA_K_DIM", "MLA_ROPE_DIM", "MLA_V_DIM", "MODES", "OPS", "STATUS", "Op",
           "Status", "Attention", "AttentionConfig", "command_layout", "io_layout",
           "response_layout", "rtl_error"]

_NEG_INF = 0xFF80_0000
_SIGN = 0x8000_0000

#: ``mode``: one query token per sequence, or T new tokens.
MODES = ("decode", "prefill")
#: MLA in absorbed form (DeepSeek-V3/R1, Kimi K2): a 576-element latent key per token (512
#: latent + 64 rotary) whose first 512 elements are the value. The block takes any latent
#: width (``kv.head_dim``) above the rotary part: the value is the rest.
MLA_K_DIM = 576
MLA_V_DIM = 512
MLA_ROPE_DIM = MLA_K_DIM - MLA_V_DIM

#: The default cache: one KV head of 64 elements (a GPT-OSS-120B head), 8 banks of 64 bits, so
#: a line is 32 BF16 elements and a token's K (or V) two lines.
_KV = KvCacheConfig(banks=8, word_bits=64, bank_words=4096, page_tokens=16, max_seqs=2,
                    kv_heads=1, head_dim=64, kv_fmt="bf16")
#: The default array: a GPT-OSS group of 8 query heads as M and a head of 64 elements as N,
#: so ``P V`` takes one token's V (two lines) per step and ``Q K^T`` a tile of 64 tokens'
#: element k per step: the group's MACs for a line (8 x 32) are half a step of the array.
_ARRAY = GemmConfig(rows=8, cols=64, fmt="bf16")


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
        1: MLA in absorbed form: one latent KV head of ``kv.head_dim`` elements (576 in
        DeepSeek-R1 and Kimi K2), V its first ``head_dim - 64`` (512).
    scale : float
        Scores are ``q.k * scale``; 0 means ``1 / sqrt(head_dim)``.
    mode : str
        ``decode`` or ``prefill``.
    chunk : int
        Tokens per chunk of the online softmax (the bits depend on it).
    q_tokens : int
        Prefill: the most new tokens (T) a step takes, the depth of the block's Q buffer; a
        step gives its T in the command. Decode steps take one.
    """

    kv: KvCacheConfig = part(_KV, "the KV cache (block kvcache)")
    array: GemmConfig = part(_ARRAY, "the array (block gemm)",
                             restrict={"fmt": ("bf16", "mxfp8"), "b_fmt": ("same", "mxfp4"),
                                       "dataflow": ("os",)})
    q_heads: int = param(8, "1..128, a multiple of kv.kv_heads", "query heads")
    window: int = param(0, "0..65535 (0: unlimited)", "sliding window in tokens")
    sinks: int = param(0, "0, 1", "a learned sink logit per query head")
    mla: int = param(0, "0, 1", "MLA in absorbed form (one latent KV head, V all but its "
                                "last 64 elements)")
    scale: float = param(0.0, "0 (1/sqrt(head_dim)) or a positive number", "score scale")
    mode: str = param("decode", "decode, prefill", "one token, or T tokens, per step")
    chunk: int = param(256, "32, 64, ..., 4096", "tokens per online-softmax chunk")
    q_tokens: int = param(32, "1, 2, 4, ..., 256",
                          "prefill: the most new tokens a step takes (the Q buffer)")

    def __post_init__(self):
        check_parts(self)
        check_int("q_heads", self.q_heads, 1, 128)
        check_int("window", self.window, 0, 65535)
        check_int("sinks", self.sinks, 0, 1)
        check_int("mla", self.mla, 0, 1)
        check_choice("mode", self.mode, MODES)
        check_int("chunk", self.chunk, 32, 4096, choices=[32 << k for k in range(8)])
        check_int("q_tokens", self.q_tokens, 1, 256, choices=[1 << k for k in range(9)])
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)) \
                or not self.scale >= 0 or self.scale == float("inf"):
            raise ParamError(f"parameter 'scale' = {self.scale!r} is not allowed; allowed: 0 "
                             "(1/sqrt(head_dim)) or a positive number")
        if self.q_heads % self.kv.kv_heads:
            raise ParamError(f"parameter 'q_heads' = {self.q_heads} is not allowed with "
                             f"kv.kv_heads = {self.kv.kv_heads}; allowed: a multiple of "
                             f"{self.kv.kv_heads}")
        if self.mla and (self.kv.kv_heads != 1 or self.kv.head_dim <= MLA_ROPE_DIM):
            raise ParamError(f"parameter 'mla' = 1 is not allowed with kv.kv_heads = "
                             f"{self.kv.kv_heads}, kv.head_dim = {self.kv.head_dim}; allowed: "
                             f"kv.kv_heads = 1, kv.head_dim above {MLA_ROPE_DIM} "
                             f"(DeepSeek-R1: {MLA_K_DIM})")
        # One source: MLA's cache stores the latent vector alone (V reads take K's lines).
        if self.kv.k_only and not self.mla:
            raise ParamError(f"parameter 'kv.k_only' = {self.kv.k_only} is not allowed with "
                             "mla = 0; allowed: 0 (it follows mla)")
        if self.mla and not self.kv.k_only:
            object.__setattr__(self, "kv", dataclasses.replace(self.kv, k_only=1))

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.q_heads // self.kv.kv_heads

    @property
    def v_dim(self) -> int:
        """Elements of a value vector."""
        return self.kv.head_dim - MLA_ROPE_DIM if self.mla else self.kv.head_dim

    @property
    def v_tiles(self) -> int:
        """Column tiles of ``P V`` (N = ``v_dim`` on ``array.cols`` columns): each its own
        read of V (a window of each token's lines) and its own replay of P."""
        return -(-self.v_dim // self.array.cols)

    @property
    def v_lines(self) -> int:
        """Lines of each token a V read takes: the whole token in one tile, else a column
        tile's (``array.cols`` elements, whole lines: :func:`rtl_error`)."""
        if self.v_tiles == 1:
            return self.kv.token_lines
        return self.array.cols * self.kv.bits // self.kv.line_bits

    def v_reads(self) -> list[tuple[int, int]]:
        """The ``(line0, nlines)`` of a chunk's V reads, one per column tile (``nlines`` = 0:
        the whole token)."""
        if self.v_tiles == 1:
            return [(0, 0)]
        return [(t * self.v_lines, self.v_lines) for t in range(self.v_tiles)]

    @property
    def v_queue(self) -> int:
        """Beats of V the RTL's token queue holds: the V tokens that arrive while the
        transposer empties K's last tile (``head_dim`` beats, one a cycle), ``v_lines`` lines
        each, and two more."""
        return -(-self.kv.head_dim // self.v_lines) + 2

    @property
    def score_scale(self) -> float:
        """The scale of the scores (``scale``, or ``1 / sqrt(head_dim)`` for 0)."""
        return self.scale if self.scale else self.kv.head_dim ** -0.5

    @property
    def max_step_tokens(self) -> int:
        """The most new tokens a step takes: ``q_tokens`` in prefill, 1 in decode."""
        return self.q_tokens if self.mode == "prefill" else 1

    @property
    def row_tokens(self) -> int:
        """Query tokens a row tile of a prefill step holds: as many whole groups as the array
        has rows (at least one, at most ``q_tokens``), each token's ``group`` query heads on
        consecutive rows. (A decode step is one tile of one token.)"""
        return max(1, min(self.q_tokens, self.array.rows // self.group))

    def window_start(self, pos: int) -> int:
        """The first position a query at ``pos`` attends."""
        return max(0, pos - self.window + 1) if self.window else 0

    def attended(self, length: int) -> tuple[int, int]:
        """The positions ``(lo, hi)`` a decode step attends once its sequence holds
        ``length`` tokens: its own token's window."""
        return self.window_start(length - 1), length - 1

    def tiles(self, length: int, tokens: int) -> list[tuple[int, int, int, int]]:
        """The row tiles of a step of ``tokens`` new tokens, the sequence then holding
        ``length``: ``(first, count, lo, hi)``, tokens ``first .. first + count - 1`` of the
        step, attending positions ``lo .. hi`` together (each row its own part of them)."""
        base = length - tokens
        tq = self.row_tokens
        out = []
        for first in range(0, tokens, tq):
            count = min(tq, tokens - first)
            out.append((first, count, self.window_start(base + first),
                        base + first + count - 1))
        return out

    def chunk_plan(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The chunks a KV head's step walks over positions ``lo .. hi``, as ``(a0, n)``:
        positions ``a0 .. a0 + n - 1``, chunks aligned to multiples of ``chunk``, the first
        starting at ``lo`` rounded down to 32."""
        out = []
        for c0 in range(lo - lo % self.chunk, hi + 1, self.chunk):
            a0 = max(c0, lo - lo % MX_BLOCK)
            out.append((a0, min(c0 + self.chunk, hi + 1) - a0))
        return out


class Op(enum.IntEnum, shape=3):
    """Commands (``cmd.op``; the codes 5 to 7 are answered ``BAD_OP``)."""
    ALLOC = 0
    FREE = 1
    APPEND = 2
    STEP = 3
    SINK = 4


#: ``{name: Op member}``, the names in lower case.
OPS = names(Op)

#: Response status codes are the cache's (:class:`~scoville.rtl.kvcache.Status`: ``NO_SEQ`` for
#: an unknown or freed sequence, ``TOO_MANY``, ``FULL`` for a cache with no room), and
#: ``BAD_OP`` for an unknown command or a sink command without sinks, ``BAD_HEAD`` for a sink of
#: a head beyond ``q_heads``. ``{name: Status member}``, the names in lower case.
STATUS = names(Status)

#: The block's own counters, beside its parts' (``kv.*``, ``array.*``).
OWN_COUNTERS = ("steps", "append_cycles", "attend_cycles", "softmax_waits", "out_stalls")

COUNTERS = data.StructLayout({
    "kv": counter_layout(dict.fromkeys(CACHE_COUNTERS, COUNTER_BITS)),
    "array": GEMM_COUNTERS,
    **{name: f.shape for name, f in counter_layout(dict.fromkeys(OWN_COUNTERS, 32))},
})


def rtl_error(config: AttentionConfig) -> str | None:
    """Why the RTL block cannot be built with ``config`` (None when it can): what the golden
    model covers and the RTL does not yet, and the shapes its dataflow needs."""
    cfg = config
    checks = [
        ("array.fmt", cfg.array.fmt, ("bf16",), "bf16"),
        ("array.b_fmt", cfg.array.b_fmt, ("same",), "same"),
    ]
    for name, value, allowed, text in checks:
        if value not in allowed:
            return (f"parameter '{name}' = {value!r} is not allowed in the RTL block yet; "
                    f"allowed: {text}")
    if cfg.group > cfg.array.rows:
        return (f"parameter 'q_heads' = {cfg.q_heads} is not allowed with array.rows = "
                f"{cfg.array.rows}; allowed: at most array.rows * kv.kv_heads = "
                f"{cfg.array.rows * cfg.kv.kv_heads} (the group is the array's M)")
    if cfg.mla and cfg.kv.kv_fmt == "mxfp4":
        # V is the first v_dim elements of the stored vector, but MXFP4's scales follow all
        # head_dim elements: V's lines are not a prefix of K's.
        return ("parameter 'kv.kv_fmt' = 'mxfp4' is not allowed with mla = 1 in the RTL "
                "block; allowed: bf16, fp8_e4m3")
    if cfg.v_tiles > 1:
        # Column tiles of P V: each reads its columns of V as whole lines of each token.
        kv, cols = cfg.kv, cfg.array.cols
        if kv.kv_fmt == "mxfp4":
            return (f"parameter 'kv.kv_fmt' = 'mxfp4' is not allowed with a value of "
                    f"{cfg.v_dim} elements on array.cols = {cols}; allowed: bf16, fp8_e4m3 "
                    "(a column tile of V is whole lines; MXFP4's scales follow the elements)")
        if cfg.v_dim % cols or (cols * kv.bits) % kv.line_bits:
            return (f"parameter 'array.cols' = {cols} is not allowed with a value of "
                    f"{cfg.v_dim} elements in lines of {kv.line_bits} bits; allowed: a "
                    f"divisor of {cfg.v_dim} whose {kv.bits}-bit elements fill whole lines, "
                    f"or at least {cfg.v_dim}")
    if cfg.kv.line_bits < _BF16:
        return (f"parameter 'kv.word_bits' = {cfg.kv.word_bits} is not allowed with kv.banks "
                f"= {cfg.kv.banks}; allowed: a line of at least {_BF16} bits")
    return None


_BF16 = 16


def io_layout(dim: int) -> data.ArrayLayout:
    """A head vector on ``q``, ``k``, ``v`` or ``o``: ``dim`` binary32 values, element 0
    lowest."""
    return data.ArrayLayout(32, dim)


def command_layout() -> data.StructLayout:
    """The ``cmd`` payload: ``op`` (:data:`OPS`); ``seq`` (free, append, step); ``tokens``
    (a step's new tokens T, less one: 0 in decode, up to ``q_tokens - 1`` in prefill);
    ``head`` and ``value`` (sink: the head's sink logit, binary32)."""
    return data.StructLayout({"op": Op, "seq": unsigned(SEQ_BITS),
                              "tokens": unsigned(8), "head": unsigned(8),
                              "value": unsigned(32)})


def response_layout() -> data.StructLayout:
    """The ``resp`` payload: ``status`` (:data:`STATUS`), ``seq`` (an alloc's new sequence,
    else the command's) and ``length`` (the sequence's tokens after the command)."""
    return data.StructLayout({"status": Status, "seq": unsigned(SEQ_BITS),
                              "length": unsigned(TOKEN_BITS)})


class Attention(wiring.Component):
    """Attention over the KV cache, on the ``os`` array (``docs/attention.md``): decode and
    prefill, GQA, sinks, windows, MLA; ``P V`` in column tiles when the value is wider than the
    array.

    Components: ``cache`` (:class:`~scoville.rtl.kvcache.KvCache`), ``array``
    (:class:`~scoville.rtl.gemm.Gemm`), ``feeder``
    (:class:`~scoville.rtl.attention_feeder.AppendFeeder`: ``k``, ``v`` into cache lines),
    ``query`` (:class:`~scoville.rtl.attention_query.QueryBuffer`: Q in BF16 per row),
    ``read_issuer`` and ``cmd_issuer`` (:class:`~scoville.rtl.attention_walk.ReadIssuer`,
    :class:`~scoville.rtl.attention_walk.CommandIssuer`: the cache's reads and the array's
    commands, chunk by chunk), ``beats`` (:class:`~scoville.rtl.attention_transpose.LinesToBeats`:
    the reads' lines into the array's B beats, through K's joiner and transposer and V's joiner
    and token queue), and units still written here: the command controller, the A sequencer
    (Q's columns, then P's: the softmax's exponentials), the score unit (the array's rows: S,
    the running max, ``alpha``, O) and the normalizer (``O / l`` onto ``o``).

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout()))
        ``alloc``, ``free``, ``append`` (the next ``kv_heads`` K and V vectors join the
        sequence: ``k`` then ``v`` beats), ``step`` (append, take ``q_heads`` Q vectors, attend,
        answer with O), ``sink`` (set a head's sink logit).
    q, k, v : In(stream.Signature(io_layout(head_dim)))
        One head vector per beat, binary32 (MLA: no ``v``; ``k`` is the latent vector).
    o : Out(stream.Signature(io_layout(v_dim)))
        A step's output, query head by query head.
    resp : Out(stream.Signature(response_layout()))
        One per command, after a step's outputs.
    counters : Out(COUNTERS)
    """

    def __init__(self, config: AttentionConfig):
        error = rtl_error(config)
        if error:
            self._MustUse__silence = True  # not built: nothing to warn about
            raise ParamError(error)
        self._config = config
        d = config.kv.head_dim
        # MLA: the latent vector comes on k alone (no v), o is v_dim wide.
        v = {} if config.mla else {"v": In(stream.Signature(io_layout(d)))}
        super().__init__({
            "cmd": In(stream.Signature(command_layout())),
            "q": In(stream.Signature(io_layout(d))),
            "k": In(stream.Signature(io_layout(d))),
            **v,
            "o": Out(stream.Signature(io_layout(config.v_dim))),
            "resp": Out(stream.Signature(response_layout())),
            "counters": Out(COUNTERS),
        })

    @property
    def config(self) -> AttentionConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        kv, arr = cfg.kv, cfg.array
        H, G, D, C = kv.kv_heads, cfg.group, kv.head_dim, arr.cols
        TL, LB = kv.token_lines, kv.line_bits
        QH = cfg.q_heads
        # P V's column tiles: VT of them, each VW elements of V (VL lines of each token).
        VD, VT, VL = cfg.v_dim, cfg.v_tiles, cfg.v_lines
        VW = VD if VT == 1 else C
        m.submodules.cache = cache = KvCache(kv)
        m.submodules.array = array = Gemm(arr)
        m.submodules.query = query = QueryBuffer(
            dim=D, kv_heads=H, group=G, row_tokens=min(cfg.row_tokens, cfg.max_step_tokens),
            tiles=-(-cfg.max_step_tokens // min(cfg.row_tokens, cfg.max_step_tokens)),
            max_vectors=256 * QH)
        m.submodules.feeder = feeder = AppendFeeder(
            kv_heads=H, dim=D, token_lines=TL, line_bits=LB, kv_fmt=kv.kv_fmt, mla=cfg.mla)
        c_factor = fp32_bits(cfg.score_scale * math.log2(math.e))
        log2e = fp32_bits(math.log2(math.e))

        # ---- The step's registers and the controller.
        TM = cfg.max_step_tokens
        TQ = min(cfg.row_tokens, TM)
        RM = TQ * G  # rows of a full row tile
        cur = Signal(command_layout())
        status = Signal(Status)
        length = Signal(TOKEN_BITS)
        out_seq = Signal(SEQ_BITS)
        base = Signal(TOKEN_BITS)  # the position of the step's first new token
        ntok = Signal(9)  # the step's tokens, T
        tok_left = Signal(9)  # appends still to request
        attending = Signal()
        m0 = Array(Signal(32, init=_NEG_INF, name=f"m0_{i}") for i in range(QH))
        m.d.comb += [self.resp.payload.status.eq(status), self.resp.payload.seq.eq(out_seq),
                     self.resp.payload.length.eq(length)]

        aqw, ocw = (ChunkWalk(m, name, cfg, base, ntok) for name in ("aqw", "ocw"))
        m.submodules.read_issuer = reader = ReadIssuer(cfg)
        m.submodules.cmd_issuer = issuer = CommandIssuer(cfg)
        wiring.connect(m, issuer.cmd, array.cmd)
        m.d.comb += [issuer.base.eq(base), issuer.tokens.eq(ntok), reader.base.eq(base),
                     reader.tokens.eq(ntok), reader.seq.eq(cur.seq)]
        finished = Signal()

        cache_req = cache.req.payload
        step_tokens = cur.tokens + 1
        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [cur.eq(self.cmd.payload), out_seq.eq(self.cmd.payload.seq),
                                 length.eq(0)]
                    m.next = "DISPATCH"
            with m.State("DISPATCH"):
                with m.Switch(cur.op):
                    with m.Case(Op.ALLOC, Op.FREE):
                        m.next = "REQ"
                    with m.Case(Op.APPEND):
                        m.d.comb += [feeder.start.eq(1), feeder.tokens.eq(0)]
                        m.d.sync += tok_left.eq(1)
                        m.next = "REQ"
                    with m.Case(Op.STEP):
                        m.d.comb += [feeder.start.eq(1), feeder.tokens.eq(cur.tokens)]
                        m.d.comb += [query.start.eq(1), query.count.eq(step_tokens * QH)]
                        m.d.sync += [ntok.eq(step_tokens),
                                     tok_left.eq(step_tokens), status.eq(Status.OK)]
                        with m.If(step_tokens > TM):
                            m.d.sync += status.eq(Status.BAD_RANGE)
                            m.next = "DRAIN"
                        with m.Else():
                            m.d.sync += self.counters.steps.eq(self.counters.steps + 1)
                            m.next = "REQ"
                    with m.Case(Op.SINK):
                        with m.If(cur.head >= QH):
                            m.d.sync += status.eq(Status.BAD_HEAD)
                        with m.Elif(cfg.sinks):
                            m.d.sync += [status.eq(Status.OK),
                                         m0[cur.head].eq(fp32_mul(m, cur.value, log2e,
                                                                  name="sinkm"))]
                        with m.Else():
                            m.d.sync += status.eq(Status.BAD_OP)
                        m.next = "RESP"
                    with m.Default():
                        m.d.sync += status.eq(Status.BAD_OP)
                        m.next = "RESP"
            with m.State("DRAIN"):
                # A step whose T is out of range: its K, V and Q are taken and dropped.
                with m.If(feeder.idle & query.idle):
                    m.next = "RESP"
            with m.State("REQ"):
                m.d.comb += [cache.req.valid.eq(1),
                             cache_req.op.eq(Mux(cur.op == Op.STEP, CacheOp.APPEND,
                                                 Mux(cur.op == Op.ALLOC,
                                                     CacheOp.ALLOC,
                                                     Mux(cur.op == Op.FREE,
                                                         CacheOp.FREE,
                                                         CacheOp.APPEND)))),
                             cache_req.seq.eq(cur.seq)]
                with m.If(cache.req.ready):
                    m.next = "WAIT"
            with m.State("WAIT"):
                m.d.comb += cache.resp.ready.eq(1)
                with m.If(cache.resp.valid):
                    r = cache.resp.payload
                    m.d.sync += [out_seq.eq(r.seq), length.eq(r.length),
                                 tok_left.eq(tok_left - 1)]
                    # A step's answer is its first failing append's (later ones fail alike).
                    with m.If((cur.op != Op.STEP) | (status == Status.OK)):
                        m.d.sync += status.eq(r.status)
                    with m.If(cur.op != Op.STEP):
                        m.next = "RESP"
                    with m.Elif(tok_left > 1):
                        m.next = "REQ"
                    with m.Else():
                        m.next = "QWAIT"
            with m.State("QWAIT"):
                # A step takes all its Q vectors, also when an append failed.
                with m.If(query.idle):
                    with m.If(status == Status.OK):
                        first = wire(m, "first_pos", length - ntok, unsigned(TOKEN_BITS))
                        lo = wire(m, "first_lo", window_start(cfg, first), unsigned(TOKEN_BITS))
                        m.d.sync += [base.eq(first), attending.eq(1)]
                        for walk in (aqw, ocw):
                            walk.start(m, lo)
                        m.d.comb += [issuer.start.eq(1), issuer.lo.eq(lo),
                                     reader.start.eq(1), reader.lo.eq(lo)]
                        m.next = "ATTEND"
                    with m.Else():
                        m.next = "RESP"
            with m.State("ATTEND"):
                m.d.comb += cache.resp.ready.eq(1)  # the reads' answers
                with m.If(finished):
                    m.d.sync += attending.eq(0)
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += self.resp.valid.eq(1)
                with m.If(self.resp.ready):
                    m.next = "IDLE"

        # ---- The append feeder: the new tokens' K and V lines into the cache.
        wiring.connect(m, wiring.flipped(self.k), feeder.k)
        if not cfg.mla:
            wiring.connect(m, wiring.flipped(self.v), feeder.v)
        wiring.connect(m, feeder.wd, cache.wd)
        drain = fsm.ongoing("DRAIN")  # a step with a bad T: its vectors are dropped
        m.d.comb += feeder.drop.eq(drain)

        # ---- Q: each vector rounded to BF16 into its row's buffer.
        wiring.connect(m, wiring.flipped(self.q), query.q)
        m.d.comb += query.drop.eq(drain)

        # ---- The read issuer: its reads go to the cache while the step attends.
        with m.If(reader.req.valid):
            m.d.comb += [cache.req.valid.eq(1), cache.req.payload.eq(reader.req.payload)]
        m.d.comb += reader.req.ready.eq(cache.req.ready)

        # ---- Lines to B beats (K's through the transposer, V's through the queue).
        m.submodules.beats = beats = LinesToBeats(
            line_bits=LB, token_lines=TL, v_lines=VL, dim=D, v_width=VW, v_tiles=VT, cols=C,
            kv_fmt=kv.kv_fmt, v_queue=cfg.v_queue)
        wiring.connect(m, cache.rd, beats.i)
        m.d.comb += [array.b.valid.eq(beats.o.valid), beats.o.ready.eq(array.b.ready),
                     array.b.payload.data.eq(beats.o.payload.data)]

        # ---- The score unit's state (written below, read by the A sequencer).
        c_lanes = range(C)
        s_mems = []
        tiles = -(-cfg.chunk // C) + 1
        for r in range(RM):
            mem = Memory(shape=data.ArrayLayout(32, C), depth=tiles, init=[])
            m.submodules[f"s{r}"] = mem
            s_mems.append((mem.write_port(), mem.read_port()))
        m_run = [Signal(32, name=f"mrun{r}") for r in range(RM)]
        m_old = [Signal(32, name=f"mold{r}") for r in range(RM)]
        alpha = [Signal(32, name=f"alpha{r}") for r in range(RM)]
        l_sum = [Signal(32, name=f"l{r}") for r in range(RM)]
        l_acc = [Signal(32, name=f"lacc{r}") for r in range(RM)]
        max_ready = Signal()
        alpha_pending = Signal()

        # ---- The A sequencer: Q's columns for Q K^T, then P's columns for P V.
        a_valid = Signal()
        a_data = Signal(data.ArrayLayout(_BF16, arr.rows))
        s1 = Signal()
        s1_p = Signal()
        s1_k = Signal(range(max(D, 2)))
        s1_lane = Signal(range(max(C, 2)))
        s1_mask = Signal(RM)
        s1_first = Signal()
        s1_last = Signal()
        s1_headfirst = Signal()
        s1_sum = Signal()  # P's first pass (of VT): its exponentials join the running sum
        aq_vt = Signal(range(max(VT, 2)))
        aq_k = Signal(range(max(D, 2)))
        aq_tb = Signal(TOKEN_BITS + 1)
        aq_j = Signal(TOKEN_BITS + 1)
        aq_lane = Signal(range(max(C, 2)))
        aq_tile = Signal(range(max(tiles, 2)))
        en_a = ~a_valid | array.a.ready
        m.d.comb += [array.a.valid.eq(a_valid), array.a.payload.data.eq(a_data)]
        issue_q = attending & ~aqw.done & ~aqw.sub
        issue_p = attending & ~aqw.done & aqw.sub & max_ready
        for _, rp in s_mems:
            m.d.comb += [rp.addr.eq(aq_tile), rp.en.eq(en_a)]
        m.d.comb += [query.rd_addr.eq(aqw.tile * H + aqw.h), query.rd_en.eq(en_a)]
        # Each row's range: its token's position p and window start.
        aq_pos = wire(m, "aq_pos", aqw.a0 + aq_j, unsigned(TOKEN_BITS + 1))
        masks = []
        for r in range(RM):
            p_r = wire(m, f"aq_p{r}", aqw.pos0 + r // G, unsigned(TOKEN_BITS + 1))
            in_window = (aq_pos >= window_start(cfg, p_r)) if cfg.window else 1
            masks.append(in_window & (aq_pos <= p_r))
        with m.If(en_a):
            m.d.sync += [s1.eq(issue_q | issue_p), s1_p.eq(aqw.sub),
                         s1_k.eq(aq_k), s1_lane.eq(aq_lane),
                         s1_mask.eq(Cat(*masks)), s1_first.eq(aq_j == 0),
                         s1_last.eq(aq_j == aqw.n - 1), s1_headfirst.eq(aqw.first),
                         s1_sum.eq(aq_vt == 0)]
            with m.If(issue_q):
                m.d.sync += aq_k.eq(aq_k + 1)
                with m.If(aq_k == D - 1):
                    m.d.sync += [aq_k.eq(0), aq_tb.eq(aq_tb + C)]
                    with m.If(aq_tb + C >= aqw.n):
                        m.d.sync += [aq_tb.eq(0), aqw.sub.eq(1), aq_j.eq(0), aq_lane.eq(0),
                                     aq_tile.eq(0)]
            with m.If(issue_p):
                m.d.sync += [aq_j.eq(aq_j + 1), aq_lane.eq(aq_lane + 1)]
                with m.If(aq_lane == C - 1):
                    m.d.sync += [aq_lane.eq(0), aq_tile.eq(aq_tile + 1)]
                with m.If(aq_j == aqw.n - 1):
                    # P again for the next column tile of V, or on to the next chunk.
                    m.d.sync += [aq_j.eq(0), aq_lane.eq(0), aq_tile.eq(0), aq_vt.eq(aq_vt + 1)]
                    with m.If(aq_vt == VT - 1):
                        m.d.sync += [max_ready.eq(0), aq_vt.eq(0)]
                        aqw.advance(m)
        # Stage 2: the beat. Q: the group's element k; P: exp2(S * c - m') per row, rounded.
        lanes = []
        for r in range(RM):
            s_val = Array(s_mems[r][1].data[j] for j in c_lanes)[s1_lane]
            sc = fp32_mul(m, s_val, c_factor, name=f"sc{r}")
            x = fp32_add(m, sc, m_run[r] ^ _SIGN, name=f"sx{r}")
            p = wire(m, f"p{r}", Mux(s1_mask[r], fp32_exp2(m, x, name=f"pexp{r}"), 0), 32)
            lanes.append(Mux(s1_p, fp32_to_bf16(m, p, name=f"pb{r}"), query.rd_data[r][s1_k]))
            acc = fp32_add(m, Mux(s1_first, 0, l_acc[r]), p, name=f"lacc_add{r}")
            base = fp32_mul(m, Mux(s1_headfirst, ONE if cfg.sinks else 0, l_sum[r]), alpha[r],
                            name=f"lmul{r}")
            with m.If(en_a & s1 & s1_p & s1_sum):
                m.d.sync += l_acc[r].eq(acc)
                with m.If(s1_last):
                    m.d.sync += l_sum[r].eq(fp32_add(m, base, acc, name=f"lnew{r}"))
        with m.If(en_a):
            m.d.sync += [a_valid.eq(s1), a_data.eq(Cat(*lanes))]  # rows past RM: zeros

        # ---- The score unit: the array's rows. Q K^T's: S stored, the running max; at the
        # chunk's end alpha. P V's: O = O * alpha + PV.
        row = array.o.payload
        oc_tb = Signal(TOKEN_BITS + 1)
        oc_r = Signal(range(max(RM, 2)))
        oc_tile = Signal(range(max(tiles, 2)))
        oc_vt = Signal(range(max(VT, 2)))
        o_regs = [Signal(data.ArrayLayout(32, VD), name=f"o{r}") for r in range(RM)]
        norm_idle = Signal()
        m.d.comb += array.o.ready.eq(~ocw.sub | norm_idle)
        take_row = array.o.valid & array.o.ready & attending
        for r, (wp, _) in enumerate(s_mems):
            m.d.comb += [wp.addr.eq(oc_tile), wp.data.eq(row),
                         wp.en.eq(take_row & ~ocw.sub & (oc_r == r))]
        base_pos = wire(m, "oc_pos", ocw.a0 + oc_tb, unsigned(TOKEN_BITS + 1))
        # The row's range: its token's position p (the tile's first, plus the row's token).
        oc_p = wire(m, "oc_p", ocw.pos0 + Array(r // G for r in range(RM))[oc_r],
                    unsigned(TOKEN_BITS + 1))
        j_lo = wire(m, "oc_jlo", window_start(cfg, oc_p) - base_pos, signed(TOKEN_BITS + 3))
        j_hi = wire(m, "oc_jhi", oc_p - base_pos, signed(TOKEN_BITS + 3))
        keys = []
        for j in c_lanes:
            valid = (j >= j_lo) & (j <= j_hi)
            keys.append(wire(m, f"key{j}", Mux(valid, fp32_key(m, row[j], name=f"rk{j}"), 0),
                             unsigned(32)))
        top = max_tree(m, "kmax", keys)
        any_valid = top != 0
        row_max = wire(m, "row_max", Mux(top[31], top & 0x7FFF_FFFF, ~top), unsigned(32))
        s_max = fp32_mul(m, row_max, c_factor, name="smax")
        s_max_key = fp32_key(m, s_max, name="smax_key")
        init = ocw.first & (oc_tb == 0)
        m_sel = Array(m_run)[oc_r]
        m0_sel = Array(Array(m0[h * G + r % G] for h in range(H))[ocw.h]
                       for r in range(RM))[oc_r]
        m_base = wire(m, "m_base", Mux(init, m0_sel, m_sel), 32)
        m_new = Mux(any_valid & (s_max_key > fp32_key(m, m_base, name="mbase_key")), s_max,
                    m_base)
        with m.If(take_row & ~ocw.sub):
            m.d.sync += [Array(m_run)[oc_r].eq(m_new), oc_r.eq(oc_r + 1)]
            with m.If(init):
                m.d.sync += Array(m_old)[oc_r].eq(m0_sel)
            with m.If(oc_r == ocw.rows - 1):
                m.d.sync += [oc_r.eq(0), oc_tb.eq(oc_tb + C), oc_tile.eq(oc_tile + 1)]
                with m.If(oc_tb + C >= ocw.n):
                    m.d.sync += [oc_tb.eq(0), oc_tile.eq(0), ocw.sub.eq(1),
                                 alpha_pending.eq(1)]
        with m.If(alpha_pending):
            m.d.sync += [alpha_pending.eq(0), max_ready.eq(1)]
            for r in range(RM):
                same = (m_run[r] == m_old[r]) | (((m_run[r] | m_old[r]) & 0x7FFF_FFFF) == 0)
                diff = fp32_add(m, m_old[r], m_run[r] ^ _SIGN, name=f"adiff{r}")
                m.d.sync += [alpha[r].eq(Mux(same, ONE, fp32_exp2(m, diff, name=f"aexp{r}"))),
                             m_old[r].eq(m_run[r])]

        # ---- O update and the normalizer, sharing the lanes' multipliers: VW lanes, a column
        # tile of O at a time (P V's rows come column tile by column tile).
        n_left = Signal(range(RM + 1))
        n_r = Signal(range(max(RM, 2)))
        n_vt = Signal(range(max(VT, 2)))
        n1 = Signal()
        n1_r = Signal(range(max(RM, 2)))
        n1_vt = Signal(range(max(VT, 2)))
        rec = Signal(32)
        l_fin = [Signal(32, name=f"lfin{r}") for r in range(RM)]
        m.d.comb += norm_idle.eq((n_left == 0) & ~n1)
        o_row = Array(o_regs)[Mux(n1, n1_r, oc_r)]
        o_sel = Array(o_row[t * VW:(t + 1) * VW] for t in range(VT))[Mux(n1, n1_vt, oc_vt)]
        alpha_sel = Array(alpha)[oc_r]
        products = []
        for e in range(VW):
            opnd = Mux(n1 | ~ocw.first, o_sel[e], 0)
            products.append(fp32_mul(m, opnd, Mux(n1, rec, alpha_sel), name=f"omul{e}"))
        updated = Cat(*(fp32_add(m, products[e], row[e], name=f"oadd{e}") for e in range(VW)))
        with m.If(take_row & ocw.sub):
            for r in range(RM):
                for t in range(VT):
                    with m.If((oc_r == r) & (oc_vt == t)):
                        m.d.sync += o_regs[r].as_value().word_select(t, 32 * VW).eq(updated)
            m.d.sync += oc_r.eq(oc_r + 1)
            with m.If(oc_r == ocw.rows - 1):
                m.d.sync += [oc_r.eq(0), oc_vt.eq(oc_vt + 1)]
                with m.If(oc_vt == VT - 1):
                    m.d.sync += oc_vt.eq(0)
                    with m.If(ocw.last_chunk):
                        m.d.sync += [n_left.eq(ocw.rows), n_r.eq(0), n_vt.eq(0)]
                        m.d.sync += [lf.eq(ls) for lf, ls in zip(l_fin, l_sum, strict=True)]
                    ocw.advance(m)
        # A row leaves after its VT column tiles: the first VT - 1 wait in o_part.
        en_o = ~self.o.valid | self.o.ready
        o_part = Signal(max(32 * VW * (VT - 1), 1))
        with m.If(en_o):
            m.d.sync += [n1.eq(n_left != 0), n1_vt.eq(n_vt),
                         self.o.valid.eq(n1 & (n1_vt == VT - 1))]
            if VT > 1:
                m.d.sync += self.o.payload.eq(Cat(o_part, *products))
                for t in range(VT - 1):
                    with m.If(n1 & (n1_vt == t)):
                        m.d.sync += o_part.word_select(t, 32 * VW).eq(Cat(*products))
            else:
                m.d.sync += self.o.payload.eq(Cat(*products))
            with m.If(n_left != 0):
                m.d.sync += [n_vt.eq(n_vt + 1), n1_r.eq(n_r),
                             rec.eq(fp32_recip(m, Array(l_fin)[n_r], name="recip"))]
                with m.If(n_vt == VT - 1):
                    m.d.sync += [n_vt.eq(0), n_left.eq(n_left - 1), n_r.eq(n_r + 1)]
        m.d.comb += finished.eq(ocw.done & norm_idle & ~self.o.valid)

        # ---- Counters.
        m.d.comb += [self.counters.kv.eq(cache.counters), self.counters.array.eq(array.counters)]
        setup = fsm.ongoing("REQ") | fsm.ongoing("WAIT") | fsm.ongoing("QWAIT")
        phase = {"append_cycles": setup & (cur.op == Op.STEP),
                 "attend_cycles": attending,
                 "softmax_waits": attending & ~aqw.done & aqw.sub & ~max_ready,
                 "out_stalls": self.o.valid & ~self.o.ready}
        count(m, self.counters, phase)
        return m
