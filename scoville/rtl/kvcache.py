"""The KV-cache scratchpad: banked on-chip SRAM with paged allocation and prefix sharing.

Storage is ``banks`` SRAMs (``amaranth.lib.memory``, one-cycle read latency) of ``bank_words``
words of ``word_bits`` each, addressed together: row ``r`` of every bank is one *line* of
``banks * word_bits`` bits, so every line read or written touches each bank exactly once and no
access can conflict. The cache is cut into pages of ``page_tokens`` tokens; a page holds, for
each of K and V and each KV head, its tokens one after another, each token's head vector padded
to whole lines (``docs/kvcache.md`` draws it)::

    line in page = ((kv * kv_heads + head) * page_tokens + slot) * token_lines + j

(with ``k_only``, K alone: ``kv`` is 0). A read may take a window of each token's lines
(``line0``, ``nlines``): a column tile of a head vector, or with ``k_only`` the value's part of
MLA's latent vector.

A read of one head streams its tokens' lines in token order, one line per cycle, so the banks
deliver all their words every cycle; a page boundary costs nothing (the page table's next entry
is read a cycle ahead).

Two engines share the banks. The *request engine* takes requests in order and answers each
with one beat on ``resp``; a read that passes its checks is answered at once and handed to the
*read engine*, which streams its lines on ``rd`` (``last`` on the final one) through the banks'
read ports while the request engine goes on. Priority: an append runs beside a streaming read
(it writes through the banks' write ports, into lines no read can cover: a later token of a
sequence, or a page no other sequence holds); an append that must copy a shared page waits
until the read has finished (the copy needs the read ports, and the page table must not send
the read to the page before it is copied); every other request waits in decode until the read
engine is idle, so pages are never freed or re-shared under a read. Every append takes its
``2 * kv_heads * token_lines`` lines from ``wd`` (K head 0, K head 1, ..., V head 0, ...), also
when it fails, so the streams stay in step. A failing request changes nothing.

The exact cost of each request in cycles is :mod:`scoville.sim.cycles.kvcache`.
"""

import functools
from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .kvcache_append import Appender
from .kvcache_banks import Banks
from .kvcache_linereader import LineReader
from .kvcache_pages import PageAllocator
from .kvcache_refs import RefWalk
from .kvcache_seqs import SequenceTable
from .lib.codes import names
from .lib.counters import count, counter_layout
from .lib.formats import ELEMENT_BITS, MX_BLOCK
from .lib.params import ParamError, check_choice, check_int, param

__all__ = [
    "COUNTERS", "FORMATS", "OPS", "STATUS", "KvCache", "KvCacheConfig", "Op", "Status",
    "request_layout",
]

#: The storage formats (their widths: :data:`~scoville.rtl.lib.formats.ELEMENT_BITS`).
FORMATS = ("bf16", "fp8_e4m3", "mxfp4")

class Op(enum.IntEnum, shape=3):
    """Request opcodes (the codes 5 to 7 are answered ``BAD_OP``)."""
    ALLOC = 0
    FREE = 1
    APPEND = 2
    READ = 3
    FORK = 4


class Status(enum.IntEnum, shape=3):
    """Response status codes, in the order they are checked."""
    OK = 0
    BAD_OP = 1
    NO_SEQ = 2
    BAD_HEAD = 3
    BAD_RANGE = 4
    TOO_MANY = 5
    FULL = 6


#: ``{name: Op member}``, the names in lower case.
OPS = names(Op)
#: ``{name: Status member}``, the names in lower case.
STATUS = names(Status)

SEQ_BITS = 8
HEAD_BITS = 8
TOKEN_BITS = 16
#: Width of a read's line window fields (``token_lines`` is at most 1024 * 16 / 8).
LINE_BITS = 12
COUNTER_BITS = 32

_PAGE_TOKENS = tuple(1 << k for k in range(9))
_WORD_BITS = (8, 16, 32, 64, 128)


def request_layout() -> data.StructLayout:
    """The ``req`` payload: ``op``; ``seq`` (free, append, read; the source of a fork);
    ``kv`` (read: 0 K, 1 V; with ``k_only``, V reads take K's lines); ``head`` (read);
    ``start`` (read: first token); ``count`` (read: tokens; fork: tokens shared); ``line0``,
    ``nlines`` (read: of each token, the lines ``line0 .. line0 + nlines - 1``; ``nlines`` = 0:
    to the token's end)."""
    return data.StructLayout({
        "op": Op, "seq": unsigned(SEQ_BITS), "kv": unsigned(1),
        "head": unsigned(HEAD_BITS), "start": unsigned(TOKEN_BITS), "count": unsigned(TOKEN_BITS),
        "line0": unsigned(LINE_BITS), "nlines": unsigned(LINE_BITS),
    })


def response_layout() -> data.StructLayout:
    """The ``resp`` payload: ``status``; ``seq`` (the new sequence of an alloc or fork, else the
    request's); ``length`` (that sequence's tokens after the request, 0 when unknown);
    ``free`` (free pages after the request)."""
    return data.StructLayout({
        "status": Status, "seq": unsigned(SEQ_BITS), "length": unsigned(TOKEN_BITS),
        "free": unsigned(TOKEN_BITS),
    })


@dataclass(frozen=True)
class KvCacheConfig:
    """Parameters of :class:`KvCache` (and of its reference and timed models).

    Attributes
    ----------
    banks : int
        SRAM banks; a line is one word of each.
    word_bits : int
        Bits per bank word.
    bank_words : int
        Words per bank; the cache holds ``bank_words // page_lines`` pages.
    page_tokens : int
        Tokens per page (a power of two).
    max_seqs : int
        Sequences alive at once.
    kv_heads, head_dim : int
        KV heads per token and elements per head vector.
    kv_fmt : str
        Storage format of K and V: ``bf16``, ``fp8_e4m3`` or ``mxfp4`` (E2M1 elements, then one
        E8M0 scale per 32 elements).
    k_only : int
        1: only K is stored (an append takes K's lines alone) and a read of V takes K's lines:
        MLA's latent vector, whose first elements are the value.
    """

    banks: int = param(4, "1..64", "SRAM banks")
    word_bits: int = param(32, "8, 16, 32, 64, 128", "bits per bank word")
    bank_words: int = param(1024, "16..65536", "words per bank")
    page_tokens: int = param(4, "1, 2, 4, ..., 256", "tokens per page")
    max_seqs: int = param(4, "1..64", "sequences alive at once")
    kv_heads: int = param(2, "1..64", "KV heads")
    head_dim: int = param(32, "1..1024 (mxfp4: a multiple of 32)", "elements per head")
    kv_fmt: str = param("bf16", "bf16, fp8_e4m3, mxfp4", "storage format of K and V")
    k_only: int = param(0, "0, 1", "1: K alone is stored, V reads take K's lines (MLA)")

    def __post_init__(self):
        check_int("banks", self.banks, 1, 64)
        check_int("word_bits", self.word_bits, 8, 128, choices=_WORD_BITS)
        check_int("bank_words", self.bank_words, 16, 65536)
        check_int("page_tokens", self.page_tokens, 1, 256, choices=_PAGE_TOKENS)
        check_int("max_seqs", self.max_seqs, 1, 64)
        check_int("kv_heads", self.kv_heads, 1, 64)
        check_int("head_dim", self.head_dim, 1, 1024)
        check_choice("kv_fmt", self.kv_fmt, FORMATS)
        check_int("k_only", self.k_only, 0, 1)
        if self.kv_fmt == "mxfp4" and self.head_dim % MX_BLOCK:
            raise ParamError(
                f"parameter 'head_dim' = {self.head_dim} is not allowed with kv_fmt=mxfp4; "
                f"allowed: a multiple of {MX_BLOCK}"
            )
        if self.pages * self.page_tokens >= 1 << TOKEN_BITS:
            raise ParamError(
                f"parameter 'bank_words' = {self.bank_words} holds {self.pages * self.page_tokens}"
                f" tokens; allowed: fewer than {1 << TOKEN_BITS} tokens (lengths are "
                f"{TOKEN_BITS} bits)"
            )
        if self.pages < 2:
            raise ParamError(
                f"parameter 'bank_words' = {self.bank_words} holds fewer than 2 pages of "
                f"{self.page_lines} lines; allowed: >= {2 * self.page_lines}"
            )
    @property
    def bits(self) -> int:
        """Bits per element."""
        return ELEMENT_BITS[self.kv_fmt]

    @functools.cached_property
    def token_bits(self) -> int:
        """Bits of one head vector (mxfp4: elements and scales)."""
        scales = self.head_dim // MX_BLOCK * 8 if self.kv_fmt == "mxfp4" else 0
        return self.head_dim * self.bits + scales

    @functools.cached_property
    def line_bits(self) -> int:
        return self.banks * self.word_bits

    @functools.cached_property
    def token_lines(self) -> int:
        """Lines per head vector (the vector is zero-padded to whole lines)."""
        return -(-self.token_bits // self.line_bits)

    @property
    def sections(self) -> int:
        """Vectors stored per token and head: K and V, or K alone (``k_only``)."""
        return 1 if self.k_only else 2

    @functools.cached_property
    def page_lines(self) -> int:
        return self.sections * self.kv_heads * self.page_tokens * self.token_lines

    @functools.cached_property
    def pages(self) -> int:
        return self.bank_words // self.page_lines

    @property
    def max_tokens(self) -> int:
        """Tokens one sequence can hold (every page); at most ``bank_words`` (a token takes at
        least a line), so lengths fit ``TOKEN_BITS``."""
        return self.pages * self.page_tokens

    @functools.cached_property
    def append_beats(self) -> int:
        """``wd`` lines per append: K then V (K alone with ``k_only``), each head in order."""
        return self.sections * self.kv_heads * self.token_lines

    @property
    def packing(self) -> float:
        """Fraction of a token's lines that carry data (the rest is padding)."""
        return self.token_bits / (self.token_lines * self.line_bits)


#: The counters: the fields (``COUNTER_BITS`` each) of the ``counters`` port, in order.
COUNTERS = ("busy", "stalls", "idle", "read_waits", "read_cycles", "read_stalls", "reads",
            "writes", "copies")


class KvCache(wiring.Component):
    """The KV-cache scratchpad (see the module docstring).

    Attributes
    ----------
    req : In(stream.Signature(request_layout()))
        Requests (``OPS``).
    wd : In(stream.Signature(ArrayLayout(word_bits, banks)))
        Append data, one line per beat.
    rd : Out(stream.Signature(StructLayout(data, last)))
        Read data, one line per beat, token by token; ``last`` on a read's final line.
    resp : Out(stream.Signature(response_layout()))
        One answer per request (``STATUS``).
    free_pages : Out
        Pages on the free list.
    counters : Out(counter_layout(COUNTERS))
        Since reset, 32 bits each: ``reads``, ``writes``, ``copies`` (lines handed over on
        ``rd``, written from ``wd``, copied by copy-on-write); ``busy``, ``stalls``, ``idle``,
        ``read_waits`` (cycles of the request engine: working; waiting on ``wd`` data or
        ``resp`` ready; waiting for a request; waiting for the read engine: see the module
        docstring); ``read_cycles``, ``read_stalls`` (cycles of the read engine: busy, a line
        to issue or to hand over; of those, waiting on ``rd`` ready).
    """

    def __init__(self, config: KvCacheConfig):
        self._config = config
        line = data.ArrayLayout(unsigned(config.word_bits), config.banks)
        super().__init__({
            "req": In(stream.Signature(request_layout())),
            "wd": In(stream.Signature(line)),
            "rd": Out(stream.Signature(data.StructLayout({"data": line, "last": 1}))),
            "resp": Out(stream.Signature(response_layout())),
            "free_pages": Out(range(config.pages + 1)),
            "counters": Out(counter_layout(dict.fromkeys(COUNTERS, COUNTER_BITS))),
        })

    @property
    def config(self) -> KvCacheConfig:
        return self._config

    def elaborate(self, platform):
        cfg = self._config
        m = Module()
        PT, P, S = cfg.page_tokens, cfg.pages, cfg.max_seqs
        log_pt = PT.bit_length() - 1
        m.submodules.banks = banks = Banks(cfg.banks, cfg.word_bits, cfg.bank_words)
        m.submodules.pages = pages = PageAllocator(S, P)
        page = pages.page.shape()
        m.submodules.seqs = seqs = SequenceTable(S, SEQ_BITS, TOKEN_BITS)
        m.submodules.reader = reader = LineReader(cfg, request_layout(),
                                                  pages.walk.addr.shape(), page)
        m.submodules.walk = walk = RefWalk(pages=P, seqs=S, seq_bits=SEQ_BITS)
        m.submodules.append = app = Appender(cfg, seq_bits=SEQ_BITS, token_bits=TOKEN_BITS)
        r = Signal(request_layout())
        wiring.connect(m, reader.walk, pages.walk)
        wiring.connect(m, reader.rd, wiring.flipped(self.rd))
        wiring.connect(m, wiring.flipped(self.wd), app.wd)
        # The page table and the reference counts: the walk's and the append's ports, each
        # driving them only in its own states (OR-ed), the read engine its own table port.
        for port in ("entry", "set", "ref", "ref_set"):
            theirs, a, b = getattr(pages, port), getattr(walk, port), getattr(app, port)
            for name, member in theirs.signature.members.items():
                if member.flow == In:  # the allocator's input: driven by either unit
                    m.d.comb += getattr(theirs, name).eq(getattr(a, name) | getattr(b, name))
                else:
                    m.d.comb += [getattr(a, name).eq(getattr(theirs, name)),
                                 getattr(b, name).eq(getattr(theirs, name))]
        m.d.comb += [pages.take.eq(app.take), app.page.eq(pages.page),
                     pages.release.eq(walk.release), pages.released.eq(walk.released),
                     app.free.eq(pages.free), self.free_pages.eq(pages.free)]
        # The banks: the read engine reads except while a page is copied; the append writes.
        bank_r = banks.read
        with m.If(app.bank_read):
            m.d.comb += [bank_r.addr.eq(app.bank_r.addr), bank_r.en.eq(1)]
        with m.Else():
            m.d.comb += [bank_r.addr.eq(reader.banks.addr), bank_r.en.eq(reader.banks.en)]
        m.d.comb += [reader.banks.data.eq(bank_r.data), app.bank_r.data.eq(bank_r.data),
                     reader.req.eq(r)]
        wiring.connect(m, app.bank_w, banks.write)

        status = Signal(Status)
        out_seq = Signal(SEQ_BITS)
        out_len = Signal(TOKEN_BITS)
        dst = Signal.like(seqs.new_id)  # a fork's new sequence
        m.d.comb += [seqs.seq.eq(r.seq), walk.seq.eq(r.seq), walk.fork.eq(r.op == Op.FORK),
                     walk.dst.eq(dst),
                     app.seq.eq(r.seq), app.length.eq(seqs.length),
                     app.engine_busy.eq(reader.busy),
                     self.resp.payload.status.eq(status), self.resp.payload.seq.eq(out_seq),
                     self.resp.payload.length.eq(out_len), self.resp.payload.free.eq(pages.free)]
        ceil_pages = lambda tokens: (tokens + PT - 1) >> log_pt  # noqa: E731
        read_wait = Signal()

        def finish(code):
            m.d.sync += status.eq(code)
            m.next = "RESP"

        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += self.req.ready.eq(1)
                with m.If(self.req.valid):
                    m.d.sync += r.eq(self.req.payload)
                    m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += [out_seq.eq(r.seq), out_len.eq(Mux(seqs.ok, seqs.length, 0))]
                with m.If(reader.busy & (r.op != Op.APPEND)):
                    m.d.comb += read_wait.eq(1)
                with m.Else():
                    self._decode(m, r, seqs, walk, app, reader, status, out_seq, out_len, dst,
                                 ceil_pages, finish)
            with m.State("WALK"):
                # Free and fork: the walk over the sequence's pages, then the table.
                with m.If(walk.done):
                    m.d.comb += seqs.set_active.eq(1)
                    with m.If(r.op == Op.FREE):
                        m.d.comb += [seqs.wseq.eq(r.seq), seqs.wactive.eq(0),
                                     seqs.set_length.eq(1), seqs.wlength.eq(0)]
                        m.d.sync += out_len.eq(0)
                    with m.Else():
                        m.d.comb += [seqs.wseq.eq(dst), seqs.wactive.eq(1),
                                     seqs.set_length.eq(1), seqs.wlength.eq(r.count)]
                        m.d.sync += [out_seq.eq(dst), out_len.eq(r.count)]
                    finish(Status.OK)
            with m.State("APPEND"):
                with m.If(app.full):
                    m.d.sync += status.eq(Status.FULL)
                with m.If(app.wrote):
                    m.d.comb += [seqs.wseq.eq(r.seq), seqs.set_length.eq(1),
                                 seqs.wlength.eq(seqs.length + 1)]
                    m.d.sync += [out_len.eq(seqs.length + 1), status.eq(Status.OK)]
                with m.If(app.done):
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += self.resp.valid.eq(1)
                with m.If(self.resp.valid & self.resp.ready):
                    m.next = "IDLE"

        idle = fsm.ongoing("IDLE") & ~self.req.valid
        stall = Signal()
        m.d.comb += stall.eq(
            app.wd_stall
            | (fsm.ongoing("RESP") & ~self.resp.ready)
        )
        wait = read_wait | app.read_wait
        count(m, self.counters, {
            "busy": ~idle & ~stall & ~wait,
            "stalls": stall,
            "idle": idle,
            "read_waits": wait,
            "read_cycles": reader.busy,
            "read_stalls": reader.stall,
            "reads": self.rd.valid & self.rd.ready,
            "writes": app.writes,
            "copies": app.copying,
        })
        return m

    def _decode(self, m, r, seqs, walk, app, reader, status, out_seq, out_len, dst, ceil_pages,
                finish):
        """The DECODE state once the request may go: its checks, and its work started or
        answered."""
        cfg = self._config
        with m.Switch(r.op):
            with m.Case(Op.ALLOC):
                with m.If(~seqs.slot_free):
                    finish(Status.TOO_MANY)
                with m.Else():
                    m.d.comb += [seqs.wseq.eq(seqs.new_id), seqs.set_active.eq(1),
                                 seqs.wactive.eq(1), seqs.set_length.eq(1),
                                 seqs.wlength.eq(0)]
                    m.d.sync += [out_seq.eq(seqs.new_id), out_len.eq(0)]
                    finish(Status.OK)
            with m.Case(Op.FREE):
                with m.If(~seqs.ok):
                    finish(Status.NO_SEQ)
                with m.Else():
                    m.d.comb += [walk.start.eq(1), walk.npages.eq(ceil_pages(seqs.length))]
                    m.next = "WALK"
            with m.Case(Op.FORK):
                with m.If(~seqs.ok):
                    finish(Status.NO_SEQ)
                with m.Elif(r.count > seqs.length):
                    finish(Status.BAD_RANGE)
                with m.Elif(~seqs.slot_free):
                    finish(Status.TOO_MANY)
                with m.Else():
                    m.d.comb += [walk.start.eq(1), walk.npages.eq(ceil_pages(r.count))]
                    m.d.sync += dst.eq(seqs.new_id)
                    m.next = "WALK"
            with m.Case(Op.APPEND):
                m.d.comb += [app.start.eq(1), app.drop.eq(~seqs.ok)]
                with m.If(~seqs.ok):
                    m.d.sync += status.eq(Status.NO_SEQ)
                m.next = "APPEND"
            with m.Case(Op.READ):
                with m.If(~seqs.ok):
                    finish(Status.NO_SEQ)
                with m.Elif(r.head >= cfg.kv_heads):
                    finish(Status.BAD_HEAD)
                with m.Elif((r.count == 0) | (r.start + r.count > seqs.length)
                            | (r.line0 >= cfg.token_lines)
                            | (r.line0 + r.nlines > cfg.token_lines)):
                    finish(Status.BAD_RANGE)
                with m.Else():
                    m.d.comb += reader.start.eq(1)
                    finish(Status.OK)
            with m.Default():
                finish(Status.BAD_OP)
