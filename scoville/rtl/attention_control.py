"""Attention's controller: the block's commands, their cache requests and answers, and the
start and end of a step's attention (``docs/attention.md``). The command and answer codes and
layouts are defined here and exported by :mod:`scoville.rtl.attention`."""

from amaranth.hdl import Cat, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .attention_walk import window_start
from .kvcache import SEQ_BITS, TOKEN_BITS, Status, request_layout
from .kvcache import Op as CacheOp
from .kvcache import response_layout as cache_response_layout
from .lib.comb import wire

__all__ = ["Controller", "Op", "command_layout", "response_layout"]


class Op(enum.IntEnum, shape=3):
    """Commands (``cmd.op``; the codes 5 to 7 are answered ``BAD_OP``)."""
    ALLOC = 0
    FREE = 1
    APPEND = 2
    STEP = 3
    SINK = 4


def command_layout() -> data.StructLayout:
    """The ``cmd`` payload: ``op`` (:class:`Op`); ``seq`` (free, append, step); ``tokens``
    (a step's new tokens T, less one: 0 in decode, up to ``q_tokens - 1`` in prefill);
    ``head`` and ``value`` (sink: the head's sink logit, binary32; step: its sliding window
    in the low 16 bits, 0 for the config's ``window``)."""
    return data.StructLayout({"op": Op, "seq": unsigned(SEQ_BITS),
                              "tokens": unsigned(8), "head": unsigned(8),
                              "value": unsigned(32)})


def response_layout() -> data.StructLayout:
    """The ``resp`` payload: ``status`` (the cache's :class:`~scoville.rtl.kvcache.Status`),
    ``seq`` (an alloc's new sequence, else the command's) and ``length`` (the sequence's
    tokens after the command)."""
    return data.StructLayout({"status": Status, "seq": unsigned(SEQ_BITS),
                              "length": unsigned(TOKEN_BITS)})


class Controller(wiring.Component):
    """Takes a command, has it done, answers. ``config`` is the
    :class:`~scoville.rtl.attention.AttentionConfig`.

    - ``alloc``, ``free``: one cache request, its answer is the command's.
    - ``append``: the feeder is started for one token (``feed_start``, ``feed_tokens`` 0) and
      one cache append asked for; its answer is the command's.
    - ``step`` of T tokens (``cmd.tokens`` T - 1): the feeder is started for T tokens and the
      query buffer for ``T * q_heads`` vectors; T above the step's most (``q_tokens`` in
      prefill, 1 in decode) is answered ``BAD_RANGE`` once the vectors are taken and dropped
      (``drop``). Else T cache appends, one after another's answer (the step's status is its
      first failing append's); once the query buffer is ``idle``, a step whose appends all
      succeeded attends: ``start`` for a cycle with ``lo`` the first row tile's window start
      (``base``, the step's first position, and ``tokens`` held from the next cycle),
      ``attending`` high until ``finished``.
    - ``sink``: ``sink_en`` for a cycle with the head and its logit (with ``sinks``; else
      ``BAD_OP``; a head past ``q_heads``: ``BAD_HEAD``).
    - other codes: ``BAD_OP``.

    Timing: a command is taken in a cycle the controller is idle; dispatched the next cycle;
    a cache request is offered from the cycle after (until taken), its answer taken as it
    comes; the answer to the command is offered from the cycle after the last of these
    (``finished``, the query buffer's ``idle``, the cache's answer) until taken, and the next
    command is taken from the cycle after. While attending the controller takes the cache's
    answers to the reads (``cache_resp.ready`` high) and drops them.

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout()))
    resp : Out(stream.Signature(response_layout()))
    cache_req : Out(stream.Signature(kvcache request_layout()))
    cache_resp : In(stream.Signature(kvcache response_layout()))
    feed_start, q_start, drop : Out(1)
    feed_tokens : Out(8)
    q_count : Out(range(256 * q_heads + 1))
    feed_idle, q_idle : In(1)
    start, attending : Out(1)
    lo, base : Out(TOKEN_BITS)
    tokens : Out(9)
    window : Out(16)
        The step's sliding window (0: all): its ``value``'s low 16 bits when not 0, else
        ``config.window``.
    seq : Out(SEQ_BITS)
        The command's sequence (the step's reads).
    finished : In(1)
    sink_en : Out(1)
    sink_head : Out(8)
    sink_value : Out(32)
    stepped, appending : Out(1)
        A step started (for ``steps``); a step's appends under way (``append_cycles``).
    """

    def __init__(self, config):
        self._config = config
        super().__init__({
            "cmd": In(stream.Signature(command_layout())),
            "resp": Out(stream.Signature(response_layout())),
            "cache_req": Out(stream.Signature(request_layout())),
            "cache_resp": In(stream.Signature(cache_response_layout())),
            "feed_start": Out(1), "feed_tokens": Out(8), "feed_idle": In(1),
            "q_start": Out(1), "q_count": Out(range(256 * config.q_heads + 1)),
            "q_idle": In(1), "drop": Out(1),
            "start": Out(1), "lo": Out(TOKEN_BITS), "base": Out(TOKEN_BITS),
            "tokens": Out(9), "window": Out(16), "seq": Out(SEQ_BITS), "attending": Out(1),
            "finished": In(1),
            "sink_en": Out(1), "sink_head": Out(8), "sink_value": Out(32),
            "stepped": Out(1), "appending": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        cur = Signal(command_layout())
        own = cur.value[:16]
        m.d.comb += self.window.eq(Mux(own != 0, own, cfg.window))
        status = Signal(Status)
        length = Signal(TOKEN_BITS)
        out_seq = Signal(SEQ_BITS)
        tok_left = Signal(9)  # appends still to request
        m.d.comb += [self.resp.payload.status.eq(status), self.resp.payload.seq.eq(out_seq),
                     self.resp.payload.length.eq(length), self.seq.eq(cur.seq),
                     self.sink_head.eq(cur.head), self.sink_value.eq(cur.value)]
        # The cache request: its op and seq, the other fields 0 (one assignment of the
        # whole payload: a request layout begins with op, then seq).
        layout = request_layout()
        assert layout["op"].offset == 0 and layout["seq"].offset == Shape.cast(CacheOp).width
        op = Mux(cur.op == Op.ALLOC, CacheOp.ALLOC,
                 Mux(cur.op == Op.FREE, CacheOp.FREE, CacheOp.APPEND))
        m.d.comb += self.cache_req.payload.eq(Cat(op, cur.seq))
        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [cur.eq(self.cmd.payload),
                                 out_seq.eq(self.cmd.payload.seq), length.eq(0)]
                    m.next = "DISPATCH"
            with m.State("DISPATCH"):
                self._dispatch(m, cur, status, tok_left)
            with m.State("DRAIN"):
                # A step whose T is out of range: its K, V and Q are taken and dropped.
                m.d.comb += self.drop.eq(1)
                with m.If(self.feed_idle & self.q_idle):
                    m.next = "RESP"
            with m.State("REQ"):
                m.d.comb += self.cache_req.valid.eq(1)
                with m.If(self.cache_req.ready):
                    m.next = "WAIT"
            with m.State("WAIT"):
                m.d.comb += self.cache_resp.ready.eq(1)
                with m.If(self.cache_resp.valid):
                    r = self.cache_resp.payload
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
                with m.If(self.q_idle):
                    with m.If(status == Status.OK):
                        first = wire(m, "first_pos", length - self.tokens, unsigned(TOKEN_BITS))
                        m.d.comb += [self.start.eq(1), self.lo.eq(window_start(self.window, first))]
                        m.d.sync += [self.base.eq(first), self.attending.eq(1)]
                        m.next = "ATTEND"
                    with m.Else():
                        m.next = "RESP"
            with m.State("ATTEND"):
                m.d.comb += self.cache_resp.ready.eq(1)  # the reads' answers
                with m.If(self.finished):
                    m.d.sync += self.attending.eq(0)
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += self.resp.valid.eq(1)
                with m.If(self.resp.ready):
                    m.next = "IDLE"
        setup = fsm.ongoing("REQ") | fsm.ongoing("WAIT") | fsm.ongoing("QWAIT")
        m.d.comb += self.appending.eq(setup & (cur.op == Op.STEP))
        return m

    def _dispatch(self, m, cur, status, tok_left):
        """The DISPATCH state: start the command's units, or answer at once."""
        QH, TM = self._config.q_heads, self._config.max_step_tokens
        step_tokens = cur.tokens + 1
        with m.Switch(cur.op):
            with m.Case(Op.ALLOC, Op.FREE):
                m.next = "REQ"
            with m.Case(Op.APPEND):
                m.d.comb += [self.feed_start.eq(1), self.feed_tokens.eq(0)]
                m.d.sync += tok_left.eq(1)
                m.next = "REQ"
            with m.Case(Op.STEP):
                m.d.comb += [self.feed_start.eq(1), self.feed_tokens.eq(cur.tokens),
                             self.q_start.eq(1), self.q_count.eq(step_tokens * QH)]
                m.d.sync += [self.tokens.eq(step_tokens), tok_left.eq(step_tokens),
                             status.eq(Status.OK)]
                with m.If(step_tokens > TM):
                    m.d.sync += status.eq(Status.BAD_RANGE)
                    m.next = "DRAIN"
                with m.Else():
                    m.d.comb += self.stepped.eq(1)
                    m.next = "REQ"
            with m.Case(Op.SINK):
                with m.If(cur.head >= QH):
                    m.d.sync += status.eq(Status.BAD_HEAD)
                with m.Elif(self._config.sinks):
                    m.d.comb += self.sink_en.eq(1)
                    m.d.sync += status.eq(Status.OK)
                with m.Else():
                    m.d.sync += status.eq(Status.BAD_OP)
                m.next = "RESP"
            with m.Default():
                m.d.sync += status.eq(Status.BAD_OP)
                m.next = "RESP"
