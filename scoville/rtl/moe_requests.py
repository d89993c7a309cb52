"""The MoE block's weight requests: every column tile of every expert a batch chose, asked
of the fetch engine and announced to the weight tiles' loader, and the check of the memory's
responses (``docs/moe.md``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .fetch import request_layout
from .lib.pipeline import offer_together
from .moe_weights import tile_layout

__all__ = ["ResponseCheck", "WeightRequests"]


class WeightRequests(wiring.Component):
    """Once a batch's experts are known, asks for each one's column tiles in turn (ascending
    expert index, the shared expert last): its gate-up tiles then its down tiles, each as a
    fetch command (the tile's address and words, :meth:`~scoville.rtl.moe.MoeConfig
    .tile_words`) and a tile descriptor for the loader (``k``, biases). ``config`` is the
    :class:`~scoville.rtl.moe.MoeConfig`.

    A cycle with ``arm`` high readies the next batch; the first cycle after it with
    ``sorting`` high takes ``experts`` (the dispatch's chosen experts) and the requests begin.

    Timing: a tile's two beats are offered from the cycle after the previous tile's are both
    taken, each held until taken (one may be taken before the other).

    Attributes
    ----------
    fetch : Out(stream.Signature(fetch request_layout))
    tile : Out(stream.Signature(tile_layout(config.tile_format)))
    arm, sorting : In(1)
    experts : In(config.experts)
    """

    def __init__(self, config):
        self._config = config
        fc = config.fetch
        super().__init__({
            "fetch": Out(stream.Signature(request_layout(fc.addr_bits, fc.len_bits))),
            "tile": Out(stream.Signature(tile_layout(config.tile_format))),
            "arm": In(1), "sorting": In(1), "experts": In(config.experts),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        H, I_, XE = cfg.hidden, cfg.intermediate, cfg.all_experts
        GT, DT = cfg.gate_up_tiles, cfg.down_tiles
        chosen = Signal(XE)                # experts still to request
        issuing = Signal()
        e_req = Signal(range(max(XE, 2)))
        for e in reversed(range(XE)):
            with m.If(chosen[e]):
                m.d.comb += e_req.eq(e)
        t_req = Signal(range(GT + DT + 1))
        gu_req = t_req < GT
        tw_gu, tw_dn = cfg.tile_words(H), cfg.tile_words(I_)
        addr = Signal(cfg.fetch.addr_bits + 1)
        m.d.comb += addr.eq(e_req * cfg.expert_words
                            + Mux(gu_req, t_req * tw_gu, GT * tw_gu + (t_req - GT) * tw_dn))
        m.d.comb += [
            self.fetch.payload.addr.eq(addr),
            self.fetch.payload.len.eq(Mux(gu_req, tw_gu, tw_dn)),
            self.tile.payload.k.eq(Mux(gu_req, H, I_)),
            self.tile.payload.bias.eq(int(cfg.biases)),
        ]
        with m.If(offer_together(m, [self.fetch, self.tile], issuing, name="tile_req")):
            m.d.sync += t_req.eq(t_req + 1)
            with m.If(t_req == GT + DT - 1):
                m.d.sync += t_req.eq(0)
                rest = chosen & ~(Const(1, XE) << e_req)[:XE]
                m.d.sync += chosen.eq(rest)
                with m.If(rest == 0):
                    m.d.sync += issuing.eq(0)
        armed = Signal()                   # the batch's experts not yet taken
        with m.If(armed & self.sorting):
            m.d.sync += [armed.eq(0), issuing.eq(1), t_req.eq(0),
                         chosen.eq(Cat(self.experts, Const(int(bool(cfg.shared)), 1))[:XE]
                         if cfg.shared else self.experts)]
        with m.If(self.arm):
            m.d.sync += armed.eq(1)
        return m


class ResponseCheck(wiring.Component):
    """Checks that the memory's responses end where the requests do: the fetch engine asks
    for each column tile's words in bursts of ``fetch.burst`` (the last one shorter), tile
    after tile, each expert's gate-up tiles then its down tiles; ``bad`` is set by a word
    taken (``take``) whose ``last`` is not where its burst ends, and cleared by ``clear``.
    ``config`` is the :class:`~scoville.rtl.moe.MoeConfig`.

    Attributes
    ----------
    take, last, clear : In(1)
    bad : Out(1)
    """

    def __init__(self, config):
        self._config = config
        super().__init__({"take": In(1), "last": In(1), "clear": In(1), "bad": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        H, I_, GT, DT = cfg.hidden, cfg.intermediate, cfg.gate_up_tiles, cfg.down_tiles
        w_tile = Signal(range(GT + DT))
        w_word = Signal(range(max(cfg.tile_words(H), cfg.tile_words(I_))))
        w_beat = Signal(range(cfg.fetch.burst))
        tile_end = w_word == Mux(w_tile < GT, cfg.tile_words(H), cfg.tile_words(I_)) - 1
        burst_end = tile_end | (w_beat == cfg.fetch.burst - 1)
        with m.If(self.take):
            m.d.sync += [w_word.eq(Mux(tile_end, 0, w_word + 1)),
                         w_beat.eq(Mux(burst_end, 0, w_beat + 1))]
            with m.If(tile_end):
                m.d.sync += w_tile.eq(Mux(w_tile == GT + DT - 1, 0, w_tile + 1))
            with m.If(self.last != burst_end):
                m.d.sync += self.bad.eq(1)
        with m.If(self.clear):
            m.d.sync += self.bad.eq(0)
        return m
