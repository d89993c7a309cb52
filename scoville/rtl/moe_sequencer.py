"""The MoE block's sequencer and the list of the expert it runs (``docs/moe.md``)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .gemm import command_layout as gemm_command_layout
from .lib.formats import MX_BLOCK
from .lib.fp32 import fp32_bits
from .moe_dispatch import entry_layout
from .moe_weights import feed_layout

__all__ = ["ExpertList", "Sequencer", "Status", "command_layout"]


class Status(enum.IntEnum, shape=2):
    """Status of the latest batch command."""
    OK = 0
    BAD_TOKENS = 1
    BAD_WEIGHTS = 2


def command_layout(config) -> data.StructLayout:
    """A ``cmd`` beat: ``tokens``, the batch's T (1 .. ``config.tokens``; the field holds
    ``tokens + 1`` too, so that one too many is refused, not cut to a smaller count)."""
    return data.StructLayout({"tokens": range(config.tokens + 2)})


class ExpertList(wiring.Component):
    """The expert being run: its tokens' places in the batch (``tok``), their router weights
    (``w``) and their number (``n``). ``add`` takes the dispatch's ``entry`` (its ``first``
    starts a new list); ``shared`` makes it every one of ``tokens`` tokens at weight 1.0 (the
    shared expert). ``tokens`` is the block's most tokens a batch.

    Attributes
    ----------
    entry : In(dispatch entry_layout)
    add, shared : In(1)
    tokens : In(range(tokens + 1))
    tok : Out(ArrayLayout(range(tokens), tokens))
    w : Out(ArrayLayout(32, tokens))
    n : Out(range(tokens + 1))
    """

    def __init__(self, config):
        self._config = config
        T = config.tokens
        super().__init__({
            "entry": In(entry_layout(config)), "add": In(1), "shared": In(1),
            "tokens": In(range(T + 1)),
            "tok": Out(data.ArrayLayout(range(max(T, 2)), T)), "w": Out(data.ArrayLayout(32, T)),
            "n": Out(range(T + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        T, e = self._config.tokens, self.entry
        tok = [Signal(range(max(T, 2)), name=f"tok{i}") for i in range(T)]
        w = [Signal(32, name=f"w{i}") for i in range(T)]
        m.d.comb += [*(self.tok[i].eq(tok[i]) for i in range(T)),
                     *(self.w[i].eq(w[i]) for i in range(T))]
        place = Mux(e.first, 0, self.n)
        with m.If(self.add):
            for i in range(T):
                with m.If(place == i):
                    m.d.sync += [tok[i].eq(e.token), w[i].eq(e.weight)]
            m.d.sync += self.n.eq(place + 1)
        with m.If(self.shared):
            m.d.sync += self.n.eq(self.tokens)
            for i in range(T):
                m.d.sync += [tok[i].eq(i), w[i].eq(fp32_bits(1.0))]
        return m


class Sequencer(wiring.Component):
    """Runs a batch. ``config`` is the :class:`~scoville.rtl.moe.MoeConfig`.

    A command (``cmd``: T) is taken when idle; T outside ``1 .. tokens`` is answered
    ``BAD_TOKENS`` at once, else ``start`` for a cycle (the batch's units begin; ``tokens``
    holds T) and the sequencer waits for the dispatch to be ``sorting``. Then expert after
    expert: the dispatch's ``entry`` beats of one expert are taken (``add``; the group's
    ``last`` starts the expert: ``expert_start``, its tokens ``run_n`` and index ``run_e``);
    once every block of x is stored (``x_blocks``), for each column tile of the gate-up
    matmul (``gu``), then of the down matmul, the array's command, the weight feeder's and
    the A store's (``x_cmd`` or ``h_cmd``) are each offered until taken, then the tile's
    ``n`` rows are awaited (``row``: a row taken); after the gate-up phase the expert's
    activations must all be stored (``h_blocks``), after the down phase the combine's last
    write done (``busy`` low). After the batch's last expert (``last`` of the dispatch), the
    shared expert runs over every token (``shared`` for a cycle). Then the output: ``first``
    (its first word read) and, unless the weights were bad (``weights_bad``: status
    ``BAD_WEIGHTS``, no output, ``bad_batch``), ``out`` until the combine's ``o_last``.

    Timing: each step above takes the cycle after the previous one's condition (one cycle a
    state); ``in_expert`` is high from an expert's start to the end of its down phase.

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout(config)))
    status : Out(Status)
    start, expert_start, shared, gu, add, first, out, in_expert, bad_batch : Out(1)
    tokens, run_n : Out(range(tokens + 1))
    run_e : Out(range(all_experts))
    entry : In(stream.Signature(dispatch entry_layout))
    sorting, row, busy, weights_bad, o_last : In(1)
    n : In(range(tokens + 1))
    x_blocks, h_blocks : In
    array_cmd, feed, x_cmd, h_cmd : Out(stream.Signature(...))
    """

    def __init__(self, config):
        self._config = config
        T, H, I_ = config.tokens, config.hidden, config.intermediate
        super().__init__({
            "cmd": In(stream.Signature(command_layout(config))), "status": Out(Status),
            "start": Out(1), "tokens": Out(range(T + 1)),
            "entry": In(stream.Signature(entry_layout(config))), "add": Out(1),
            "sorting": In(1), "n": In(range(T + 1)),
            "expert_start": Out(1), "shared": Out(1), "run_n": Out(range(T + 1)),
            "run_e": Out(range(config.all_experts)), "gu": Out(1),
            "x_blocks": In(range(T * H // MX_BLOCK + 1)),
            "h_blocks": In(range(T * I_ // MX_BLOCK + 1)),
            "array_cmd": Out(stream.Signature(gemm_command_layout(config.array))),
            "feed": Out(stream.Signature(feed_layout(config.tile_format))),
            "x_cmd": Out(stream.Signature(range(T + 1))),
            "h_cmd": Out(stream.Signature(range(T + 1))),
            "row": In(1), "busy": In(1), "weights_bad": In(1), "o_last": In(1),
            "first": Out(1), "out": Out(1), "in_expert": Out(1), "bad_batch": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        T, H, I_, C, R = cfg.tokens, cfg.hidden, cfg.intermediate, cfg.array.cols, cfg.array.rows
        GT, DT = cfg.gate_up_tiles, cfg.down_tiles
        n, gu = self.n, self.gu
        last_group = Signal()
        shared_run = Signal()              # the shared expert's turn
        tile = Signal(range(max(GT, DT) + 1))
        sent_g, sent_b, sent_a = Signal(), Signal(), Signal()
        rows_out = Signal(range(T + 1))    # rows of the current tile handled
        m.d.comb += [
            self.array_cmd.payload.m.eq(n), self.array_cmd.payload.n.eq(C),
            self.array_cmd.payload.k.eq(Mux(gu, H, I_)),
            self.feed.payload.m_tiles.eq((n + R - 1) // R),
            self.x_cmd.payload.eq(n), self.h_cmd.payload.eq(n),
        ]
        entry = self.entry.payload

        def begin_expert():
            m.d.comb += self.expert_start.eq(1)
            m.d.sync += [gu.eq(1), tile.eq(0)]
            m.next = "WAIT_X"

        with m.FSM() as fsm:
            m.d.comb += self.in_expert.eq(fsm.ongoing("WAIT_X") | fsm.ongoing("TILE")
                                          | fsm.ongoing("ROWS") | fsm.ongoing("DRAIN"))
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    t_ = self.cmd.payload.tokens
                    bad = (t_ == 0) | (t_ > T)
                    m.d.sync += self.status.eq(Mux(bad, Status.BAD_TOKENS, Status.OK))
                    with m.If(~bad):
                        m.d.comb += self.start.eq(1)
                        m.d.sync += [self.tokens.eq(t_), shared_run.eq(0)]
                        m.next = "INPUT"
            with m.State("INPUT"):
                with m.If(self.sorting):
                    m.next = "GROUP"
            with m.State("GROUP"):
                # One expert's list from the dispatch.
                m.d.comb += [self.entry.ready.eq(1), self.add.eq(self.entry.valid)]
                with m.If(self.entry.valid & entry.last):
                    m.d.comb += [self.run_n.eq(entry.count), self.run_e.eq(entry.expert)]
                    m.d.sync += [last_group.eq(entry.end), rows_out.eq(0)]
                    begin_expert()
            with m.State("WAIT_X"):
                # Every block of x is in the store (the quantizer drained).
                with m.If(self.x_blocks == self.tokens * (H // MX_BLOCK)):
                    m.next = "TILE"
            with m.State("TILE"):
                # One column tile: the array's command, the weight feeder's and the A
                # store's, each taken once; then its rows.
                g_ok = sent_g | (self.array_cmd.valid & self.array_cmd.ready)
                b_ok = sent_b | (self.feed.valid & self.feed.ready)
                a_ok = sent_a | Mux(gu, self.x_cmd.valid & self.x_cmd.ready,
                                    self.h_cmd.valid & self.h_cmd.ready)
                m.d.comb += [self.array_cmd.valid.eq(~sent_g), self.feed.valid.eq(~sent_b),
                             self.x_cmd.valid.eq(gu & ~sent_a),
                             self.h_cmd.valid.eq(~gu & ~sent_a)]
                m.d.sync += [sent_g.eq(g_ok), sent_b.eq(b_ok), sent_a.eq(a_ok)]
                with m.If(g_ok & b_ok & a_ok):
                    m.d.sync += [sent_g.eq(0), sent_b.eq(0), sent_a.eq(0), rows_out.eq(0)]
                    m.next = "ROWS"
            with m.State("ROWS"):
                with m.If(self.row):
                    m.d.sync += rows_out.eq(rows_out + 1)
                    with m.If(rows_out == n - 1):
                        m.d.sync += tile.eq(tile + 1)
                        with m.If(tile == Mux(gu, GT, DT) - 1):
                            m.next = "DRAIN"
                        with m.Else():
                            m.next = "TILE"
            with m.State("DRAIN"):
                # The phase's last rows through SwiGLU and the quantizer, or the combine.
                with m.If(gu):
                    with m.If(self.h_blocks == n * (I_ // MX_BLOCK)):
                        m.d.sync += [gu.eq(0), tile.eq(0)]
                        m.next = "TILE"
                with m.Elif(~self.busy):
                    with m.If(shared_run | (last_group & (not cfg.shared))):
                        m.next = "OUT_FIRST"
                    with m.Elif(last_group):
                        # The shared expert: every token, weight 1.0.
                        m.d.comb += [self.shared.eq(1), self.run_n.eq(self.tokens),
                                     self.run_e.eq(cfg.experts)]
                        m.d.sync += [last_group.eq(0), shared_run.eq(1)]
                        begin_expert()
                    with m.Else():
                        m.next = "GROUP"
            with m.State("OUT_FIRST"):
                # The output's first word is read; a batch whose weights came with a
                # misplaced ``last`` emits nothing.
                m.d.comb += self.first.eq(1)
                with m.If(self.weights_bad):
                    m.d.sync += self.status.eq(Status.BAD_WEIGHTS)
                    m.d.comb += self.bad_batch.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.next = "OUT"
            with m.State("OUT"):
                m.d.comb += self.out.eq(1)
                with m.If(self.o_last):
                    m.next = "IDLE"
        return m
