"""Cache lines into the ``os`` array's B beats, for attention (``docs/attention.md``).

A KV-cache read streams a head's tokens one after another, each token ``token_lines`` lines
holding its ``dim`` elements in the cache's storage format (element ``e`` at bits ``e * bits``
of the token's lines put end to end, MXFP4's scales after the elements). Three components turn
them into B beats of BF16 elements:

- :class:`TokenJoin` joins a token's lines and decodes its elements to BF16 (exactly: every
  BF16, FP8 E4M3 and MXFP4 value is a BF16 value, or overflows to Inf as the golden model's
  rounding does);
- for ``Q K^T`` the reduction runs along the head dimension, so a beat is element ``k`` of
  ``cols`` tokens: :class:`KTranspose` collects a tile of ``cols`` tokens and emits its
  ``dim`` beats;
- for ``P V`` the reduction runs along the tokens, so a beat is one token's V:
  :class:`TokenQueue` holds V's tokens while the transposer empties K's last tile.

Each passes a read's end on: ``last`` on the item that ends it. :class:`LinesToBeats` joins
the four: the cache's reads in (K, then V's column tiles, chunk after chunk), the array's B
beats out.
"""

import math

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .lib.comb import wire
from .lib.formats import ELEMENT_BITS, MX_BLOCK
from .lib.fp32 import fp32_bits

__all__ = ["KTranspose", "LinesToBeats", "TokenJoin", "TokenQueue", "beat_layout",
           "line_layout", "token_layout"]

_BF16_NAN = 0x7FC0
_BF16_INF = 0x7F80


def line_layout(line_bits: int) -> data.StructLayout:
    """A cache line and the end of its read."""
    return data.StructLayout({"data": unsigned(line_bits), "last": 1})


def token_layout(dim: int) -> data.StructLayout:
    """A token's ``dim`` elements in BF16 and the end of its read."""
    return data.StructLayout({"data": data.ArrayLayout(16, dim), "last": 1})


def beat_layout(cols: int) -> data.StructLayout:
    """A B beat of ``cols`` BF16 elements and the end of its read."""
    return data.StructLayout({"data": data.ArrayLayout(16, cols), "last": 1})


def _bf16(value: float) -> int:
    """The BF16 bits of a value that BF16 holds exactly."""
    return fp32_bits(value) >> 16


def _e4m3_table() -> list[int]:
    """BF16 bits of each FP8 E4M3 (``fn``: no Inf, 0x7F and 0xFF NaN) code."""
    out = []
    for code in range(256):
        sign, exp, man = code >> 7, code >> 3 & 15, code & 7
        if exp == 15 and man == 7:
            out.append(_BF16_NAN)
            continue
        value = math.ldexp(man, -9) if exp == 0 else math.ldexp(8 + man, exp - 10)
        out.append(_bf16(-value if sign else value))
    return out


def _mxfp4_to_bf16(m, code, scale, *, name: str):
    """BF16 bits of E2M1 ``code`` times ``2**(scale - 127)``: exact (normal, or subnormal
    for the smallest scales), +-Inf beyond BF16's range, NaN for scale 0xFF."""
    # E2M1 magnitudes 0.5, 1, 1.5, 2, 3, 4, 6 as 2**e * (1 + f / 2).
    e_of = Array(Const(v, signed(3)) for v in (0, -1, 0, 0, 1, 1, 2, 2))
    f_of = Array(Const(v, 1) for v in (0, 0, 0, 1, 0, 1, 0, 1))
    mag = code[:3]
    sign = code[3]
    field = wire(m, f"{name}_field", e_of[mag] + scale, signed(11))
    frac = f_of[mag]
    # Below the normal range (field -1 or 0): (2 + f) * 2**(field + 5) in units of 2**-133.
    sub = wire(m, f"{name}_sub", Mux(field == 0, Cat(Const(0, 5), Const(0, 0), frac, 1),
                                     Cat(Const(0, 4), frac, 1)), unsigned(7))
    out = Signal(16, name=name)
    with m.If(scale == 0xFF):
        m.d.comb += out.eq(_BF16_NAN)
    with m.Elif(mag == 0):
        m.d.comb += out.eq(Cat(Const(0, 15), sign))
    with m.Elif(field >= 255):
        m.d.comb += out.eq(Cat(Const(_BF16_INF, 15), sign))
    with m.Elif(field >= 1):
        m.d.comb += out.eq(Cat(Const(0, 6), frac, field[:8], sign))
    with m.Else():
        m.d.comb += out.eq(Cat(sub, Const(0, 8), sign))
    return out


def decode_token(m, bits, kv_fmt: str, dim: int, *, name: str) -> list:
    """The BF16 bits of a stored token's ``dim`` elements (``bits``: its lines end to end)."""
    width = ELEMENT_BITS[kv_fmt]
    codes = [bits[width * e: width * (e + 1)] for e in range(dim)]
    if kv_fmt == "bf16":
        return codes
    if kv_fmt == "fp8_e4m3":
        table = Array(Const(v, 16) for v in _e4m3_table())
        return [wire(m, f"{name}{e}", table[c], 16) for e, c in enumerate(codes)]
    scales = [bits[4 * dim + 8 * b: 4 * dim + 8 * (b + 1)] for b in range(dim // MX_BLOCK)]
    return [_mxfp4_to_bf16(m, c, scales[e // MX_BLOCK], name=f"{name}{e}")
            for e, c in enumerate(codes)]


class TokenJoin(wiring.Component):
    """A token's ``token_lines`` lines in, the token out: its ``dim`` elements decoded from
    ``kv_fmt`` to BF16, ``last`` from the read's last line.

    Timing: the token's lines but the last are taken at once (into holding registers); the
    last is taken when the output register is empty or taken, and the token is offered in the
    next cycle.

    Attributes
    ----------
    i : In(stream.Signature(line_layout(line_bits)))
    o : Out(stream.Signature(token_layout(dim)))
    """

    def __init__(self, *, line_bits: int, token_lines: int, dim: int, kv_fmt: str):
        self._line_bits, self._tl, self._dim, self._fmt = line_bits, token_lines, dim, kv_fmt
        super().__init__({
            "i": In(stream.Signature(line_layout(line_bits))),
            "o": Out(stream.Signature(token_layout(dim))),
        })

    def elaborate(self, platform):
        m = Module()
        TL = self._tl
        held = [Signal(self._line_bits, name=f"held{j}") for j in range(TL - 1)]
        line = Signal(range(max(TL, 2)))
        final = line == TL - 1
        advance = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(~final | advance)
        take = self.i.valid & self.i.ready
        token = wire(m, "token", Cat(*held, self.i.payload.data))
        elems = decode_token(m, token, self._fmt, self._dim, name="dec")
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(take):
            for j, reg in enumerate(held):
                with m.If(line == j):
                    m.d.sync += reg.eq(self.i.payload.data)
            if TL > 1:
                m.d.sync += line.eq(line + 1)
            with m.If(final):
                m.d.sync += [line.eq(0), self.o.valid.eq(1),
                             self.o.payload.data.eq(Cat(*elems)),
                             self.o.payload.last.eq(self.i.payload.last)]
        return m


class KTranspose(wiring.Component):
    """Tiles of ``cols`` tokens in, their ``dim`` beats out (beat ``k``: element ``k`` of each
    token of the tile, token ``j`` in lane ``j``; lanes past the tile's tokens hold what they
    held).

    Two tile buffers: one fills while the other empties. Each is a word of ``cols`` small
    SRAMs, one per token slot: a token goes into its slot's SRAM, and a beat reads the buffer's
    word of every SRAM and takes the same element of each. A tile closes on its ``cols``-th
    token or on a read's ``last`` token; the read's final tile's last beat carries ``last``.

    Timing: a token is taken when the filling buffer is not full. A closed buffer emits a
    beat in each cycle the output register is empty or taken, from the cycle after it closes.

    Attributes
    ----------
    i : In(stream.Signature(token_layout(dim)))
    o : Out(stream.Signature(beat_layout(cols)))
    """

    def __init__(self, *, dim: int, cols: int):
        self._dim, self._cols = dim, cols
        super().__init__({
            "i": In(stream.Signature(token_layout(dim))),
            "o": Out(stream.Signature(beat_layout(cols))),
        })

    def elaborate(self, platform):
        m = Module()
        C, D = self._cols, self._dim
        full = Signal(2)
        closes_read = Signal(2)
        wbuf, rbuf = Signal(), Signal()
        slot = Signal(range(max(C, 2)))
        k = Signal(range(max(D, 2)))
        sel = Signal(range(max(D, 2)))
        last_out = Signal()
        ports = []
        for s in range(C):
            mem = Memory(shape=data.ArrayLayout(16, D), depth=2, init=[])
            m.submodules[f"slot{s}"] = mem
            ports.append((mem.write_port(), mem.read_port()))

        take = self.i.valid & self.i.ready
        tile_end = (slot == C - 1) | self.i.payload.last
        m.d.comb += self.i.ready.eq(~full.bit_select(wbuf, 1))
        for s, (wp, _) in enumerate(ports):
            m.d.comb += [wp.addr.eq(wbuf), wp.data.eq(self.i.payload.data),
                         wp.en.eq(take & (slot == s))]
        with m.If(take):
            m.d.sync += slot.eq(slot + 1)
            with m.If(tile_end):
                m.d.sync += [slot.eq(0), wbuf.eq(~wbuf)]

        # The emptying side: a beat per cycle while the output register moves.
        advance = ~self.o.valid | self.o.ready
        issue = full.bit_select(rbuf, 1)
        beat_end = k == D - 1
        for _, rp in ports:
            m.d.comb += [rp.addr.eq(rbuf), rp.en.eq(advance)]
        with m.If(advance):
            m.d.sync += [self.o.valid.eq(issue), sel.eq(k),
                         last_out.eq(beat_end & closes_read.bit_select(rbuf, 1))]
        with m.If(issue & advance):
            m.d.sync += k.eq(k + 1)
            with m.If(beat_end):
                m.d.sync += [k.eq(0), rbuf.eq(~rbuf)]
        for b in range(2):
            with m.If(take & tile_end & (wbuf == b)):
                m.d.sync += [full[b].eq(1), closes_read[b].eq(self.i.payload.last)]
            with m.If(issue & advance & beat_end & (rbuf == b)):
                m.d.sync += full[b].eq(0)
        lanes = [Array(rp.data[e] for e in range(D))[sel] for _, rp in ports]
        m.d.comb += [self.o.payload.data.eq(Cat(*lanes)), self.o.payload.last.eq(last_out)]
        return m


class TokenQueue(wiring.Component):
    """Up to ``depth`` tokens wait here; each leaves as one beat: its ``dim`` elements in lanes
    0..dim-1 of ``cols`` (the rest zero).

    Timing: a token is taken while fewer than ``depth`` wait, and offered from the next cycle,
    behind those before it.

    Attributes
    ----------
    i : In(stream.Signature(token_layout(dim)))
    o : Out(stream.Signature(beat_layout(cols)))
    """

    def __init__(self, *, dim: int, cols: int, depth: int):
        self._dim, self._cols, self._depth = dim, cols, depth
        super().__init__({
            "i": In(stream.Signature(token_layout(dim))),
            "o": Out(stream.Signature(beat_layout(cols))),
        })

    def elaborate(self, platform):
        m = Module()
        layout = token_layout(self._dim)
        m.submodules.fifo = fifo = SyncFIFO(width=layout.size, depth=self._depth)
        head = data.View(layout, fifo.r_data)
        m.d.comb += [fifo.w_data.eq(self.i.payload), fifo.w_en.eq(self.i.valid),
                     self.i.ready.eq(fifo.w_rdy), self.o.valid.eq(fifo.r_rdy),
                     fifo.r_en.eq(self.o.ready), self.o.payload.data.eq(head.data),
                     self.o.payload.last.eq(head.last)]
        return m


class LinesToBeats(wiring.Component):
    """The lines of the cache's reads in, the array's B beats out. Reads come in turn: a K
    read, then ``v_tiles`` V reads (one per column tile of ``P V``, each ``v_lines`` of each
    token's lines), chunk after chunk. A K read's lines go through a :class:`TokenJoin` of
    ``token_lines`` lines into the :class:`KTranspose` (``dim`` beats per tile of ``cols``
    tokens); a V read's through a :class:`TokenJoin` of ``v_lines`` lines into the
    :class:`TokenQueue` (``v_queue`` tokens; a beat per token). The beats leave in the same
    turn: K's until a beat with ``last``, then each V tile's until its ``last``.

    Timing: a line is taken as its read's joiner takes it (the ``rd`` side switches after a
    read's last line); a beat is offered as the transposer or the queue offers it (the ``b``
    side switches after a beat with ``last``). No cycle is added on either path.

    Attributes
    ----------
    i : In(stream.Signature(line_layout(line_bits)))
        The reads' lines.
    o : Out(stream.Signature(beat_layout(cols)))
        The B beats; ``last`` ends each read's beats.
    """

    def __init__(self, *, line_bits: int, token_lines: int, v_lines: int, dim: int,
                 v_width: int, v_tiles: int, cols: int, kv_fmt: str, v_queue: int):
        self._p = dict(line_bits=line_bits, token_lines=token_lines, v_lines=v_lines, dim=dim,
                       v_width=v_width, v_tiles=v_tiles, cols=cols, kv_fmt=kv_fmt,
                       v_queue=v_queue)
        super().__init__({
            "i": In(stream.Signature(line_layout(line_bits))),
            "o": Out(stream.Signature(beat_layout(cols))),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._p
        VT, C = p["v_tiles"], p["cols"]
        m.submodules.join = join = TokenJoin(line_bits=p["line_bits"],
                                             token_lines=p["token_lines"], dim=p["dim"],
                                             kv_fmt=p["kv_fmt"])
        m.submodules.vjoin = vjoin = TokenJoin(line_bits=p["line_bits"],
                                               token_lines=p["v_lines"], dim=p["v_width"],
                                               kv_fmt=p["kv_fmt"])
        m.submodules.ktr = ktr = KTranspose(dim=p["dim"], cols=C)
        m.submodules.vq = vq = TokenQueue(dim=p["v_width"], cols=C, depth=p["v_queue"])
        wiring.connect(m, join.o, ktr.i)
        wiring.connect(m, vjoin.o, vq.i)
        # The read side: K (rphase 0), then V's column tiles (r_vt).
        rphase = Signal()
        r_vt = Signal(range(max(VT, 2)))
        rd = self.i
        m.d.comb += [join.i.payload.eq(rd.payload), vjoin.i.payload.eq(rd.payload),
                     join.i.valid.eq(rd.valid & ~rphase), vjoin.i.valid.eq(rd.valid & rphase),
                     rd.ready.eq(Mux(rphase, vjoin.i.ready, join.i.ready))]
        with m.If(rd.valid & rd.ready & rd.payload.last):
            m.d.sync += rphase.eq(1)
            with m.If(rphase):
                m.d.sync += r_vt.eq(r_vt + 1)
                with m.If(r_vt == VT - 1):
                    m.d.sync += [r_vt.eq(0), rphase.eq(0)]
        # The beat side, in the same turn (bphase, b_vt).
        bphase = Signal()
        b_vt = Signal(range(max(VT, 2)))
        bsrc = data.View(beat_layout(C), Mux(bphase, vq.o.payload.as_value(),
                                             ktr.o.payload.as_value()))
        m.d.comb += [self.o.valid.eq(Mux(bphase, vq.o.valid, ktr.o.valid)),
                     self.o.payload.eq(bsrc),
                     ktr.o.ready.eq(self.o.ready & ~bphase),
                     vq.o.ready.eq(self.o.ready & bphase)]
        with m.If(self.o.valid & self.o.ready & bsrc.last):
            m.d.sync += bphase.eq(1)
            with m.If(bphase):
                m.d.sync += b_vt.eq(b_vt + 1)
                with m.If(b_vt == VT - 1):
                    m.d.sync += [b_vt.eq(0), bphase.eq(0)]
        return m
