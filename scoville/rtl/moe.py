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

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .fetch import Fetch, FetchConfig, request_layout
from .gemm import COUNTERS as GEMM_COUNTERS
from .gemm import Gemm, GemmConfig
from .lib.codes import names
from .lib.counters import count, counter_layout
from .lib.formats import MX_BLOCK
from .lib.params import ParamError, check_choice, check_int, check_parts, param, part
from .lib.queue import Queue
from .moe_acts import ActStore, LinePacker, StoreWriter
from .moe_combine import Combine
from .moe_dispatch import Dispatch
from .moe_input import XSplit, x_layout
from .moe_requests import ResponseCheck, WeightRequests
from .moe_router import Router
from .moe_router import write_layout as router_write_layout
from .moe_sequencer import ExpertList, Sequencer, Status, command_layout
from .moe_swiglu import ALPHA, LIMIT, Swiglu, SwigluConfig
from .moe_weights import TileFormat, WeightTiles, tile_layout
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

#: The array by default. Its block units and PEs uncut (``unit_latency`` and ``pe_latency``
#: 0): the block runs one array command a column tile, each draining before the next, so every
#: stage they add costs each tile a cycle (units at 6, 8 cycles: the DeepSeek-shaped decode of
#: scripts/moe_bench.py fell from 96.7% of the memory's rate to 94.1%, under its 95% target).
#: Commands that overlap in the array would hide them.
_ARRAY = GemmConfig(rows=8, cols=8, fmt="mxfp8", b_fmt="mxfp4", unit_latency=0, pe_latency=0)


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
    x_lanes : int
        Elements of ``x`` a beat; the router takes a beat a cycle (a token in
        ``hidden / x_lanes`` cycles), each expert's products of a beat summed as a tree.
    act_fmt : str
        ``mxfp8`` or ``mxfp4``: activations of both matmuls, quantized on chip.
    weight_port_bits : int
        Width of the port the experts' weights arrive on.
    tokens : int
        The most tokens a batch holds (the on-chip buffers' depth).
    tile_queue : int
        Column-tile descriptors queued between the weight requests and the loader: the
        requests (and so the fetch engine) run that many tiles further ahead of the tile
        being loaded; 0 hands each descriptor over directly (the requests wait for the
        loader to start the tile before).
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
    x_lanes: int = param(1, "1, 2, 4, ..., 32", "elements of x a beat (the router's a cycle)")
    act_fmt: str = param("mxfp8", "mxfp8, mxfp4", "activations of both matmuls")
    weight_port_bits: int = param(256, "64, 128, 256, 512, 1024", "weight port width")
    tokens: int = param(16, "1..256", "the most tokens a batch holds")
    fetch_buffer: int = param(32, "32..4096", "weight words requested and not yet loaded "
                              "(cover the memory's round trip: latency x words a cycle + 16)")
    expert_counters: int = param(1, "0, 1", "a tokens and a cycles counter per expert "
                                 "(2 x 32 flip-flops an expert)")
    tile_queue: int = param(0, "0..16", "column-tile descriptors queued ahead of the loader "
                            "(0: handed over directly)")

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
        check_int("x_lanes", self.x_lanes, 1, MX_BLOCK, choices=[1 << k for k in range(6)])
        check_choice("act_fmt", self.act_fmt, ACT_FORMATS)
        check_int("tokens", self.tokens, 1, 256)
        check_int("fetch_buffer", self.fetch_buffer, 32, 4096)
        check_int("expert_counters", self.expert_counters, 0, 1)
        check_int("tile_queue", self.tile_queue, 0, 16)
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

    @property
    def tile_format(self) -> TileFormat:
        """How the experts' column tiles lie in memory (MXFP4, :class:`~scoville.rtl
        .moe_weights.TileFormat`) and what the weight tiles' slots hold."""
        return TileFormat(array=self.array, port_bits=self.weight_port_bits,
                          k_max=max(self.hidden, self.intermediate), tokens=self.tokens)

    def tile_bits(self, k: int) -> int:
        """Bits of one column tile (``array.cols`` columns) of a matrix of ``k`` rows as the
        memory holds it: per block of 32 rows, the rows' MXFP4 codes (``cols`` x 4 bits a row,
        column 0 lowest) then the block's ``cols`` E8M0 scales; then, with :attr:`biases`,
        the ``cols`` FP32 biases."""
        return self.tile_format.tile_bits(k, self.biases)

    def tile_words(self, k: int) -> int:
        """Words of the weight port one column tile takes (the last one zero-padded)."""
        return self.tile_format.tile_words(k, self.biases)

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


def weight_layout(config: MoeConfig) -> data.StructLayout:
    """An ``rdata`` beat: a word of the weight memory, and ``last`` on a response's last word."""
    return data.StructLayout({"data": config.weight_port_bits, "last": 1})


class Moe(wiring.Component):
    """The MoE layer (``docs/moe.md``): a batch of tokens in, the layer's output out, the
    experts' weights fetched from memory on request. ``config`` is a :class:`MoeConfig`.

    Parts (``elaborate`` is their wiring; ``docs/moe.md`` draws them): ``seq``
    (:class:`~scoville.rtl.moe_sequencer.Sequencer`), ``experts``
    (:class:`~scoville.rtl.moe_sequencer.ExpertList`), ``split``
    (:class:`~scoville.rtl.moe_input.XSplit`), ``router``
    (:class:`~scoville.rtl.moe_router.Router`), ``xq`` and ``hq``
    (:class:`~scoville.rtl.mx_quant.MxQuant`: the tokens' and the experts' activations to
    ``act_fmt``), ``xw`` and ``hw`` (:class:`~scoville.rtl.moe_acts.StoreWriter`), ``xs`` and
    ``hs`` (:class:`~scoville.rtl.moe_acts.ActStore`), ``dispatch``
    (:class:`~scoville.rtl.moe_dispatch.Dispatch`), ``requests`` and ``check``
    (:class:`~scoville.rtl.moe_requests.WeightRequests`,
    :class:`~scoville.rtl.moe_requests.ResponseCheck`), ``fetch``
    (:class:`~scoville.rtl.fetch.Fetch`), ``tiles``
    (:class:`~scoville.rtl.moe_weights.WeightTiles`), ``array``
    (:class:`~scoville.rtl.gemm.Gemm`), ``glu`` (:class:`~scoville.rtl.moe_swiglu.Swiglu`),
    ``pack`` (:class:`~scoville.rtl.moe_acts.LinePacker`) and ``combine``
    (:class:`~scoville.rtl.moe_combine.Combine`).

    Attributes
    ----------
    wr : In(stream.Signature(router write layout))
        The router's weights and bias (:func:`~scoville.rtl.moe_router.write_layout`).
    cmd : In(stream.Signature(command_layout(config)))
        A batch: its T; then T x ``hidden`` elements on ``x``.
    x : In(stream.Signature(x_layout(config)))
        The tokens' hidden vectors, FP32 (or BF16, ``x_fmt``), ``x_lanes`` elements a beat
        (:func:`~scoville.rtl.moe_input.x_layout`), token after token.
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
            "x": In(stream.Signature(x_layout(config))),
            "req": Out(stream.Signature(req)),
            "rdata": In(stream.Signature(weight_layout(config))),
            "o": Out(stream.Signature(data.ArrayLayout(32, config.array.cols))),
            "status": Out(Status),
            "counters": Out(counters_layout(config)),
        })

    @property
    def config(self) -> MoeConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        T, H, I_, C = cfg.tokens, cfg.hidden, cfg.intermediate, cfg.array.cols
        kind = "gpt_oss" if cfg.biases else "deepseek"
        m.submodules.seq = seq = Sequencer(cfg)
        m.submodules.split = split = XSplit(cfg)
        m.submodules.router = router = Router(cfg)
        m.submodules.dispatch = disp = Dispatch(cfg)
        m.submodules.experts = elist = ExpertList(cfg)
        m.submodules.xq = xq = MxQuant(MxQuantConfig(out_fmt=cfg.act_fmt))
        m.submodules.hq = hq = MxQuant(MxQuantConfig(out_fmt=cfg.act_fmt))
        m.submodules.xw = xw = StoreWriter(T, H, cfg.act_fmt, by_lane=True)
        m.submodules.hw = hw = StoreWriter(T, I_, cfg.act_fmt, by_lane=False)
        m.submodules.xs = xs = ActStore(T, H, cfg.act_fmt, cfg.array)
        m.submodules.hs = hs = ActStore(T, I_, cfg.act_fmt, cfg.array)
        m.submodules.requests = reqs = WeightRequests(cfg)
        m.submodules.check = check = ResponseCheck(cfg)
        m.submodules.fetch = fetch = Fetch(cfg.fetch)
        m.submodules.tiles = tiles = WeightTiles(cfg.tile_format)
        m.submodules.array = array = Gemm(cfg.array)
        m.submodules.glu = glu = Swiglu(SwigluConfig(kind=kind, lanes=C // 2))
        m.submodules.pack = pack = LinePacker(T, C // 2, cfg.gate_up_tiles)
        m.submodules.combine = comb = Combine(cfg)

        # The sequencer: commands, the batch's start, each expert's start and tiles.
        wiring.connect(m, wiring.flipped(self.cmd), seq.cmd)
        wiring.connect(m, disp.o, seq.entry)
        m.d.comb += [self.status.eq(seq.status), seq.sorting.eq(disp.sorting),
                     seq.n.eq(elist.n), seq.x_blocks.eq(xw.count), seq.h_blocks.eq(hw.count),
                     seq.row.eq(array.o.valid & array.o.ready), seq.busy.eq(comb.busy),
                     seq.weights_bad.eq(check.bad), seq.o_last.eq(comb.o_last),
                     elist.entry.eq(disp.o.payload), elist.add.eq(seq.add),
                     elist.shared.eq(seq.shared), elist.tokens.eq(seq.tokens)]
        start, expert = seq.start, seq.expert_start
        m.d.comb += [split.start.eq(start), split.tokens.eq(seq.tokens), xw.clear.eq(start),
                     reqs.arm.eq(start), check.clear.eq(start), comb.clear.eq(start),
                     comb.tokens.eq(seq.tokens), hw.clear.eq(expert), pack.clear.eq(expert),
                     comb.restart.eq(expert), hw.n.eq(elist.n), pack.n.eq(elist.n),
                     comb.n.eq(elist.n), comb.tok.eq(elist.tok), comb.w.eq(elist.w),
                     comb.first.eq(seq.first), comb.out.eq(seq.out)]

        # x: to the router and, 32 elements a line, quantized into the x store.
        wiring.connect(m, wiring.flipped(self.x), split.x)
        wiring.connect(m, split.router, router.x)
        wiring.connect(m, split.line, xq.i)
        wiring.connect(m, xq.o, xw.i)
        wiring.connect(m, xw.w, xs.w)
        # The router's answers to the dispatch, the batch's last marked.
        wiring.connect(m, wiring.flipped(self.wr), router.wr)
        routed = Signal(range(T + 1))
        m.d.comb += [disp.c.valid.eq(router.o.valid), router.o.ready.eq(disp.c.ready),
                     disp.c.payload.index.eq(router.o.payload.index),
                     disp.c.payload.weight.eq(router.o.payload.weight),
                     disp.c.payload.last.eq(routed == seq.tokens - 1)]
        with m.If(disp.c.valid & disp.c.ready):
            m.d.sync += routed.eq(routed + 1)
        with m.If(start):
            m.d.sync += routed.eq(0)

        # The experts' weights: requests, the memory's words (checked) into the tiles.
        m.d.comb += [reqs.sorting.eq(disp.sorting), reqs.experts.eq(disp.experts)]
        wiring.connect(m, reqs.fetch, fetch.cmd)
        if cfg.tile_queue:      # the descriptors queued: the requests run ahead
            m.submodules.tileq = q = Queue(tile_layout(cfg.tile_format), cfg.tile_queue)
            wiring.connect(m, reqs.tile, q.i)
            wiring.connect(m, q.o, tiles.tile)
        else:
            wiring.connect(m, reqs.tile, tiles.tile)
        wiring.connect(m, fetch.req, wiring.flipped(self.req))
        m.d.comb += [fetch.rdata.valid.eq(self.rdata.valid),
                     fetch.rdata.payload.eq(self.rdata.payload.data),
                     self.rdata.ready.eq(fetch.rdata.ready),
                     check.take.eq(self.rdata.valid & self.rdata.ready),
                     check.last.eq(self.rdata.payload.last)]
        wiring.connect(m, fetch.o, tiles.words)
        wiring.connect(m, tiles.b, array.b)

        # The array: commands from the sequencer, A from the x store (gate-up) or the h store
        # (down), one list of tokens.
        wiring.connect(m, seq.array_cmd, array.cmd)
        wiring.connect(m, seq.feed, tiles.cmd)
        wiring.connect(m, seq.x_cmd, xs.cmd)
        wiring.connect(m, seq.h_cmd, hs.cmd)
        for i in range(T):
            m.d.comb += [xs.lane[i].eq(elist.tok[i]), hs.lane[i].eq(i)]
        m.d.comb += [array.a.valid.eq(xs.a.valid | hs.a.valid),
                     array.a.payload.eq(Mux(xs.a.valid, xs.a.payload, hs.a.payload)),
                     xs.a.ready.eq(array.a.ready), hs.a.ready.eq(array.a.ready)]

        # Gate-up rows: + bias, SwiGLU, into lines, quantized into the h store. Down rows:
        # into the combine, and out.
        row, bias, gu = array.o.payload, tiles.bias, seq.gu
        m.d.comb += [glu.i.valid.eq(array.o.valid & gu),
                     comb.rows.valid.eq(array.o.valid & ~gu), comb.rows.payload.eq(row),
                     comb.bias.eq(bias),
                     array.o.ready.eq(Mux(gu, glu.i.ready, comb.rows.ready))]
        for q in range(C // 2):
            m.d.comb += [glu.i.payload.gate[q].eq(row[2 * q]),
                         glu.i.payload.up[q].eq(row[2 * q + 1])]
            if cfg.biases:
                m.d.comb += [glu.i.payload.gate_bias[q].eq(bias[2 * q]),
                             glu.i.payload.up_bias[q].eq(bias[2 * q + 1])]
        wiring.connect(m, glu.o, pack.i)
        wiring.connect(m, pack.o, hq.i)
        wiring.connect(m, hq.o, hw.i)
        wiring.connect(m, hw.w, hs.w)
        wiring.connect(m, comb.o, wiring.flipped(self.o))
        self._count(m, seq, array)
        return m

    def _count(self, m, seq, array):
        """The counters: the array's, the block's own and (``expert_counters``) each
        expert's."""
        cfg, R = self._config, self._config.array.rows
        run_n = seq.run_n
        starts = seq.expert_start
        m.d.comb += self.counters.array.eq(array.counters)
        count(m, self.counters, {
            "weight_words": self.rdata.valid & self.rdata.ready,
            "experts_run": starts,
            "rows": Mux(starts, run_n, 0),
            "pad_rows": Mux(starts, (run_n + R - 1) // R * R - run_n, 0),
            "bad_weights": seq.bad_batch,
            "expert_cycles": seq.in_expert,
        })
        if cfg.expert_counters:
            # Each expert's tokens when it starts; its cycles from the next one on (the cycle
            # it starts in is still the previous expert's).
            cur_e = Signal(range(cfg.all_experts))  # the expert running
            tokens_of, cycles_of = self.counters.tokens_of, self.counters.cycles_of
            with m.If(starts):
                m.d.sync += cur_e.eq(seq.run_e)
            for e in range(cfg.all_experts):
                with m.If(starts & (seq.run_e == e)):
                    m.d.sync += tokens_of[e].eq(tokens_of[e] + run_n)
                with m.If(seq.in_expert & (cur_e == e)):
                    m.d.sync += cycles_of[e].eq(cycles_of[e] + 1)
