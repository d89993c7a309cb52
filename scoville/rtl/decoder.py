"""The decoder layer's engine: the parameters of the ``decoder`` block, one frozen config that
its golden model (:class:`scoville.sim.golden.decoder.DecoderModel`) reads.

The block (``docs/decoder.md``) runs a layer as a program of commands over an activation
memory of lines (32 FP32 values each), one command at a time: ``IN`` (lines from ``x``),
``OUT`` (lines to ``o``), ``ADD`` (the residual: two ranges of lines added in FP32), ``NORM``
(RMSNorm of tokens, the weight vector fetched from memory: the ``rmsnorm`` block), ``LINEAR``
(a projection, its weight fetched from memory: the ``linear`` block), ``MOE`` (the MoE
layer, its experts' weights fetched from memory: the ``moe`` block) and ``ROPE`` (rotary
embedding of vectors in place, their positions' table rows fetched from memory: the ``rope``
block), ``ATTN`` (the ``attention`` block's commands: a step's query, key and value
heads from the lines, its outputs into lines; its KV cache holds the sequences) and
``ARGMAX`` (greedy sampling of a token's logits from the lines: the ``argmax`` block, the
chosen index in the answer), ``GLU`` (DeepSeek's gated product ``silu(a) b`` of two
ranges of lines, lane by lane: a dense MLP's between its projections) and ``ROUTER`` (the
MoE router's weights and bias fetched from memory into the router, for the ``MOE`` commands
after it). The three fetching parts share the memory port through
:class:`~scoville.rtl.lib.memmux.MemoryMux`.
"""

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .argmax import Argmax, ArgmaxConfig
from .attention import Attention, AttentionConfig, rtl_error
from .decoder_parts import (
    INDEX_BITS,
    LINE,
    AttnOp,
    Joiner,
    LineReader,
    Op,
    OutWalker,
    Placer,
    Sequencer,
    Splitter,
    Status,
    VecGather,
    VecLoader,
    VecWalker,
    command_layout,
    line_layout,
    line_splitter,
    response_layout,
)
from .fetch import Fetch, FetchConfig, request_layout
from .gemm import GemmConfig
from .kvcache import KvCacheConfig
from .kvcache import Status as CacheStatus
from .lib.codes import names
from .lib.counters import count, counter_layout
from .lib.fp32 import fp32_add
from .lib.memmux import MemoryMux
from .lib.params import ParamError, check_int, check_parts, param, part
from .linear import Linear, LinearConfig
from .moe import Moe, MoeConfig
from .moe_swiglu import Swiglu, SwigluConfig
from .rmsnorm import RmsNorm, RmsNormConfig
from .rope import Rope, RopeConfig

__all__ = ["COUNTERS", "LINE", "MUX_DEPTH", "OPS", "STATUS", "AttnOp", "Decoder",
           "DecoderConfig", "Op", "Status", "command_layout", "line_layout", "response_layout"]

#: ``{name: Op member}`` and ``{name: Status member}``, the names in lower case.
OPS = names(Op)
STATUS = names(Status)

#: The counters: commands run and refused, words read on the memory port.
COUNTERS = counter_layout({"commands": 32, "refused": 32, "weight_words": 32})

#: Requests the memory mux keeps in flight: the harness memory's queue.
MUX_DEPTH = 16

_LINEAR = LinearConfig(tokens=16, k_max=256, n_max=1024)
_MOE = MoeConfig(x_lanes=LINE, tokens=16)   # the router takes a line of x a cycle
_ROPE = RopeConfig(dim=32)                  # the heads of 32
#: The issue's attention: 8 query and 2 KV heads of 32 (BF16 cache), prefill steps of up to
#: 16 tokens (a decode step is one), 8 sequences.
_ATTN = AttentionConfig(
    kv=KvCacheConfig(banks=4, word_bits=64, bank_words=4096, page_tokens=16, max_seqs=8,
                     kv_heads=2, head_dim=32),
    array=GemmConfig(rows=8, cols=32, fmt="bf16"), q_heads=8, sinks=1, mode="prefill",
    q_tokens=16)

#: A vocabulary of 1024 tokens, a line of logits a beat.
_ARGMAX = ArgmaxConfig(vocab=1024, lanes=LINE)

#: ``rope.dim``: a vector within a line (a power of two) or whole lines.
ROPE_DIMS = (2, 4, 8, 16, 32, 64, 96, 128)
#: ``glu_lanes``: the gated products a cycle (a line in ``32 / glu_lanes`` cycles).
GLU_LANES = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class DecoderConfig:
    """Parameters of the ``decoder`` block.

    Attributes
    ----------
    hidden : int
        The hidden size H: a ``NORM`` token's values unless its ``k`` says fewer.
    eps : float
        ``NORM``'s eps.
    act_lines : int
        Lines of the activation memory.
    linear : LinearConfig
        The projections' part (``linear.*``; ``array.cols`` at most 32): its array, its most
        tokens, K and N, and the weight port (``linear.weight_port_bits``: the block's).
    moe : MoeConfig
        The MoE's part (``moe.*``): its ``hidden`` the block's, FP32 x (a line in ``32 /
        x_lanes`` beats: 32 lanes, the default, route a line a cycle), the block's weight
        port, ``array.cols`` at most 32.
    rope : RopeConfig
        The rotary embedding's part (``rope.*``): ``dim`` values a vector (a power of two up
        to 32, or whole lines), a table row (``dim / 2`` cosines then as many sines, FP32)
        whole words of the weight port; ``interleaved`` the pairs.
    attn : AttentionConfig
        The attention's part (``attn.*``: the ``attention`` block, its KV cache and array):
        its head vectors (``kv.head_dim`` values; ``v_dim`` out) within a line or whole
        lines; with ``mla`` a step's one key vector a token is the latent one (no values).
    argmax : ArgmaxConfig
        Greedy sampling's part (``argmax.*``: the ``argmax`` block): ``vocab`` logits a
        token, a line a beat.
    glu_lanes : int
        ``GLU``'s gated products a cycle (a line in ``32 / glu_lanes`` cycles).
    """

    hidden: int = param(256, "32..8192, a multiple of 32", "hidden size H")
    eps: float = param(1e-5, "a positive number below 1", "NORM's eps")
    act_lines: int = param(1024, "16..32768", "lines of the activation memory")
    linear: LinearConfig = part(_LINEAR, "the projections (block linear)")
    moe: MoeConfig = part(_MOE, "the MoE (block moe)")
    rope: RopeConfig = part(_ROPE, "the rotary embedding (block rope)")
    attn: AttentionConfig = part(_ATTN, "the attention over the KV cache (block attention)")
    argmax: ArgmaxConfig = part(_ARGMAX, "greedy sampling (block argmax)",
                                restrict={"lanes": (LINE,)})
    glu_lanes: int = param(8, "1, 2, 4, 8, 16, 32", "GLU's gated products a cycle")

    def __post_init__(self):
        check_parts(self)
        check_int("hidden", self.hidden, LINE, 8192)
        if self.hidden % LINE:
            raise ParamError(f"parameter 'hidden' = {self.hidden} is not allowed; allowed: a "
                             f"multiple of {LINE} from {LINE} to 8192")
        check_int("act_lines", self.act_lines, 16, 32768)
        if self.linear.array.cols > LINE:
            raise ParamError(f"parameter 'linear.array.cols' = {self.linear.array.cols} is not "
                             f"allowed; allowed: 1, 2, 4, 8, 16, 32 (a column tile within a "
                             "line)")
        for name, value, want in (("moe.hidden", self.moe.hidden, self.hidden),
                                   ("moe.x_fmt", self.moe.x_fmt, "fp32"),
                                   ("moe.weight_port_bits", self.moe.weight_port_bits,
                                    self.linear.weight_port_bits)):
            if value != want:
                raise ParamError(f"parameter {name!r} = {value!r} is not allowed; allowed: "
                                 f"{want!r} (the block's: FP32 lines, one weight port)")
        if self.moe.array.cols > LINE:
            raise ParamError(f"parameter 'moe.array.cols' = {self.moe.array.cols} is not "
                             "allowed; allowed: 2, 4, 8, 16, 32 (a column tile within a line)")
        if self.moe_words > 1 << self.linear.addr_bits:
            raise ParamError(f"parameter 'linear.addr_bits' = {self.linear.addr_bits} is not "
                             f"allowed with this MoE: its weights are {self.moe_words} words; "
                             f"allowed: {self.moe_words.bit_length()}..32")
        if self.rope.dim not in ROPE_DIMS:
            raise ParamError(f"parameter 'rope.dim' = {self.rope.dim} is not allowed; allowed: "
                             f"{', '.join(map(str, ROPE_DIMS))} (a vector within a line, or "
                             "whole lines)")
        if self.rope.dim * 32 % self.linear.weight_port_bits:
            dims = [d for d in ROPE_DIMS if d * 32 % self.linear.weight_port_bits == 0]
            raise ParamError(f"parameter 'rope.dim' = {self.rope.dim} is not allowed with "
                             f"linear.weight_port_bits = {self.linear.weight_port_bits}: a "
                             f"table row must be whole words; allowed: "
                             f"{', '.join(map(str, dims)) or 'none'}")
        check_int("glu_lanes", self.glu_lanes, 1, LINE, choices=GLU_LANES)
        def whole(d):       # a head within a line, or whole lines
            return d < LINE and LINE % d == 0 or d % LINE == 0

        if not whole(self.attn.kv.head_dim):
            raise ParamError(f"parameter 'attn.kv.head_dim' = {self.attn.kv.head_dim} is not "
                             "allowed; allowed: a divisor of 32 or a multiple of 32 (a head "
                             "within a line, or whole lines)")
        if not whole(self.attn.v_dim):
            d = self.attn.kv.head_dim
            ok = [r for r in range(1, d) if whole(d - r)][:6]
            raise ParamError(f"parameter 'attn.rope_dim' = {self.attn.rope_dim} is not allowed "
                             f"with attn.mla = 1 and attn.kv.head_dim = {d}; allowed: "
                             f"{', '.join(map(str, ok))}, ... (the value, head_dim - rope_dim "
                             "elements, within a line or whole lines)")
        error = rtl_error(self.attn)
        if error:
            raise ParamError(error.replace("parameter '", "parameter 'attn.", 1))
        _ = self.norm  # eps is checked by the norm's config
        # (A norm's weights are never more words than the router's: one fetch holds both.)
        if self.router_words >= 1 << 16:
            words = ((1 << 16) - 1) // self.router_beats     # a beat's most words
            most = words * self.linear.weight_port_bits // (32 * self.moe.x_lanes)
            raise ParamError(f"parameter 'moe.experts' = {self.moe.experts} is not allowed "
                             f"with moe.hidden = {self.moe.hidden}, moe.x_lanes = "
                             f"{self.moe.x_lanes} and linear.weight_port_bits = "
                             f"{self.linear.weight_port_bits}: the router's weights "
                             f"({self.router_words} words) must fit one fetch command; "
                             f"allowed: at most {most}")

    @property
    def line_bits(self) -> int:
        """Bits of a line address."""
        return max((self.act_lines - 1).bit_length(), 1)

    @property
    def norm(self) -> RmsNormConfig:
        """The norm part: up to H values a token (a command's ``k``), a line a beat."""
        return RmsNormConfig(hidden=self.hidden, lanes=LINE, eps=self.eps, runtime=1)

    @property
    def norm_words(self) -> int:
        """Weight-port words of a norm's weight vector of H values (FP32, value 0 lowest)."""
        return self.hidden // LINE * self.norm_line_words

    @property
    def norm_line_words(self) -> int:
        """Weight-port words of a line of a norm's weight vector (32 FP32 values): a
        ``NORM`` of ``k`` values fetches ``k / 32`` of them."""
        return LINE * 32 // self.linear.weight_port_bits

    @property
    def glu(self) -> SwigluConfig:
        """``GLU``'s gated products: DeepSeek's, ``glu_lanes`` a beat."""
        return SwigluConfig(kind="deepseek", lanes=self.glu_lanes)

    @property
    def glu_beats(self) -> int:
        """Beats of a line through ``GLU``'s gated products."""
        return LINE // self.glu_lanes

    @property
    def norm_fetch(self) -> FetchConfig:
        """The fetch engine of the norms' weights, ``ROPE``'s table rows and the router's
        weights: the projections' (one request layout on the port), its commands long
        enough for the router's."""
        fc = self.linear.fetch
        return dataclasses.replace(fc, len_bits=max(fc.len_bits,
                                                    self.router_words.bit_length()))

    @property
    def rope_words(self) -> int:
        """Weight-port words of a ``ROPE`` table row (``dim / 2`` cosines, then as many sines,
        FP32, value 0 lowest)."""
        return self.rope.dim * 32 // self.linear.weight_port_bits

    @property
    def rope_lines(self) -> int:
        """Lines a ``ROPE`` vector's read and write take: one up to 32 values, else
        ``dim / 32``."""
        return max(self.rope.dim // LINE, 1)

    @property
    def attn_vectors(self) -> int:
        """Key and value vectors of a token (``kv_heads`` each; MLA: the latent key alone)."""
        return 1 if self.attn.mla else 2 * self.attn.kv.kv_heads

    def attn_out_lines(self, tokens: int) -> int:
        """Lines a step's outputs take: ``tokens x q_heads`` vectors of ``v_dim`` values."""
        return -(-tokens * self.attn.q_heads * self.attn.v_dim // LINE)

    @property
    def len_bits(self) -> int:
        """Bits of a read request's ``len`` on the block's port: the longest of its
        clients'."""
        return max(self.norm_fetch.len_bits, self.moe.fetch.len_bits)

    @property
    def router_beat_words(self) -> int:
        """Weight-port words of one of the router's beats (``moe.x_lanes`` columns of
        ``moe.experts`` FP32 values, column 0 and expert 0 lowest; the top word padded with
        zeros)."""
        m = self.moe
        return -(-m.x_lanes * m.experts * 32 // self.linear.weight_port_bits)

    @property
    def router_beats(self) -> int:
        """Beats of the router's weights: ``moe.hidden / moe.x_lanes`` of columns, then the
        bias's (one FP32 per expert in its first column)."""
        return self.moe.hidden // self.moe.x_lanes + 1

    @property
    def router_words(self) -> int:
        """Words of a ``ROUTER``'s weights in memory, from its ``addr``."""
        return self.router_beats * self.router_beat_words

    @property
    def moe_words(self) -> int:
        """Words of a MoE layer's weights (every expert's, from the ``MOE`` command's
        ``addr``)."""
        return self.moe.all_experts * self.moe.expert_words


class Decoder(wiring.Component):
    """The decoder layer's engine (the module says what it runs). ``config`` is a
    :class:`DecoderConfig`.

    Parts (``elaborate`` is their wiring; ``docs/decoder.md`` draws them): ``seq``
    (:class:`~scoville.rtl.decoder_parts.Sequencer`), ``act`` (the activation memory: two
    read ports, one write port of lane granularity), ``ra`` and ``rb``
    (:class:`~scoville.rtl.decoder_parts.LineReader`), ``norm``
    (:class:`~scoville.rtl.rmsnorm.RmsNorm`), ``wfetch`` and ``wvec``
    (:class:`~scoville.rtl.fetch.Fetch`, :class:`~scoville.rtl.decoder_parts.VecLoader`: the
    norm's weights), ``proj`` (:class:`~scoville.rtl.linear.Linear`), ``place``
    (:class:`~scoville.rtl.decoder_parts.Placer`), ``mux``
    (:class:`~scoville.rtl.lib.memmux.MemoryMux`), ``moe``, ``msplit`` and ``mplace``
    (:class:`~scoville.rtl.moe.Moe`, its
    :class:`~scoville.rtl.decoder_parts.LineSplitter` and placer), and the 32 FP32 adders of
    ``ADD``.

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout(config)))
        Commands, one at a time.
    resp : Out(stream.Signature(response_layout()))
        A command's answer once it is done (a refused one's at once): its status, an
        ``ATTN``'s sequence and length, an ``ARGMAX``'s index.
    x : In(stream.Signature(line_layout()))
        ``IN``'s lines.
    o : Out(stream.Signature(line_layout()))
        ``OUT``'s lines.
    req, rdata :
        Read requests and the memory's words (:attr:`memory_ports`): the norms' weight
        vectors, the projections', the router's and the experts' weights, ``ROPE``'s table
        rows.
    status : Out(Status)
        Of the latest command.
    counters : Out(COUNTERS)
    """

    memory_ports = {"req": "rdata"}

    def __init__(self, config: DecoderConfig):
        self._config = config
        lin = config.linear
        super().__init__({
            "cmd": In(stream.Signature(command_layout(config))),
            "resp": Out(stream.Signature(response_layout())),
            "x": In(stream.Signature(line_layout())),
            "o": Out(stream.Signature(line_layout())),
            "req": Out(stream.Signature(request_layout(lin.addr_bits, config.len_bits))),
            "rdata": In(stream.Signature(lin.weight_port_bits)),
            "status": Out(Status),
            "counters": Out(COUNTERS),
        })

    @property
    def config(self) -> DecoderConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        lin, HL = cfg.linear, cfg.hidden // LINE
        m.submodules.seq = seq = Sequencer(cfg)
        m.submodules.act = act = Memory(shape=line_layout(), depth=cfg.act_lines, init=[])
        wp = act.write_port(granularity=1)   # one FP32 lane
        ports = (act.read_port(), act.read_port())
        m.submodules.ra = ra = LineReader(cfg.line_bits)
        m.submodules.rb = rb = LineReader(cfg.line_bits)
        m.submodules.norm = norm = RmsNorm(cfg.norm)
        m.submodules.wfetch = wfetch = Fetch(cfg.norm_fetch)
        m.submodules.wvec = wvec = VecLoader(HL, lin.weight_port_bits)
        m.submodules.proj = proj = Linear(lin)
        m.submodules.place = place = Placer(cfg, lin.array.cols)
        m.submodules.moe = moe = Moe(cfg.moe)
        m.submodules.msplit = msplit = line_splitter(cfg.moe.x_lanes)
        m.submodules.mplace = mplace = Placer(cfg, cfg.moe.array.cols)
        rope = self._rope_parts(m)
        router = self._router_parts(m)
        attn = self._attn_parts(m)
        m.submodules.argmax = am = Argmax(cfg.argmax)
        glu = self._glu_parts(m)

        c, run = self.cmd.payload, seq.run
        wiring.connect(m, wiring.flipped(self.cmd), seq.cmd)
        wiring.connect(m, seq.resp, wiring.flipped(self.resp))
        m.d.comb += [self.status.eq(seq.status), seq.good.eq(self._check(m, c)),
                     seq.expect.eq(self._expect(c)), seq.loaded.eq(wvec.loaded)]

        # Readers: A (every op that reads lines but ROPE and ATTN) and B (ADD's and GLU's second
        # range), started on go; ROPE's walker reads on B's port, ATTN's query walker on A's
        # and its key and value walker on B's.
        m.d.comb += [ra.data.eq(ports[0].data), rb.data.eq(ports[1].data)]
        roping = Mux(seq.start, c.op == Op.ROPE, run.op == Op.ROPE)
        attending = Mux(seq.start, c.op == Op.ATTN, run.op == Op.ATTN)
        m.d.comb += [ports[0].addr.eq(Mux(attending, attn.qwalk.addr, ra.addr)),
                     ports[1].addr.eq(Mux(roping, rope.rwalk.addr,
                                          Mux(attending, attn.kvwalk.addr, rb.addr)))]
        m.d.comb += [ra.start.eq(seq.go & ~(seq.start & ((c.op == Op.IN) | (c.op == Op.ROPE)
                                                         | (c.op == Op.ATTN)
                                                         | (c.op == Op.ROUTER)))),
                     rb.start.eq(seq.start & ((c.op == Op.ADD) | (c.op == Op.GLU))),
                     ra.base.eq(Mux(seq.start, c.a, run.a)), rb.base.eq(c.b)]
        now, later = _tokens(c, HL), _tokens(run, HL)    # a NORM's reader starts on go
        for field in ("count", "per", "stride"):
            m.d.comb += getattr(ra, field).eq(Mux(seq.start, getattr(now, field),
                                                  getattr(later, field)))
        m.d.comb += [rb.count.eq(c.count), rb.per.eq(1), rb.stride.eq(1),
                     norm.width.eq(later.per)]

        # The norm's weights (into the vector loader) and ROPE's table rows (into rows):
        # fetched from start (the command offered until taken).
        fcmd = self._offer(m, wfetch.cmd, seq.start & ((c.op == Op.NORM) | (c.op == Op.ROPE)
                                                       | (c.op == Op.ROUTER)), "wfetch")
        rope_now, router_now = run.op == Op.ROPE, run.op == Op.ROUTER
        m.d.comb += [fcmd.addr.eq(run.addr),
                     fcmd.len.eq(Mux(rope_now, run.count * cfg.rope_words,
                                     Mux(router_now, cfg.router_words,
                                         later.per * cfg.norm_line_words))),
                     wvec.clear.eq(seq.start & (c.op == Op.NORM)), wvec.want.eq(now.per),
                     wvec.raddr.eq(ra.index_next),
                     wvec.words.payload.eq(wfetch.o.payload),
                     rope.rows.i.payload.eq(wfetch.o.payload),
                     router.words.i.payload.eq(wfetch.o.payload),
                     wvec.words.valid.eq(wfetch.o.valid & ~rope_now & ~router_now),
                     rope.rows.i.valid.eq(wfetch.o.valid & rope_now),
                     router.words.i.valid.eq(wfetch.o.valid & router_now),
                     wfetch.o.ready.eq(Mux(rope_now, rope.rows.i.ready,
                                           Mux(router_now, router.words.i.ready,
                                               wvec.words.ready)))]
        self._router_load(m, seq, router, moe)
        for walker in (rope.rwalk, rope.wwalk):
            m.d.comb += [walker.start.eq(seq.start & (c.op == Op.ROPE)), walker.base.eq(c.a),
                         walker.count.eq(c.count), walker.heads.eq(c.heads),
                         walker.stride.eq(c.stride), walker.off.eq(c.off),
                         walker.row.eq(c.row)]
        self._rope_datapath(m, rope, ports[1])
        self._attn_datapath(m, seq, attn, ports)
        self._answer(m, seq, attn.attn, am)

        # The projection and the MoE: each its command from start (offered until taken), x
        # from reader A, its output placed into lines (the MoE's in order: one "token").
        pc = self._offer(m, proj.cmd, seq.start & (c.op == Op.LINEAR), "proj")
        m.d.comb += [pc.tokens.eq(run.count), pc.k.eq(run.k), pc.n.eq(run.n),
                     pc.addr.eq(run.addr), pc.bias.eq(run.bias)]
        mc = self._offer(m, moe.cmd, seq.start & (c.op == Op.MOE), "moe")
        m.d.comb += mc.tokens.eq(run.count)
        rows = Mux(c.row == 0, c.n // LINE, c.row)      # lines between a token's outputs
        for placer, tokens, lines in ((place, c.count, rows), (mplace, 1, 1)):
            m.d.comb += [placer.start.eq(seq.start), placer.dst.eq(c.dst),
                         placer.tokens.eq(tokens), placer.lines.eq(lines)]
        wiring.connect(m, proj.o, place.i)
        wiring.connect(m, moe.o, mplace.i)
        wiring.connect(m, msplit.o, moe.x)

        self._memory(m, proj, wfetch, moe, run)
        self._datapath(m, seq, ra, rb, norm, wvec, proj, msplit.i, (place, mplace),
                       (rope, attn, glu), am, wp, moe.wr)
        took = self.cmd.valid & self.cmd.ready
        count(m, self.counters, {"commands": took & seq.start, "refused": took & ~seq.start,
                                 "weight_words": self.rdata.valid & self.rdata.ready})
        return m

    def _memory(self, m, proj, wfetch, moe, run):
        """The memory port, shared through the mux: the projection's fetch, the norm
        weights', the MoE's (its addresses from the ``MOE`` command's ``addr``; ``last`` on
        each response's last word)."""
        cfg = self._config
        m.submodules.mux = mux = MemoryMux(3, self.req.payload.shape(),
                                           cfg.linear.weight_port_bits, MUX_DEPTH)
        base = Signal.like(run.addr)
        with m.If(moe.cmd.valid & moe.cmd.ready):
            m.d.sync += base.eq(run.addr)
        for i, (req, add) in enumerate(((proj.req, 0), (wfetch.req, 0), (moe.req, base))):
            m.d.comb += [mux.creq[i].valid.eq(req.valid), req.ready.eq(mux.creq[i].ready),
                         mux.creq[i].payload.addr.eq(req.payload.addr + add),
                         mux.creq[i].payload.len.eq(req.payload.len)]
        wiring.connect(m, mux.crdata[0], proj.rdata)
        wiring.connect(m, mux.crdata[1], wfetch.rdata)
        m.d.comb += [moe.rdata.valid.eq(mux.crdata[2].valid),
                     mux.crdata[2].ready.eq(moe.rdata.ready),
                     moe.rdata.payload.data.eq(mux.crdata[2].payload),
                     moe.rdata.payload.last.eq(mux.last)]
        wiring.connect(m, mux.req, wiring.flipped(self.req))
        wiring.connect(m, wiring.flipped(self.rdata), mux.rdata)

    def _rope_parts(self, m) -> SimpleNamespace:
        """``ROPE``'s parts: the walkers of the vectors' lines read (``rwalk``) and written
        (``wwalk``), the gatherer of a vector from its lines, the table's rows from the
        port's words, the rotation, and the splitter of a result into lines."""
        cfg = self._config
        D = cfg.rope.dim
        parts = SimpleNamespace(
            rwalk=VecWalker(cfg.line_bits, D), wwalk=VecWalker(cfg.line_bits, D),
            gather=VecGather(D), rows=Joiner(cfg.linear.weight_port_bits, cfg.rope_words),
            rope=Rope(cfg.rope),
            split=Splitter(line_layout(), cfg.rope_lines, held=True) if D > LINE else None)
        _register(m, "rope", parts)
        return parts

    def _router_parts(self, m) -> SimpleNamespace:
        """``ROUTER``'s parts: the joiner of a router beat's words (the port's words, the
        fetch engine's) and the beat's address."""
        cfg = self._config
        parts = SimpleNamespace(
            words=Joiner(cfg.linear.weight_port_bits, cfg.router_beat_words),
            addr=Signal(range(cfg.router_beats), name="router_addr"))
        m.submodules.router_words = parts.words
        return parts

    def _router_load(self, m, seq, router, moe) -> None:
        """``ROUTER``: each beat joined from its words written into the MoE's router (idle
        between commands, so it takes a beat a cycle), the beats at addresses 0 on."""
        wr = moe.wr
        m.d.comb += [wr.valid.eq(router.words.o.valid & (seq.run.op == Op.ROUTER)),
                     wr.payload.addr.eq(router.addr),
                     wr.payload.data.eq(router.words.o.payload[:Value.cast(wr.payload.data)
                                                               .shape().width]),
                     router.words.o.ready.eq(wr.ready)]
        with m.If(seq.start):
            m.d.sync += router.addr.eq(0)
        with m.Elif(wr.valid & wr.ready):
            m.d.sync += router.addr.eq(router.addr + 1)

    def _attn_parts(self, m) -> SimpleNamespace:
        """``ATTN``'s parts: the ``attention`` block, the walkers of a step's query vectors
        (``qwalk``) and of its key and value vectors (``kvwalk``) and their gatherers, the
        splitter of an output wider than a line, and the walker of the outputs' places."""
        cfg = self._config
        A = cfg.attn
        D, VD = A.kv.head_dim, A.v_dim
        parts = SimpleNamespace(
            attn=Attention(A), qwalk=VecWalker(cfg.line_bits, D),
            kvwalk=VecWalker(cfg.line_bits, D), qgather=VecGather(D), kvgather=VecGather(D),
            owalk=OutWalker(cfg.line_bits, q_heads=A.q_heads, kv_heads=A.kv.kv_heads,
                            v_dim=VD, tile_tokens=A.tile_tokens),
            split=Splitter(line_layout(), VD // LINE) if VD > LINE else None)
        _register(m, "attn", parts)
        return parts

    def _attn_datapath(self, m, seq, attn, ports):
        """``ATTN``: the attention block's command from the one held (offered until taken);
        a step's (or an append's) vectors walked from the lines (query heads from ``off``,
        then the key heads, then the value heads, ``row`` lines a token) into ``q`` and the
        feeder's ``k`` and ``v`` (which takes them in that order), its outputs into the
        lines from ``dst`` (:meth:`_datapath` writes them), its answer the command's."""
        cfg = self._config
        A = cfg.attn
        D = A.kv.head_dim
        c, run, blk = self.cmd.payload, seq.run, attn.attn
        start = seq.start & (c.op == Op.ATTN)
        ac = self._offer(m, blk.cmd, start, "attn")
        m.d.comb += [ac.op.eq(run.aop), ac.seq.eq(run.seq), ac.tokens.eq(run.count - 1),
                     ac.head.eq(run.heads), ac.value.eq(run.value)]
        step = c.aop == AttnOp.STEP
        for walker, heads, off, go in (
                (attn.qwalk, A.q_heads, c.off, step),
                (attn.kvwalk, cfg.attn_vectors, c.off + A.q_heads * D,
                 step | (c.aop == AttnOp.APPEND))):
            m.d.comb += [walker.start.eq(start & go), walker.base.eq(c.a),
                         walker.count.eq(c.count), walker.heads.eq(heads),
                         walker.stride.eq(D), walker.off.eq(off), walker.row.eq(c.row)]
        for walker, gather, port in ((attn.qwalk, attn.qgather, ports[0]),
                                     (attn.kvwalk, attn.kvgather, ports[1])):
            m.d.comb += [gather.i.valid.eq(walker.o.valid), walker.o.ready.eq(gather.i.ready),
                         gather.i.payload.data.eq(port.data),
                         gather.i.payload.lane.eq(walker.o.payload.lane)]
        wiring.connect(m, attn.qgather.o, blk.q)
        kv = attn.kvgather.o
        if A.mla:       # the latent key alone
            wiring.connect(m, kv, blk.k)
        else:
            m.d.comb += [blk.k.valid.eq(kv.valid), blk.v.valid.eq(kv.valid),
                         blk.k.payload.eq(kv.payload), blk.v.payload.eq(kv.payload),
                         kv.ready.eq(blk.k.ready | blk.v.ready)]
        m.d.comb += [attn.owalk.start.eq(start & step), attn.owalk.dst.eq(c.dst),
                     attn.owalk.count.eq(c.count)]
        if attn.split is not None:
            wiring.connect(m, blk.o, attn.split.i)
            attn.out = attn.split.o
        else:
            attn.out = blk.o

    def _glu_parts(self, m) -> SimpleNamespace:
        """``GLU``'s parts: the splitter of a pair of lines (``a``'s and ``b``'s) into beats
        of ``glu_lanes`` pairs, the gated products (:class:`~scoville.rtl.moe_swiglu
        .Swiglu`, DeepSeek's), and the joiner of their beats into a line."""
        cfg = self._config
        G = cfg.glu_lanes
        parts = SimpleNamespace(
            glu=Swiglu(cfg.glu),
            split=Splitter(2 * 32 * G, cfg.glu_beats),
            join=Joiner(32 * G, cfg.glu_beats))
        _register(m, "glu", parts)
        return parts

    def _answer(self, m, seq, blk, am):
        """The answers of ``ATTN`` (the attention block's) and ``ARGMAX`` (the argmax
        block's: the chosen index), each taken at once while its op runs."""
        run = seq.run
        answer = blk.resp.payload
        code = Signal(Status)
        with m.Switch(answer.status):     # the cache's codes, by name
            for cache_code in CacheStatus:
                with m.Case(cache_code):
                    m.d.comb += code.eq(Status[cache_code.name])
        index = am.o.payload.index
        picked = run.op == Op.ARGMAX
        # One assignment of the whole answer: a struct driven field by field from processes
        # of their own becomes Verilog that Icarus leaves at X until a field's source changes.
        m.d.comb += [
            blk.resp.ready.eq(seq.active & (run.op == Op.ATTN)),
            am.o.ready.eq(seq.active & picked),
            seq.answered.eq((blk.resp.valid & blk.resp.ready) | (am.o.valid & am.o.ready)),
            seq.answer.eq(Mux(picked,
                              Cat(Const(Status.OK, Status), Const(0, answer.seq.shape()),
                                  Const(0, answer.length.shape()), index),
                              Cat(code, answer.seq, answer.length, Const(0, INDEX_BITS)))),
        ]

    def _rope_datapath(self, m, rope, port):
        """``ROPE``: the walker's lines (read on ``port``) gathered into vectors, each rotated
        with its token's table row (the row taken after the token's last vector), the result
        back into its lines (:meth:`_datapath` writes them)."""
        g, rows, rot = rope.gather, rope.rows, rope.rope
        D = self._config.rope.dim
        m.d.comb += [g.i.valid.eq(rope.rwalk.o.valid), rope.rwalk.o.ready.eq(g.i.ready),
                     g.i.payload.data.eq(port.data),
                     g.i.payload.lane.eq(rope.rwalk.o.payload.lane)]
        row = rows.o.payload
        m.d.comb += [rot.i.valid.eq(g.o.valid & rows.o.valid),
                     g.o.ready.eq(rot.i.ready & rows.o.valid),
                     rows.o.ready.eq(rot.i.ready & g.o.valid & rope.rwalk.o.payload.last),
                     rot.i.payload.x.eq(g.o.payload),
                     rot.i.payload.cos.as_value().eq(row[:16 * D]),
                     rot.i.payload.sin.as_value().eq(row[16 * D:])]
        if rope.split is not None:
            wiring.connect(m, rot.o, rope.split.i)
            rope.out = rope.split.o
        else:
            rope.out = rot.o

    @staticmethod
    def _offer(m, port, start, name: str):
        """A part's command, offered from the cycle after ``start`` until taken (from the
        command the sequencer holds); its payload to drive."""
        pending = Signal(name=f"{name}_pending")
        with m.If(start):
            m.d.sync += pending.eq(1)
        with m.Elif(port.ready):
            m.d.sync += pending.eq(0)
        m.d.comb += port.valid.eq(pending)
        return port.payload

    def _datapath(self, m, seq, ra, rb, norm, wvec, proj, moe_x, placers, walked, am, wp, wr):
        """Reader A's lines to the op's unit, and the unit's results into the write port (or
        ``ROUTER``'s beats into the router, ``wr``)."""
        active, op = seq.active, seq.run.op
        place, mplace = placers
        rope, attn, glu = walked
        HL = self._config.hidden // LINE
        # The next line written (IN, ADD, NORM, GLU): lines in order from dst, a NORM's
        # tokens row apart (its token's first line tline, its j-th line in it).
        line, tline = Signal(self._config.line_bits), Signal(self._config.line_bits)
        j, per, row = Signal(16), Signal(16), Signal(16)
        with m.If(seq.start):
            c = self.cmd.payload
            now = _tokens(c, HL)
            is_norm = c.op == Op.NORM
            m.d.sync += [line.eq(c.dst), tline.eq(c.dst), j.eq(0),
                         per.eq(Mux(is_norm, now.per, 1)),
                         row.eq(Mux(is_norm, now.stride, 1))]
        # ADD: the two readers' lines in step, added lane by lane; GLU: their gated
        # products, glu_lanes a beat.
        both = ra.o.valid & rb.o.valid
        total = Signal(line_layout())
        for q in range(LINE):
            m.d.comb += total[q].eq(fp32_add(m, ra.o.payload[q], rb.o.payload[q],
                                             name=f"res{q}"))
        G = self._config.glu_lanes
        m.d.comb += glu.split.i.payload.eq(Cat(*(
            Cat(ra.o.payload.as_value().word_select(b, 32 * G),
                rb.o.payload.as_value().word_select(b, 32 * G))
            for b in range(self._config.glu_beats))))
        wiring.connect(m, glu.split.o, glu.glu.i)
        wiring.connect(m, glu.glu.o, glu.join.i)
        m.d.comb += [norm.i.payload.x.eq(ra.o.payload), norm.i.payload.w.eq(wvec.rdata),
                     proj.x.payload.eq(ra.o.payload), self.o.payload.eq(ra.o.payload),
                     moe_x.payload.eq(ra.o.payload), am.i.payload.eq(ra.o.payload)]
        is_ = {o: active & (op == o) for o in Op}
        m.d.comb += [
            self.x.ready.eq(is_[Op.IN] & ~seq.counted),
            self.o.valid.eq(is_[Op.OUT] & ra.o.valid),
            norm.i.valid.eq(is_[Op.NORM] & ra.o.valid),
            proj.x.valid.eq(is_[Op.LINEAR] & ra.o.valid),
            moe_x.valid.eq(is_[Op.MOE] & ra.o.valid),
            am.i.valid.eq(is_[Op.ARGMAX] & ra.o.valid),
            glu.split.i.valid.eq(both & is_[Op.GLU]),
            ra.o.ready.eq(Mux(op == Op.ADD, both & is_[Op.ADD],
                              (is_[Op.OUT] & self.o.ready) | (is_[Op.NORM] & norm.i.ready)
                              | (is_[Op.LINEAR] & proj.x.ready)
                              | (is_[Op.MOE] & moe_x.ready)
                              | (is_[Op.ARGMAX] & am.i.ready)
                              | (both & is_[Op.GLU] & glu.split.i.ready))),
            rb.o.ready.eq(both & (is_[Op.ADD] | (is_[Op.GLU] & glu.split.i.ready))),
            glu.join.o.ready.eq(1),
            norm.o.ready.eq(1), place.w.ready.eq(1), mplace.w.ready.eq(1),
            rope.out.ready.eq(1), rope.wwalk.o.ready.eq(rope.out.valid),
            attn.out.ready.eq(1), attn.owalk.o.ready.eq(attn.out.valid),
        ]
        # The write port: IN's, ADD's, NORM's and GLU's lines in order from dst; LINEAR's and
        # MOE's placed.
        src = {Op.IN: (self.x.valid & self.x.ready, self.x.payload),
               Op.ADD: (both & is_[Op.ADD], total),
               Op.NORM: (norm.o.valid, norm.o.payload),
               Op.GLU: (glu.join.o.valid, glu.join.o.payload)}
        wen = Signal()
        with m.Switch(op):
            for o, (valid, value) in src.items():
                with m.Case(o):
                    m.d.comb += [wen.eq(valid), wp.addr.eq(line),
                                 wp.data.eq(value)]
                    with m.If(valid):
                        m.d.comb += wp.en.eq((1 << LINE) - 1)
                        with m.If(j == per - 1):
                            m.d.sync += [j.eq(0), line.eq(tline + row),
                                         tline.eq(tline + row)]
                        with m.Else():
                            m.d.sync += [j.eq(j + 1), line.eq(line + 1)]
            for o, D, out, spot in (
                    (Op.ROPE, self._config.rope.dim, rope.out, rope.wwalk.o.payload),
                    (Op.ATTN, self._config.attn.v_dim, attn.out, attn.owalk.o.payload)):
                with m.Case(o):     # a vector's lanes of a line, or a line of it
                    value = Value.cast(out.payload)
                    m.d.comb += [wen.eq(out.valid), wp.addr.eq(spot.line),
                                 wp.data.as_value().eq(value.replicate(LINE // min(D, LINE)))]
                    with m.If(out.valid):
                        m.d.comb += wp.en.eq(Const((1 << min(D, LINE)) - 1, LINE) << spot.lane)
            for o, placer in ((Op.LINEAR, place), (Op.MOE, mplace)):
                with m.Case(o):
                    w = placer.w.payload
                    m.d.comb += [wen.eq(placer.w.valid), wp.addr.eq(w.addr),
                                 wp.data.eq(w.data)]
                    with m.If(placer.w.valid):
                        m.d.comb += wp.en.eq(w.mask)
        m.d.comb += seq.beats.eq(Mux(op == Op.OUT, self.o.valid & self.o.ready,
                                     Mux((op == Op.ATTN) | (op == Op.ARGMAX), seq.answered,
                                         Mux(op == Op.ROUTER, wr.valid & wr.ready & active,
                                             wen & active))))

    def _check(self, m, c) -> Signal:
        """The status of command ``c`` (:func:`scoville.sim.golden.decoder.check` states the
        rules): every range within the memory and no read range overwritten ahead of its
        reads, a count, and a shape the projections take."""
        cfg, lin = self._config, self._config.linear
        HL, N = cfg.hidden // LINE, cfg.act_lines
        status = Signal(Status)
        kl, nl = c.k // LINE, c.n // LINE
        reads = Signal(40)
        writes = Signal(40)
        norm = _tokens(c, HL)       # a NORM's token: per lines, stride apart
        span = (c.count - 1) * norm.stride + norm.per
        rope = c.op == Op.ROPE
        A = cfg.attn
        attn = c.op == Op.ATTN
        step = attn & (c.aop == AttnOp.STEP)
        walks = step | (attn & (c.aop == AttnOp.APPEND))     # an ATTN that reads lines
        out_values = A.q_heads * A.v_dim
        in_stride = Mux(c.stride == 0, kl, c.stride)     # LINEAR's tokens
        out_row = Mux(c.row == 0, nl, c.row)
        m.d.comb += [
            reads.eq(Mux(c.op == Op.NORM, span, Mux(c.op == Op.MOE, c.count * HL,
                     Mux(c.op == Op.LINEAR, (c.count - 1) * in_stride + kl,
                         Mux(rope | attn, c.count * c.row, c.count))))),
            writes.eq(Mux(c.op == Op.NORM, span, Mux(c.op == Op.MOE, c.count * HL,
                      Mux(c.op == Op.LINEAR, (c.count - 1) * out_row + nl,
                          Mux(attn, (c.count * out_values + LINE - 1) // LINE,
                              c.count))))),
        ]
        router = c.op == Op.ROUTER      # reads and writes no lines
        reads_a = (c.op != Op.IN) & (~attn | walks) & ~router
        # ROPE writes in place; ARGMAX answers
        writes_dst = ((c.op != Op.OUT) & ~rope & (~attn | step) & (c.op != Op.ARGMAX)
                      & ~router)
        two = (c.op == Op.ADD) | (c.op == Op.GLU)       # ops that read b too
        over = (((c.count == 0) & (~attn | walks) & ~router) | (reads_a & (c.a + reads > N)) |
                (two & (c.b + reads > N)) | (writes_dst & (c.dst + writes > N)))

        def clash(first):   # a read range that the written one overlaps, not from its start
            return (first != c.dst) & (first < c.dst + writes) & (c.dst < first + reads)

        over |= ((two & (clash(c.a) | clash(c.b))) |
                 ((c.op == Op.NORM) & clash(c.a)))
        bits = c.k * lin.tile_format.row_bits + Mux(c.bias, 32 * lin.array.cols, 0)
        P = lin.weight_port_bits
        end = Signal(lin.addr_bits + 40)
        m.d.comb += end.eq(c.addr + (c.n // lin.array.cols) * ((bits + P - 1) // P))
        bad_linear = ((c.count > lin.tokens) | (c.k == 0) | (c.k > lin.k_max) |
                      (c.k % LINE != 0) | (c.n == 0) | (c.n > lin.n_max) | (c.n % LINE != 0) |
                      ((c.stride != 0) & (c.stride < kl)) | ((c.row != 0) & (c.row < nl)) |
                      (end > (1 << lin.addr_bits)))
        bad_norm = ((c.k % LINE != 0) | (c.k > cfg.hidden)
                    | ((c.row != 0) & (c.row < norm.per))
                    | (c.addr + norm.per * cfg.norm_line_words > (1 << lin.addr_bits)))
        bad_moe = (c.count > cfg.moe.tokens) | (c.addr + cfg.moe_words > (1 << lin.addr_bits))
        bad_router = c.addr + cfg.router_words > (1 << lin.addr_bits)
        bad_rope = self._bad_rope(m, c)
        D, g = A.kv.head_dim, min(A.kv.head_dim, LINE)
        bad_attn = walks & ((c.count > 256) | (c.off % g != 0)
                            | (c.off + A.q_heads * D >= 1 << 16)    # the key walker's off
                            | (c.off + (A.q_heads + cfg.attn_vectors) * D > c.row * LINE)
                            | ((c.aop == AttnOp.APPEND) & (c.count != 1)))
        with m.If(Value.cast(c.op) > Op.ROUTER):
            m.d.comb += status.eq(Status.BAD_OP)
        with m.Elif(over):
            m.d.comb += status.eq(Status.BAD_RANGE)
        with m.Elif(((c.op == Op.ARGMAX) & (c.count != cfg.argmax.beats))
                    | ((c.op == Op.LINEAR) & bad_linear) | ((c.op == Op.NORM) & bad_norm)
                    | ((c.op == Op.MOE) & bad_moe) | (rope & bad_rope) | bad_attn
                    | (router & bad_router)):
            m.d.comb += status.eq(Status.BAD_SHAPE)
        with m.Else():
            m.d.comb += status.eq(Status.OK)
        return status

    def _bad_rope(self, m, c):
        """A ``ROPE`` whose vectors do not fit (:func:`scoville.sim.golden.decoder.check`):
        no heads; ``off`` or ``stride`` off the vector's grid (``min(dim, 32)`` values); two
        vectors that overlap; the last vector past its token's row; table rows past one
        fetch or past the memory."""
        cfg, lin = self._config, self._config.linear
        D = cfg.rope.dim
        g = min(D, LINE)
        words = Signal(32)
        span = Signal(32)
        m.d.comb += [words.eq(c.count * cfg.rope_words),
                     span.eq(c.off + (c.heads - 1) * c.stride + D)]
        return ((c.heads == 0) | (c.off % g != 0) | (c.stride % g != 0)
                | ((c.heads > 1) & (c.stride < D)) | (span > c.row * LINE)
                | (words >= (1 << cfg.norm_fetch.len_bits))
                | (c.addr + words > (1 << lin.addr_bits)))

    def _expect(self, c):
        """The beats an op counts: lines written (``LINEAR``, ``MOE``: their beats placed),
        ``OUT``'s lines, or ``ROUTER``'s beats written into the router."""
        cfg = self._config
        HL, C, MC = cfg.hidden // LINE, cfg.linear.array.cols, cfg.moe.array.cols
        return Mux(c.op == Op.NORM, c.count * _tokens(c, HL).per,
                   Mux(c.op == Op.LINEAR, c.count * (c.n // C),
                       Mux(c.op == Op.MOE, c.count * (cfg.hidden // MC),
                           Mux(c.op == Op.ROPE, c.count * c.heads * cfg.rope_lines,
                               Mux((c.op == Op.ATTN) | (c.op == Op.ARGMAX), 1,
                                   Mux(c.op == Op.ROUTER, cfg.router_beats,
                                       c.count))))))


def _tokens(c, hl: int) -> SimpleNamespace:
    """Reader A's walk for command ``c`` (a view of its fields): ``count`` lines, ``per`` a
    token, each token ``stride`` lines after the one before (``NORM``: ``k / 32`` lines a
    token, or ``hl``, ``row`` apart; ``LINEAR``: ``k / 32``, ``stride`` apart; ``MOE``:
    ``hl``; a zero ``row`` or ``stride`` packs them); the other ops' lines in order."""
    norm_per = Mux(c.k == 0, hl, c.k[5:])
    per = Mux(c.op == Op.NORM, norm_per, Mux(c.op == Op.LINEAR, c.k[5:],
                                              Mux(c.op == Op.MOE, hl, 1)))
    apart = Mux(c.op == Op.NORM, c.row, Mux(c.op == Op.LINEAR, c.stride, 0))
    return SimpleNamespace(count=c.count * per, per=per, stride=Mux(apart == 0, per, apart))


def _register(m, prefix: str, parts: SimpleNamespace) -> None:
    """``parts`` as submodules named ``PREFIX_NAME`` (the one called ``prefix`` as it is)."""
    for name, part_ in vars(parts).items():
        if part_ is not None:
            m.submodules[name if name == prefix else f"{prefix}_{name}"] = part_
