"""Weight tiles: the words of a weight matrix's column tiles (as :class:`TileFormat` lays them
out) in, the array's B beats out, double-buffered so that one tile loads while the array works
on the other. The MoE block's experts (MXFP4) and the ``linear`` block's projections (BF16)
take their weights through it.

Two slots, each a whole column tile: ``k`` rows of ``cols`` codes (MXFP4: after each 32 rows,
a row of ``cols`` E8M0 scales; BF16: none) and, when the tile has them, ``cols`` FP32
biases. The *loader* takes a tile's
descriptor on ``tile`` (``k`` and whether it has biases), then ``tile_words(k)`` words on
``words`` into the next slot once that slot is free, unpacking the fields as they come (a bit
buffer of one word and one field: a word is taken when it fits); the padding after the last
field is dropped. The *feeder* takes a command on ``cmd`` (``m_tiles``) once the next slot is
full: it replays the slot's ``k`` B beats ``m_tiles`` times (once per row tile of the
array's os schedule), its biases held on ``bias`` from the command until the next, then frees
the slot. Slots are loaded and fed in turn, 0, 1, 0, ...
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .gemm import GemmConfig, operand_layouts
from .lib.formats import MX_BLOCK
from .lib.params import ParamError

__all__ = ["B_FORMATS", "Field", "TileFormat", "WeightTiles", "feed_layout", "tile_layout"]

#: The B formats a tile holds: MXFP4 codes with a row of scales per 32 rows, or BF16.
B_FORMATS = ("mxfp4", "bf16")


@dataclass(frozen=True)
class TileFormat:
    """How column tiles lie in memory and how many rows and replays the slots hold.

    Attributes
    ----------
    array : GemmConfig
        The array the B beats feed: ``cols`` columns a tile, B in ``mxfp4`` or ``bf16``.
    port_bits : int
        Bits of a word of the weight port.
    k_max : int
        The most rows a tile has (a slot's depth).
    tokens : int
        The most rows of A a GEMM of a tile runs (a feed command's ``m_tiles`` reaches
        ``tokens``).
    """

    array: GemmConfig
    port_bits: int
    k_max: int
    tokens: int

    def __post_init__(self):
        if self.array.b_format not in B_FORMATS:
            raise ParamError(f"parameter 'array.b_fmt' = {self.array.b_format!r} is not "
                             f"allowed for weight tiles; allowed: {', '.join(B_FORMATS)}")

    @property
    def scales(self) -> bool:
        """Whether a row of E8M0 scales follows each 32 rows (MXFP4)."""
        return self.array.b_format == "mxfp4"

    @property
    def row_bits(self) -> int:
        """Bits of a row of a tile: ``cols`` codes, column 0 lowest."""
        return (4 if self.scales else 16) * self.array.cols

    def tile_bits(self, k: int, bias: bool) -> int:
        """Bits of one column tile of ``k`` rows: its rows (MXFP4: per block of 32 rows, the
        rows then the block's ``cols`` scales), then with ``bias`` its ``cols`` FP32
        biases."""
        c = self.array.cols
        scales = k // MX_BLOCK * 8 * c if self.scales else 0
        return k * self.row_bits + scales + (32 * c if bias else 0)

    def tile_words(self, k: int, bias: bool) -> int:
        """Words of the weight port one column tile takes (the last one zero-padded)."""
        return -(-self.tile_bits(k, bias) // self.port_bits)


class Field(enum.IntEnum, shape=2):
    """The loader's state: the field of the tile it unpacks next."""
    CODES = 0
    SCALE = 1
    BIAS = 2


def tile_layout(fmt: TileFormat) -> data.StructLayout:
    """A ``tile`` descriptor: ``k`` (rows; MXFP4: a multiple of 32) and ``bias`` (1: biases
    follow the rows)."""
    return data.StructLayout({"k": range(fmt.k_max + 1), "bias": 1})


def feed_layout(fmt: TileFormat) -> data.StructLayout:
    """A ``cmd`` beat: ``m_tiles``, the row tiles to feed the slot's B beats for."""
    return data.StructLayout({"m_tiles": range(fmt.tokens + 1)})


class WeightTiles(wiring.Component):
    """Two column-tile slots between the weight port and the array (the module says how),
    laid out as ``fmt`` (:class:`TileFormat`) says.

    Attributes
    ----------
    tile : In(stream.Signature(tile_layout(fmt)))
        A descriptor per tile, in the order the words come.
    words : In(stream.Signature(weight_port_bits))
        The tiles' words.
    cmd : In(stream.Signature(feed_layout(fmt)))
        A command per tile, in the same order.
    b : Out(stream.Signature(the array's B beat))
        The B beats.
    bias : Out(ArrayLayout(32, cols))
        The biases of the latest command's tile (0 without).
    """

    def __init__(self, fmt: TileFormat):
        self._fmt = fmt
        self.b_layout = operand_layouts(fmt.array)[1]
        super().__init__({
            "tile": In(stream.Signature(tile_layout(fmt))),
            "words": In(stream.Signature(fmt.port_bits)),
            "cmd": In(stream.Signature(feed_layout(fmt))),
            "b": Out(stream.Signature(self.b_layout)),
            "bias": Out(data.ArrayLayout(32, fmt.array.cols)),
        })

    def elaborate(self, platform):
        m = Module()
        fmt = self._fmt
        C, P, KM, MX = fmt.array.cols, fmt.port_bits, fmt.k_max, fmt.scales
        BM = max(KM // MX_BLOCK, 1)
        ROW, SCALE, BIAS = fmt.row_bits, 8 * C, 32
        W = P + max(ROW, SCALE, BIAS)

        m.submodules.codes = codes = Memory(shape=ROW, depth=2 * KM, init=[])
        cw = codes.write_port()
        cr = codes.read_port(transparent_for=(cw,))
        if MX:
            m.submodules.scales = scales = Memory(shape=SCALE, depth=2 * BM, init=[])
            sw = scales.write_port()
            sr = scales.read_port(transparent_for=(sw,))
        biases = [Signal(data.ArrayLayout(32, C), name=f"bias{s}") for s in range(2)]
        slot_k = [Signal(range(KM + 1), name=f"k{s}") for s in range(2)]
        full = Signal(2)

        # ---- Loader: a descriptor, then the tile's fields out of a bit buffer.
        ws = Signal()                     # the slot being loaded
        loading = Signal()
        k = Signal(range(KM + 1))
        has_bias = Signal()
        words_left = Signal(range(max(fmt.tile_words(KM, True), 2) + 1))
        buf = Signal(W)
        fill = Signal(range(W + 1))
        row = Signal(range(KM + 1))       # rows written (codes), in the tile
        blk_row = Signal(range(MX_BLOCK + 1))
        blk = Signal(range(BM + 1))
        bias_i = Signal(range(C + 1))
        phase = Signal(Field)

        tile_bits = Signal(range(fmt.tile_bits(KM, True) + 1))
        rows_bits = (self.tile.payload.k // MX_BLOCK * (MX_BLOCK * ROW + SCALE) if MX
                     else self.tile.payload.k * ROW)
        m.d.comb += tile_bits.eq(rows_bits + Mux(self.tile.payload.bias, BIAS * C, 0))
        m.d.comb += self.tile.ready.eq(~loading)
        with m.If(self.tile.valid & ~loading):
            m.d.sync += [loading.eq(1), k.eq(self.tile.payload.k),
                         has_bias.eq(self.tile.payload.bias),
                         words_left.eq((tile_bits + P - 1) // P), row.eq(0), blk_row.eq(0),
                         blk.eq(0), bias_i.eq(0), phase.eq(Field.CODES), fill.eq(0)]

        need = Signal(range(max(ROW, SCALE, BIAS) + 1))
        m.d.comb += need.eq(Mux(phase == Field.CODES, ROW, Mux(phase == Field.SCALE, SCALE, BIAS)))
        can_out = Signal()
        m.d.comb += can_out.eq(loading & ~full.bit_select(ws, 1) & (fill >= need))
        shifted = Signal(W)
        m.d.comb += shifted.eq(Mux(can_out, Mux(phase == Field.CODES, buf >> ROW,
                                                Mux(phase == Field.SCALE, buf >> SCALE,
                                                    buf >> BIAS)),
                                   buf))
        f2 = Signal(range(W + 1))
        m.d.comb += f2.eq(fill - Mux(can_out, need, 0))
        take = Signal()
        m.d.comb += [take.eq(loading & (words_left != 0) & (f2 + P <= W)),
                     self.words.ready.eq(take)]
        got = self.words.valid & take
        last_field = Signal()
        m.d.comb += [cw.addr.eq(row + Mux(ws, KM, 0)), cw.data.eq(buf[:ROW])]
        if MX:
            m.d.comb += [sw.addr.eq(blk + Mux(ws, BM, 0)), sw.data.eq(buf[:SCALE])]
        with m.If(loading):
            m.d.sync += [buf.eq(shifted | Mux(got, self.words.payload << f2, 0)),
                         fill.eq(f2 + Mux(got, P, 0))]
            with m.If(got):
                m.d.sync += words_left.eq(words_left - 1)
        with m.If(can_out):
            with m.Switch(phase):
                with m.Case(Field.CODES):
                    m.d.comb += cw.en.eq(1)
                    m.d.sync += [row.eq(row + 1), blk_row.eq(blk_row + 1)]
                    if MX:
                        with m.If(blk_row == MX_BLOCK - 1):
                            m.d.sync += phase.eq(Field.SCALE)
                    else:
                        with m.If(row == k - 1):
                            m.d.sync += phase.eq(Field.BIAS)
                            m.d.comb += last_field.eq(~has_bias)
                with m.Case(Field.SCALE):
                    if MX:
                        m.d.comb += sw.en.eq(1)
                    m.d.sync += [blk.eq(blk + 1), blk_row.eq(0)]
                    with m.If(row == k):
                        m.d.sync += phase.eq(Mux(has_bias, Field.BIAS, Field.CODES))
                        m.d.comb += last_field.eq(~has_bias)
                    with m.Else():
                        m.d.sync += phase.eq(Field.CODES)
                with m.Case(Field.BIAS):
                    for s in range(2):
                        with m.If(ws == s):
                            m.d.sync += biases[s].as_value().eq(
                                Cat(biases[s].as_value()[32:], buf[:32]))
                    m.d.sync += bias_i.eq(bias_i + 1)
                    with m.If(bias_i == C - 1):
                        m.d.comb += last_field.eq(1)
        with m.If(last_field):
            # The tile is in: the slot is full; the padding is dropped.
            m.d.sync += [loading.eq(0), fill.eq(0), ws.eq(~ws)]
            for s in range(2):
                with m.If(ws == s):
                    m.d.sync += slot_k[s].eq(k)
                    with m.If(~has_bias):
                        m.d.sync += biases[s].eq(0)

        # ---- Feeder: a command, then m_tiles replays of the slot's k beats.
        rs = Signal()
        feeding = Signal()
        m_left = Signal(range(fmt.tokens + 1))
        beat = Signal(range(KM + 1))
        kk = Signal(range(KM + 1))
        m.d.comb += kk.eq(Mux(rs, slot_k[1], slot_k[0]))
        m.d.comb += self.cmd.ready.eq(~feeding & full.bit_select(rs, 1))
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [feeding.eq(self.cmd.payload.m_tiles != 0),
                         m_left.eq(self.cmd.payload.m_tiles), beat.eq(0),
                         self.bias.eq(Mux(rs, biases[1], biases[0]))]
            with m.If(self.cmd.payload.m_tiles == 0):
                m.d.sync += rs.eq(~rs)
        fire = self.b.valid & self.b.ready
        wrap = beat == kk - 1
        nxt = Signal.like(beat)
        m.d.comb += nxt.eq(Mux(fire, Mux(wrap, 0, beat + 1), beat))
        m.d.comb += [
            cr.addr.eq(nxt + Mux(rs, KM, 0)),
            self.b.valid.eq(feeding),
            self.b.payload.data.as_value().eq(cr.data),
        ]
        if MX:
            m.d.comb += [sr.addr.eq(nxt // MX_BLOCK + Mux(rs, BM, 0)),
                         self.b.payload.scale.as_value().eq(sr.data)]
        with m.If(fire):
            m.d.sync += beat.eq(nxt)
            with m.If(wrap):
                m.d.sync += m_left.eq(m_left - 1)
                with m.If(m_left == 1):
                    m.d.sync += [feeding.eq(0), rs.eq(~rs)]

        # full: set by the loader's last field, cleared by the feeder's last beat.
        set_full = Signal(2)
        clr_full = Signal(2)
        with m.If(last_field):
            m.d.comb += set_full.bit_select(ws, 1).eq(1)
        with m.If(fire & wrap & (m_left == 1)):
            m.d.comb += clr_full.bit_select(rs, 1).eq(1)
        with m.If(self.cmd.valid & self.cmd.ready & (self.cmd.payload.m_tiles == 0)):
            m.d.comb += clr_full.bit_select(rs, 1).eq(1)
        m.d.sync += full.eq((full | set_full) & ~clr_full)
        return m
