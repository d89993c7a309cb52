"""Attention over the KV cache: the parameters of the ``attention`` block, one frozen config that
its golden model (:mod:`scoville.sim.golden.attention`) reads.

The block composes the ``kvcache`` (part ``kv``) and the ``gemm`` array (part ``array``, ``os``,
in ``bf16`` or ``mxfp8``) with the softmax (:mod:`scoville.rtl.exp2`). How a decode step
computes, to the bit, is in ``docs/attention.md``: scores ``Q K^T`` on the array, times
``scale * log2(e)`` in FP32, an online softmax over chunks of ``chunk`` tokens (running max,
running sum, rescaled partial output), ``P V`` on the array, and a final normalization.
"""

import dataclasses
from dataclasses import dataclass

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .attention_control import Controller, Op, command_layout, response_layout
from .attention_feeder import AppendFeeder
from .attention_normalizer import Normalizer
from .attention_query import QueryBuffer
from .attention_score import ScoreUnit
from .attention_sequencer import ASequencer
from .attention_transpose import LinesToBeats
from .attention_walk import CommandIssuer, ReadIssuer
from .gemm import COUNTERS as GEMM_COUNTERS
from .gemm import Gemm, GemmConfig
from .kvcache import COUNTER_BITS, KvCache, KvCacheConfig, Status
from .kvcache import COUNTERS as CACHE_COUNTERS
from .lib.codes import names
from .lib.counters import count, counter_layout
from .lib.formats import MX_BLOCK
from .lib.params import ParamError, check_choice, check_int, check_parts, param, part

__all__ = ["COUNTERS", "MLA_K_DIM", "MLA_ROPE_DIM", "MLA_V_DIM", "MODES", "OPS", "STATUS", "Op",
           "Status", "Attention", "AttentionConfig", "command_layout", "io_layout",
           "response_layout", "rtl_error"]


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
        Sliding window: a query at position p attends to p - window + 1 .. p (0: all). A
        step's command may give its own (``value``'s low 16 bits when not 0: models whose
        layers alternate sliding and full attention, one block for all).
    sinks : int
        1: a learned logit per query head joins the softmax's denominator (GPT-OSS).
    mla : int
        1: MLA in absorbed form: one latent KV head of ``kv.head_dim`` elements (576 in
        DeepSeek-R1 and Kimi K2), V its first ``head_dim - rope_dim`` (512).
    rope_dim : int
        MLA: the latent vector's rotary part, its last elements (64 in DeepSeek-R1).
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
                                "last rope_dim elements)")
    rope_dim: int = param(MLA_ROPE_DIM, "1..kv.head_dim - 1",
                          "MLA: the rotary elements at the end of the latent vector")
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
        check_int("rope_dim", self.rope_dim, 1, 1023)
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
        if self.mla and (self.kv.kv_heads != 1 or self.kv.head_dim <= self.rope_dim):
            raise ParamError(f"parameter 'mla' = 1 is not allowed with kv.kv_heads = "
                             f"{self.kv.kv_heads}, kv.head_dim = {self.kv.head_dim}; allowed: "
                             f"kv.kv_heads = 1, kv.head_dim above rope_dim = {self.rope_dim} "
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
        return self.kv.head_dim - self.rope_dim if self.mla else self.kv.head_dim

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
        consecutive rows. (A decode step is one tile of one token: the RTL is sized by
        :attr:`tile_tokens`.)"""
        return max(1, min(self.q_tokens, self.array.rows // self.group))

    @property
    def tile_tokens(self) -> int:
        """Query tokens a full row tile of a step holds: ``row_tokens``, or 1 in decode (the
        RTL's Q buffers, score rows and tile walk are sized by it)."""
        return min(self.row_tokens, self.max_step_tokens)

    @property
    def step_tiles(self) -> int:
        """Row tiles of the longest step: ``max_step_tokens / tile_tokens``, rounded up."""
        return -(-self.max_step_tokens // self.tile_tokens)

    def rtl_error(self) -> str | None:
        """Why the RTL block cannot be built with this config (None when it can): what the
        golden model covers and the RTL does not yet, and the shapes its dataflow needs (the
        timed model, the RTL's picture, refuses the same)."""
        cfg = self
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

    def window_start(self, pos: int, window: int = 0) -> int:
        """The first position a query at ``pos`` attends, ``window`` the step's own sliding
        window (0: ``self.window``)."""
        window = window or self.window
        return max(0, pos - window + 1) if window else 0

    def attended(self, length: int, window: int = 0) -> tuple[int, int]:
        """The positions ``(lo, hi)`` a decode step attends once its sequence holds
        ``length`` tokens: its own token's window (``window`` its own, 0: the config's)."""
        return self.window_start(length - 1, window), length - 1

    def tiles(self, length: int, tokens: int, window: int = 0
              ) -> list[tuple[int, int, int, int]]:
        """The row tiles of a step of ``tokens`` new tokens, the sequence then holding
        ``length``: ``(first, count, lo, hi)``, tokens ``first .. first + count - 1`` of the
        step, attending positions ``lo .. hi`` together (each row its own part of them;
        ``window`` the step's own, 0: the config's)."""
        base = length - tokens
        tq = self.row_tokens
        out = []
        for first in range(0, tokens, tq):
            count = min(tq, tokens - first)
            out.append((first, count, self.window_start(base + first, window),
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
    """Why the RTL block cannot be built with ``config`` (None when it can):
    :meth:`AttentionConfig.rtl_error`."""
    return config.rtl_error()


_BF16 = 16


def io_layout(dim: int) -> data.ArrayLayout:
    """A head vector on ``q``, ``k``, ``v`` or ``o``: ``dim`` binary32 values, element 0
    lowest."""
    return data.ArrayLayout(32, dim)


class Attention(wiring.Component):
    """Attention over the KV cache, on the ``os`` array (``docs/attention.md``): decode and
    prefill, GQA, sinks, windows, MLA; ``P V`` in column tiles when the value is wider than the
    array.

    Components (``elaborate`` is their wiring): ``control``
    (:class:`~scoville.rtl.attention_control.Controller`: commands, their cache requests and
    answers, a step's start and end), ``cache`` (:class:`~scoville.rtl.kvcache.KvCache`),
    ``array`` (:class:`~scoville.rtl.gemm.Gemm`), ``feeder``
    (:class:`~scoville.rtl.attention_feeder.AppendFeeder`: ``k``, ``v`` into cache lines),
    ``query`` (:class:`~scoville.rtl.attention_query.QueryBuffer`: Q in BF16 per row),
    ``read_issuer`` and ``cmd_issuer`` (:class:`~scoville.rtl.attention_walk.ReadIssuer`,
    :class:`~scoville.rtl.attention_walk.CommandIssuer`: the cache's reads and the array's
    commands, chunk by chunk), ``beats`` (:class:`~scoville.rtl.attention_transpose.LinesToBeats`:
    the reads' lines into the array's B beats, through K's joiner and transposer and V's joiner
    and token queue), ``sequencer`` (:class:`~scoville.rtl.attention_sequencer.ASequencer`: Q's
    columns, then P's, the softmax's exponentials, and their running sum), ``score``
    (:class:`~scoville.rtl.attention_score.ScoreUnit`: the array's rows; S, the running max,
    ``alpha``) and ``normalizer`` (:class:`~scoville.rtl.attention_normalizer.Normalizer`: O,
    and ``O / l`` onto ``o``).

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
        kv = cfg.kv
        m.submodules.cache = cache = KvCache(kv)
        m.submodules.array = array = Gemm(cfg.array)
        m.submodules.control = ctrl = Controller(cfg)
        m.submodules.feeder = feeder = AppendFeeder(
            kv_heads=kv.kv_heads, dim=kv.head_dim, token_lines=kv.token_lines,
            line_bits=kv.line_bits, kv_fmt=kv.kv_fmt, mla=cfg.mla)
        m.submodules.query = query = QueryBuffer(
            dim=kv.head_dim, kv_heads=kv.kv_heads, group=cfg.group, tile_tokens=cfg.tile_tokens,
            tiles=cfg.step_tiles, max_vectors=256 * cfg.q_heads)
        m.submodules.read_issuer = reader = ReadIssuer(cfg)
        m.submodules.cmd_issuer = issuer = CommandIssuer(cfg)
        m.submodules.beats = beats = LinesToBeats(
            line_bits=kv.line_bits, token_lines=kv.token_lines, v_lines=cfg.v_lines,
            dim=kv.head_dim, v_width=cfg.v_dim if cfg.v_tiles == 1 else cfg.array.cols,
            v_tiles=cfg.v_tiles, cols=cfg.array.cols, kv_fmt=kv.kv_fmt, v_queue=cfg.v_queue)
        m.submodules.sequencer = aseq = ASequencer(cfg)
        m.submodules.score = score = ScoreUnit(cfg)
        m.submodules.normalizer = norm = Normalizer(cfg)

        # The controller: commands and answers; appends and the step's start to the units.
        wiring.connect(m, wiring.flipped(self.cmd), ctrl.cmd)
        wiring.connect(m, ctrl.resp, wiring.flipped(self.resp))
        wiring.connect(m, cache.resp, ctrl.cache_resp)
        m.d.comb += [feeder.start.eq(ctrl.feed_start), feeder.tokens.eq(ctrl.feed_tokens),
                     ctrl.feed_idle.eq(feeder.idle), feeder.drop.eq(ctrl.drop),
                     query.start.eq(ctrl.q_start), query.count.eq(ctrl.q_count),
                     ctrl.q_idle.eq(query.idle), query.drop.eq(ctrl.drop),
                     reader.seq.eq(ctrl.seq),
                     score.sink_en.eq(ctrl.sink_en), score.sink_head.eq(ctrl.sink_head),
                     score.sink_value.eq(ctrl.sink_value)]
        for unit in (reader, issuer, aseq, score):
            m.d.comb += [unit.start.eq(ctrl.start), unit.lo.eq(ctrl.lo),
                         unit.base.eq(ctrl.base), unit.tokens.eq(ctrl.tokens),
                         unit.window.eq(ctrl.window)]
        m.d.comb += [aseq.attending.eq(ctrl.attending), score.attending.eq(ctrl.attending)]
        # The cache's requests: the read issuer's while the step attends, else the controller's.
        with m.If(reader.req.valid):
            m.d.comb += [cache.req.valid.eq(1), cache.req.payload.eq(reader.req.payload)]
        with m.Else():
            m.d.comb += [cache.req.valid.eq(ctrl.cache_req.valid),
                         cache.req.payload.eq(ctrl.cache_req.payload)]
        m.d.comb += [reader.req.ready.eq(cache.req.ready),
                     ctrl.cache_req.ready.eq(cache.req.ready)]

        # K and V into the cache's lines; Q into the query buffer.
        wiring.connect(m, wiring.flipped(self.k), feeder.k)
        if not cfg.mla:
            wiring.connect(m, wiring.flipped(self.v), feeder.v)
        wiring.connect(m, feeder.wd, cache.wd)
        wiring.connect(m, wiring.flipped(self.q), query.q)

        # The array: commands from the issuer, B from the cache's lines, A from the sequencer;
        # its rows to the score unit and on to the normalizer.
        wiring.connect(m, issuer.cmd, array.cmd)
        wiring.connect(m, cache.rd, beats.i)
        m.d.comb += [array.b.valid.eq(beats.o.valid), beats.o.ready.eq(array.b.ready),
                     array.b.payload.data.eq(beats.o.payload.data)]
        wiring.connect(m, aseq.a, array.a)
        m.d.comb += [query.rd_addr.eq(aseq.q_addr), query.rd_en.eq(aseq.q_en),
                     aseq.q_data.eq(query.rd_data),
                     score.s_addr.eq(aseq.s_addr), score.s_en.eq(aseq.s_en),
                     aseq.s_data.eq(score.s_data), aseq.m_run.eq(score.m_run),
                     aseq.alpha.eq(score.alpha), aseq.max_ready.eq(score.max_ready),
                     score.max_done.eq(aseq.max_done), norm.l_sum.eq(aseq.l_sum)]
        wiring.connect(m, array.o, score.rows)
        wiring.connect(m, score.pv, norm.pv)
        wiring.connect(m, norm.o, wiring.flipped(self.o))
        m.d.comb += ctrl.finished.eq(score.done & norm.idle & ~self.o.valid)

        # Counters.
        m.d.comb += [self.counters.kv.eq(cache.counters), self.counters.array.eq(array.counters)]
        count(m, self.counters, {"steps": ctrl.stepped, "append_cycles": ctrl.appending,
                                 "attend_cycles": ctrl.attending,
                                 "softmax_waits": aseq.waiting,
                                 "out_stalls": self.o.valid & ~self.o.ready})
        return m
