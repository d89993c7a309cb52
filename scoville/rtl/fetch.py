"""A read-fetch engine: commands for runs of words in, bursts of read requests out to a
memory, the words back in order on an output stream.

It is the piece a block uses to pull operands it does not hold (MoE's expert weights, later
anything in HBM) from a memory that answers requests with a latency and a bandwidth of its own:
it never asks for more than its buffer can take, so the memory is never back-pressured by a
slow consumer, and the consumer sees the words in the order it asked for them.
"""

from dataclasses import dataclass

from amaranth.hdl import Assert, Assume, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .lib.counters import counter_layout
from .lib.params import ParamError, check_int, param

__all__ = ["COUNTERS", "Fetch", "FetchConfig", "request_layout"]

#: The performance counters (the ``counters`` port).
COUNTERS = counter_layout({"rejected": 32})


@dataclass(frozen=True)
class FetchConfig:
    """Parameters of :class:`Fetch`.

    Attributes
    ----------
    data_bits : int
        Width of a word: of a memory beat and of an output beat.
    addr_bits : int
        Width of a word address.
    len_bits : int
        Width of a command's length in words (1 .. 2**len_bits - 1).
    burst : int
        Most words one read request asks for.
    buffer : int
        Words of the output buffer; words requested and not yet taken never exceed it.
    """

    data_bits: int = param(64, "8..1024", "bits of a word")
    addr_bits: int = param(16, "4..32", "bits of a word address")
    len_bits: int = param(8, "1..16", "bits of a command's length in words")
    burst: int = param(8, "1..2**len_bits - 1, <= buffer", "most words per read request")
    buffer: int = param(32, "3..4096", "words of the output buffer")

    def __post_init__(self):
        check_int("data_bits", self.data_bits, 8, 1024)
        check_int("addr_bits", self.addr_bits, 4, 32)
        check_int("len_bits", self.len_bits, 1, 16)
        check_int("buffer", self.buffer, 3, 4096)
        check_int("burst", self.burst, 1, (1 << self.len_bits) - 1)
        if self.burst > self.buffer:
            raise ParamError(f"parameter 'burst' = {self.burst} is out of range; allowed: "
                             f"1..{min(self.buffer, (1 << self.len_bits) - 1)} "
                             f"(at most 'buffer' = {self.buffer})")

    def accepts(self, addr: int, length: int) -> bool:
        """Whether the engine takes command ``(addr, length)``: at least one word, none past
        the last address (else it is rejected and counted)."""
        return length > 0 and addr + length <= 1 << self.addr_bits


def request_layout(addr_bits: int, len_bits: int) -> data.StructLayout:
    """A run of words: ``addr`` (the first word's address) and ``len`` (words)."""
    return data.StructLayout({"addr": unsigned(addr_bits), "len": unsigned(len_bits)})


class Fetch(wiring.Component):
    """Fetches runs of words from a memory, in command order.

    A command ``(addr, len)`` asks for words ``addr .. addr + len - 1``. The engine splits it
    into read requests of at most ``burst`` words, in address order, and issues a request only
    when the buffer has room for all of its words beside every word already requested and not
    yet taken on ``o``; the memory's words go into the buffer as they come (``rdata.ready`` is
    the buffer's room, which the reservation keeps high) and out on ``o`` in order.

    A command with ``len`` 0, or one that runs past the last address (``addr + len >
    2**addr_bits``), is rejected: it issues no request and adds 1 to ``counters.rejected``; the
    engine goes on with the next command.

    To the cycle: a command is taken (``cmd.ready``) when the engine holds no command (the cycle
    after its last request is taken); the first request can be offered the cycle after the
    command is taken, each later one the cycle after the one before it is taken, in each case
    once the buffer has room for it. A word taken from ``rdata`` in cycle ``t`` can be offered
    on ``o`` from cycle ``t + 2`` (``amaranth.lib.fifo.SyncFIFOBuffered``: a memory with a
    registered read port and an output register); the buffer's word count is
    ``SyncFIFOBuffered``'s (``buffer - 1`` in memory and one in the output register).

    Attributes
    ----------
    cmd : In(stream.Signature(request_layout(addr_bits, len_bits)))
        Commands.
    req : Out(stream.Signature(request_layout(addr_bits, len_bits)))
        Read requests to the memory: ``len`` 1 .. ``burst`` words from ``addr``.
    rdata : In(stream.Signature(data_bits))
        The memory's words, in request order.
    o : Out(stream.Signature(data_bits))
        The words of every accepted command, in order.
    counters : Out(COUNTERS)
        ``rejected``: commands rejected since reset (32 bits).
    """

    #: The request stream and the data stream that answers it: the simulation harness serves
    #: them from a memory (its memory agent).
    memory_ports = {"req": "rdata"}

    def __init__(self, config: FetchConfig):
        self._config = config
        layout = request_layout(config.addr_bits, config.len_bits)
        super().__init__({
            "cmd": In(stream.Signature(layout)),
            "req": Out(stream.Signature(layout)),
            "rdata": In(stream.Signature(unsigned(config.data_bits))),
            "o": Out(stream.Signature(unsigned(config.data_bits))),
            "counters": Out(COUNTERS),
        })

    @property
    def config(self) -> FetchConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.buffer = buf = SyncFIFOBuffered(width=cfg.data_bits, depth=cfg.buffer)

        busy = Signal()
        addr = Signal(cfg.addr_bits)
        left = Signal(cfg.len_bits)
        # Words requested and not yet taken on ``o``: at most ``buffer``.
        reserved = Signal(range(cfg.buffer + 1))
        size = Signal(range(cfg.burst + 1))
        if cfg.burst >= (1 << cfg.len_bits) - 1:  # every command fits one request
            m.d.comb += size.eq(left)
        else:
            m.d.comb += size.eq(Mux(left > cfg.burst, cfg.burst, left))

        # Commands: taken while no command is held; a bad one is counted and dropped.
        m.d.comb += self.cmd.ready.eq(~busy)
        c = self.cmd.payload
        bad = (c.len == 0) | (c.addr + c.len > (1 << cfg.addr_bits))
        with m.If(self.cmd.valid & self.cmd.ready):
            with m.If(bad):
                m.d.sync += self.counters.rejected.eq(self.counters.rejected + 1)
            with m.Else():
                m.d.sync += [busy.eq(1), addr.eq(c.addr), left.eq(c.len)]

        # Requests: one burst at a time, once the buffer has room for all of its words.
        # While a request waits, ``reserved`` only falls, so ``valid`` never drops.
        room = reserved + size <= cfg.buffer
        m.d.comb += [
            self.req.valid.eq(busy & room),
            self.req.payload.addr.eq(addr),
            self.req.payload.len.eq(size),
        ]
        issue = self.req.valid & self.req.ready
        with m.If(issue):
            m.d.sync += [addr.eq(addr + size), left.eq(left - size)]
            with m.If(left == size):
                m.d.sync += busy.eq(0)

        # The buffer.
        wiring.connect(m, wiring.flipped(self.rdata), buf.w_stream)
        wiring.connect(m, buf.r_stream, wiring.flipped(self.o))
        out = self.o.valid & self.o.ready
        m.d.sync += reserved.eq(reserved + Mux(issue, size, 0) - out)

        if platform == "formal":
            # The memory answers only what was asked (``asked``: words requested and not yet
            # answered); the reservation is what it claims to be, the words asked and those
            # in the buffer, never past the buffer's depth.
            asked = Signal(range(cfg.buffer + 1))
            answered = self.rdata.valid & self.rdata.ready
            m.d.sync += asked.eq(asked + Mux(issue, size, 0) - answered)
            m.d.comb += [
                Assume(~self.rdata.valid | (asked != 0)),
                Assert(reserved <= cfg.buffer, "fetch: reserved past the buffer"),
                Assert(reserved == asked + buf.level,
                       "fetch: reserved is not the words asked plus those buffered"),
            ]
        return m
