"""Unit model (:mod:`scoville.sim.cycles.unit`) of
:class:`scoville.rtl.moe_sequencer.Sequencer`, from its docstring."""

from __future__ import annotations

from scoville.rtl.lib.formats import MX_BLOCK

__all__ = ["Sequencer"]

_EXPERT_STATES = ("WAIT_X", "TILE", "ROWS", "DRAIN")


class Sequencer:
    """The sequencer: one state a cycle, as its RTL unit's docstring walks them. A command's
    payload is the batch (:class:`~scoville.sim.cycles.moe.Batch`: ``tokens``, ``groups``,
    ``fault``); an entry's is ``(expert, count, last, end)``.

    The composed model sets the neighbours' signals for the cycle about to be stepped:
    :attr:`sorting`, :attr:`n` (the expert list's), :attr:`x_blocks`, :attr:`h_blocks`,
    :attr:`row` (a row of the array taken), :attr:`busy` (the combine's) and :attr:`o_last`.

    Parameters
    ----------
    config : MoeConfig
    cmd : input port
    entry : input port
        The dispatch's sorted choices.
    array_cmd, feed, x_cmd, h_cmd : output port
        A column tile's commands (no payload: the composed model gives the array's).
    """

    __slots__ = ("_cfg", "_last_group", "_rows", "_sent", "_shared_run", "_tile", "array_cmd",
                 "batch", "busy", "cmd", "entry", "feed", "gu", "h_blocks", "h_cmd", "n",
                 "o_last", "row", "sorting", "state", "x_blocks", "x_cmd")

    def __init__(self, config, cmd, entry, array_cmd, feed, x_cmd, h_cmd):
        self._cfg = config
        self.cmd, self.entry = cmd, entry
        self.array_cmd, self.feed, self.x_cmd, self.h_cmd = array_cmd, feed, x_cmd, h_cmd
        self.state, self.batch = "IDLE", None
        self.gu = True
        self._tile = self._rows = 0
        self._last_group = self._shared_run = False
        self._sent = [False, False, False]  # array, feed, store
        self.sorting = self.row = self.busy = self.o_last = False
        self.n = self.x_blocks = self.h_blocks = 0

    # ---- What it shows in this cycle.
    @property
    def entry_ready(self) -> bool:
        return self.state == "GROUP"

    def tile_valid(self) -> tuple[bool, bool, bool, bool]:
        """The array's, the feeder's, the x store's and the h store's commands offered."""
        if self.state != "TILE":
            return False, False, False, False
        g, b, a = (not s for s in self._sent)
        return g, b, a and self.gu, a and not self.gu

    @property
    def in_expert(self) -> bool:
        return self.state in _EXPERT_STATES

    @property
    def first(self) -> bool:
        return self.state == "OUT_FIRST"

    @property
    def out(self) -> bool:
        return self.state == "OUT"

    @property
    def bad_batch(self) -> bool:
        return self.first and self.batch.fault

    def step(self, t: int) -> str | None:
        """Cycle ``t``; returns what starts in it: ``batch``, ``expert`` (with the entry's
        payload taken, on the group's last), ``shared``, or None."""
        cfg, state = self._cfg, self.state
        H = cfg.hidden
        if state == "IDLE" and self.cmd.offers(t):
            self.batch = self.cmd.payload
            self.cmd.take(t)
            if self.batch.groups is not None:
                self._shared_run, self.state = False, "INPUT"
                return "batch"
        elif state == "INPUT" and self.sorting:
            self.state = "GROUP"
        elif state == "GROUP" and self.entry.offers(t):
            _, _, last, end = self.entry.payload
            self.entry.take(t)
            if last:
                self._last_group, self._rows = end, 0
                return self._begin()
        elif state == "WAIT_X" and self.x_blocks == self.batch.tokens * (H // MX_BLOCK):
            self.state = "TILE"
        elif state == "TILE":
            ports = (self.array_cmd, self.feed, self.x_cmd if self.gu else self.h_cmd)
            for k, port in enumerate(ports):
                if not self._sent[k] and port.accepts(t):
                    port.take(t)
                    self._sent[k] = True
            if all(self._sent):
                self._sent, self._rows, self.state = [False, False, False], 0, "ROWS"
        elif state == "ROWS" and self.row:
            self._rows += 1
            if self._rows == self.n:
                self._tile += 1
                ends = self._tile == (cfg.gate_up_tiles if self.gu else cfg.down_tiles)
                self.state = "DRAIN" if ends else "TILE"
        elif state == "DRAIN":
            return self._drain()
        elif state == "OUT_FIRST":
            self.state = "IDLE" if self.batch.fault else "OUT"
        elif state == "OUT" and self.o_last:
            self.state = "IDLE"
        return None

    def _begin(self) -> str:
        self.gu, self._tile, self.state = True, 0, "WAIT_X"
        return "expert"

    def _drain(self) -> str | None:
        cfg = self._cfg
        if self.gu:
            if self.h_blocks == self.n * (cfg.intermediate // MX_BLOCK):
                self.gu, self._tile, self.state = False, 0, "TILE"
        elif not self.busy:
            if self._shared_run or (self._last_group and not cfg.shared):
                self.state = "OUT_FIRST"
            elif self._last_group:
                self._last_group, self._shared_run = False, True
                self._begin()
                return "shared"
            else:
                self.state = "GROUP"
        return None
