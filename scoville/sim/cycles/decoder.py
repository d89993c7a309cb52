"""Cycle model of the ``decoder`` block's engine (:class:`scoville.rtl.decoder.Decoder`).

:func:`timing` is the block's picture in unit models (:mod:`scoville.sim.cycles.unit`), one
per RTL part, joined by wires as the RTL connects them and stepped together cycle by cycle:
the sequencer and the two line readers (below, from the docstrings of
:mod:`scoville.rtl.decoder_parts`), the norm (:class:`~scoville.sim.cycles.rmsnorm.Norm`),
its weights' fetch engine (:class:`~scoville.sim.cycles.fetch.Engine`) and loader (and
``ROUTER``'s joiner of a router beat's words), the
projections (:class:`~scoville.sim.cycles.linear.Parts`), the MoE
(:class:`~scoville.sim.cycles.moe.Parts`) and its line splitter, ``ROPE``'s walkers, joiners
(a vector's lines, a table row's words), rotation
(:class:`~scoville.sim.cycles.stream.StallPipeline`) and splitter, ``GLU``'s splitter, gated
products (a stalling pipeline) and joiner, ``ATTN``'s attention
(:class:`~scoville.sim.cycles.attention.Parts`) with its walkers, gatherers, output splitter
and output walker, ``ARGMAX``'s argmax (:class:`Reducer`), the memory mux
(:class:`~scoville.sim.cycles.memory.MemoryMux`) and the memory. The activation memory's
write port always takes a line, so what a command writes counts in the cycle its unit hands
it over (the placers pass the projection's rows and the MoE's words through).
"""

from __future__ import annotations

from types import SimpleNamespace

from scoville.rtl.decoder import LINE, MUX_DEPTH, AttnOp, Op, Status
from scoville.sim.golden.decoder import COMMAND_FIELDS, check, norm_words, walk

from . import attention as attention_timed
from . import fetch as fetch_timed
from .linear import Parts as LinearParts
from .memory import MemoryAgent, MemoryMux
from .moe import Batch
from .moe import Parts as MoeParts
from .rmsnorm import Norm
from .stream import ALWAYS, Consumer, Producer, Schedule, Source, StallPipeline, Timing
from .unit import Wire, run

__all__ = ["HeldSplitter", "Joiner", "LineReader", "Reducer", "Sequencer", "Splitter",
           "VecLoader",
           "VecWalker",
           "arrived", "expect", "fast", "timing"]

def expect(config, fields: dict) -> int:
    """The beats a command counts before it is done: lines written (``LINEAR``: the
    projection's rows of a column tile), ``OUT``'s lines."""
    op, n = fields["op"], fields["count"]
    if op == Op.NORM:
        return walk(config, fields)[0]
    if op == Op.LINEAR:
        return n * (fields["n"] // config.linear.array.cols)
    if op == Op.MOE:
        return n * (config.hidden // config.moe.array.cols)
    if op == Op.ROPE:
        return n * fields["heads"] * config.rope_lines
    if op in (Op.ATTN, Op.ARGMAX):
        return 1            # the attention block's answer, the argmax's
    if op == Op.ROUTER:
        return config.router_beats      # beats written into the router
    return n


class Sequencer:
    """The sequencer (:class:`scoville.rtl.decoder_parts.Sequencer`): takes a command while
    ``IDLE``; a refused one goes to ``RESP``; a good one starts (``go`` too unless a ``NORM``,
    which waits in ``WEIGHTS`` for its weights), then ``RUN`` until its beats are counted (a
    cycle's check sees the count at its start), then ``RESP`` offers the status until taken.

    Parameters
    ----------
    config : DecoderConfig
    cmd : input port
        Payloads: the command's fields.
    resp : output port
    """

    __slots__ = ("_cfg", "_seen", "_want", "cmd", "commands", "refused", "resp", "run",
                 "state", "status", "statuses")

    def __init__(self, config, cmd, resp):
        self._cfg, self.cmd, self.resp = config, cmd, resp
        self.state = "IDLE"
        self.status = Status.OK
        self.run: dict | None = None
        self._seen = self._want = self.commands = self.refused = 0
        self.statuses: list[Status] = []

    def starting(self, t: int) -> dict | None:
        """The fields of a command the block starts in cycle ``t`` (taken and good)."""
        if self.state == "IDLE" and self.cmd.offers(t):
            fields = self.cmd.payload
            if check(self._cfg, fields) == Status.OK:
                return fields
        return None

    def going(self, t: int, loaded: bool) -> dict | None:
        """The fields of the command whose datapath is started (``go``) in cycle ``t``."""
        started = self.starting(t)
        if started is not None:
            return None if started["op"] == Op.NORM else started
        return self.run if self.state == "WEIGHTS" and loaded else None

    @property
    def active(self) -> bool:
        return self.state == "RUN"

    @property
    def counted(self) -> bool:
        return self._seen == self._want

    @property
    def op(self) -> Op | None:
        return Op(self.run["op"]) if self.run is not None else None

    def step(self, t: int, *, loaded: bool, beat: bool) -> None:
        seen = self._seen + beat
        if self.state == "IDLE":
            if self.cmd.offers(t):
                fields = self.cmd.payload
                self.cmd.take(t)
                self.status = check(self._cfg, fields)
                self.statuses.append(self.status)
                seen = 0
                if self.status == Status.OK:
                    self.commands += 1
                    self.run, self._want = fields, expect(self._cfg, fields)
                    self.state = "WEIGHTS" if fields["op"] == Op.NORM else "RUN"
                else:
                    self.refused += 1
                    self.state = "RESP"
        elif self.state == "WEIGHTS":
            if loaded:
                self.state = "RUN"
        elif self.state == "RUN":
            if self._seen == self._want:
                self.state = "RESP"
        elif self.resp.accepts(t):
            self.resp.take(t)
            self.state = "IDLE"
        self._seen = seen


class LineReader:
    """A line reader (:class:`scoville.rtl.decoder_parts.LineReader`): :meth:`start` (in the
    cycle about to be stepped) with ``count`` lines; line 0 is offered on ``o`` from the next
    cycle, each next line from the cycle after the previous one is taken."""

    __slots__ = ("_start", "left", "o")

    def __init__(self, o):
        self.o, self.left, self._start = o, 0, None

    def start(self, count: int) -> None:
        self._start = count

    @property
    def valid(self) -> bool:
        return self.left != 0

    def step(self, t: int) -> None:
        if self.left and self.o.accepts(t):
            self.o.take(t)
            self.left -= 1
        if self._start is not None:
            self.left, self._start = self._start, None


class VecWalker(LineReader):
    """A vector walker (:class:`scoville.rtl.decoder_parts.VecWalker`): a line reader whose
    lines come ``per_token`` a token (the vectors' lines); :attr:`last`: the line offered is
    its token's last."""

    __slots__ = ("_per",)

    def __init__(self, o):
        super().__init__(o)
        self._per = 1

    def start_tokens(self, tokens: int, per_token: int) -> None:
        self.start(tokens * per_token)
        self._per = per_token

    @property
    def last(self) -> bool:
        return (self.left - 1) % self._per == 0


class Joiner:
    """A joiner (:class:`scoville.rtl.decoder_parts.Joiner`) of ``n`` beats: the first ``n -
    1`` taken at once; the last offered on ``o`` with them (:meth:`o_valid`, a method of the
    cycle) and taken when ``o`` takes it (:meth:`i_ready` passes ``o``'s ``ready``
    through). ``n`` 1 is a wire (``ROPE``'s gatherer of a vector within a line)."""

    __slots__ = ("_k", "_n", "i", "o")

    def __init__(self, n: int, i, o):
        self._n, self.i, self.o, self._k = n, i, o, 0

    def o_valid(self, t: int) -> bool:
        return self._k == self._n - 1 and self.i.offers(t)

    def i_ready(self, t: int) -> bool:
        return self._k != self._n - 1 or self.o.accepts(t)

    def step(self, t: int) -> None:
        if self.i.offers(t) and self.i_ready(t):
            if self._k == self._n - 1:
                self.o.take(t)
            self.i.take(t)
            self._k = 0 if self._k == self._n - 1 else self._k + 1


class HeldSplitter:
    """A splitter that holds its beat (:class:`scoville.rtl.decoder_parts.Splitter`,
    ``held``): a beat is taken (:meth:`i_ready`) when none is held or the held one's last
    piece is taken; its ``pieces`` pieces are offered on ``o`` from the next cycle."""

    __slots__ = ("_at", "_full", "_pieces", "i", "o")

    def __init__(self, pieces: int, i, o):
        self._pieces, self.i, self.o = pieces, i, o
        self._at, self._full = 0, False

    @property
    def o_valid(self) -> bool:
        return self._full

    def i_ready(self, t: int) -> bool:
        return not self._full or (self._at == self._pieces - 1 and self.o.accepts(t))

    def step(self, t: int) -> None:
        take = self.i.offers(t) and self.i_ready(t)
        if self._full and self.o.accepts(t):
            self.o.take(t)
            if self._at == self._pieces - 1:
                self._at, self._full = 0, False
            else:
                self._at += 1
        if take:
            self.i.take(t)
            self._full = True


class Splitter:
    """A splitter (:class:`scoville.rtl.decoder_parts.Splitter`): each of a beat's ``pieces``
    pieces offered with the beat; the beat taken with its last. :attr:`last`: the piece
    offered is the beat's last."""

    __slots__ = ("_at", "_pieces", "o")

    def __init__(self, pieces: int, o):
        self._pieces, self.o, self._at = pieces, o, 0

    @property
    def last(self) -> bool:
        return self._at == self._pieces - 1

    def step(self, t: int) -> None:
        if self.o.valid and self.o.ready:
            self._at = 0 if self.last else self._at + 1


class Reducer(StallPipeline):
    """The argmax (:class:`scoville.rtl.argmax.Argmax`), a reducing stalling pipeline of
    ``latency`` stages: a beat offered on ``i`` is taken while the last stage is empty or
    its answer taken (the pipeline's :meth:`i_ready`); a token's last beat (every
    ``beats``-th) becomes its answer, offered on ``o`` ``latency`` cycles after its handshake
    until taken."""

    __slots__ = ("_beats", "_k")

    def __init__(self, beats: int, latency: int, i, o):
        super().__init__(latency, i, o)
        self._beats, self._k = beats, 0

    def step(self, t: int) -> None:
        out = self._stages[-1]
        if out and self.o.accepts(t):
            self.o.take(t)
        elif out:
            return
        last = False
        if self.i.offers(t):
            self.i.take(t)
            last = self._k == self._beats - 1
            self._k = 0 if last else self._k + 1
        self._stages = [last, *self._stages[:-1]]
        self._held = sum(self._stages)      # answers in the stages (the base's count)


class VecLoader:
    """The norm weights' loader (:class:`scoville.rtl.decoder_parts.VecLoader`): takes every
    word offered on ``words`` until it holds the vector's; :meth:`clear` starts over for a
    vector of ``words`` words; ``loaded`` from the cycle after its last word."""

    __slots__ = ("_clear", "_max", "held", "words")

    def __init__(self, words_max: int, words):
        self._max, self.words, self.held, self._clear = words_max, words, 0, None

    def clear(self, words: int) -> None:
        self._clear = words

    @property
    def ready(self) -> bool:
        return self.held != self._max

    @property
    def loaded(self) -> bool:
        return self.held == self._max

    def step(self, t: int) -> None:
        if self.ready and self.words.offers(t):
            self.words.take(t)
            self.held += 1
        if self._clear is not None:
            self.held, self._max, self._clear = 0, self._clear, None


def timing(config, commands, sources: dict[str, Source] | None = None,
           ready: dict[str, Schedule] | None = None,
           memory: MemoryAgent | None = None) -> Timing:
    """The cycle of every handshake on ``cmd``, ``x``, ``o``, ``resp``, ``req`` and ``rdata``
    for ``commands`` (each the ``cmd`` beat's fields, :data:`COMMAND_FIELDS`, a missing one
    0; a ``MOE``'s also ``groups``, its dispatch's ``(expert, tokens)``: what its router
    chose, :attr:`scoville.sim.golden.decoder.DecoderModel.routes`), ``sources`` of ``cmd``
    and ``x``, ``ready`` of ``o``, ``resp`` and ``req``, the memory answering as ``memory``
    does (a fresh
    :class:`~scoville.sim.cycles.memory.MemoryAgent`; the model steps it); the counters."""
    commands = [{**{f: int(c.get(f, 0)) for f in COMMAND_FIELDS}, "groups": c.get("groups"),
                 "result": c.get("result")} for c in commands]
    block = _Block(config, commands, sources or {}, ready or {}, memory)
    run("decoder", block.cycle, block.done, 100_000_000, block.parts)
    return block.timing()


class _Block:
    """The block's unit models and the wires between them, as the RTL connects them."""

    def __init__(self, cfg, commands, sources, ready, memory):
        self.cfg, self.commands = cfg, commands
        good = [c for c in commands if check(cfg, c) == Status.OK]
        self.cmd = Producer(sources.get("cmd", Source()), len(commands), commands)
        self.x = Producer(sources.get("x", Source()),
                          sum(c["count"] for c in good if c["op"] == Op.IN))
        self.o = Consumer(ready.get("o", ALWAYS))
        self.resp = Consumer(ready.get("resp", ALWAYS))
        self.w = w = SimpleNamespace(**{name: Wire() for name in (
            "ra", "rb", "norm_i", "norm_o", "lin_cmd", "lin_x", "lin_o", "wf_cmd", "words",
            "moe_cmd", "moe_x", "moe_o", "lin_req", "lin_rdata", "wf_req", "wf_rdata",
            "moe_req", "moe_rdata", "req", "rdata", "vwords", "rwords", "rl", "rg", "rrow",
            "rope_i", "rope_o", "rline", "wl", "at_cmd", "at_q", "at_kv", "at_o", "at_resp",
            "aq_l", "akv_l", "at_oline", "ao_w", "am_i", "am_o", "glu_i", "glu_o",
            "glu_line", "twords", "tbeat")})
        P = cfg.linear.weight_port_bits
        self.mem = memory or MemoryAgent(1, P // 8, P)
        self.mem.attach(w.req, w.rdata, ready.get("req", ALWAYS))
        self.seq = Sequencer(cfg, self.cmd, self.resp)
        self.ra, self.rb = LineReader(w.ra), LineReader(w.rb)
        self.norm = Norm(cfg.norm, w.norm_i, w.norm_o)
        self.wfetch = fetch_timed.Engine(cfg.norm_fetch, w.wf_cmd, w.wf_req, w.wf_rdata,
                                         w.words)
        self.wvec = VecLoader(cfg.norm_words, w.vwords)
        self.proj = LinearParts(cfg.linear, w.lin_cmd, w.lin_x, w.lin_o, w.lin_req,
                                w.lin_rdata)
        self.moe = MoeParts(cfg.moe, w.moe_cmd, w.moe_x, w.moe_o, w.moe_req, w.moe_rdata)
        self.msplit = Splitter(LINE // cfg.moe.x_lanes, w.moe_x)
        self.rwalk, self.wwalk = VecWalker(w.rl), VecWalker(w.wl)
        self.rgather = Joiner(cfg.rope_lines if cfg.rope.dim >= LINE else 1, w.rl, w.rg)
        self.rrows = Joiner(cfg.rope_words, w.rwords, w.rrow)
        self.rtjoin = Joiner(cfg.router_beat_words, w.twords, w.tbeat)
        self.rope = StallPipeline(cfg.rope.latency, w.rope_i, w.rope_o)
        A = cfg.attn
        self.attn = attention_timed.Parts(A, w.at_cmd, w.at_q, w.at_kv, w.at_kv, w.at_o,
                                          w.at_resp)
        self._head_lines = max(A.kv.head_dim // LINE, 1)
        self._out_lines = max(A.v_dim // LINE, 1)
        self.qwalk, self.kvwalk, self.owalk = VecWalker(w.aq_l), VecWalker(w.akv_l), \
            VecWalker(w.ao_w)
        self.qgather = Joiner(self._head_lines, w.aq_l, w.at_q)
        self.kvgather = Joiner(self._head_lines, w.akv_l, w.at_kv)
        self.osplit = Splitter(self._out_lines, w.at_oline)
        #: ROPE's results: a vector up to a line written as it comes; wider, split in lines.
        self.rsplit = HeldSplitter(cfg.rope_lines, w.rope_o, w.rline) \
            if cfg.rope.dim > LINE else None
        self.argmax = Reducer(cfg.argmax.beats, cfg.argmax.latency, w.am_i, w.am_o)
        self.gsplit = Splitter(cfg.glu_beats, w.glu_i)
        self.glu = StallPipeline(cfg.glu.latency, w.glu_i, w.glu_o)
        self.gjoin = Joiner(cfg.glu_beats, w.glu_o, w.glu_line)
        self.mux = MemoryMux(MUX_DEPTH, [w.lin_req, w.wf_req, w.moe_req],
                             [w.lin_rdata, w.wf_rdata, w.moe_rdata], w.req, w.rdata)
        #: The projection's, the norm fetch's, the MoE's and the attention's commands offered
        #: and not yet taken (each offered from the cycle after its command's start).
        self._pending: list[dict | None] = [None, None, None, None]

    def done(self) -> bool:
        return len(self.resp.cycles) == len(self.commands)

    def parts(self) -> dict:
        """The unit models, then the wires between them, by name (a trace's columns)."""
        units = {name: getattr(self, name) for name in (
            "seq", "ra", "rb", "norm", "wfetch", "wvec", "mux", "mem", "msplit", "rwalk",
            "wwalk", "rgather", "rrows", "rtjoin", "rope", "rsplit", "qwalk", "kvwalk", "owalk",
            "qgather",
            "kvgather", "osplit", "argmax", "gsplit", "glu", "gjoin")
            if getattr(self, name) is not None}
        inner = {f"{part}.{name}": unit for part in ("proj", "moe", "attn")
                 for name, unit in getattr(self, part).parts().items()}
        return {**units, **inner, **{f"w.{name}": wire for name, wire in vars(self.w).items()}}

    def _memory_wires(self, t: int) -> None:
        """The three fetch engines' requests through the mux to the memory, and its words
        back."""
        w, mux, mem = self.w, self.mux, self.mem
        clients = ((w.lin_req, w.lin_rdata, self.proj.fetch),
                   (w.wf_req, w.wf_rdata, self.wfetch),
                   (w.moe_req, w.moe_rdata, self.moe.fetch))
        for req, _, engine in clients:
            req.set(engine.req_valid, False, engine.req_size)
        g = mux.grant(t)
        taken = mem.req_ready(t)
        w.req.set(g is not None, taken, clients[g][0].payload if g is not None else None)
        if g is not None:
            clients[g][0].ready = taken
        w.rdata.set(mem.offers(t), False)
        for i, (_, rdata, engine) in enumerate(clients):
            rdata.set(mux.crdata_valid(i, t), engine.rdata_ready)
        w.rdata.ready = mux.rdata_ready(t)

    def _part_commands(self) -> None:
        """The parts' commands on their wires (the ones pending)."""
        cfg, w = self.cfg, self.w
        lin, vec, moe, attn = self._pending   # vec: a NORM's, a ROPE's or a ROUTER's words
        w.at_cmd.set(attn is not None, self.attn.cmd_ready,
                     None if attn is None else attn["result"])
        w.lin_cmd.set(lin is not None, self.proj.seq.state == "IDLE",
                      None if lin is None else {"tokens": lin["count"], "k": lin["k"],
                                                "n": lin["n"], "addr": lin["addr"],
                                                "bias": lin["bias"]})
        lengths = {Op.NORM: lambda c: norm_words(cfg, c),
                   Op.ROPE: lambda c: c["count"] * cfg.rope_words,
                   Op.ROUTER: lambda c: cfg.router_words}
        w.wf_cmd.set(vec is not None, self.wfetch.ready,
                     None if vec is None else (vec["addr"], lengths[vec["op"]](vec)))
        w.moe_cmd.set(moe is not None, self.moe.seq.state == "IDLE",
                      None if moe is None else Batch(moe["count"], tuple(moe["groups"])))

    def _rope_wires(self, t: int) -> None:
        """The fetch engine's words to the norm's loader, ``ROPE``'s rows or ``ROUTER``'s
        joiner (by the command run), and ``ROPE``'s datapath: a vector's lines and its
        token's row into the rotation together (the row taken with the token's last vector),
        its result split into the lines written (the write port always takes them; the
        write walker steps with them)."""
        w = self.w
        roping, routing = self.seq.op == Op.ROPE, self.seq.op == Op.ROUTER
        w.vwords.set(self.wfetch.o_valid and not roping and not routing, self.wvec.ready)
        w.rwords.set(self.wfetch.o_valid and roping)
        # ROUTER's words joined into beats, each written into the router (idle: ready).
        w.twords.set(self.wfetch.o_valid and routing, self.rtjoin.i_ready(t))
        w.tbeat.set(self.rtjoin.o_valid(t), True)
        w.rl.set(self.rwalk.valid)
        gv, rv = self.rgather.o_valid(t), self.rrows.o_valid(t)
        if self.rsplit is None:
            w.rope_o.set(self.rope.o_valid, True)
            w.rline.set(self.rope.o_valid, True)
        else:
            w.rline.set(self.rsplit.o_valid, True)
            w.rope_o.set(self.rope.o_valid, self.rsplit.i_ready(t))
        ri = self.rope.i_ready(t)
        w.rope_i.set(gv and rv, ri)
        w.rg.set(gv, ri and rv)
        w.rrow.set(rv, ri and gv and self.rwalk.last)
        w.rl.ready = self.rgather.i_ready(t)
        w.rwords.ready = self.rrows.i_ready(t)
        w.words.set(self.wfetch.o_valid, w.rwords.ready if roping
                    else w.twords.ready if routing else self.wvec.ready)
        w.wl.set(self.wwalk.valid, w.rline.valid)

    def _attn_wires(self, t: int, op) -> None:
        """``ATTN``'s: the walkers' lines gathered into the attention block's ``q`` and its
        feeder's K and V (one wire: the feeder takes them in its order), its outputs split
        into the lines written (the output walker steps with them), its answer taken at
        once."""
        w, at = self.w, self.attn
        at.wires(t)
        for walker, gather, line, out, ready in (
                (self.qwalk, self.qgather, w.aq_l, w.at_q, at.q_ready),
                (self.kvwalk, self.kvgather, w.akv_l, w.at_kv, at.kv_ready(t))):
            line.set(walker.valid)
            out.set(gather.o_valid(t), ready)
            line.ready = gather.i_ready(t)
        w.at_o.set(at.o_valid, self.osplit.last)
        w.at_oline.set(at.o_valid, True)
        w.ao_w.set(self.owalk.valid, w.at_oline.valid)
        w.at_resp.set(at.resp_valid, self.seq.active and op == Op.ATTN)

    def cycle(self, t: int) -> int:
        """Cycle ``t``: every wire from the units' state at its start, then every unit
        steps."""
        cfg, w, seq, ra, rb = self.cfg, self.w, self.seq, self.ra, self.rb
        started = seq.starting(t)
        go = seq.going(t, self.wvec.loaded)
        op = seq.op if seq.active else None
        self._part_commands()
        self._rope_wires(t)
        self._attn_wires(t, op)
        # Reader A's lines to the op's unit (ADD, GLU: with reader B's, in step).
        both = ra.valid and rb.valid and op == Op.ADD
        w.glu_i.set(ra.valid and rb.valid and op == Op.GLU, self.glu.i_ready(t))
        w.glu_o.set(self.glu.o_valid, self.gjoin.i_ready(t))
        w.glu_line.set(self.gjoin.o_valid(t), True)
        glu_lines = w.glu_i.valid and w.glu_i.ready and self.gsplit.last
        w.norm_i.set(op == Op.NORM and ra.valid, self.norm.i_ready(t))
        w.lin_x.set(op == Op.LINEAR and ra.valid, self.proj.x_ready)
        w.moe_x.set(op == Op.MOE and ra.valid, False)
        w.am_i.set(op == Op.ARGMAX and ra.valid, self.argmax.i_ready(t))
        w.am_o.set(self.argmax.o_valid, seq.active and op == Op.ARGMAX)
        out = op == Op.OUT and ra.valid and self.o.accepts(t)
        w.norm_o.set(self.norm.o_valid, True)
        w.lin_o.set(self.proj.o_valid, True)
        w.moe_o.set(self.moe.o_valid, True)
        self._memory_wires(t)
        self.proj.wires(t)
        self.moe.wires(t)
        w.moe_x.ready = self.moe.x_ready(t)
        moe_line = w.moe_x.valid and w.moe_x.ready and self.msplit.last
        w.ra.set(ra.valid, both or out or moe_line or glu_lines or any(
            p.valid and p.ready for p in (w.norm_i, w.lin_x, w.am_i)))
        w.rb.set(rb.valid, both or glu_lines)
        taken_x = op == Op.IN and not seq.counted and self.x.offers(t)
        # A beat counted: a line written (the write port always takes it), or one of OUT's.
        beat = (taken_x or both or out or (op == Op.NORM and w.norm_o.valid)
                or (op == Op.LINEAR and w.lin_o.valid) or (op == Op.MOE and w.moe_o.valid)
                or (op == Op.ROPE and w.rline.valid)
                or (op == Op.ATTN and w.at_resp.valid and w.at_resp.ready)
                or (op == Op.ARGMAX and w.am_o.valid and w.am_o.ready)
                or (op == Op.GLU and w.glu_line.valid)
                or (op == Op.ROUTER and w.tbeat.valid))
        if taken_x:
            self.x.take(t)
        if out:
            self.o.take(t)
        loaded = self.wvec.loaded
        for i, wire in enumerate((w.lin_cmd, w.wf_cmd, w.moe_cmd, w.at_cmd)):
            if wire.valid and wire.ready:
                self._pending[i] = None
        if started is not None and started["op"] in _PARTS:
            self._pending[_PARTS[started["op"]]] = started
        if started is not None and started["op"] == Op.NORM:
            self.wvec.clear(norm_words(cfg, started))
            self.norm.set_width(walk(cfg, started)[1])
        if started is not None and started["op"] == Op.ROPE:
            for walker in (self.rwalk, self.wwalk):
                walker.start_tokens(started["count"], started["heads"] * cfg.rope_lines)
        if started is not None and started["op"] == Op.ATTN:
            self._start_attn(started)
        if go is not None and go["op"] not in (Op.IN, Op.ROPE, Op.ATTN, Op.ROUTER):
            ra.start(walk(cfg, go)[0])      # reader A's lines, and B's for ADD and GLU
            if go["op"] in (Op.ADD, Op.GLU):
                rb.start(go["count"])
        seq.step(t, loaded=loaded, beat=beat)
        for unit in (ra, rb, self.norm, self.wfetch, self.wvec, self.mux, self.mem,
                     self.msplit, self.rwalk, self.wwalk, self.rgather, self.rrows,
                     self.rtjoin, self.rope,
                     self.argmax, self.gsplit, self.glu, self.gjoin):
            unit.step(t)
        if self.rsplit is not None:
            self.rsplit.step(t)
        self.attn.step(t)
        for unit in (self.qwalk, self.kvwalk, self.owalk, self.qgather, self.kvgather,
                     self.osplit):
            unit.step(t)
        self.proj.step(t)
        self.moe.step(t)
        return t + 1

    def _start_attn(self, c: dict) -> None:
        """An ``ATTN``'s walkers, started with it: a step's query vectors and outputs, a
        step's or an append's key and value vectors."""
        A, n, aop = self.cfg.attn, c["count"], c["aop"]
        if aop == AttnOp.STEP:
            self.qwalk.start_tokens(n, A.q_heads * self._head_lines)
            self.owalk.start_tokens(n, A.q_heads * self._out_lines)
        if aop in (AttnOp.STEP, AttnOp.APPEND):
            self.kvwalk.start_tokens(n, self.cfg.attn_vectors * self._head_lines)

    def timing(self) -> Timing:
        counters = {"commands": self.seq.commands, "refused": self.seq.refused,
                    "weight_words": len(self.mem.cycles)}
        return Timing({"cmd": self.cmd.cycles, "x": self.x.cycles, "o": self.o.cycles,
                       "resp": self.resp.cycles, "req": self.w.req.cycles,
                       "rdata": self.mem.cycles}, counters)


#: The ops whose part takes a command of its own, and its place in ``_Block._pending``.
_PARTS = {Op.LINEAR: 0, Op.NORM: 1, Op.MOE: 2, Op.ROPE: 1, Op.ATTN: 3, Op.ROUTER: 1}


def fast(config, commands, mem_latency: int, mem_bytes_per_cycle: int) -> dict:
    """The fast path: ``commands`` (each the ``cmd`` beat's fields) back to back with streams
    that keep up (each command, ``IN``'s lines offered as soon as the block takes them;
    ``o``, ``resp`` and the memory's requests always ready), the memory agent at
    ``mem_latency`` and ``mem_bytes_per_cycle``: ``cycles`` from the first command's
    handshake to the cycle after the last answer, ``weight_words``, ``macs`` (the
    projections' and the experts'), at any size.

    It follows the commands, not the cycles. A command taken in cycle ``t`` starts its
    datapath then (a ``NORM`` once its weights are in); its last beat ``e`` is counted at
    ``e + 1``, answered at ``e + 2``, and the next command taken at ``e + 3``. ``IN``,
    ``OUT`` and ``ADD`` move a line a cycle from ``t + 1``, ``ARGMAX`` too, its answer the
    argmax's latency after its last line; a refused command is answered at ``t + 1``. A
    ``ROPE`` as :func:`_rope_fast` says; an ``ATTN`` (its ``result``, the
    attention model's, as for :func:`timing`) is the attention block's command offered at
    ``t + 1``, its answer as :func:`_attn_answer` says. A ``NORM``'s and a ``LINEAR``'s part
    takes its command at ``t + 1``. The
    ``NORM``'s vector and a ``ROUTER``'s words arrive as :func:`arrived` says (a
    ``ROUTER``'s last beat written with its last word); the norm runs as
    :func:`~scoville.sim.cycles.rmsnorm.ideal_cycles` says. The ``LINEAR`` is
    :func:`scoville.sim.cycles.linear.fast` from then, a ``MOE`` (its ``groups`` as for
    :func:`timing`) :func:`scoville.sim.cycles.moe.layer`. ``tests/test_decoder.py`` holds it
    to the cycle model, where the memory's queue holds a round trip's words as
    :func:`~scoville.sim.cycles.linear.fast` says."""
    from . import linear as linear_timed
    from . import moe as moe_timed
    from .rmsnorm import ideal_cycles

    cfg, L = config, mem_latency
    P = cfg.linear.weight_port_bits
    rho = min(1.0, mem_bytes_per_cycle / (P // 8))
    fc = cfg.norm_fetch
    t = 0.0                     # the next command's handshake
    end = 0.0
    words = macs = 0
    for c in commands:
        groups, result = c.get("groups"), c.get("result")
        c = {f: int(c.get(f, 0)) for f in COMMAND_FIELDS}
        if check(cfg, c) != Status.OK:
            end = t + 1
            t += 2
            continue
        op, n = Op(c["op"]), c["count"]
        if op in (Op.IN, Op.OUT, Op.ADD):
            last = t + n
        elif op == Op.GLU:      # a line's beats through the gated products
            last = t + n * cfg.glu_beats + cfg.glu.latency
        elif op == Op.ARGMAX:
            last = t + n + cfg.argmax.latency       # its answer, after the last line
        elif op == Op.NORM:
            W = norm_words(cfg, c)
            go = arrived(fc, t, W, L, rho) + 1       # loaded, then go
            last = go + ideal_cycles(cfg.norm, n, width=walk(cfg, c)[1])
            words += W
        elif op == Op.ROUTER:   # the last beat written with its last word
            last = arrived(fc, t, cfg.router_words, L, rho)
            words += cfg.router_words
        elif op == Op.ROPE:
            last = _rope_fast(cfg, c, t, L, rho)
            words += n * cfg.rope_words
        elif op == Op.ATTN:
            last = t + 1 + _attn_answer(cfg.attn, result)
            macs += attention_timed.macs(cfg.attn, [result])
        elif op == Op.MOE:
            got = moe_timed.layer(cfg.moe, n, groups, L, mem_bytes_per_cycle)
            last = t + got["cycles"]
            words += got["weight_words"]
            macs += 3 * cfg.moe.hidden * cfg.moe.intermediate * got["rows"]
        else:
            got = linear_timed.fast(cfg.linear, [(n, c["k"], c["n"], bool(c["bias"]))], L,
                                    mem_bytes_per_cycle)
            last = t + got["cycles"]
            words += got["weight_words"]
            macs += got["macs"]
        end = last + 2
        t = last + 3
    return {"cycles": end + 1, "weight_words": words, "macs": macs}



class _Fetched:
    """The fetch engine's words as the fast path sees them, for a command taken at ``t``:
    bursts of ``total`` words requested from ``t + 2`` (each once the buffer has room for it:
    the words asked and not yet taken at most ``buffer``), the memory giving each word
    ``latency`` cycles after its request at ``rho`` words a cycle, each offered two cycles
    after. :attr:`taken` holds the cycle each word is taken (set by the consumer's model)."""

    def __init__(self, fc, t: float, total: int, latency: int, rho: float):
        self.fc, self.t, self.total, self.latency, self.rho = fc, t, total, latency, rho
        self.taken: list[float] = [0.0] * total
        self.requests: list[float] = []
        self.given = -1.0                   # the memory's last word

    def offered(self, k: int) -> float:
        """The cycle word ``k`` is offered (its burst asked first)."""
        fc, b = self.fc, k // self.fc.burst
        if b == len(self.requests):
            room = min((b + 1) * fc.burst, self.total) - fc.buffer - 1
            ask = self.t + 2 if not b else self.requests[-1] + 1
            self.requests.append(max(ask, self.taken[room] + 1) if room >= 0 else ask)
        self.given = max(self.requests[b] + self.latency, self.given + 1 / self.rho)
        return self.given + 2


def arrived(fc, t: float, words: int, latency: int, rho: float) -> float:
    """The cycle the fetch engine (``fc``) offers the last of ``words`` words to a consumer
    that takes each at once (:class:`_Fetched`), for a command taken at ``t``."""
    got = _Fetched(fc, t, words, latency, rho)
    for k in range(words):
        got.taken[k] = got.offered(k)
    return got.taken[-1]


def _rope_fast(cfg, c: dict, t: float, latency: int, rho: float) -> float:
    """The cycle of a ``ROPE``'s last write, taken at ``t``: its table's words as
    :class:`_Fetched` has them, offered to the row joiner. The joiner takes a row's words but
    the last one a cycle, from the cycle after the previous row was taken; the row is whole
    (``R``) once its last word is offered. A token's ``V`` lines (``heads`` vectors of ``Lv``
    lines) go one a cycle, a vector's first ``Lv - 1`` ahead of its row, so its last vector
    enters the rotation, and takes the row, at ``E = max(R, E' + Lv) + V - Lv`` (``E'`` the
    previous token's, ``t`` at first); the last write is ``latency`` cycles after it (and
    ``Lv`` more through the splitter of a vector wider than a line)."""
    RW, Lv = cfg.rope_words, cfg.rope_lines
    n, V = c["count"], c["heads"] * cfg.rope_lines
    got = _Fetched(cfg.norm_fetch, t, n * RW, latency, rho)
    taken, offered = got.taken, got.offered
    end = t
    for r in range(n):
        prev = end
        for k in range(r * RW, (r + 1) * RW - 1):
            prev = taken[k] = max(offered(k), prev + 1)
        row = max(offered((r + 1) * RW - 1), prev + 1)
        end = max(row, end + Lv) + V - Lv
        taken[(r + 1) * RW - 1] = end
    return end + cfg.rope.latency + (Lv if cfg.rope.dim > LINE else 0)


def _attn_answer(config, result) -> int:
    """The cycle of the attention block's answer to ``result``'s command offered at cycle 0,
    its vectors offered as it takes them: a one-token step's from
    :func:`~scoville.sim.cycles.attention.decode_step` (any context), any other's from the
    block's cycle model (:func:`~scoville.sim.cycles.attention.timing`)."""
    if result.op == AttnOp.STEP and result.status == 0 and result.tokens == 1:
        return attention_timed.decode_step(config, result.length,
                                           result.window)["cycles"] - 1
    return attention_timed.timing(config, [result]).handshakes["resp"][0]
