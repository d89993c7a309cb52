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

from amaranth.hdl import Array, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .kvcache_banks import Banks
from .kvcache_linereader import LineReader
from .kvcache_pages import PageAllocator, table_address
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


def _index(n: int) -> range:
    """The shape of an index below ``n``, at least one bit wide."""
    return range(max(n, 2))


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
        H, PT, TL, PL = cfg.kv_heads, cfg.page_tokens, cfg.token_lines, cfg.page_lines
        P, S, B = cfg.pages, cfg.max_seqs, cfg.append_beats
        log_pt = PT.bit_length() - 1
        head_lines = PT * TL

        m.submodules.banks = banks = Banks(cfg.banks, cfg.word_bits, cfg.bank_words)
        m.submodules.pages = pages = PageAllocator(S, P)
        page = pages.page.shape()
        r = Signal(request_layout())
        m.submodules.reader = reader = LineReader(cfg, request_layout(),
                                                  pages.walk.addr.shape(), page)
        # The request engine's ports on the page allocator and the banks.
        tab_c, tab_w, ref_r, ref_w = pages.entry, pages.set, pages.ref, pages.ref_set
        bank_r, bank_w = banks.read, banks.write
        wiring.connect(m, reader.walk, pages.walk)
        wiring.connect(m, reader.rd, wiring.flipped(self.rd))
        # The read engine owns the banks' read port except while a page is copied.
        m.d.comb += [bank_r.addr.eq(reader.banks.addr), bank_r.en.eq(reader.banks.en),
                     reader.banks.data.eq(bank_r.data), reader.req.eq(r)]

        # Per-sequence state.
        active = Signal(S)
        length = Array(Signal(TOKEN_BITS, name=f"length{s}") for s in range(S))
        free = pages.free
        m.d.comb += self.free_pages.eq(free)

        status = Signal(Status)
        out_seq = Signal(SEQ_BITS)
        out_len = Signal(TOKEN_BITS)
        seq_ok = Signal()
        seq_len = Signal(TOKEN_BITS)
        m.d.comb += [
            seq_ok.eq((r.seq < S) & active.bit_select(r.seq[: max(1, (S - 1).bit_length())], 1)),
            seq_len.eq(length[r.seq]),
        ]
        # The lowest free sequence slot, registered (off the decode path): ``active`` changes
        # only in the cycle before an answer, so this is current again by the next decode.
        slot_free = Signal()
        new_id = Signal(range(max(S, 2)))
        m.d.sync += slot_free.eq(0)
        for s in reversed(range(S)):
            with m.If(~active[s]):
                m.d.sync += [slot_free.eq(1), new_id.eq(s)]
        dst = Signal.like(new_id)

        # Walks over a sequence's pages (free, fork), and appends.
        pg = Signal(range(P + 1))
        npages = Signal(range(P + 1))
        page_old = Signal(page)
        page_w = Signal(page)
        ref_old = Signal(pages.ref_shape)
        cow = Signal()
        slot = Signal(_index(PT))
        pidx = Signal(range(P + 1))
        beat = Signal(range(B))
        kvh = Signal(range(max(cfg.sections * H, 2)))
        j = Signal(_index(TL))
        copy = Signal(range(PL + 1))
        engine_busy = reader.busy
        read_wait = Signal()

        ceil_pages = lambda tokens: (tokens + PT - 1) >> log_pt  # noqa: E731

        m.d.comb += [
            self.resp.payload.status.eq(status),
            self.resp.payload.seq.eq(out_seq),
            self.resp.payload.length.eq(out_len),
            self.resp.payload.free.eq(free),
        ]

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
                m.d.sync += [out_seq.eq(r.seq), out_len.eq(Mux(seq_ok, seq_len, 0)),
                             pg.eq(0), beat.eq(0), kvh.eq(0), j.eq(0)]
                with m.If(engine_busy & (r.op != Op.APPEND)):
                    m.d.comb += read_wait.eq(1)
                with m.Else():
                    with m.Switch(r.op):
                        with m.Case(Op.ALLOC):
                            with m.If(~slot_free):
                                finish(Status.TOO_MANY)
                            with m.Else():
                                m.d.sync += [active.bit_select(new_id, 1).eq(1),
                                             length[new_id].eq(0), out_seq.eq(new_id),
                                             out_len.eq(0)]
                                finish(Status.OK)
                        with m.Case(Op.FREE):
                            with m.If(~seq_ok):
                                finish(Status.NO_SEQ)
                            with m.Else():
                                m.d.sync += npages.eq(ceil_pages(seq_len))
                                m.next = "W_TAB"
                        with m.Case(Op.FORK):
                            with m.If(~seq_ok):
                                finish(Status.NO_SEQ)
                            with m.Elif(r.count > seq_len):
                                finish(Status.BAD_RANGE)
                            with m.Elif(~slot_free):
                                finish(Status.TOO_MANY)
                            with m.Else():
                                m.d.sync += [npages.eq(ceil_pages(r.count)), dst.eq(new_id)]
                                m.next = "W_TAB"
                        with m.Case(Op.APPEND):
                            m.d.sync += [slot.eq(seq_len[:log_pt] if log_pt else 0),
                                         pidx.eq(seq_len >> log_pt)]
                            m.d.comb += tab_c.addr.eq(table_address(P, r.seq, seq_len >> log_pt))
                            with m.If(~seq_ok):
                                m.d.sync += status.eq(Status.NO_SEQ)
                                m.next = "DRAIN"
                            with m.Else():
                                m.next = "A_REF"
                        with m.Case(Op.READ):
                            with m.If(~seq_ok):
                                finish(Status.NO_SEQ)
                            with m.Elif(r.head >= H):
                                finish(Status.BAD_HEAD)
                            with m.Elif((r.count == 0) | (r.start + r.count > seq_len)
                                        | (r.line0 >= TL) | (r.line0 + r.nlines > TL)):
                                finish(Status.BAD_RANGE)
                            with m.Else():
                                m.d.comb += reader.start.eq(1)
                                finish(Status.OK)
                        with m.Default():
                            finish(Status.BAD_OP)

            # Free and fork: for each page, read its table entry, then its reference count,
            # then write the count back (a freed page that drops to 0 goes on the free list).
            with m.State("W_TAB"):
                m.d.comb += tab_c.addr.eq(table_address(P, r.seq, pg))
                with m.If(pg == npages):
                    with m.If(r.op == Op.FREE):
                        m.d.sync += [active.bit_select(r.seq[: len(new_id)], 1).eq(0),
                                     length[r.seq].eq(0), out_len.eq(0)]
                    with m.Else():
                        m.d.sync += [active.bit_select(dst, 1).eq(1), length[dst].eq(r.count),
                                     out_seq.eq(dst), out_len.eq(r.count)]
                    finish(Status.OK)
                with m.Else():
                    m.next = "W_REF"
            with m.State("W_REF"):
                m.d.comb += ref_r.addr.eq(tab_c.data)
                m.d.sync += page_old.eq(tab_c.data)
                with m.If(r.op == Op.FORK):
                    m.d.comb += [tab_w.addr.eq(dst * P + pg), tab_w.data.eq(tab_c.data),
                                 tab_w.en.eq(1)]
                m.next = "W_UPD"
            with m.State("W_UPD"):
                m.d.comb += [ref_w.addr.eq(page_old), ref_w.en.eq(1)]
                with m.If(r.op == Op.FORK):
                    m.d.comb += ref_w.data.eq(ref_r.data + 1)
                with m.Else():
                    m.d.comb += ref_w.data.eq(ref_r.data - 1)
                    with m.If(ref_r.data == 1):
                        m.d.comb += [pages.release.eq(1), pages.released.eq(page_old)]
                m.d.sync += pg.eq(pg + 1)
                m.next = "W_TAB"

            # Append: the page of the new token, its reference count, then a new page when the
            # token opens a page or its page is shared (copy-on-write), then the lines.
            with m.State("A_REF"):
                m.d.comb += ref_r.addr.eq(tab_c.data)
                m.d.sync += page_old.eq(tab_c.data)
                m.next = "A_DEC"
            with m.State("A_DEC"):
                # A copy-on-write waits for the read engine: the copy needs the banks' read
                # port, and the page table must not point a read at the page before it is
                # copied. The reference count stays addressed while waiting.
                m.d.comb += ref_r.addr.eq(page_old)
                shared = (slot != 0) & (ref_r.data > 1)
                need = (slot == 0) | shared
                m.d.sync += [ref_old.eq(ref_r.data), cow.eq(shared), page_w.eq(page_old),
                             copy.eq(0)]
                with m.If(need & (free == 0)):
                    m.d.sync += status.eq(Status.FULL)
                    m.next = "DRAIN"
                with m.Elif(shared & engine_busy):
                    m.d.comb += read_wait.eq(1)
                with m.Elif(need):
                    m.next = "A_ALLOC"
                with m.Else():
                    m.next = "WRITE"
            with m.State("A_ALLOC"):
                new_page = pages.page
                m.d.comb += [pages.take.eq(1),
                             ref_w.addr.eq(new_page), ref_w.data.eq(1), ref_w.en.eq(1),
                             tab_w.addr.eq(r.seq * P + pidx), tab_w.data.eq(new_page),
                             tab_w.en.eq(1)]
                m.d.sync += page_w.eq(new_page)
                with m.If(cow):
                    m.next = "COPY"
                with m.Else():
                    m.next = "WRITE"
            with m.State("COPY"):
                with m.If(copy == 0):
                    m.d.comb += [ref_w.addr.eq(page_old), ref_w.data.eq(ref_old - 1),
                                 ref_w.en.eq(1)]
                m.d.comb += [bank_r.addr.eq(page_old * PL + copy), bank_r.en.eq(1),
                             bank_w.addr.eq(page_w * PL + copy - 1), bank_w.data.eq(bank_r.data),
                             bank_w.en.eq(copy != 0)]
                m.d.sync += copy.eq(copy + 1)
                with m.If(copy == PL):
                    m.next = "WRITE"
            with m.State("WRITE"):
                m.d.comb += self.wd.ready.eq(1)
                row = page_w * PL + kvh * head_lines + slot * TL + j
                m.d.comb += [bank_w.addr.eq(row), bank_w.data.eq(self.wd.payload),
                             bank_w.en.eq(self.wd.valid)]
                with m.If(self.wd.valid):
                    m.d.sync += [beat.eq(beat + 1), j.eq(Mux(j == TL - 1, 0, j + 1))]
                    with m.If(j == TL - 1):
                        m.d.sync += kvh.eq(kvh + 1)
                    with m.If(beat == B - 1):
                        m.d.sync += [length[r.seq].eq(seq_len + 1), out_len.eq(seq_len + 1),
                                     status.eq(Status.OK)]
                        m.next = "RESP"
            with m.State("DRAIN"):
                m.d.comb += self.wd.ready.eq(1)
                with m.If(self.wd.valid):
                    m.d.sync += beat.eq(beat + 1)
                    with m.If(beat == B - 1):
                        m.next = "RESP"

            with m.State("RESP"):
                m.d.comb += self.resp.valid.eq(1)
                with m.If(self.resp.valid & self.resp.ready):
                    m.next = "IDLE"

        idle = fsm.ongoing("IDLE") & ~self.req.valid
        stall = Signal()
        m.d.comb += stall.eq(
            ((fsm.ongoing("WRITE") | fsm.ongoing("DRAIN")) & ~self.wd.valid)
            | (fsm.ongoing("RESP") & ~self.resp.ready)
        )
        counts = {
            "busy": ~idle & ~stall & ~read_wait,
            "stalls": stall,
            "idle": idle,
            "read_waits": read_wait,
            "read_cycles": engine_busy,
            "read_stalls": reader.stall,
            "reads": self.rd.valid & self.rd.ready,
            "writes": fsm.ongoing("WRITE") & self.wd.valid,
            "copies": fsm.ongoing("COPY") & (copy != 0),
        }
        count(m, self.counters, counts)
        return m
