"""Unit model (:mod:`scoville.sim.cycles.unit`) of
:class:`scoville.rtl.moe_requests.WeightRequests`, from its docstring. Checked against the RTL
unit alone (``tests/test_moe_units.py``)."""

from __future__ import annotations

from .unit import hand_over_together

__all__ = ["WeightRequests"]


class WeightRequests:
    """The weight requests: once armed (:meth:`arm`) and the dispatch is sorting
    (:attr:`sorting`, set by the composed model each cycle), each chosen expert's column tiles
    in turn (:meth:`start` gives them: ascending index, the shared one last), gate-up then
    down; a tile's fetch command and loader descriptor are offered from the cycle after the
    previous tile's are both taken, each held until taken.

    Parameters
    ----------
    config : MoeConfig
    fetch, tile : output port
        Payloads: ``(address, words)`` and the tile's ``(k, bias)``.
    """

    __slots__ = ("_armed", "_cfg", "_experts", "_next", "_pending", "_sent", "_t", "fetch",
                 "issuing", "sorting", "tile")

    def __init__(self, config, fetch, tile):
        self._cfg, self.fetch, self.tile = config, fetch, tile
        self._armed = self.issuing = self.sorting = False
        self._sent = [False, False]   # the tile's fetch command and descriptor taken
        self._t = 0
        self._experts: list[int] = []
        self._next: list[int] | None = None
        self._pending: list[int] = []

    def arm(self, experts: list[int]) -> None:
        """In the cycle about to be stepped: the next batch's experts (taken when sorting)."""
        self._next = experts

    @property
    def fetch_valid(self) -> bool:
        return self.issuing and not self._sent[0]

    @property
    def tile_valid(self) -> bool:
        return self.issuing and not self._sent[1]

    def _gate_up(self) -> bool:
        return self._t < self._cfg.gate_up_tiles

    @property
    def fetch_payload(self) -> tuple[int, int]:
        cfg, gt = self._cfg, self._cfg.gate_up_tiles
        tw_gu, tw_dn = cfg.tile_words(cfg.hidden), cfg.tile_words(cfg.intermediate)
        base = self._experts[0] * cfg.expert_words
        if self._gate_up():
            return base + self._t * tw_gu, tw_gu
        return base + gt * tw_gu + (self._t - gt) * tw_dn, tw_dn

    @property
    def tile_payload(self) -> tuple[int, bool]:
        """The tile's ``(k, bias)``."""
        k = self._cfg.hidden if self._gate_up() else self._cfg.intermediate
        return k, self._cfg.biases

    def step(self, t: int) -> None:
        if self.issuing:
            self._sent, taken = hand_over_together(t, (self.fetch, self.tile), self._sent)
            if taken:
                self._t += 1
                if self._t == self._cfg.gate_up_tiles + self._cfg.down_tiles:
                    self._t = 0
                    self._experts.pop(0)
                    self.issuing = bool(self._experts)
        if self._armed and self.sorting:
            self._armed, self.issuing, self._t = False, True, 0
            self._experts = list(self._pending)
        if self._next is not None:
            self._armed, self._pending, self._next = True, self._next, None
