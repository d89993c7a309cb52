"""Attention's A sequencer: the array's A beats, Q's columns for ``Q K^T`` and P's (the
softmax's exponentials) for ``P V``, and the running sum of the exponentials
(``docs/attention.md``)."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream
from amaranth.lib.wiring import In, Out

from .attention_score import score_factor_bits, score_rows, score_tiles
from .attention_walk import Walker, window_start
from .gemm import operand_layouts
from .kvcache import TOKEN_BITS
from .lib.comb import wire
from .lib.fp32 import ONE, fp32_add, fp32_exp2, fp32_mul, fp32_to_bf16

__all__ = ["ASequencer", "query_entries"]

_SIGN = 0x8000_0000


def query_entries(cfg) -> int:
    """Entries of each row's Q buffer: a step's row tiles x KV heads (at least two)."""
    return max(cfg.step_tiles * cfg.kv.kv_heads, 2)


class ASequencer(Walker):
    """Walks the step's chunks as the array takes its A beats (``start``, ``lo``, ``base``,
    ``tokens`` as :class:`~scoville.rtl.attention_walk.CommandIssuer`'s) and offers them
    through a two-stage pipeline. ``config`` is the
    :class:`~scoville.rtl.attention.AttentionConfig`.

    - ``Q K^T``: for each tile of ``cols`` positions, ``head_dim`` beats, beat k the row
      tile's rows' Q element k (read from the query buffer: ``q_addr``, ``q_en``, ``q_data``).
    - ``P V`` (once ``max_ready``): one beat per position of the chunk, once per column tile
      of V: each row's ``exp2(S * scale * log2 e - m_run)`` rounded to BF16, 0 outside the
      row's range (its token's window, causal), S read from the score unit (``s_addr``,
      ``s_en``, ``s_data``). On the first pass the row's exponentials are summed in FP32 in
      position order; at the chunk's end ``l_sum = l_sum * alpha + sum`` (a head's first
      chunk starts from 1 with sinks, else 0). ``max_done`` is raised with the chunk's last
      beat of its last pass.

    Timing: stage 1 takes the walk's next beat in any cycle stage 2 is empty or the array
    takes its beat, while the step attends (``Q K^T``; ``P V`` only with ``max_ready``);
    stage 2 offers it the next cycle. ``waiting``: a ``P V`` waits for the chunk's max.

    Attributes
    ----------
    start : In(1)
    lo, base : In(TOKEN_BITS)
    tokens : In(9)
    window : In(16)
    attending : In(1)
    a : Out(stream.Signature(the array's A layout))
    q_addr : Out(range(query_entries)), q_en : Out(1)
    q_data : In(ArrayLayout(ArrayLayout(16, head_dim), rows))
    s_addr : Out(range(score_tiles)), s_en : Out(1)
    s_data : In(ArrayLayout(ArrayLayout(32, cols), rows))
    m_run, alpha : In(ArrayLayout(32, rows))
    max_ready : In(1)
    max_done : Out(1)
    l_sum : Out(ArrayLayout(32, rows))
    waiting : Out(1)
    """

    def __init__(self, config):
        rows, cols, tiles = score_rows(config), config.array.cols, score_tiles(config)
        d = config.kv.head_dim
        super().__init__(config, {
            "attending": In(1),
            "a": Out(stream.Signature(operand_layouts(config.array)[0])),
            "q_addr": Out(range(query_entries(config))), "q_en": Out(1),
            "q_data": In(data.ArrayLayout(data.ArrayLayout(16, d), rows)),
            "s_addr": Out(range(max(tiles, 2))), "s_en": Out(1),
            "s_data": In(data.ArrayLayout(data.ArrayLayout(32, cols), rows)),
            "m_run": In(data.ArrayLayout(32, rows)), "alpha": In(data.ArrayLayout(32, rows)),
            "max_ready": In(1), "max_done": Out(1),
            "l_sum": Out(data.ArrayLayout(32, rows)), "waiting": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        H, G, D, C, VT = cfg.kv.kv_heads, cfg.group, cfg.kv.head_dim, cfg.array.cols, cfg.v_tiles
        RM, tiles = score_rows(cfg), score_tiles(cfg)
        aqw = self._walk(m, "aqw")
        s1 = Signal()
        s1_p = Signal()
        s1_k = Signal(range(max(D, 2)))
        s1_lane = Signal(range(max(C, 2)))
        s1_mask = Signal(RM)
        s1_first = Signal()
        s1_last = Signal()
        s1_headfirst = Signal()
        s1_sum = Signal()  # P's first pass (of VT): its exponentials join the running sum
        aq_vt = Signal(range(max(VT, 2)))
        aq_k = Signal(range(max(D, 2)))
        aq_tb = Signal(TOKEN_BITS + 1)
        aq_j = Signal(TOKEN_BITS + 1)
        aq_lane = Signal(range(max(C, 2)))
        aq_tile = Signal(range(max(tiles, 2)))
        en = ~self.a.valid | self.a.ready
        walking = self.attending & ~aqw.done
        issue_q = walking & ~aqw.sub
        issue_p = walking & aqw.sub & self.max_ready
        m.d.comb += [self.waiting.eq(walking & aqw.sub & ~self.max_ready),
                     self.s_addr.eq(aq_tile), self.s_en.eq(en),
                     self.q_addr.eq(aqw.tile * H + aqw.h), self.q_en.eq(en)]
        # Each row's range: its token's position p and window start.
        aq_pos = wire(m, "aq_pos", aqw.a0 + aq_j, unsigned(TOKEN_BITS + 1))
        masks = []
        for r in range(RM):
            p_r = wire(m, f"aq_p{r}", aqw.pos0 + r // G, unsigned(TOKEN_BITS + 1))
            in_window = aq_pos >= window_start(self.window, p_r)
            masks.append(in_window & (aq_pos <= p_r))
        # Stage 1: the walk's next beat.
        with m.If(en):
            m.d.sync += [s1.eq(issue_q | issue_p), s1_p.eq(aqw.sub),
                         s1_k.eq(aq_k), s1_lane.eq(aq_lane),
                         s1_mask.eq(Cat(*masks)), s1_first.eq(aq_j == 0),
                         s1_last.eq(aq_j == aqw.n - 1), s1_headfirst.eq(aqw.first),
                         s1_sum.eq(aq_vt == 0)]
            with m.If(issue_q):
                m.d.sync += aq_k.eq(aq_k + 1)
                with m.If(aq_k == D - 1):
                    m.d.sync += [aq_k.eq(0), aq_tb.eq(aq_tb + C)]
                    with m.If(aq_tb + C >= aqw.n):
                        m.d.sync += [aq_tb.eq(0), aqw.sub.eq(1), aq_j.eq(0), aq_lane.eq(0),
                                     aq_tile.eq(0)]
            with m.If(issue_p):
                m.d.sync += [aq_j.eq(aq_j + 1), aq_lane.eq(aq_lane + 1)]
                with m.If(aq_lane == C - 1):
                    m.d.sync += [aq_lane.eq(0), aq_tile.eq(aq_tile + 1)]
                with m.If(aq_j == aqw.n - 1):
                    # P again for the next column tile of V, or on to the next chunk.
                    m.d.sync += [aq_j.eq(0), aq_lane.eq(0), aq_tile.eq(0), aq_vt.eq(aq_vt + 1)]
                    with m.If(aq_vt == VT - 1):
                        m.d.comb += self.max_done.eq(1)
                        m.d.sync += aq_vt.eq(0)
                        aqw.advance(m)
        # Stage 2: the beat. Q: the group's element k; P: exp2(S * c - m') per row, rounded.
        l_acc = [Signal(32, name=f"lacc{r}") for r in range(RM)]
        l_sum = [Signal(32, name=f"l{r}") for r in range(RM)]
        m.d.comb += [self.l_sum[r].eq(l_sum[r]) for r in range(RM)]
        lanes = []
        for r in range(RM):
            s_val = Array(self.s_data[r][j] for j in range(C))[s1_lane]
            sc = fp32_mul(m, s_val, score_factor_bits(cfg), name=f"sc{r}")
            x = fp32_add(m, sc, self.m_run[r] ^ _SIGN, name=f"sx{r}")
            p = wire(m, f"p{r}", Mux(s1_mask[r], fp32_exp2(m, x, name=f"pexp{r}"), 0), 32)
            lanes.append(Mux(s1_p, fp32_to_bf16(m, p, name=f"pb{r}"), self.q_data[r][s1_k]))
            acc = fp32_add(m, Mux(s1_first, 0, l_acc[r]), p, name=f"lacc_add{r}")
            l_base = fp32_mul(m, Mux(s1_headfirst, ONE if cfg.sinks else 0, l_sum[r]),
                              self.alpha[r], name=f"lmul{r}")
            with m.If(en & s1 & s1_p & s1_sum):
                m.d.sync += l_acc[r].eq(acc)
                with m.If(s1_last):
                    m.d.sync += l_sum[r].eq(fp32_add(m, l_base, acc, name=f"lnew{r}"))
        with m.If(en):
            # Rows past the tile's: zeros.
            m.d.sync += [self.a.valid.eq(s1), self.a.payload.data.eq(Cat(*lanes))]
        return m
