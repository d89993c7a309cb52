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

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .fetch import Fetch, FetchConfig, request_layout
from .gemm import COUNTERS as GEMM_COUNTERS
from .gemm import Gemm, GemmConfig
from .lib.codes import names
from .lib.counters import count, counter_layout
from .lib.formats import MX_BLOCK
from .lib.fp32 import fp32_add, fp32_bits, fp32_mul
from .lib.params import ParamError, check_choice, check_int, check_parts, param, part
from .moe_acts import ActStore
from .moe_dispatch import Dispatch
from .moe_router import Router
from .moe_router import write_layout as router_write_layout
from .moe_swiglu import ALPHA, LIMIT, Swiglu, SwigluConfig
from .moe_weights import WeightTiles
from .mx_quant import MxQuant, MxQuantConfig

__all__ = ["ACT_FORMATS", "ARRAY_FORMATS", "COLS", "COUNTERS", "EXPERT_COUNTERS", "OWN_COUNTERS",
           "ROUTERS",
           "STATUS", "SWIGLU_ALPHA", "SWIGLU_LIMIT", "X_FORMATS", "Moe", "MoeConfig", "Status",
           "command_layout"]

#: ``router``: GPT-OSS (softmax over the top-k logits, biases everywhere, interleaved gate and
#: up, the clamped SwiGLU) or DeepSeek-V3 (sigmoid, grouped top-k, gate and up in halves,
#: SiLU, a shared expert).
ROUTERS = ("gpt_oss", "deepseek")
#: The array's ``(fmt, b_fmt)`` for activations in ``act_fmt`` against MXFP4 weights.
ARRAY_FORMATS = {"mxfp8": ("mxfp8", "mxfp4"), "mxfp4": ("mxfp4", "same")}
#: ``x_fmt``: the format of ``x`` on its stream.
X_FORMATS = ("fp32", "bf16")
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
    x_fmt : str
        ``fp32`` or ``bf16``: the format of ``x`` on its stream (BF16 widened exactly).
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
    x_fmt: str = param("fp32", "fp32, bf16", "the format of x on its stream")
    act_fmt: str = param("mxfp8", "mxfp8, mxfp4", "activations of both matmuls")
    weight_port_bits: int = param(256, "64, 128, 256, 512, 1024", "weight port width")
    tokens: int = param(16, "1..256", "the most tokens a batch holds")
    fetch_buffer: int = param(32, "32..4096", "weight words requested and not yet loaded "
                              "(cover the memory's round trip: latency x words a cycle + 16)")
    expert_counters: int = param(1, "0, 1", "a tokens and a cycles counter per expert "
                                 "(2 x 32 flip-flops an expert)")

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
        check_choice("x_fmt", self.x_fmt, X_FORMATS)
        check_choice("act_fmt", self.act_fmt, ACT_FORMATS)
        check_int("tokens", self.tokens, 1, 256)
        check_int("fetch_buffer", self.fetch_buffer, 32, 4096)
        check_int("expert_counters", self.expert_counters, 0, 1)
        cols = self.array.cols
        if cols not in COLS or self.hidden % cols:
            raise ParamError(f"parameter 'array.cols' = {cols} is not allowed with hidden = "
                             f"{self.hidden}; allowed: {', '.join(map(str, COLS))} dividing "
                             "hidden (a column tile holds whole gate-up pairs, whole blocks of "
                             "32 activations fill from whole tiles)")
        check_int("weight_port_bits", self.weight_port_bits, 64, 1024,
                  choices=[64 << k for k in range(5)])
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
    def fetch(self) -> FetchConfig:
        """The weight fetch engine's parameters: words of the weight port, addresses over
        every expert's weights, a command per column tile."""
        words = self.all_experts * self.expert_words
        longest = max(self.tile_words(self.hidden), self.tile_words(self.intermediate))
        len_bits = max(longest.bit_length(), 4)
        burst = min(16, (1 << len_bits) - 1)
        return FetchConfig(data_bits=self.weight_port_bits,
                           addr_bits=max(words.bit_length(), 4), len_bits=len_bits,
                           burst=burst, buffer=self.fetch_buffer)

    @property
    def gated_width(self) -> int:
        """Columns of the first matmul: gate and up, ``2 * intermediate``."""
        return 2 * self.intermediate


class Status(enum.IntEnum, shape=2):
    """Status of the latest batch command."""
    OK = 0
    BAD_TOKENS = 1
    BAD_WEIGHTS = 2


#: ``{name: Status member}``, the names in lower case.
STATUS = names(Status)

#: The block's own counters, beside the array's (``array.*``): words read on the weight port,
#: experts run (the shared one included), rows the experts ran (tokens per expert, summed),
#: rows of partly filled row tiles the array ran empty (``ceil(n / rows) * rows - n`` per
#: expert of n tokens: the cost of few tokens per expert), and cycles from each expert's
#: start to the end of its last row (the experts' share of the run).
OWN_COUNTERS = ("weight_words", "experts_run", "rows", "pad_rows", "expert_cycles",
                "bad_weights")

#: Counters of each expert (routed experts, then the shared one), with ``expert_counters``:
#: the tokens it ran and the cycles the block spent on it.
EXPERT_COUNTERS = ("tokens_of", "cycles_of")

#: The ``counters`` port without per-expert counters.
COUNTERS = data.StructLayout({
    "array": GEMM_COUNTERS,
    **{name: f.shape for name, f in counter_layout(dict.fromkeys(OWN_COUNTERS, 32))},
})


def counters_layout(config: MoeConfig) -> data.StructLayout:
    """The ``counters`` port: :data:`COUNTERS`, and with ``expert_counters`` an array of 32-bit
    counters per :data:`EXPERT_COUNTERS` name, one per expert."""
    if not config.expert_counters:
        return COUNTERS
    return data.StructLayout({**{name: f.shape for name, f in COUNTERS},
                              **{name: data.ArrayLayout(32, config.all_experts)
                                 for name in EXPERT_COUNTERS}})


def command_layout(config: MoeConfig) -> data.StructLayout:
    """A ``cmd`` beat: ``tokens``, the batch's T (1 .. ``config.tokens``; the field holds
    ``tokens + 1`` too, so that one too many is refused, not cut to a smaller count)."""
    return data.StructLayout({"tokens": range(config.tokens + 2)})


def weight_layout(config: MoeConfig) -> data.StructLayout:
    """An ``rdata`` beat: a word of the weight memory, and ``last`` on a response's last word."""
    return data.StructLayout({"data": config.weight_port_bits, "last": 1})


def _store(m, quant, store, *, block, lane):
    """Connect a quantizer's blocks to an activation store's writes at ``block`` and ``lane``;
    returns the write's handshake."""
    m.d.comb += [store.w.valid.eq(quant.o.valid), quant.o.ready.eq(store.w.ready),
                 store.w.payload.block.eq(block), store.w.payload.lane.eq(lane),
                 store.w.payload.mx.eq(quant.o.payload)]
    return quant.o.valid & quant.o.ready


def _nested_step(m, inner, inner_end, outer, outer_end=None):
    """Step two nested counters (under the caller's condition): ``inner`` counts to
    ``inner_end - 1`` and wraps to 0, stepping ``outer`` (which wraps after ``outer_end - 1``
    when given)."""
    wraps = inner == inner_end - 1
    m.d.sync += inner.eq(Mux(wraps, 0, inner + 1))
    with m.If(wraps):
        step = outer + 1 if outer_end is None else Mux(outer == outer_end - 1, 0, outer + 1)
        m.d.sync += outer.eq(step)


class Moe(wiring.Component):
    """The MoE layer (``docs/moe.md``): a batch of tokens in, the layer's output out, the
    experts' weights fetched from memory on request. ``config`` is a :class:`MoeConfig`.

    Parts: ``router`` (:class:`~scoville.rtl.moe_router.Router`), ``xq`` and ``hq``
    (:class:`~scoville.rtl.mx_quant.MxQuant`: the tokens' and the experts' activations to
    ``act_fmt``), ``xs`` and ``hs`` (:class:`~scoville.rtl.moe_acts.ActStore`), ``dispatch``
    (:class:`~scoville.rtl.moe_dispatch.Dispatch`), ``fetch``
    (:class:`~scoville.rtl.fetch.Fetch`), ``tiles``
    (:class:`~scoville.rtl.moe_weights.WeightTiles`), ``array``
    (:class:`~scoville.rtl.gemm.Gemm`), ``glu`` (:class:`~scoville.rtl.moe_swiglu.Swiglu`),
    and the combine's output memory.

    Attributes
    ----------
    wr : In(stream.Signature(router write layout))
        The router's weights and bias (:func:`~scoville.rtl.moe_router.write_layout`).
    cmd : In(stream.Signature(command_layout(config)))
        A batch: its T; then T x ``hidden`` elements on ``x``.
    x : In(stream.Signature(32 or 16))
        The tokens' hidden vectors, FP32 (or BF16, ``x_fmt``), one element a beat, token after
        token.
    req, rdata :
        Read requests for the experts' weights and the memory's words
        (:attr:`memory_ports`; the layout of :meth:`MoeConfig.tile_bits`, expert after expert
        from address 0, each its gate-up tiles then its down tiles), each word with ``last``
        on its response's last (:func:`weight_layout`). A ``last`` where the request does not
        end it (a response that ends early or runs long) makes the batch end without output,
        status ``bad_weights``.
    o : Out(stream.Signature(ArrayLayout(32, array.cols)))
        The output, ``cols`` FP32 values a beat, token after token.
    status : Out(Status)
        Of the latest command (:class:`Status`).
    counters : Out(counters_layout(config))
        Since reset: the array's (``array.*``), :data:`OWN_COUNTERS`, and with
        ``expert_counters`` each expert's :data:`EXPERT_COUNTERS`.
    """

    memory_ports = {"req": "rdata"}

    def __init__(self, config: MoeConfig):
        self._config = config
        fc = config.fetch
        req = request_layout(fc.addr_bits, fc.len_bits)
        super().__init__({
            "wr": In(stream.Signature(router_write_layout(config))),
            "cmd": In(stream.Signature(command_layout(config))),
            "x": In(stream.Signature(16 if config.x_fmt == "bf16" else 32)),
            "req": Out(stream.Signature(req)),
            "rdata": In(stream.Signature(weight_layout(config))),
            "o": Out(stream.Signature(data.ArrayLayout(32, config.array.cols))),
            "status": Out(Status),
            "counters": Out(counters_layout(config)),
        })

    @property
    def config(self) -> MoeConfig:
        return self._config

    def elaborate(self, platform):  # noqa: C901 - one sequencer, in phases
        m = Module()
        cfg = self._config
        T, H, I_, C, R = cfg.tokens, cfg.hidden, cfg.intermediate, cfg.array.cols, cfg.array.rows
        XE = cfg.all_experts
        GT, DT = cfg.gate_up_tiles, cfg.down_tiles
        HB = C // 2  # activations per row of a gate-up tile
        kind = "gpt_oss" if cfg.biases else "deepseek"

        m.submodules.router = router = Router(cfg)
        m.submodules.dispatch = disp = Dispatch(cfg)
        m.submodules.xq = xq = MxQuant(MxQuantConfig(out_fmt=cfg.act_fmt))
        m.submodules.hq = hq = MxQuant(MxQuantConfig(out_fmt=cfg.act_fmt))
        m.submodules.xs = xs = ActStore(T, H, cfg.act_fmt, cfg.array)
        m.submodules.hs = hs = ActStore(T, I_, cfg.act_fmt, cfg.array)
        m.submodules.fetch = fetch = Fetch(cfg.fetch)
        m.submodules.tiles = tiles = WeightTiles(cfg)
        m.submodules.array = array = Gemm(cfg.array)
        m.submodules.glu = glu = Swiglu(SwigluConfig(kind=kind, lanes=HB))
        m.submodules.out = out_mem = Memory(shape=data.ArrayLayout(32, C), depth=max(T * DT, 2),
                                            init=[])
        ow = out_mem.write_port()
        orp = out_mem.read_port(transparent_for=(ow,))

        wiring.connect(m, wiring.flipped(self.wr), router.wr)
        wiring.connect(m, fetch.req, wiring.flipped(self.req))
        m.d.comb += [fetch.rdata.valid.eq(self.rdata.valid),
                     fetch.rdata.payload.eq(self.rdata.payload.data),
                     self.rdata.ready.eq(fetch.rdata.ready)]
        # Every response's ``last`` where the requests put it: the fetch engine asks for each
        # column tile's words in bursts of ``burst`` (the last one shorter), tile after tile,
        # each expert's gate-up tiles then its down tiles. A misplaced ``last`` (a response
        # that ends early or runs long) marks the batch bad.
        w_tile = Signal(range(GT + DT))
        w_word = Signal(range(max(cfg.tile_words(H), cfg.tile_words(I_))))
        w_beat = Signal(range(cfg.fetch.burst))
        tile_end = w_word == Mux(w_tile < GT, cfg.tile_words(H), cfg.tile_words(I_)) - 1
        burst_end = tile_end | (w_beat == cfg.fetch.burst - 1)
        weights_bad = Signal()
        with m.If(self.rdata.valid & self.rdata.ready):
            m.d.sync += [w_word.eq(Mux(tile_end, 0, w_word + 1)),
                         w_beat.eq(Mux(burst_end, 0, w_beat + 1))]
            with m.If(tile_end):
                m.d.sync += w_tile.eq(Mux(w_tile == GT + DT - 1, 0, w_tile + 1))
            with m.If(self.rdata.payload.last != burst_end):
                m.d.sync += weights_bad.eq(1)
        wiring.connect(m, fetch.o, tiles.words)
        wiring.connect(m, tiles.b, array.b)

        n_tok = Signal(range(T + 1))       # the batch's T
        shared_run = Signal()              # the shared expert's turn

        # ---- Input: x to the router and, 32 elements a line, to the quantizer.
        x32 = Signal(32)  # x as FP32 (a BF16 is the top half of its FP32)
        m.d.comb += x32.eq(Cat(Const(0, 16), self.x.payload) if cfg.x_fmt == "bf16"
                           else self.x.payload)
        pos = Signal(range(MX_BLOCK))
        line = Signal(data.ArrayLayout(32, MX_BLOCK - 1))
        taking = Signal()                  # the batch's x is due
        completes = pos == MX_BLOCK - 1
        go = Signal()
        m.d.comb += [
            go.eq(taking & self.x.valid & router.x.ready & (~completes | xq.i.ready)),
            self.x.ready.eq(taking & router.x.ready & (~completes | xq.i.ready)),
            router.x.valid.eq(taking & self.x.valid & (~completes | xq.i.ready)),
            router.x.payload.eq(x32),
            xq.i.valid.eq(taking & self.x.valid & router.x.ready & completes),
            xq.i.payload.as_value().eq(Cat(line.as_value(), x32)),
        ]
        x_count = Signal(range(T * H + 1))
        with m.If(go):
            m.d.sync += [line.as_value().eq(Cat(line.as_value()[32:], x32)),
                         pos.eq(Mux(completes, 0, pos + 1)), x_count.eq(x_count + 1)]
            with m.If(x_count == n_tok * H - 1):
                m.d.sync += taking.eq(0)  # the batch's last element
        # Blocks out of the quantizer, token-major: (token, block) counted.
        xt = Signal(range(T + 1))
        xb = Signal(range(H // MX_BLOCK + 1))
        x_blocks = Signal(range(T * H // MX_BLOCK + 1))
        with m.If(_store(m, xq, xs, block=xb, lane=xt)):
            m.d.sync += x_blocks.eq(x_blocks + 1)
            _nested_step(m, xb, H // MX_BLOCK, xt)

        # Router answers to the dispatch, the batch's last marked.
        routed = Signal(range(T + 1))
        m.d.comb += [disp.c.valid.eq(router.o.valid), router.o.ready.eq(disp.c.ready),
                     disp.c.payload.index.eq(router.o.payload.index),
                     disp.c.payload.weight.eq(router.o.payload.weight),
                     disp.c.payload.last.eq(routed == n_tok - 1)]
        with m.If(disp.c.valid & disp.c.ready):
            m.d.sync += routed.eq(routed + 1)

        # ---- Weight requests: every tile of every expert chosen, then the shared one's.
        chosen = Signal(XE)                # experts still to request
        issuing = Signal()
        e_req = Signal(range(max(XE, 2)))
        for e in reversed(range(XE)):
            with m.If(chosen[e]):
                m.d.comb += e_req.eq(e)
        t_req = Signal(range(GT + DT + 1))
        gu_req = t_req < GT
        tw_gu, tw_dn = cfg.tile_words(H), cfg.tile_words(I_)
        addr = Signal(cfg.fetch.addr_bits + 1)
        m.d.comb += addr.eq(e_req * cfg.expert_words
                            + Mux(gu_req, t_req * tw_gu, GT * tw_gu + (t_req - GT) * tw_dn))
        sent_f, sent_t = Signal(), Signal()
        m.d.comb += [
            fetch.cmd.valid.eq(issuing & ~sent_f), fetch.cmd.payload.addr.eq(addr),
            fetch.cmd.payload.len.eq(Mux(gu_req, tw_gu, tw_dn)),
            tiles.tile.valid.eq(issuing & ~sent_t),
            tiles.tile.payload.k.eq(Mux(gu_req, H, I_)),
            tiles.tile.payload.bias.eq(int(cfg.biases)),
        ]
        f_done = sent_f | (fetch.cmd.valid & fetch.cmd.ready)
        t_done = sent_t | (tiles.tile.valid & tiles.tile.ready)
        with m.If(issuing):
            m.d.sync += [sent_f.eq(f_done), sent_t.eq(t_done)]
            with m.If(f_done & t_done):
                m.d.sync += [sent_f.eq(0), sent_t.eq(0), t_req.eq(t_req + 1)]
                with m.If(t_req == GT + DT - 1):
                    m.d.sync += t_req.eq(0)
                    rest = chosen & ~(Const(1, XE) << e_req)[:XE]
                    m.d.sync += chosen.eq(rest)
                    with m.If(rest == 0):
                        m.d.sync += issuing.eq(0)
        req_armed = Signal()               # the batch's experts not yet taken
        with m.If(req_armed & disp.sorting):
            m.d.sync += [req_armed.eq(0), issuing.eq(1), t_req.eq(0),
                         chosen.eq(Cat(disp.experts, Const(int(bool(cfg.shared)), 1))[:XE]
                         if cfg.shared else disp.experts)]

        # ---- The experts, one after another.
        lst_tok = Array(Signal(range(max(T, 2)), name=f"tok{i}") for i in range(T))
        lst_w = Array(Signal(32, name=f"w{i}") for i in range(T))
        n = Signal(range(T + 1))
        last_group = Signal()
        gu = Signal()                      # the gate-up phase (else down)
        tile = Signal(range(max(GT, DT) + 1))
        sent_g, sent_b, sent_a = Signal(), Signal(), Signal()
        rows_out = Signal(range(T + 1))    # rows of the current tile handled
        for i in range(T):
            m.d.comb += [xs.lane[i].eq(lst_tok[i]), hs.lane[i].eq(i)]
        m.d.comb += [
            array.cmd.payload.m.eq(n), array.cmd.payload.n.eq(C),
            array.cmd.payload.k.eq(Mux(gu, H, I_)),
            tiles.cmd.payload.m_tiles.eq((n + R - 1) // R),
            xs.cmd.payload.eq(n), hs.cmd.payload.eq(n),
            array.a.valid.eq(xs.a.valid | hs.a.valid),
            array.a.payload.eq(Mux(xs.a.valid, xs.a.payload, hs.a.payload)),
            xs.a.ready.eq(array.a.ready), hs.a.ready.eq(array.a.ready),
        ]

        # Gate-up rows: + bias, SwiGLU; the activations into each list place's line.
        row = array.o.payload
        bias = tiles.bias
        m.d.comb += [
            glu.i.valid.eq(array.o.valid & gu),
            *(glu.i.payload.gate[q].eq(row[2 * q]) for q in range(HB)),
            *(glu.i.payload.up[q].eq(row[2 * q + 1]) for q in range(HB)),
        ]
        if cfg.biases:
            m.d.comb += [*(glu.i.payload.gate_bias[q].eq(bias[2 * q]) for q in range(HB)),
                         *(glu.i.payload.up_bias[q].eq(bias[2 * q + 1]) for q in range(HB))]
        hl = Array(Signal(data.ArrayLayout(32, MX_BLOCK), name=f"hline{i}") for i in range(T))
        g_row = Signal(range(T + 1))       # list place of the next SwiGLU output
        g_tile = Signal(range(GT + 1))
        seg = Signal(range(MX_BLOCK // HB))
        m.d.comb += seg.eq(g_tile % (MX_BLOCK // HB))
        fills = seg == MX_BLOCK // HB - 1
        merged = Signal(data.ArrayLayout(32, MX_BLOCK))
        cur = hl[g_row]
        for s_ in range(MX_BLOCK // HB):
            for q in range(HB):
                m.d.comb += merged[s_ * HB + q].eq(Mux(seg == s_, glu.o.payload[q],
                                                       cur[s_ * HB + q]))
        m.d.comb += [glu.o.ready.eq(~fills | hq.i.ready),
                     hq.i.valid.eq(glu.o.valid & fills),
                     hq.i.payload.as_value().eq(merged.as_value())]
        with m.If(glu.o.valid & glu.o.ready):
            m.d.sync += hl[g_row].eq(merged)
            _nested_step(m, g_row, n, g_tile, GT)
        # The quantizer's blocks, block-major: (list place, block).
        hp = Signal(range(T + 1))
        hb_ = Signal(range(I_ // MX_BLOCK + 1))
        h_blocks = Signal(range(T * I_ // MX_BLOCK + 1))
        with m.If(_store(m, hq, hs, block=hb_, lane=hp)):
            m.d.sync += h_blocks.eq(h_blocks + 1)
            _nested_step(m, hp, n, hb_)

        # Down rows: + bias, times the router's weight, added into the output (a read, then
        # the write a cycle later).
        d_row = Signal(range(T + 1))
        d_tile = Signal(range(DT + 1))
        m.d.comb += array.o.ready.eq(Mux(gu, glu.i.ready, 1))
        y = [fp32_add(m, row[c], bias[c], name=f"yb{c}") if cfg.biases else row[c]
             for c in range(C)]
        wy = [fp32_mul(m, lst_w[d_row], y[c], name=f"wy{c}") for c in range(C)]
        acc_v = Signal()
        acc_addr = Signal(range(T * DT))
        acc_p = Signal(data.ArrayLayout(32, C))
        d_fire = array.o.valid & array.o.ready & ~gu
        clearing = Signal()
        clear_at = Signal(range(T * DT + 1))
        rmw_addr = Signal(range(T * DT))  # the row's word: its token's, its column tile's
        m.d.comb += [rmw_addr.eq(lst_tok[d_row] * DT + d_tile), orp.addr.eq(rmw_addr)]
        m.d.sync += acc_v.eq(d_fire)
        with m.If(d_fire):
            m.d.sync += [acc_addr.eq(rmw_addr), acc_p.eq(Cat(*wy))]
            _nested_step(m, d_row, n, d_tile, DT)
        with m.If(clearing):
            m.d.comb += [ow.en.eq(1), ow.addr.eq(clear_at), ow.data.eq(0)]
            m.d.sync += clear_at.eq(clear_at + 1)
            with m.If(clear_at == n_tok * DT - 1):
                m.d.sync += clearing.eq(0)
        with m.Elif(acc_v):
            m.d.comb += [ow.en.eq(1), ow.addr.eq(acc_addr),
                         ow.data.eq(Cat(*(fp32_add(m, orp.data[c], acc_p[c], name=f"acc{c}")
                                          for c in range(C))))]

        # Output: the batch's words in order.
        o_at = Signal(range(T * DT + 1))
        o_fire = self.o.valid & self.o.ready

        # ---- The counters.
        run_n = Signal(range(T + 1))      # the tokens of the expert about to run
        run_e = Signal(range(cfg.all_experts))  # and its index
        starts = Signal()                 # an expert starts (its list is in)
        cur_e = Signal(range(cfg.all_experts))  # the expert running
        bad_batch = Signal()              # a batch ends without output (bad weights)
        m.d.comb += self.counters.array.eq(array.counters)
        count(m, self.counters, {
            "weight_words": self.rdata.valid & self.rdata.ready,
            "experts_run": starts,
            "rows": Mux(starts, run_n, 0),
            "pad_rows": Mux(starts, (run_n + R - 1) // R * R - run_n, 0),
            "bad_weights": bad_batch,
        })

        # ---- The sequencer.
        entry = disp.o.payload
        with m.FSM() as fsm:
            in_expert = (fsm.ongoing("WAIT_X") | fsm.ongoing("TILE") | fsm.ongoing("ROWS")
                         | fsm.ongoing("DRAIN"))
            count(m, self.counters, {"expert_cycles": in_expert})
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    t_ = self.cmd.payload.tokens
                    bad = (t_ == 0) | (t_ > T)
                    m.d.sync += self.status.eq(Mux(bad, Status.BAD_TOKENS, Status.OK))
                    with m.If(~bad):
                        m.d.sync += weights_bad.eq(0)
                        m.d.sync += [n_tok.eq(t_), taking.eq(1), pos.eq(0), xt.eq(0),
                                     x_count.eq(0), shared_run.eq(0),
                                     xb.eq(0), x_blocks.eq(0), routed.eq(0), clearing.eq(1),
                                     clear_at.eq(0), req_armed.eq(1)]
                        m.next = "INPUT"
            with m.State("INPUT"):
                with m.If(disp.sorting):
                    m.next = "GROUP"
            with m.State("GROUP"):
                # Latch one expert's list from the dispatch.
                m.d.comb += disp.o.ready.eq(1)
                with m.If(disp.o.valid):
                    with m.If(entry.first):
                        m.d.sync += [lst_tok[0].eq(entry.token), lst_w[0].eq(entry.weight),
                                     n.eq(1)]
                    with m.Else():
                        m.d.sync += [lst_tok[n].eq(entry.token), lst_w[n].eq(entry.weight),
                                     n.eq(n + 1)]
                    with m.If(entry.last):
                        m.d.comb += [starts.eq(1), run_n.eq(entry.count),
                                     run_e.eq(entry.expert)]
                        m.d.sync += [last_group.eq(entry.end), gu.eq(1), tile.eq(0),
                                     g_row.eq(0), g_tile.eq(0), hp.eq(0), hb_.eq(0),
                                     h_blocks.eq(0), rows_out.eq(0), d_row.eq(0),
                                     d_tile.eq(0)]
                        m.next = "WAIT_X"
            with m.State("WAIT_X"):
                # Every block of x is in the store (the quantizer drained).
                with m.If(x_blocks == n_tok * (H // MX_BLOCK)):
                    m.next = "TILE"
            with m.State("TILE"):
                # One column tile: the array's command, the weight feeder's and the A
                # store's, each taken once; then its rows.
                g_ok = sent_g | (array.cmd.valid & array.cmd.ready)
                b_ok = sent_b | (tiles.cmd.valid & tiles.cmd.ready)
                a_ok = sent_a | Mux(gu, xs.cmd.valid & xs.cmd.ready,
                                    hs.cmd.valid & hs.cmd.ready)
                m.d.comb += [array.cmd.valid.eq(~sent_g), tiles.cmd.valid.eq(~sent_b),
                             xs.cmd.valid.eq(gu & ~sent_a), hs.cmd.valid.eq(~gu & ~sent_a)]
                m.d.sync += [sent_g.eq(g_ok), sent_b.eq(b_ok), sent_a.eq(a_ok)]
                with m.If(g_ok & b_ok & a_ok):
                    m.d.sync += [sent_g.eq(0), sent_b.eq(0), sent_a.eq(0), rows_out.eq(0)]
                    m.next = "ROWS"
            with m.State("ROWS"):
                with m.If(array.o.valid & array.o.ready):
                    m.d.sync += rows_out.eq(rows_out + 1)
                    with m.If(rows_out == n - 1):
                        m.d.sync += tile.eq(tile + 1)
                        with m.If(tile == Mux(gu, GT, DT) - 1):
                            m.next = "DRAIN"
                        with m.Else():
                            m.next = "TILE"
            with m.State("DRAIN"):
                # The phase's last rows through SwiGLU and the quantizer, or the combine.
                with m.If(gu):
                    with m.If(h_blocks == n * (I_ // MX_BLOCK)):
                        m.d.sync += [gu.eq(0), tile.eq(0)]
                        m.next = "TILE"
                with m.Elif(~acc_v):
                    with m.If(shared_run | (last_group & (not cfg.shared))):
                        m.next = "OUT_FIRST"
                    with m.Elif(last_group):
                        # The shared expert: every token, weight 1.0.
                        m.d.comb += [starts.eq(1), run_n.eq(n_tok), run_e.eq(cfg.experts)]
                        m.d.sync += [n.eq(n_tok), last_group.eq(0), gu.eq(1), tile.eq(0),
                                     g_row.eq(0), g_tile.eq(0), hp.eq(0), hb_.eq(0),
                                     h_blocks.eq(0), d_row.eq(0), d_tile.eq(0),
                                     shared_run.eq(1)]
                        for i in range(T):
                            m.d.sync += [lst_tok[i].eq(i), lst_w[i].eq(fp32_bits(1.0))]
                        m.next = "WAIT_X"
                    with m.Else():
                        m.next = "GROUP"
            with m.State("OUT_FIRST"):
                # The output memory's first word is read; a batch whose weights came with a
                # misplaced ``last`` emits nothing.
                m.d.comb += orp.addr.eq(0)
                m.d.sync += o_at.eq(0)
                with m.If(weights_bad):
                    m.d.sync += self.status.eq(Status.BAD_WEIGHTS)
                    m.d.comb += bad_batch.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.next = "OUT"
            with m.State("OUT"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(orp.data),
                             orp.addr.eq(o_at + o_fire)]
                with m.If(o_fire):
                    m.d.sync += o_at.eq(o_at + 1)
                    with m.If(o_at == n_tok * DT - 1):
                        m.next = "IDLE"
        if cfg.expert_counters:
            # Each expert's tokens when it starts; its cycles from the next one on (the cycle
            # it starts in is still the previous expert's).
            tokens_of, cycles_of = self.counters.tokens_of, self.counters.cycles_of
            with m.If(starts):
                m.d.sync += cur_e.eq(run_e)
            for e in range(cfg.all_experts):
                with m.If(starts & (run_e == e)):
                    m.d.sync += tokens_of[e].eq(tokens_of[e] + run_n)
                with m.If(in_expert & (cur_e == e)):
                    m.d.sync += cycles_of[e].eq(cycles_of[e] + 1)
        return m
