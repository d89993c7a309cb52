"""The ``linear`` block's own parts (``docs/linear.md``): the x store, the weight requests
and the sequencer. The weight tiles are :class:`~scoville.rtl.moe_weights.WeightTiles`, the
fetch engine :class:`~scoville.rtl.fetch.Fetch` and the array :class:`~scoville.rtl.gemm.Gemm`.
``config`` is the :class:`~scoville.rtl.linear.LinearConfig`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .fetch import request_layout
from .gemm import command_layout as gemm_command_layout
from .gemm import operand_layouts
from .lib.formats import MX_BLOCK
from .lib.fp32 import fp32_to_bf16
from .lib.pipeline import offer_together
from .moe_weights import feed_layout, tile_layout

__all__ = ["LINE", "Sequencer", "Status", "TileRequests", "XStore", "command_layout",
           "run_layout"]

#: Elements of a beat of ``x``: a line of 32 FP32 values.
LINE = MX_BLOCK


class Status(enum.IntEnum, shape=3):
    """Status of the latest command: taken, or refused (and nothing else changed) for the
    field named."""
    OK = 0
    BAD_TOKENS = 1
    BAD_K = 2
    BAD_N = 3
    BAD_ADDR = 4


def command_layout(config) -> data.StructLayout:
    """A ``cmd`` beat: ``tokens`` (T), ``k`` and ``n`` (the weight is N x K), ``addr`` (the
    word its first column tile starts at) and ``bias`` (1: the tiles carry biases, added to
    the outputs). The fields are wide enough to name values the block refuses."""
    return data.StructLayout({"tokens": 9, "k": 15, "n": 21, "addr": config.addr_bits,
                              "bias": 1})


def run_layout(config) -> data.StructLayout:
    """The command being run, as the sequencer holds it for the other parts."""
    return data.StructLayout({"tokens": range(config.tokens + 1),
                              "lines": range(config.k_max // LINE + 1),
                              "tiles": range(config.n_max // config.array.cols + 1),
                              "addr": config.addr_bits, "bias": 1})


class XStore(wiring.Component):
    """The tokens' x, rounded to BF16, in a memory of ``k_max / 32`` words, word ``b`` holding
    line ``b`` (elements ``32 b .. 32 b + 31``) of every token (``tokens`` lanes, each written
    alone).

    *Writer*: a beat on ``i`` (32 FP32 values) is taken while fewer than ``want`` lines are
    stored (``count``), rounded to BF16 (to nearest, ties to even) and written at the next
    place: every line of token 0, then of token 1, ... (``lines`` a token). ``clear`` (with
    the command's ``want`` and ``lines`` from the next cycle) starts over.

    *Feeder*: a command on ``cmd`` (``n`` rows) is taken while idle; then for each row tile of
    ``rows`` tokens, ``32 lines`` beats on ``a``, beat ``k`` carrying each row's element ``k``.

    Timing: a beat on ``i`` is written in the cycle it is taken; a beat on ``a`` is offered
    from the cycle after the command is taken, the next from the cycle after each is taken.

    Attributes
    ----------
    i : In(stream.Signature(ArrayLayout(32, 32)))
    clear : In(1)
    lines : In(range(k_max / 32 + 1))
    want : In(range(tokens * k_max / 32 + 1))
    count : Out(range(tokens * k_max / 32 + 1))
    cmd : In(stream.Signature(range(tokens + 1)))
    a : Out(stream.Signature(the array's A beat))
    """

    def __init__(self, config):
        self._config = config
        T, LM = config.tokens, config.k_max // LINE
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(32, LINE))),
            "clear": In(1), "lines": In(range(LM + 1)),
            "want": In(range(T * LM + 1)), "count": Out(range(T * LM + 1)),
            "cmd": In(stream.Signature(range(T + 1))),
            "a": Out(stream.Signature(operand_layouts(config.array)[0])),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        T, R, LM = cfg.tokens, cfg.array.rows, cfg.k_max // LINE
        line = data.ArrayLayout(16, LINE)
        m.submodules.mem = mem = Memory(shape=data.ArrayLayout(line, T), depth=max(LM, 2),
                                        init=[])
        wp = mem.write_port(granularity=1)     # one token's line
        rp = mem.read_port(transparent_for=(wp,))

        # ---- Writer.
        w_line = Signal(range(max(LM, 2)))
        w_tok = Signal(range(max(T, 2)))
        m.d.comb += self.i.ready.eq(self.count < self.want)
        rounded = Signal(line)
        for e in range(LINE):
            m.d.comb += rounded[e].eq(fp32_to_bf16(m, self.i.payload[e], name=f"bf16_{e}"))
        m.d.comb += [wp.addr.eq(w_line), wp.data.as_value().eq(rounded.as_value().replicate(T))]
        with m.If(self.i.valid & self.i.ready):
            m.d.comb += wp.en.bit_select(w_tok, 1).eq(1)
            m.d.sync += self.count.eq(self.count + 1)
            last = w_line == self.lines - 1
            m.d.sync += [w_line.eq(Mux(last, 0, w_line + 1)), w_tok.eq(w_tok + last)]
        with m.If(self.clear):
            m.d.sync += [self.count.eq(0), w_line.eq(0), w_tok.eq(0)]

        # ---- Feeder.
        busy = Signal()
        n = Signal(range(T + 1))
        tile0 = Signal(range(T + R + 1))    # the first token of the current row tile
        k = Signal(range(LM * LINE + 1))
        m.d.comb += self.cmd.ready.eq(~busy)
        with m.If(self.cmd.valid & ~busy & (self.cmd.payload != 0)):
            m.d.sync += [busy.eq(1), n.eq(self.cmd.payload), tile0.eq(0), k.eq(0)]
        fire = self.a.valid & self.a.ready
        last_k = k == self.lines * LINE - 1
        nxt = Signal.like(k)
        m.d.comb += nxt.eq(Mux(fire, Mux(last_k, 0, k + 1), k))
        m.d.comb += [rp.addr.eq(nxt // LINE), self.a.valid.eq(busy)]
        elem = Signal(range(LINE))
        m.d.comb += elem.eq(k % LINE)
        for r in range(R):
            tok = Signal(range(max(T, 2)), name=f"tok{r}")
            m.d.comb += tok.eq(Mux(tile0 + r < T, tile0 + r, 0))
            word = rp.data.as_value().word_select(tok, line.size)
            m.d.comb += self.a.payload.data[r].eq(word.word_select(elem, 16))
        with m.If(fire):
            m.d.sync += k.eq(nxt)
            with m.If(last_k):
                m.d.sync += tile0.eq(tile0 + R)
                with m.If(tile0 + R >= n):
                    m.d.sync += busy.eq(0)
        return m


class TileRequests(wiring.Component):
    """The weight requests of a command: for each of its column tiles in turn, a fetch command
    (the tile's address and words, :meth:`~scoville.rtl.linear.LinearConfig.tile_words`) and a
    tile descriptor for the loader (``k``, ``bias``). A cycle with ``start`` high takes the
    command (``run``) and the requests begin from the next cycle.

    Timing: a tile's two beats are offered from the cycle after the previous tile's are both
    taken, each held until taken (one may be taken before the other).

    Attributes
    ----------
    fetch : Out(stream.Signature(fetch request_layout))
    tile : Out(stream.Signature(tile_layout))
    start : In(1)
    run : In(run_layout(config))
    """

    def __init__(self, config):
        self._config = config
        fc = config.fetch
        super().__init__({
            "fetch": Out(stream.Signature(request_layout(fc.addr_bits, fc.len_bits))),
            "tile": Out(stream.Signature(tile_layout(config.tile_format))),
            "start": In(1), "run": In(run_layout(config)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        issuing = Signal()
        left = Signal(range(cfg.n_max // cfg.array.cols + 1))
        addr = Signal(cfg.addr_bits)
        words = Signal(range(cfg.tile_words(cfg.k_max, True) + 1))
        k = Signal(range(cfg.k_max + 1))
        bias = Signal()
        m.d.comb += [
            self.fetch.payload.addr.eq(addr), self.fetch.payload.len.eq(words),
            self.tile.payload.k.eq(k), self.tile.payload.bias.eq(bias),
        ]
        with m.If(offer_together(m, [self.fetch, self.tile], issuing, name="tile_req")):
            m.d.sync += [addr.eq(addr + words), left.eq(left - 1)]
            with m.If(left == 1):
                m.d.sync += issuing.eq(0)
        with m.If(self.start):
            run = self.run
            kk = run.lines * LINE
            bits = kk * cfg.tile_format.row_bits + Mux(run.bias, 32 * cfg.array.cols, 0)
            m.d.sync += [issuing.eq(1), left.eq(run.tiles), addr.eq(run.addr), k.eq(kk),
                         bias.eq(run.bias),
                         words.eq((bits + cfg.weight_port_bits - 1) // cfg.weight_port_bits)]
        return m


class Sequencer(wiring.Component):
    """Runs a command (``docs/linear.md``).

    A command is taken when idle. One whose ``tokens`` is not in ``1 .. tokens``, ``k`` not a
    multiple of 32 in ``32 .. k_max``, ``n`` not a multiple of ``array.cols`` in ``cols ..
    n_max``, or whose tiles would pass the end of the weight memory (``2**addr_bits`` words)
    is answered with that field's status at once and changes nothing else. Otherwise
    ``start`` for a cycle (``run`` holds the command from the next); once every line of x is
    stored (``count`` = ``want``), for each column tile the array's command (``m`` = T, ``k``,
    ``n`` = ``cols``), the weight feeder's (``m_tiles`` = ceil(T / rows)) and the x store's
    (``n`` = T) are each offered until taken, then the tile's T rows are awaited (``row``: a
    row taken); after the last tile's, idle.

    Timing: each step above takes the cycle after the previous one's condition (one cycle a
    state).

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout(config)))
    status : Out(Status)
    start : Out(1)
    run : Out(run_layout(config))
    want : Out(range(tokens * k_max / 32 + 1))
    count : In(range(tokens * k_max / 32 + 1))
    array_cmd, feed, x_cmd : Out(stream.Signature(...))
    row : In(1)
    """

    def __init__(self, config):
        self._config = config
        T, LM = config.tokens, config.k_max // LINE
        super().__init__({
            "cmd": In(stream.Signature(command_layout(config))), "status": Out(Status),
            "start": Out(1), "run": Out(run_layout(config)),
            "want": Out(range(T * LM + 1)), "count": In(range(T * LM + 1)),
            "array_cmd": Out(stream.Signature(gemm_command_layout(config.array))),
            "feed": Out(stream.Signature(feed_layout(config.tile_format))),
            "x_cmd": Out(stream.Signature(range(T + 1))),
            "row": In(1),
        })

    def _check(self, m, c) -> Signal:
        """The status a command ``c`` gets (OK when it can run)."""
        cfg = self._config
        C, P = cfg.array.cols, cfg.weight_port_bits
        status = Signal(Status)
        tiles = c.n >> (C.bit_length() - 1)
        bits = c.k * cfg.tile_format.row_bits + Mux(c.bias, 32 * C, 0)
        end = Signal(cfg.addr_bits + 40)
        m.d.comb += end.eq(c.addr + tiles * ((bits + P - 1) // P))
        with m.If((c.tokens == 0) | (c.tokens > cfg.tokens)):
            m.d.comb += status.eq(Status.BAD_TOKENS)
        with m.Elif((c.k == 0) | (c.k > cfg.k_max) | (c.k % LINE != 0)):
            m.d.comb += status.eq(Status.BAD_K)
        with m.Elif((c.n == 0) | (c.n > cfg.n_max) | (c.n % C != 0)):
            m.d.comb += status.eq(Status.BAD_N)
        with m.Elif(end > (1 << cfg.addr_bits)):
            m.d.comb += status.eq(Status.BAD_ADDR)
        with m.Else():
            m.d.comb += status.eq(Status.OK)
        return status

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        R, C = cfg.array.rows, cfg.array.cols
        run = self.run
        tile = Signal.like(run.tiles)
        rows_out = Signal(range(cfg.tokens + 1))
        sent_g, sent_b, sent_a = Signal(), Signal(), Signal()
        m.d.comb += [
            self.array_cmd.payload.m.eq(run.tokens), self.array_cmd.payload.n.eq(C),
            self.array_cmd.payload.k.eq(run.lines * LINE),
            self.feed.payload.m_tiles.eq((run.tokens + R - 1) // R),
            self.x_cmd.payload.eq(run.tokens),
        ]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    c = self.cmd.payload
                    status = self._check(m, c)
                    m.d.sync += self.status.eq(status)
                    with m.If(status == Status.OK):
                        m.d.comb += self.start.eq(1)
                        lines = c.k // LINE
                        m.d.sync += [run.tokens.eq(c.tokens), run.lines.eq(lines),
                                     run.tiles.eq(c.n >> (C.bit_length() - 1)),
                                     run.addr.eq(c.addr), run.bias.eq(c.bias),
                                     self.want.eq(c.tokens * lines), tile.eq(0)]
                        m.next = "LOAD"
            with m.State("LOAD"):
                with m.If(self.count == self.want):
                    m.next = "TILE"
            with m.State("TILE"):
                g_ok = sent_g | (self.array_cmd.valid & self.array_cmd.ready)
                b_ok = sent_b | (self.feed.valid & self.feed.ready)
                a_ok = sent_a | (self.x_cmd.valid & self.x_cmd.ready)
                m.d.comb += [self.array_cmd.valid.eq(~sent_g), self.feed.valid.eq(~sent_b),
                             self.x_cmd.valid.eq(~sent_a)]
                m.d.sync += [sent_g.eq(g_ok), sent_b.eq(b_ok), sent_a.eq(a_ok)]
                with m.If(g_ok & b_ok & a_ok):
                    m.d.sync += [sent_g.eq(0), sent_b.eq(0), sent_a.eq(0), rows_out.eq(0)]
                    m.next = "ROWS"
            with m.State("ROWS"):
                with m.If(self.row):
                    m.d.sync += rows_out.eq(rows_out + 1)
                    with m.If(rows_out == run.tokens - 1):
                        m.d.sync += tile.eq(tile + 1)
                        with m.If(tile == run.tiles - 1):
                            m.next = "IDLE"
                        with m.Else():
                            m.next = "TILE"
        return m
