"""Attention's score unit: the array's rows, ``Q K^T``'s kept as scores with their running max
and ``alpha``, ``P V``'s passed on to the normalizer (``docs/attention.md``)."""

import math

from amaranth.hdl import Array, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .attention_walk import Walker, window_start
from .kvcache import TOKEN_BITS
from .lib.comb import max_tree, wire
from .lib.fp32 import ONE, fp32_add, fp32_bits, fp32_exp2, fp32_key, fp32_mul

__all__ = ["ScoreUnit", "pv_layout", "score_rows", "score_tiles"]

_NEG_INF = 0xFF80_0000
_SIGN = 0x8000_0000


def score_rows(cfg) -> int:
    """The rows of a full row tile (the array's rows a step uses): tokens of a tile x group."""
    return cfg.tile_tokens * cfg.group


def score_tiles(cfg) -> int:
    """Entries of a row's score memory: a chunk's tiles of ``cols`` positions, and one more
    (a chunk whose first position is not a multiple of 32 spans one more tile)."""
    return -(-cfg.chunk // cfg.array.cols) + 1


def score_factor_bits(cfg) -> int:
    """``scale * log2(e)`` in binary32: a score times it is a base-2 logit."""
    return fp32_bits(cfg.score_scale * math.log2(math.e))


def pv_layout(cfg) -> data.StructLayout:
    """A row of ``P V`` as the score unit passes it to the normalizer: ``data`` (the array's
    row), ``row`` and ``tile`` (its row of the row tile and column tile of O), ``first`` (the
    head's first chunk: O starts from 0), ``last`` (the head's last row: its outputs follow),
    ``alpha`` (the row's rescale of O)."""
    rows, vt = score_rows(cfg), cfg.v_tiles
    return data.StructLayout({"data": data.ArrayLayout(32, cfg.array.cols),
                              "row": range(max(rows, 2)), "tile": range(max(vt, 2)),
                              "first": 1, "last": 1, "alpha": 32})


class ScoreUnit(Walker):
    """Takes the array's rows while the step attends, walking the step's chunks as the array
    computes them (``start``, ``lo``, ``base``, ``tokens`` as
    :class:`~scoville.rtl.attention_walk.CommandIssuer`'s). ``config`` is the
    :class:`~scoville.rtl.attention.AttentionConfig`.

    - ``Q K^T``'s rows (a row tile's ``rows`` rows per tile of ``cols`` positions): each is
      stored in its row's score memory (entry: the tile) and its largest score within the
      row's range (the row's token's window, causal), times ``scale * log2(e)``, raises the
      row's running max ``m_run``; a head's first chunk starts from the row's query head's
      sink logit (times log2 e, ``sink_en``), else minus infinity. The cycle after the chunk's
      last row, ``alpha = exp2(m_old - m_run)`` (1 when equal) is computed for every row, and
      from the next cycle ``max_ready`` is high until the A sequencer raises ``max_done``.
    - ``P V``'s rows (column tile by column tile, row by row within each) go on ``pv`` with
      their row, column tile, the row's ``alpha`` and whether the chunk is the head's first or
      its last row; the unit takes them as ``pv`` does.

    Timing: ``rows`` is ready in a ``Q K^T`` and when ``pv`` is ready in a ``P V``. A score
    read (``s_addr``, ``s_en``) gives every row's entry in the next cycle and holds it while
    ``s_en`` is low. ``done`` is high from the cycle after the walk's last ``P V`` row.

    Attributes
    ----------
    start : In(1)
    lo, base : In(TOKEN_BITS)
    tokens : In(9)
    window : In(16)
    attending : In(1)
    rows : In(stream.Signature(ArrayLayout(32, cols)))
    pv : Out(stream.Signature(pv_layout(config)))
    sink_en : In(1)
    sink_head : In(8)
    sink_value : In(32)
        A head's sink logit, binary32.
    s_addr : In(range(score_tiles)), s_en : In(1)
    s_data : Out(ArrayLayout(ArrayLayout(32, cols), rows))
    m_run, alpha : Out(ArrayLayout(32, rows))
    max_ready : Out(1)
    max_done : In(1)
    done : Out(1)
    """

    def __init__(self, config):
        rows, cols, tiles = score_rows(config), config.array.cols, score_tiles(config)
        super().__init__(config, {
            "attending": In(1),
            "rows": In(stream.Signature(data.ArrayLayout(32, cols))),
            "pv": Out(stream.Signature(pv_layout(config))),
            "sink_en": In(1), "sink_head": In(8), "sink_value": In(32),
            "s_addr": In(range(max(tiles, 2))), "s_en": In(1),
            "s_data": Out(data.ArrayLayout(data.ArrayLayout(32, cols), rows)),
            "m_run": Out(data.ArrayLayout(32, rows)), "alpha": Out(data.ArrayLayout(32, rows)),
            "max_ready": Out(1), "max_done": In(1), "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        H, G, C, VT = cfg.kv.kv_heads, cfg.group, cfg.array.cols, cfg.v_tiles
        RM, tiles = score_rows(cfg), score_tiles(cfg)
        ocw = self._walk(m, "ocw")
        m.d.comb += self.done.eq(ocw.done)
        m0 = Array(Signal(32, init=_NEG_INF, name=f"m0_{i}") for i in range(cfg.q_heads))
        with m.If(self.sink_en):
            log2e = fp32_bits(math.log2(math.e))
            m.d.sync += m0[self.sink_head].eq(fp32_mul(m, self.sink_value, log2e, name="sinkm"))
        oc_tb = Signal(TOKEN_BITS + 1)
        oc_r = Signal(range(max(RM, 2)))
        oc_tile = Signal(range(max(tiles, 2)))
        oc_vt = Signal(range(max(VT, 2)))
        m_run = [Signal(32, name=f"mrun{r}") for r in range(RM)]
        m_old = [Signal(32, name=f"mold{r}") for r in range(RM)]
        alpha = [Signal(32, name=f"alpha{r}") for r in range(RM)]
        alpha_pending = Signal()
        m.d.comb += [self.m_run[r].eq(m_run[r]) for r in range(RM)]
        m.d.comb += [self.alpha[r].eq(alpha[r]) for r in range(RM)]
        row = self.rows.payload
        m.d.comb += self.rows.ready.eq(~ocw.sub | self.pv.ready)
        take = self.rows.valid & self.rows.ready & self.attending
        for r in range(RM):
            mem = Memory(shape=data.ArrayLayout(32, C), depth=tiles, init=[])
            m.submodules[f"s{r}"] = mem
            wp, rp = mem.write_port(), mem.read_port()
            m.d.comb += [wp.addr.eq(oc_tile), wp.data.eq(row),
                         wp.en.eq(take & ~ocw.sub & (oc_r == r)),
                         rp.addr.eq(self.s_addr), rp.en.eq(self.s_en), self.s_data[r].eq(rp.data)]

        # Q K^T: the row's largest score in its range raises its running max.
        base_pos = wire(m, "oc_pos", ocw.a0 + oc_tb, unsigned(TOKEN_BITS + 1))
        # The row's range: its token's position p (the tile's first, plus the row's token).
        oc_p = wire(m, "oc_p", ocw.pos0 + Array(r // G for r in range(RM))[oc_r],
                    unsigned(TOKEN_BITS + 1))
        j_lo = wire(m, "oc_jlo", window_start(self.window, oc_p) - base_pos, signed(TOKEN_BITS + 3))
        j_hi = wire(m, "oc_jhi", oc_p - base_pos, signed(TOKEN_BITS + 3))
        keys = []
        for j in range(C):
            valid = (j >= j_lo) & (j <= j_hi)
            keys.append(wire(m, f"key{j}", Mux(valid, fp32_key(m, row[j], name=f"rk{j}"), 0),
                             unsigned(32)))
        top = max_tree(m, "kmax", keys)
        any_valid = top != 0
        row_max = wire(m, "row_max", Mux(top[31], top & 0x7FFF_FFFF, ~top), unsigned(32))
        s_max = fp32_mul(m, row_max, score_factor_bits(cfg), name="smax")
        s_max_key = fp32_key(m, s_max, name="smax_key")
        init = ocw.first & (oc_tb == 0)
        m0_sel = Array(Array(m0[h * G + r % G] for h in range(H))[ocw.h]
                       for r in range(RM))[oc_r]
        m_base = wire(m, "m_base", Mux(init, m0_sel, Array(m_run)[oc_r]), 32)
        m_new = Mux(any_valid & (s_max_key > fp32_key(m, m_base, name="mbase_key")), s_max,
                    m_base)
        with m.If(take & ~ocw.sub):
            m.d.sync += [Array(m_run)[oc_r].eq(m_new), oc_r.eq(oc_r + 1)]
            with m.If(init):
                m.d.sync += Array(m_old)[oc_r].eq(m0_sel)
            with m.If(oc_r == ocw.rows - 1):
                m.d.sync += [oc_r.eq(0), oc_tb.eq(oc_tb + C), oc_tile.eq(oc_tile + 1)]
                with m.If(oc_tb + C >= ocw.n):
                    m.d.sync += [oc_tb.eq(0), oc_tile.eq(0), ocw.sub.eq(1),
                                 alpha_pending.eq(1)]
        # The chunk's max is ready for P until the A sequencer is done with it.
        with m.If(self.max_done):
            m.d.sync += self.max_ready.eq(0)
        with m.If(alpha_pending):
            m.d.sync += [alpha_pending.eq(0), self.max_ready.eq(1)]
            for r in range(RM):
                same = (m_run[r] == m_old[r]) | (((m_run[r] | m_old[r]) & 0x7FFF_FFFF) == 0)
                diff = fp32_add(m, m_old[r], m_run[r] ^ _SIGN, name=f"adiff{r}")
                m.d.sync += [alpha[r].eq(Mux(same, ONE, fp32_exp2(m, diff, name=f"aexp{r}"))),
                             m_old[r].eq(m_run[r])]

        # P V: the rows to the normalizer, column tile by column tile.
        pv = self.pv.payload
        last_row = oc_r == ocw.rows - 1
        m.d.comb += [self.pv.valid.eq(self.rows.valid & ocw.sub & self.attending),
                     pv.data.eq(row), pv.row.eq(oc_r), pv.tile.eq(oc_vt), pv.first.eq(ocw.first),
                     pv.last.eq(ocw.last_chunk & last_row & (oc_vt == VT - 1)),
                     pv.alpha.eq(Array(alpha)[oc_r])]
        with m.If(take & ocw.sub):
            m.d.sync += oc_r.eq(oc_r + 1)
            with m.If(last_row):
                m.d.sync += [oc_r.eq(0), oc_vt.eq(oc_vt + 1)]
                with m.If(oc_vt == VT - 1):
                    m.d.sync += oc_vt.eq(0)
                    ocw.advance(m)
        return m
