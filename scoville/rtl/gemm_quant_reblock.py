"""The reblocking buffer: rows of an output-stationary GEMM's C tiles in, whole 32-element MX
blocks of rows of C out.

An ``os`` array of ``rows`` x ``cols`` PEs (``cols`` dividing 32) emits the rows of C tile by
tile: for each row tile (``rows`` rows of C), its column tiles in order, each as up to ``rows``
rows of ``cols`` values. A row of C quantized along N in blocks of 32 needs ``32 / cols``
consecutive column tiles of the same row, and they arrive ``rows`` rows apart. So the buffer
holds *lines* of 32 values: a row tile's column tiles ``g * 32 / cols .. (g + 1) * 32 / cols - 1``
fill lines ``0 .. rows - 1`` of one *group*, part by part; when a line's last part is written the
line is complete and leaves, whole, as one block. ``groups`` groups of ``rows`` lines each form a
ring, so the array can fill the next group while the previous one drains.

One group is the least that works (a line's parts arrive ``rows`` rows apart, so ``rows`` lines
are filling at once). With streams that keep up, one group holds the array back only when tiles
follow each other every cycle (a 1 x 1 array with K = 1): a line is freed the cycle after its
last part, and the same line of the next group is first written a tile (``max(K, rows,
cols)`` steps) after that part. Two groups never hold it back; more absorb back-pressure from
the consumer of the blocks.

Cycle behaviour (the timed model, :mod:`scoville.sim.cycles.gemm_quant`, follows it):

- ``cmd`` is a 2-entry queue (``amaranth.lib.fifo.SyncFIFO``) of the (M, N) of the commands
  whose rows are still to come; a command's rows are taken once it is in the queue (the cycle
  after its handshake) and it leaves with its last row.
- ``i.ready`` when a command is queued and the row's line is free or already this group's
  (a row of a later part). A line is taken by its first part and freed when it is read.
- A completed line's index enters a FIFO of complete lines (readable the next cycle). The
  memory's read port reads the oldest one when the port's register is empty or moves to the
  output register in the same cycle; the output register takes it one cycle later when it
  is empty or taken. So a block can be offered on ``o`` three cycles after its last part.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .gemm_dataflow import DIM_BITS
from .lib.formats import MX_BLOCK

__all__ = ["CMD_DEPTH", "Reblock"]

#: The low bits of N that count columns within an MX block.
_BLOCK_BITS = (MX_BLOCK - 1).bit_length()

#: Commands the buffer queues: the one whose rows arrive and the next.
CMD_DEPTH = 2


class Reblock(wiring.Component):
    """Rows of ``cols``-value column tiles in, 32-value lines out (see the module docstring).

    Parameters
    ----------
    rows, cols : int
        The array's shape; ``cols`` divides 32.
    groups : int
        Groups of ``rows`` lines of 32 values (32-bit each) the buffer holds.

    Attributes
    ----------
    cmd : In(stream.Signature(StructLayout(m, n)))
        The shape of each command's C, in the order its rows come; N a multiple of 32.
    i : In(stream.Signature(ArrayLayout(32, cols)))
        Rows of C's tiles, in the ``os`` engine's order.
    o : Out(stream.Signature(ArrayLayout(32, 32)))
        Blocks: for each row tile, for each 32 columns, the tile's rows in order.
    """

    def __init__(self, rows: int, cols: int, groups: int):
        if MX_BLOCK % cols:
            raise ValueError(f"parameter 'cols' = {cols} must divide {MX_BLOCK}")
        if groups < 1:
            raise ValueError(f"parameter 'groups' must be >= 1; got {groups}")
        self._rows, self._cols, self._groups = rows, cols, groups
        super().__init__({
            "cmd": In(stream.Signature(data.StructLayout({"m": unsigned(DIM_BITS),
                                                          "n": unsigned(DIM_BITS)}))),
            "i": In(stream.Signature(data.ArrayLayout(32, cols))),
            "o": Out(stream.Signature(data.ArrayLayout(32, MX_BLOCK))),
        })

    @property
    def lines(self) -> int:
        """Lines of 32 values the buffer holds."""
        return self._groups * self._rows

    def elaborate(self, platform):
        m = Module()
        R, C, G = self._rows, self._cols, self._groups
        parts = MX_BLOCK // C
        lines = self.lines

        m.submodules.cmdq = cmdq = SyncFIFO(width=2 * DIM_BITS, depth=CMD_DEPTH)
        m.d.comb += [
            self.cmd.ready.eq(cmdq.w_rdy),
            cmdq.w_en.eq(self.cmd.valid),
            cmdq.w_data.eq(self.cmd.payload.as_value()),
        ]
        cur = data.View(self.cmd.payload.shape(), cmdq.r_data)

        # Write side: where the next row goes, in the engine's order (row r of part t of line
        # group lg of the row tile at i0; group ring index grp).
        r = Signal(range(max(R, 2)))
        t = Signal(range(max(parts, 2)))
        lg = Signal(DIM_BITS - _BLOCK_BITS)
        i0 = Signal(DIM_BITS)
        grp = Signal(range(max(G, 2)))
        base = Signal(range(max(lines, 2)))  # grp * R
        slot = Signal(range(max(lines, 2)))
        occupied = Signal(lines)
        m.d.comb += slot.eq(base + r)
        left = Signal(DIM_BITS)
        m.d.comb += left.eq(cur.m - i0)
        row_last = (r == R - 1) | (r + 1 == left)
        part_last = t == parts - 1
        group_last = lg == (cur.n >> _BLOCK_BITS) - 1
        tile_last = i0 + R >= cur.m
        free = ~(occupied >> slot)[0]
        m.d.comb += self.i.ready.eq(cmdq.r_rdy & ((t != 0) | free))
        write = self.i.valid & self.i.ready

        # At least two entries: a one-entry memory (or FIFO) has no address bits, a zero-width
        # range Verilator's lint rejects (one array row and one group); the spare is unused.
        room = max(lines, 2)
        m.submodules.mem = mem = Memory(shape=data.ArrayLayout(32, MX_BLOCK), depth=room,
                                        init=[])
        wp = mem.write_port(granularity=C if parts > 1 else None)
        rp = mem.read_port()
        m.d.comb += [
            wp.addr.eq(slot),
            wp.data.eq(Cat(*([self.i.payload.as_value()] * parts))),
            wp.en.eq(Mux(write, Const(1, parts) << t, 0) if parts > 1 else write),
        ]
        m.submodules.done = done = SyncFIFO(width=(room - 1).bit_length(), depth=room)
        m.d.comb += [done.w_en.eq(write & part_last), done.w_data.eq(slot)]
        with m.If(write):
            with m.If(~row_last):
                m.d.sync += r.eq(r + 1)
            with m.Else():
                m.d.sync += r.eq(0)
                with m.If(~part_last):
                    m.d.sync += t.eq(t + 1)
                with m.Else():
                    m.d.sync += t.eq(0)
                    with m.If(grp == G - 1):
                        m.d.sync += [grp.eq(0), base.eq(0)]
                    with m.Else():
                        m.d.sync += [grp.eq(grp + 1), base.eq(base + R)]
                    with m.If(~group_last):
                        m.d.sync += lg.eq(lg + 1)
                    with m.Else():
                        m.d.sync += lg.eq(0)
                        with m.If(tile_last):
                            m.d.sync += i0.eq(0)
                            m.d.comb += cmdq.r_en.eq(1)
                        with m.Else():
                            m.d.sync += i0.eq(i0 + R)

        # Read side: the oldest complete line through the read port's register to ``o``.
        fetched = Signal()
        load = fetched & (~self.o.valid | self.o.ready)
        issue = done.r_rdy & (~fetched | load)
        m.d.comb += [rp.addr.eq(done.r_data), rp.en.eq(issue), done.r_en.eq(issue)]
        taken = Mux(write & (t == 0), Const(1, lines) << slot, 0)
        freed = Mux(issue, Const(1, lines) << done.r_data, 0)
        m.d.sync += [
            occupied.eq((occupied | taken) & ~freed),
            fetched.eq(issue | (fetched & ~load)),
        ]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(load):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(rp.data)]
        return m
