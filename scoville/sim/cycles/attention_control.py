"""Unit model (:mod:`scoville.sim.cycles.unit`) of
:class:`scoville.rtl.attention_control.Controller`, from its docstring."""

from __future__ import annotations

from scoville.rtl.attention_control import Op
from scoville.rtl.kvcache import Status

__all__ = ["Controller"]


class Controller:
    """The controller: a command is taken in a cycle it is idle, dispatched the next cycle; a
    cache request is offered from the cycle after (until taken) and its answer taken as it
    comes; the command's answer is offered from the cycle after the last of these until taken.

    A command is the golden model's result of it (:class:`~scoville.sim.golden.attention
    .Result`: its op, status, tokens, cache requests and chunks). The composed model sets the
    neighbours' signals for the cycle about to be stepped: :attr:`feed_idle`, :attr:`q_idle`
    (the feeder's and query buffer's ``idle``) and :attr:`finished`.

    Parameters
    ----------
    max_step_tokens, q_heads : int
    cmd : input port
        Commands (payload: the result).
    resp : output port
        Answers.
    cache_req : output port
        Cache requests (payload: the cache's outcome of it).
    cache_resp : input port
        The cache's answers.
    """

    __slots__ = ("_left", "_max", "_qh", "attending", "cache_req", "cache_resp", "cmd",
                 "feed_idle", "finished", "q_idle", "res", "resp", "state")

    def __init__(self, max_step_tokens: int, q_heads: int, cmd, resp, cache_req, cache_resp):
        self._max, self._qh = max_step_tokens, q_heads
        self.cmd, self.resp, self.cache_req, self.cache_resp = cmd, resp, cache_req, cache_resp
        self.state = "IDLE"
        self.res = None
        self._left = 0  # a step's appends still to request
        self.attending = False
        self.feed_idle = self.q_idle = self.finished = False

    # ---- What the controller shows in this cycle.
    @property
    def resp_valid(self) -> bool:
        return self.state == "RESP"

    @property
    def req_valid(self) -> bool:
        return self.state == "REQ"

    @property
    def req_payload(self):
        """The cache request offered: the step's next append, or the command's one."""
        res = self.res
        return res.cache[res.tokens - self._left if res.op == Op.STEP else 0]

    @property
    def cache_resp_ready(self) -> bool:
        return self.state in ("WAIT", "ATTEND")

    def _dispatching(self, op) -> bool:
        return self.state == "DISPATCH" and self.res.op == op

    @property
    def feed_start(self) -> int | None:
        """The feeder's start: the tokens after the first (None: no start)."""
        if self._dispatching(Op.APPEND):
            return 0
        return self.res.tokens - 1 if self._dispatching(Op.STEP) else None

    @property
    def q_start(self) -> int | None:
        """The query buffer's start: the step's Q vectors (None: no start)."""
        return self._qh * self.res.tokens if self._dispatching(Op.STEP) else None

    @property
    def drop(self) -> bool:
        return self.state == "DRAIN"

    @property
    def start(self) -> bool:
        """The step's attention starts (the walking units start from the next cycle)."""
        return self.state == "QWAIT" and self.q_idle and self.res.status == Status.OK

    @property
    def stepped(self) -> bool:
        return self._dispatching(Op.STEP) and self.res.tokens <= self._max

    @property
    def appending(self) -> bool:
        return self.state in ("REQ", "WAIT", "QWAIT") and self.res.op == Op.STEP

    def step(self, t: int) -> None:
        state, res = self.state, self.res
        if state == "IDLE":
            if self.cmd.offers(t):
                self.res = self.cmd.payload
                self.cmd.take(t)
                self.state = "DISPATCH"
        elif state == "DISPATCH":
            self.state = self._dispatch(res)
        elif state == "DRAIN":
            if self.feed_idle and self.q_idle:
                self.state = "RESP"
        elif state == "REQ":
            if self.cache_req.accepts(t):
                self.cache_req.take(t)
                self.state = "WAIT"
        elif state == "WAIT":
            if self.cache_resp.offers(t):
                self.cache_resp.take(t)
                self._left -= 1
                if res.op != Op.STEP:
                    self.state = "RESP"
                else:
                    self.state = "REQ" if self._left else "QWAIT"
        elif state == "QWAIT":
            if self.q_idle:
                self.attending = res.status == Status.OK
                self.state = "ATTEND" if self.attending else "RESP"
        elif state == "ATTEND":
            if self.cache_resp.offers(t):
                self.cache_resp.take(t)  # a read's answer, dropped
            if self.finished:
                self.attending = False
                self.state = "RESP"
        elif state == "RESP":
            if self.resp.accepts(t):
                self.resp.take(t)
                self.state = "IDLE"

    def _dispatch(self, res) -> str:
        """The next state after DISPATCH."""
        if res.op in (Op.ALLOC, Op.FREE):
            return "REQ"
        if res.op == Op.APPEND:
            self._left = 1
            return "REQ"
        if res.op == Op.STEP:
            self._left = res.tokens
            return "DRAIN" if res.tokens > self._max else "REQ"
        return "RESP"
