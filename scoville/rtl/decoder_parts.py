"""The ``decoder`` block's own parts (``docs/decoder.md``): the line reader, the weight-vector
loader, the placer of the projections' column tiles, and the sequencer. ``config`` is the
:class:`~scoville.rtl.decoder.DecoderConfig`."""

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .attention_control import Op as AttnOp
from .kvcache import SEQ_BITS, TOKEN_BITS
from .lib.formats import MX_BLOCK

__all__ = ["INDEX_BITS", "LINE", "AttnOp", "Joiner", "LineReader", "Op", "OutWalker", "Placer",
           "Sequencer", "Splitter", "Status", "VecGather", "VecLoader", "VecWalker",
           "command_layout", "line_layout", "line_splitter", "response_layout", "walk_layout",
           "write_layout"]

#: Values of a line of the activation memory (FP32 each).
LINE = MX_BLOCK


class Op(enum.IntEnum, shape=4):
    """A command's operation (``docs/decoder.md`` says what each reads and writes); the codes
    past ``ROUTER`` are refused (``BAD_OP``)."""
    IN = 0
    OUT = 1
    ADD = 2
    NORM = 3
    LINEAR = 4
    MOE = 5
    ROPE = 6
    ATTN = 7
    ARGMAX = 8
    GLU = 9
    ROUTER = 10


class Status(enum.IntEnum, shape=3):
    """Status of a command: done, or refused by the engine (and nothing changed: ``BAD_OP``
    for an unknown op), or an ``ATTN``'s answer from the attention block (its cache's codes:
    ``docs/attention.md``)."""
    OK = 0
    BAD_RANGE = 1
    BAD_SHAPE = 2
    BAD_OP = 3
    NO_SEQ = 4
    BAD_HEAD = 5
    TOO_MANY = 6
    FULL = 7


def line_layout() -> data.ArrayLayout:
    """A line: 32 FP32 values, value 0 lowest."""
    return data.ArrayLayout(32, LINE)


def command_layout(config) -> data.StructLayout:
    """A ``cmd`` beat: ``op``; the activation lines ``a``, ``b`` (read) and ``dst`` (written);
    ``count`` (lines, or tokens for ``NORM``, ``LINEAR``, ``MOE``, ``ROPE`` and ``ATTN``);
    ``LINEAR``'s ``k``, ``n``, ``bias``, ``stride`` and ``row`` (lines between tokens read and
    written; 0: packed); ``NORM``'s ``k`` (values a token; 0: ``hidden``) and ``row`` (lines
    between tokens; 0: packed); the memory word ``addr`` of ``NORM``'s,
    ``LINEAR``'s, ``MOE``'s and ``ROUTER``'s weights and ``ROPE``'s table rows; ``ROPE``'s ``heads``
    (vectors a token), ``stride`` and ``off`` (values: between a token's vectors, and to its
    first) and ``row`` (lines: between tokens); ``ATTN``'s ``aop`` (the attention block's
    command), ``seq``, ``heads`` and ``value`` (a sink's head and logit, a step's window),
    with ``a``, ``row``, ``off`` and ``dst`` for its vectors; ``ARGMAX``'s ``a`` and ``count``
    (a token's logits, ``argmax.vocab / 32`` lines) (``docs/decoder.md``)."""
    line = config.line_bits
    return data.StructLayout({"op": Op, "a": line, "b": line, "dst": line, "count": 16,
                              "k": 15, "n": 21, "addr": config.linear.addr_bits, "bias": 1,
                              "heads": 8, "stride": 16, "off": 16, "row": 16,
                              "aop": AttnOp, "seq": SEQ_BITS, "value": 32})


#: Bits of ``ARGMAX``'s answer: a token of the argmax block's largest vocabulary.
INDEX_BITS = 18


def response_layout() -> data.StructLayout:
    """A ``resp`` beat: the command's ``status``; an ``ATTN``'s ``seq`` (an ``ALLOC``'s new
    sequence) and ``length`` (the sequence's tokens after it) from the attention block's
    answer; an ``ARGMAX``'s ``index`` (the chosen token); 0 for the other ops."""
    return data.StructLayout({"status": Status, "seq": SEQ_BITS, "length": TOKEN_BITS,
                              "index": INDEX_BITS})


def write_layout(config) -> data.StructLayout:
    """A write of the activation memory: a line's address, the lanes written, the values."""
    return data.StructLayout({"addr": config.line_bits, "mask": LINE, "data": line_layout()})


class Splitter(wiring.Component):
    """A beat of ``i`` into ``pieces`` beats of ``o`` (piece 0 the lowest bits, first).

    A pass-through by default: each piece offered with the beat, the beat taken with its last
    piece. ``held``: the beat is taken into a register when the register is empty or its last
    piece is taken, and its pieces offered from the next cycle (the producer is not held while
    the pieces go: a stalling pipeline before it keeps its rate).

    Attributes
    ----------
    i : In(stream.Signature(whole))
        ``whole`` (a shape of ``pieces`` times the piece's bits; plain bits by default).
    o : Out(stream.Signature(piece))
    """

    def __init__(self, piece, pieces: int, whole=None, *, held: bool = False):
        self._pieces, self._held = pieces, held
        width = Shape.cast(piece).width
        super().__init__({"i": In(stream.Signature(whole or pieces * width)),
                          "o": Out(stream.Signature(piece))})

    def elaborate(self, platform):
        m = Module()
        pieces = self._pieces
        width = Value.cast(self.o.payload).shape().width
        idx = Signal(range(max(pieces, 2)))
        last = idx == pieces - 1
        flat = Value.cast(self.i.payload)
        if self._held:
            flat = Signal.like(flat, name="beat")
            full = Signal()
            m.d.comb += [self.o.valid.eq(full),
                         self.i.ready.eq(~full | (self.o.ready & last))]
            with m.If(self.o.valid & self.o.ready & last):
                m.d.sync += full.eq(0)
            with m.If(self.i.valid & self.i.ready):
                m.d.sync += [full.eq(1), flat.eq(self.i.payload)]
        else:
            m.d.comb += [self.o.valid.eq(self.i.valid),
                         self.i.ready.eq(self.o.ready & last)]
        m.d.comb += Value.cast(self.o.payload).eq(flat.word_select(idx, width))
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += idx.eq(Mux(last, 0, idx + 1))
        return m


def line_splitter(lanes: int) -> Splitter:
    """A line into ``32 / lanes`` beats of ``lanes`` values, value 0 first (one value: its
    bare 32 bits)."""
    beat = 32 if lanes == 1 else data.ArrayLayout(32, lanes)
    return Splitter(beat, LINE // lanes, line_layout())


class Joiner(wiring.Component):
    """``n`` beats of ``width`` bits into one of ``n * width`` (beat 0 the lowest bits): a
    pass-through on the last (the first ``n - 1`` are taken at once into registers; the last
    is offered on ``o`` with them and taken when ``o`` is).

    Attributes
    ----------
    i : In(stream.Signature(width))
    o : Out(stream.Signature(n * width))
    """

    def __init__(self, width: int, n: int):
        self._width, self._n = width, n
        super().__init__({"i": In(stream.Signature(width)),
                          "o": Out(stream.Signature(n * width))})

    def elaborate(self, platform):
        m = Module()
        n = self._n
        held = [Signal(self._width, name=f"held{j}") for j in range(n - 1)]
        k = Signal(range(max(n, 2)))
        final = k == n - 1
        m.d.comb += [self.o.valid.eq(self.i.valid & final),
                     self.o.payload.eq(Cat(*held, self.i.payload)),
                     self.i.ready.eq(~final | self.o.ready)]
        with m.If(self.i.valid & self.i.ready):
            for j, reg in enumerate(held):
                with m.If(k == j):
                    m.d.sync += reg.eq(self.i.payload)
            m.d.sync += k.eq(Mux(final, 0, k + 1))
        return m


class LineReader(wiring.Component):
    """Reads ``count`` lines of a memory with a synchronous read port and offers them on
    ``o``, in order: ``per`` lines a token, token ``t``'s from line ``base + t * stride`` (a
    ``stride`` of ``per``: consecutive lines). A cycle with ``start`` high takes ``base``,
    ``count``, ``per`` and ``stride``; line 0 is offered from the next cycle, each next line
    from the cycle after the previous one is taken. ``addr`` drives the read port (the line
    to be offered next cycle); ``index`` is the offered line's place in its token (and
    ``index_next`` the next one's).

    Attributes
    ----------
    start : In(1)
    base : In(line address)
    count, per, stride : In(16)
    addr : Out(line address)
    data : In(line_layout())
    o : Out(stream.Signature(line_layout()))
    index, index_next : Out(16)
    """

    def __init__(self, line_bits: int):
        super().__init__({
            "start": In(1), "base": In(line_bits), "count": In(16), "per": In(16),
            "stride": In(16), "addr": Out(line_bits), "data": In(line_layout()),
            "o": Out(stream.Signature(line_layout())),
            "index": Out(16), "index_next": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        cur, tline = Signal.like(self.addr), Signal.like(self.addr)   # the line; its token's
        left, per, stride = Signal(16), Signal(16), Signal(16)
        fire = self.o.valid & self.o.ready
        wraps = self.index == per - 1
        nxt = Mux(wraps, tline + stride, cur + 1)
        m.d.comb += [self.o.valid.eq(left != 0), self.o.payload.eq(self.data),
                     self.addr.eq(Mux(self.start, self.base, Mux(fire, nxt, cur))),
                     self.index_next.eq(Mux(self.start, 0,
                                            Mux(fire, Mux(wraps, 0, self.index + 1),
                                                self.index)))]
        m.d.sync += self.index.eq(self.index_next)
        with m.If(fire):
            m.d.sync += [cur.eq(nxt), left.eq(left - 1)]
            with m.If(wraps):
                m.d.sync += tline.eq(tline + stride)
        with m.If(self.start):
            m.d.sync += [cur.eq(self.base), tline.eq(self.base), left.eq(self.count),
                         per.eq(self.per), stride.eq(self.stride)]
        return m


def walk_layout(line_bits: int) -> data.StructLayout:
    """A :class:`VecWalker` beat: a vector's ``line``, the ``lane`` of its first value (in a
    vector narrower than a line), and ``last``: the token's last line."""
    return data.StructLayout({"line": line_bits, "lane": 5, "last": 1})


class VecWalker(wiring.Component):
    """The lines of ``count`` tokens' vectors of ``dim`` values (a divisor of 32 or a multiple
    of it), token by token, vector by vector: token ``t``'s row starts at line ``base + t *
    row``; its vector ``h`` (of ``heads``) at value ``off + h * stride`` of the row, so in
    line ``base + t * row + (off + h * stride) // 32``, lane ``(off + h * stride) % 32``;
    one line a vector of ``dim`` up to 32 values (which stays within its line: ``off`` and
    ``stride`` multiples of ``dim``), ``dim / 32`` consecutive lines a wider one. A cycle
    with ``start`` high takes the walk (``count`` at least 1); its first line is offered on
    ``o`` from the next cycle, each next from the cycle after the previous one is taken.
    ``addr`` is the line offered next cycle (to drive a synchronous read port).

    Attributes
    ----------
    start : In(1)
    base : In(line address)
    count : In(16)
    heads : In(8)
    stride, off : In(16)
    row : In(16)
    addr : Out(line address)
    o : Out(stream.Signature(walk_layout(line_bits)))
    """

    def __init__(self, line_bits: int, dim: int):
        self._line_bits, self._dim = line_bits, dim
        super().__init__({
            "start": In(1), "base": In(line_bits), "count": In(16), "heads": In(8),
            "stride": In(16), "off": In(16), "row": In(16), "addr": Out(line_bits),
            "o": Out(stream.Signature(walk_layout(line_bits))),
        })

    def elaborate(self, platform):
        m = Module()
        L = max(self._dim // LINE, 1)          # lines a vector
        W = self._line_bits + 1
        count, heads = Signal(16), Signal(8)
        stride, off, row = Signal(16), Signal(16), Signal(16)
        busy = Signal()
        cur, tline = Signal(W), Signal(W)      # the line offered; the token's first line
        hp = Signal(22)                        # the vector's first value in its token's row
        j = Signal(range(max(L, 2)))
        h, t = Signal(8), Signal(16)
        last_line, last_head = j == L - 1, h == heads - 1
        fire = self.o.valid & self.o.ready
        step_hp = hp + stride
        nxt = Signal(W)
        with m.If(~last_line):
            m.d.comb += nxt.eq(cur + 1)
        with m.Elif(~last_head):
            m.d.comb += nxt.eq(tline + step_hp[5:])
        with m.Else():
            m.d.comb += nxt.eq(tline + row + off[5:])
        m.d.comb += [
            self.addr.eq(Mux(self.start, self.base + self.off[5:], Mux(fire, nxt, cur))),
            self.o.valid.eq(busy), self.o.payload.line.eq(cur),
            self.o.payload.lane.eq(hp[:5]), self.o.payload.last.eq(last_line & last_head),
        ]
        with m.If(fire):
            m.d.sync += [cur.eq(nxt), j.eq(Mux(last_line, 0, j + 1))]
            with m.If(last_line & ~last_head):
                m.d.sync += [h.eq(h + 1), hp.eq(step_hp)]
            with m.If(last_line & last_head):
                m.d.sync += [h.eq(0), hp.eq(off), tline.eq(tline + row), t.eq(t + 1)]
                with m.If(t == count - 1):
                    m.d.sync += busy.eq(0)
        with m.If(self.start):
            m.d.sync += [count.eq(self.count), heads.eq(self.heads), stride.eq(self.stride),
                         off.eq(self.off), row.eq(self.row), busy.eq(1), j.eq(0), h.eq(0),
                         t.eq(0), hp.eq(self.off), tline.eq(self.base),
                         cur.eq(self.base + self.off[5:])]
        return m


class OutWalker(wiring.Component):
    """The lines and lanes the attention block's outputs go to, in the order of its ``o``
    beats (row tile, KV head, the tile's tokens, the group's query heads): the output of
    token ``t``'s query head ``qh`` is ``v_dim`` values from value ``(t * q_heads + qh) *
    v_dim`` on, counted from line ``dst`` (a token's heads in order, token after token): one
    line's lanes for ``v_dim`` up to 32, else ``v_dim / 32`` lines. A cycle with ``start``
    high takes ``dst`` and the step's ``count`` tokens (at least 1); the first place is
    offered on ``o`` from the next cycle, each next from the cycle after the previous one is
    taken.

    Attributes
    ----------
    start : In(1)
    dst : In(line address)
    count : In(16)
    o : Out(stream.Signature(walk_layout(line_bits)))
        ``last`` unused (0).
    """

    def __init__(self, line_bits: int, *, q_heads: int, kv_heads: int, v_dim: int,
                 tile_tokens: int):
        self._line_bits, self._qh, self._kvh = line_bits, q_heads, kv_heads
        self._vd, self._rt = v_dim, tile_tokens
        super().__init__({"start": In(1), "dst": In(line_bits), "count": In(16),
                          "o": Out(stream.Signature(walk_layout(line_bits)))})

    def elaborate(self, platform):
        m = Module()
        QH, KVH, VD, RT = self._qh, self._kvh, self._vd, self._rt
        G, P = QH // KVH, max(VD // LINE, 1)
        dst, count = Signal(self._line_bits), Signal(16)
        first, j = Signal(16), Signal(16)          # the tile's first token; the token in it
        h = Signal(range(max(KVH, 2)))
        g = Signal(range(max(G, 2)))
        piece = Signal(range(max(P, 2)))
        busy = Signal()
        tile = Signal(16)                           # the tile's tokens
        m.d.comb += tile.eq(Mux(count - first < RT, count - first, RT))
        value = Signal(32)
        m.d.comb += value.eq(((first + j) * QH + h * G + g) * VD + piece * LINE)
        m.d.comb += [self.o.valid.eq(busy), self.o.payload.line.eq(dst + value[5:]),
                     self.o.payload.lane.eq(value[:5])]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += piece.eq(piece + 1)
            with m.If(piece == P - 1):
                m.d.sync += [piece.eq(0), g.eq(g + 1)]
                with m.If(g == G - 1):
                    m.d.sync += [g.eq(0), j.eq(j + 1)]
                    with m.If(j == tile - 1):
                        m.d.sync += [j.eq(0), h.eq(h + 1)]
                        with m.If(h == KVH - 1):
                            m.d.sync += [h.eq(0), first.eq(first + RT)]
                            with m.If(first + RT >= count):
                                m.d.sync += busy.eq(0)
        with m.If(self.start):
            m.d.sync += [dst.eq(self.dst), count.eq(self.count), first.eq(0), j.eq(0),
                         h.eq(0), g.eq(0), piece.eq(0), busy.eq(1)]
        return m


class VecGather(wiring.Component):
    """A vector of ``dim`` values from the lines of a :class:`VecWalker` (``i``: a line and the
    lane of the vector's first value): up to 32, the vector's lanes of its one line (a
    pass-through); wider, its ``dim / 32`` lines joined (:class:`Joiner`).

    Attributes
    ----------
    i : In(stream.Signature({"data": line_layout(), "lane": 5}))
    o : Out(stream.Signature(ArrayLayout(32, dim)))
    """

    def __init__(self, dim: int):
        self._dim = dim
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": line_layout(), "lane": 5}))),
            "o": Out(stream.Signature(data.ArrayLayout(32, dim))),
        })

    def elaborate(self, platform):
        m = Module()
        D = self._dim
        line = self.i.payload.data.as_value()
        if D == LINE:
            m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready),
                         Value.cast(self.o.payload).eq(line)]
            return m
        if D < LINE:
            shift = (D - 1).bit_length()
            m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready),
                         Value.cast(self.o.payload).eq(
                             line.word_select(self.i.payload.lane[shift:], 32 * D))]
            return m
        m.submodules.join = join = Joiner(32 * LINE, D // LINE)
        m.d.comb += [join.i.valid.eq(self.i.valid), self.i.ready.eq(join.i.ready),
                     join.i.payload.eq(line), self.o.valid.eq(join.o.valid),
                     join.o.ready.eq(self.o.ready),
                     Value.cast(self.o.payload).eq(join.o.payload)]
        return m


class VecLoader(wiring.Component):
    """A weight vector of up to ``lines`` lines (a norm's weights), from the weight port's words
    into a memory of lines: ``clear`` starts over, for a vector of ``want`` lines (1..
    ``lines``, taken with ``clear``); each word on ``words`` is taken at once and fills the
    next ``1 / per_line`` of a line (word 0 the lowest bits); ``loaded`` is high from the
    cycle after its last line is written. ``raddr`` reads a line onto ``rdata`` the next
    cycle.

    Attributes
    ----------
    words : In(stream.Signature(word_bits))
    clear : In(1)
    want : In(range(lines + 1))
    loaded : Out(1)
    raddr : In(range(lines))
    rdata : Out(line_layout())
    """

    def __init__(self, lines: int, word_bits: int):
        self._lines, self._word = lines, word_bits
        super().__init__({
            "words": In(stream.Signature(word_bits)), "clear": In(1),
            "want": In(range(lines + 1)), "loaded": Out(1),
            "raddr": In(range(max(lines, 2))), "rdata": Out(line_layout()),
        })

    def elaborate(self, platform):
        m = Module()
        L, W = self._lines, self._word
        per = LINE * 32 // W                 # words a line
        m.submodules.mem = mem = Memory(shape=line_layout(), depth=max(L, 2), init=[])
        wp = mem.write_port(granularity=W // 32)   # a word's FP32 values
        rp = mem.read_port()
        line = Signal(range(L + 1))
        want = Signal(range(L + 1), init=L)
        part = Signal(range(max(per, 2)))
        m.d.comb += [self.words.ready.eq(line != want), rp.addr.eq(self.raddr),
                     self.rdata.eq(rp.data), wp.addr.eq(line),
                     wp.data.as_value().eq(self.words.payload.replicate(per))]
        with m.If(self.words.valid & self.words.ready):
            m.d.comb += wp.en.bit_select(part, 1).eq(1)
            last = part == per - 1
            m.d.sync += [part.eq(Mux(last, 0, part + 1)), line.eq(line + last)]
        m.d.comb += self.loaded.eq(line == want)
        with m.If(self.clear):
            m.d.sync += [line.eq(0), part.eq(0), want.eq(self.want)]
        return m


class Placer(wiring.Component):
    """A part's outputs (``cols`` values a beat: column tile after column tile, each the T
    tokens' rows) into writes of the activation memory: beat (tile j, token t) goes to line
    ``dst + t * lines + floor(j * cols / 32)``, lanes ``j * cols mod 32`` on. ``start``
    takes ``dst``, ``tokens`` and ``lines`` (the lines between tokens' outputs: ``n / 32``
    packed, or a ``LINEAR``'s ``row``); with ``tokens`` 1 the beats fill the lines from
    ``dst`` in order. A pass-through: ``w`` is ``i`` placed.

    Attributes
    ----------
    i : In(stream.Signature(ArrayLayout(32, cols)))
    w : Out(stream.Signature(write_layout(config)))
    start : In(1)
    dst : In(line address)
    tokens : In(16)
    lines : In(16)
    """

    def __init__(self, config, cols: int):
        self._config, self._cols = config, cols
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(32, cols))),
            "w": Out(stream.Signature(write_layout(config))),
            "start": In(1), "dst": In(config.line_bits), "tokens": In(16), "lines": In(16),
        })

    def elaborate(self, platform):
        m = Module()
        C = self._cols
        groups = LINE // C
        dst = Signal.like(self.dst)
        tokens, lines = Signal(16), Signal(16)
        tok = Signal(16)
        row = Signal.like(self.dst)        # line of token tok in the current tile's column
        tile = Signal(range(max(groups, 2)))   # the tile's place in its line
        col_line = Signal.like(self.dst)   # the current tile's line offset in a token
        with m.If(self.start):
            m.d.sync += [dst.eq(self.dst), tokens.eq(self.tokens), lines.eq(self.lines),
                         tok.eq(0), row.eq(self.dst), tile.eq(0), col_line.eq(0)]
        m.d.comb += [self.w.valid.eq(self.i.valid), self.i.ready.eq(self.w.ready),
                     self.w.payload.addr.eq(row),
                     self.w.payload.data.as_value().eq(self.i.payload.as_value().replicate(
                         groups)),
                     self.w.payload.mask.eq(Const((1 << C) - 1, LINE) << (tile * C))]
        with m.If(self.w.valid & self.w.ready):
            with m.If(tok == tokens - 1):
                last_of_line = tile == groups - 1
                m.d.sync += [tok.eq(0), tile.eq(Mux(last_of_line, 0, tile + 1)),
                             col_line.eq(col_line + last_of_line),
                             row.eq(dst + col_line + last_of_line)]
            with m.Else():
                m.d.sync += [tok.eq(tok + 1), row.eq(row + lines)]
        return m


class Sequencer(wiring.Component):
    """Runs the commands one at a time (``docs/decoder.md``).

    A command is taken while idle. One the block refuses (``good``, the rules of
    :func:`scoville.sim.golden.decoder.check`: a ``count`` of 0, a range past
    the activation memory, a write that overtakes a read; a projection's shape, a ``ROPE``'s
    or an ``ATTN``'s vectors that do not fit their rows, weights past the memory) is answered
    at once, changing nothing. An ``ATTN`` ends on the attention block's answer: the block
    has taken every vector the engine's walkers give and given every output by then (the
    checks keep the two counts equal: an append is one token). Otherwise ``start`` is high in
    the cycle it is taken (with ``go`` for every op but ``NORM``), and the op runs until its
    ``expect`` beats are counted (``writes`` of the activation memory; ``OUT``: beats of
    ``o``; ``ATTN`` and ``ARGMAX``: their part's answer, ``answered``, whose ``answer``
    becomes the command's); ``NORM`` first waits for its weights (``loaded``: ``go`` in the
    cycle it is seen). Then ``resp`` offers the answer (the status; an ``ATTN``'s ``seq`` and
    ``length``, an ``ARGMAX``'s ``index``, else 0) until taken, and the next command is taken
    from the cycle after.

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout(config)))
    resp : Out(stream.Signature(response_layout()))
    status : Out(Status)
    start, go : Out(1)
    run : Out(command_layout(config))
    good : In(Status)
        The status of ``cmd``'s payload (the block's checks).
    expect : In(range)
        The beats the taken command counts (from ``cmd``'s payload).
    beats : In(1)
        A counted beat in this cycle.
    answered : In(1)
    answer : In(response_layout())
        An ``ATTN``'s or an ``ARGMAX``'s answer, in the cycle its beat is counted.
    loaded : In(1)
    active : Out(1)
        The op runs (its datapath moves beats): from the cycle after ``go``.
    counted : Out(1)
        Every beat the op counts has been seen (``IN`` takes no more).
    """

    def __init__(self, config):
        self._config = config
        super().__init__({
            "cmd": In(stream.Signature(command_layout(config))),
            "resp": Out(stream.Signature(response_layout())), "status": Out(Status),
            "start": Out(1), "go": Out(1), "run": Out(command_layout(config)),
            "good": In(Status), "expect": In(32), "beats": In(1), "loaded": In(1),
            "answered": In(1), "answer": In(response_layout()),
            "active": Out(1), "counted": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        want = Signal(32)
        seen = Signal(32)
        with m.If(self.beats):
            m.d.sync += seen.eq(seen + 1)
        m.d.comb += self.counted.eq(seen == want)
        held = Signal(response_layout())
        m.d.comb += [self.resp.payload.eq(held), self.status.eq(held.status)]
        with m.If(self.answered):
            m.d.sync += held.eq(self.answer)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [held.eq(0), held.status.eq(self.good),
                                 self.run.eq(self.cmd.payload), want.eq(self.expect),
                                 seen.eq(0)]
                    with m.If(self.good == Status.OK):
                        is_norm = self.cmd.payload.op == Op.NORM
                        m.d.comb += [self.start.eq(1), self.go.eq(~is_norm)]
                        with m.If(is_norm):
                            m.next = "WEIGHTS"
                        with m.Else():
                            m.next = "RUN"
                    with m.Else():
                        m.next = "RESP"
            with m.State("WEIGHTS"):
                with m.If(self.loaded):
                    m.d.comb += self.go.eq(1)
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.active.eq(1)
                with m.If(seen == want):
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += self.resp.valid.eq(1)
                with m.If(self.resp.ready):
                    m.next = "IDLE"
        return m
