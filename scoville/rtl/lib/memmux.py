"""One memory port shared by several readers: their read requests onto the port, round robin,
and the memory's words back to the reader that asked, in the order asked.

A block whose parts each fetch from the same memory (the decoder layer's projections, its
experts' weights and its tables) puts this between their fetch engines and the port. It adds no
cycle on either path: a granted request and a returning word pass through in the cycle they
are offered.
"""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import ParamError

__all__ = ["MemoryMux"]


class MemoryMux(wiring.Component):
    """``clients`` readers' requests (``creq[i]``: ``addr``, ``len`` words) onto one memory port
    (``req``), and the words of its responses (``rdata``) back to the readers (``crdata[i]``).

    Requests: in each cycle the first client offering a request, counting from the one after the
    client granted last, is granted while the tag queue has fewer than ``depth`` entries: its
    request is offered on ``req`` in that cycle and taken from the client when the memory
    takes it, which queues the client and the request's ``len``.

    Words: the memory's words belong to the queue's head: each is offered to that client in the
    cycle the memory offers it (``rdata`` is ready when the client is; never with the queue
    empty) and the head leaves with its ``len``-th word; ``last`` is high while that word is
    offered (for a client that wants its responses' ends marked).

    Attributes
    ----------
    creq : In(stream.Signature(request layout)).array(clients)
    crdata : Out(stream.Signature(data_bits)).array(clients)
    req : Out(stream.Signature(request layout))
    rdata : In(stream.Signature(data_bits))
    last : Out(1)
    """

    def __init__(self, clients: int, request: data.Layout, data_bits: int, depth: int = 8):
        error = (f"parameter 'clients' = {clients} is not allowed; allowed: 2..16"
                 if not 2 <= clients <= 16 else
                 f"parameter 'depth' = {depth} is not allowed; allowed: 1..64"
                 if not 1 <= depth <= 64 else None)
        if error:
            self._MustUse__silence = True  # not built: nothing to warn about
            raise ParamError(error)
        self._n, self._request, self._depth = clients, data.Layout.cast(request), depth
        super().__init__({
            "creq": In(stream.Signature(request)).array(clients),
            "crdata": Out(stream.Signature(data_bits)).array(clients),
            "req": Out(stream.Signature(request)),
            "rdata": In(stream.Signature(data_bits)),
            "last": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n, depth = self._n, self._depth
        len_shape = self._request["len"].shape
        ids = Array(Signal(range(n), name=f"id{i}") for i in range(depth))
        lens = Array(Signal(len_shape, name=f"len{i}") for i in range(depth))
        head = Signal(range(depth))
        tail = Signal(range(depth))
        count = Signal(range(depth + 1))
        got = Signal(len_shape)             # words of the head's response delivered

        # ---- Requests: round robin from the client after the last granted.
        ptr = Signal(range(n))
        grant = Signal(range(n))
        offered = Signal()
        with m.Switch(ptr):
            for p in range(n):
                with m.Case(p):
                    for off in reversed(range(n)):   # the nearest client assigned last wins
                        i = (p + off) % n
                        with m.If(self.creq[i].valid):
                            m.d.comb += [grant.eq(i), offered.eq(1)]
        room = count < depth
        m.d.comb += self.req.valid.eq(offered & room)
        for i in range(n):
            with m.If(grant == i):
                m.d.comb += self.req.payload.eq(self.creq[i].payload)
            m.d.comb += self.creq[i].ready.eq(room & offered & (grant == i) & self.req.ready)
        push = self.req.valid & self.req.ready
        with m.If(push):
            m.d.sync += [ids[tail].eq(grant), lens[tail].eq(self.req.payload.len),
                         tail.eq((tail + 1) % depth if depth & (depth - 1) else tail + 1),
                         ptr.eq((grant + 1) % n if n & (n - 1) else grant + 1)]

        # ---- Words: to the head's client.
        hid = ids[head]
        have = count != 0
        m.d.comb += self.rdata.ready.eq(have & Array(c.ready for c in self.crdata)[hid])
        for i in range(n):
            m.d.comb += [self.crdata[i].valid.eq(have & (hid == i) & self.rdata.valid),
                         self.crdata[i].payload.eq(self.rdata.payload)]
        word = self.rdata.valid & self.rdata.ready
        m.d.comb += self.last.eq(got == lens[head] - 1)
        pop = word & self.last
        with m.If(word):
            m.d.sync += got.eq(got + 1)
        with m.If(pop):
            m.d.sync += [got.eq(0),
                         head.eq((head + 1) % depth if depth & (depth - 1) else head + 1)]
        m.d.sync += count.eq(count + push - pop)
        return m
