"""Unit models (:mod:`scoville.sim.cycles.unit`) of :mod:`scoville.rtl.linear_parts`: the x
store, the weight requests and the sequencer, from their docstrings."""

from __future__ import annotations

from scoville.rtl.linear_parts import LINE, Status

from .unit import hand_over_together

__all__ = ["Run", "Sequencer", "TileRequests", "XStore", "check"]


class Run:
    """A command the block runs: ``tokens``, ``lines`` (K / 32), ``tiles`` (N / cols),
    ``addr`` and ``bias``."""

    __slots__ = ("addr", "bias", "lines", "tiles", "tokens")

    def __init__(self, tokens: int, lines: int, tiles: int, addr: int, bias: bool):
        self.tokens, self.lines, self.tiles, self.addr, self.bias = (tokens, lines, tiles,
                                                                     addr, bias)


def check(config, fields: dict) -> Status:
    """The status the sequencer answers a command of ``fields`` with (the first field out of
    range, in the order tokens, k, n, address)."""
    t, k, n, addr, bias = (fields[f] for f in ("tokens", "k", "n", "addr", "bias"))
    C = config.array.cols
    if not 1 <= t <= config.tokens:
        return Status.BAD_TOKENS
    if not (LINE <= k <= config.k_max and k % LINE == 0):
        return Status.BAD_K
    if not (C <= n <= config.n_max and n % C == 0):
        return Status.BAD_N
    if addr + config.weight_words(k, n, bool(bias)) > 1 << config.addr_bits:
        return Status.BAD_ADDR
    return Status.OK


class XStore:
    """The x store: the *writer* takes a beat on ``i`` while fewer than ``want`` lines are
    stored; :meth:`clear` (at a command's start) starts over with the command's ``want`` and
    ``lines``. The *feeder* takes a command on ``cmd`` (``n`` rows) while idle, then offers
    ``32 lines`` beats per row tile of ``rows`` on ``a``, one as the array takes each, from the
    next cycle.

    Parameters
    ----------
    rows : int
    i, cmd : input port
    a : output port
    """

    __slots__ = ("_beats", "_clear", "_rows", "a", "cmd", "count", "i", "lines", "want")

    def __init__(self, rows: int, i, cmd, a):
        self._rows, self.i, self.cmd, self.a = rows, i, cmd, a
        self.count = self.want = self.lines = self._beats = 0
        self._clear: tuple[int, int] | None = None

    def clear(self, want: int, lines: int) -> None:
        """In the cycle about to be stepped: a command's start."""
        self._clear = (want, lines)

    @property
    def i_ready(self) -> bool:
        return self.count < self.want

    @property
    def busy(self) -> bool:
        return self._beats != 0

    def step(self, t: int) -> None:
        if self.i_ready and self.i.offers(t):
            self.i.take(t)
            self.count += 1
        idle = not self.busy
        if self.busy and self.a.accepts(t):
            self.a.take(t)
            self._beats -= 1
        if idle and self.cmd.offers(t):
            n = self.cmd.payload
            self.cmd.take(t)
            self._beats = -(-n // self._rows) * self.lines * LINE
        if self._clear is not None:
            self.count = 0
            self.want, self.lines = self._clear
            self._clear = None


class TileRequests:
    """The weight requests: from the cycle after :meth:`start`, each column tile of the run in
    turn, its fetch command ``(address, words)`` and loader descriptor ``(k, bias)`` offered
    from the cycle after the previous tile's are both taken, each held until taken.

    Parameters
    ----------
    config : LinearConfig
    fetch, tile : output port
    """

    __slots__ = ("_addr", "_bias", "_cfg", "_k", "_left", "_pending", "_sent", "_words",
                 "fetch", "tile")

    def __init__(self, config, fetch, tile):
        self._cfg, self.fetch, self.tile = config, fetch, tile
        self._left = self._addr = self._k = self._words = 0
        self._bias = False
        self._sent = [False, False]   # the tile's fetch command and descriptor taken
        self._pending: Run | None = None

    def start(self, run: Run) -> None:
        """In the cycle about to be stepped: a command's start."""
        self._pending = run

    @property
    def fetch_valid(self) -> bool:
        return self._left != 0 and not self._sent[0]

    @property
    def tile_valid(self) -> bool:
        return self._left != 0 and not self._sent[1]

    @property
    def fetch_payload(self) -> tuple[int, int]:
        return self._addr, self._words

    @property
    def tile_payload(self) -> tuple[int, bool]:
        return self._k, self._bias

    def step(self, t: int) -> None:
        if self._left:
            self._sent, taken = hand_over_together(t, (self.fetch, self.tile), self._sent)
            if taken:
                self._addr += self._words
                self._left -= 1
        if self._pending is not None:
            run, self._pending = self._pending, None
            self._left, self._addr, self._bias = run.tiles, run.addr, run.bias
            self._k = run.lines * LINE
            self._words = self._cfg.tile_words(self._k, run.bias)


class Sequencer:
    """The sequencer: takes a command on ``cmd`` while idle (``IDLE``); a refused one sets
    :attr:`status` and nothing else; a good one starts (:meth:`step` returns its
    :class:`Run`) and waits for the x store to hold ``want`` lines (``LOAD``); then per column
    tile offers its three commands until each is taken (``TILE``) and counts the tile's rows
    (``ROWS``), one state a cycle.

    Parameters
    ----------
    config : LinearConfig
    cmd : input port
        Payloads: the command's fields (:func:`check`).
    """

    __slots__ = ("_cfg", "_rows", "_sent", "_tile", "cmd", "refused", "run", "state", "status")

    def __init__(self, config, cmd):
        self._cfg, self.cmd = config, cmd
        self.state = "IDLE"
        self.status = Status.OK
        self.run: Run | None = None
        self._tile = self._rows = self.refused = 0
        self._sent = [False, False, False]

    def tile_valid(self) -> tuple[bool, bool, bool]:
        """The array's, the feeder's and the x store's command offered in this cycle."""
        if self.state != "TILE":
            return False, False, False
        return tuple(not s for s in self._sent)

    def step(self, t: int, *, count: int, want: int, taken: tuple[bool, bool, bool],
             row: bool) -> Run | None:
        """Cycle ``t``, given the x store's ``count`` and ``want`` at its start, which of the
        three tile commands are taken in it and whether a row leaves the array in it."""
        started = None
        if self.state == "IDLE":
            if self.cmd.offers(t):
                fields = self.cmd.payload
                self.cmd.take(t)
                self.status = check(self._cfg, fields)
                if self.status == Status.OK:
                    C = self._cfg.array.cols
                    started = self.run = Run(fields["tokens"], fields["k"] // LINE,
                                             fields["n"] // C, fields["addr"],
                                             bool(fields["bias"]))
                    self._tile = 0
                    self.state = "LOAD"
                else:
                    self.refused += 1
        elif self.state == "LOAD":
            if count == want:
                self.state = "TILE"
        elif self.state == "TILE":
            self._sent = [s or k for s, k in zip(self._sent, taken, strict=True)]
            if all(self._sent):
                self._sent = [False, False, False]
                self._rows = 0
                self.state = "ROWS"
        elif row:
            self._rows += 1
            if self._rows == self.run.tokens:
                self._tile += 1
                self.state = "IDLE" if self._tile == self.run.tiles else "TILE"
        return started
