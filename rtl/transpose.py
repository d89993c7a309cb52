"""Cache lines into the ``os`` array's B beats, for attention (``docs/attention.md``).

A KV-cache read streams a head's tokens one after another, each token ``token_lines`` lines
holding its ``dim`` elements (element ``e`` at bits ``e * elem_bits`` of the token's lines
put end to end). The array's ``os`` dataflow takes B one row of the reduction per beat:

- for ``Q K^T`` the reduction runs along the head dimension, so a beat is element ``k`` of
  ``cols`` tokens: :class:`KTranspose` collects a tile of ``cols`` tokens and emits its
  ``dim`` beats;
- for ``P V`` the reduction runs along the tokens, so a beat is one token's V:
  :class:`TokenBeats` joins a token's lines into one beat.

Both pass a read's end on: ``last`` on the beat that ends it.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["KTranspose", "TokenBeats", "beat_layout", "line_layout"]


def line_layout(line_bits: int) -> data.StructLayout:
    """A cache line and the end of its read."""
    return data.StructLayout({"data": unsigned(line_bits), "last": 1})


def beat_layout(elem_bits: int, cols: int) -> data.StructLayout:
    """A B beat of ``cols`` elements and the end of its read."""
    return data.StructLayout({"data": data.ArrayLayout(elem_bits, cols), "last": 1})


class KTranspose(wiring.Component):
    """Tiles of ``cols`` tokens' K lines in, their ``dim`` beats out (beat ``k``: element ``k``
    of each token of the tile, token ``j`` in lane ``j``; lanes past the tile's tokens hold
    what they held).

    Two tile buffers: one fills while the other empties. Each is ``cols`` small SRAMs of
    ``token_lines`` lines, one per token slot: a line goes into its token's SRAM, and a beat
    reads the same line of every SRAM and takes the same element of each. A tile closes on its
    ``cols``-th token or on a read's ``last`` line; the read's final tile's last beat carries
    ``last``.

    Timing: a line is taken when the filling buffer is not full. A closed buffer emits a beat
    in each cycle the output register is empty or taken, from the cycle after it closes.

    Attributes
    ----------
    i : In(stream.Signature(line_layout(line_bits)))
    o : Out(stream.Signature(beat_layout(elem_bits, cols)))
    """

    def __init__(self, *, line_bits: int, token_lines: int, elem_bits: int, dim: int,
                 cols: int):
        self._line_bits, self._tl, self._eb, self._dim, self._cols = \
            line_bits, token_lines, elem_bits, dim, cols
        super().__init__({
            "i": In(stream.Signature(line_layout(line_bits))),
            "o": Out(stream.Signature(beat_layout(elem_bits, cols))),
        })

    def elaborate(self, platform):
        m = Module()
        TL, C, D, EB = self._tl, self._cols, self._dim, self._eb
        per_line = self._line_bits // EB
        full = Signal(2)
        closes_read = Signal(2)
        wbuf, rbuf = Signal(), Signal()
        slot = Signal(range(max(C, 2)))
        line = Signal(range(max(TL, 2)))
        kl = Signal(range(max(TL, 2)))
        ke = Signal(range(max(per_line, 2)))
        sel = Signal(range(max(per_line, 2)))
        last_out = Signal()

        ports = []
        for s in range(C):
            mem = Memory(shape=unsigned(self._line_bits), depth=2 * TL, init=[])
            m.submodules[f"slot{s}"] = mem
            ports.append((mem.write_port(), mem.read_port()))

        take = self.i.valid & self.i.ready
        token_end = line == TL - 1
        tile_end = token_end & ((slot == C - 1) | self.i.payload.last)
        m.d.comb += self.i.ready.eq(~full.bit_select(wbuf, 1))
        for s, (wp, _) in enumerate(ports):
            m.d.comb += [wp.addr.eq(wbuf * TL + line), wp.data.eq(self.i.payload.data),
                         wp.en.eq(take & (slot == s))]
        with m.If(take):
            m.d.sync += line.eq(0 if TL == 1 else line + 1)
            with m.If(token_end):
                m.d.sync += [line.eq(0), slot.eq(slot + 1)]
            with m.If(tile_end):
                m.d.sync += [slot.eq(0), wbuf.eq(~wbuf)]

        # The emptying side: a beat per cycle while the output register moves.
        advance = ~self.o.valid | self.o.ready
        issue = full.bit_select(rbuf, 1)
        beat_end = (kl * per_line + ke) == D - 1
        for _, rp in ports:
            m.d.comb += [rp.addr.eq(rbuf * TL + kl), rp.en.eq(advance)]
        with m.If(advance):
            m.d.sync += [self.o.valid.eq(issue), sel.eq(ke),
                         last_out.eq(beat_end & closes_read.bit_select(rbuf, 1))]
        with m.If(issue & advance):
            m.d.sync += ke.eq(ke + 1)
            with m.If(ke == per_line - 1):
                m.d.sync += [ke.eq(0), kl.eq(kl + 1)]
            with m.If(beat_end):
                m.d.sync += [ke.eq(0), kl.eq(0), rbuf.eq(~rbuf)]
        for b in range(2):
            with m.If(take & tile_end & (wbuf == b)):
                m.d.sync += [full[b].eq(1), closes_read[b].eq(self.i.payload.last)]
            with m.If(issue & advance & beat_end & (rbuf == b)):
                m.d.sync += full[b].eq(0)
        lanes = [Array(rp.data[EB * e: EB * (e + 1)] for e in range(per_line))[sel]
                 for _, rp in ports]
        m.d.comb += [self.o.payload.data.eq(Cat(*lanes)), self.o.payload.last.eq(last_out)]
        return m


class TokenBeats(wiring.Component):
    """A token's ``token_lines`` lines in, one beat out: its first ``dim`` elements in lanes
    0..dim-1 of ``cols`` (the rest zero), ``last`` from the read's last line; up to ``depth``
    joined beats wait in a queue (V lines keep coming while the transposer still empties K's
    last tile).

    Timing: the token's lines but the last are taken at once (into holding registers); the
    last is taken while the queue holds fewer than ``depth`` beats, and its beat is offered
    from the next cycle, behind those queued before it.

    Attributes
    ----------
    i : In(stream.Signature(line_layout(line_bits)))
    o : Out(stream.Signature(beat_layout(elem_bits, cols)))
    """

    def __init__(self, *, line_bits: int, token_lines: int, elem_bits: int, dim: int,
                 cols: int, depth: int):
        self._line_bits, self._tl, self._eb, self._dim, self._cols = \
            line_bits, token_lines, elem_bits, dim, cols
        self._depth = depth
        super().__init__({
            "i": In(stream.Signature(line_layout(line_bits))),
            "o": Out(stream.Signature(beat_layout(elem_bits, cols))),
        })

    def elaborate(self, platform):
        m = Module()
        TL, N = self._tl, self._depth
        layout = beat_layout(self._eb, self._cols)
        m.submodules.queue = queue = Memory(shape=layout, depth=N, init=[])
        wp = queue.write_port()
        rp = queue.read_port(domain="comb")
        held = [Signal(self._line_bits, name=f"held{j}") for j in range(TL - 1)]
        line = Signal(range(max(TL, 2)))
        level = Signal(range(N + 1))
        wr = Signal(range(max(N, 2)))
        rd = Signal(range(max(N, 2)))
        final = line == TL - 1
        m.d.comb += self.i.ready.eq(~final | (level != N))
        take = self.i.valid & self.i.ready
        push = take & final
        pop = self.o.valid & self.o.ready
        token = Cat(*held, self.i.payload.data)[: self._dim * self._eb]
        m.d.comb += [wp.addr.eq(wr), wp.en.eq(push), wp.data.data.eq(token),
                     wp.data.last.eq(self.i.payload.last),
                     rp.addr.eq(rd), self.o.valid.eq(level != 0), self.o.payload.eq(rp.data)]
        with m.If(take):
            for j, reg in enumerate(held):
                with m.If(line == j):
                    m.d.sync += reg.eq(self.i.payload.data)
            if TL > 1:
                m.d.sync += line.eq(line + 1)
            with m.If(final):
                m.d.sync += line.eq(0)
        with m.If(push):
            m.d.sync += wr.eq(Mux(wr == N - 1, 0, wr + 1))
        with m.If(pop):
            m.d.sync += rd.eq(Mux(rd == N - 1, 0, rd + 1))
        m.d.sync += level.eq(level + push - pop)
        return m
