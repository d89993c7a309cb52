"""Unit model (:mod:`scoville.sim.cycles.unit`) of :class:`scoville.rtl.moe_weights.WeightTiles`,
from its module's docstring: the loader and the feeder of two column-tile slots."""

from __future__ import annotations

import bisect

from scoville.rtl.lib.formats import MX_BLOCK

__all__ = ["TileStream", "WeightTiles", "tile_fields"]


def tile_fields(fmt, k: int, bias: bool) -> int:
    """Fields the loader writes for a column tile of ``k`` rows, one a cycle: the rows, in
    MXFP4 a scale row per block of 32, and with ``bias`` the ``cols`` biases."""
    return k + (k // MX_BLOCK if fmt.scales else 0) + (fmt.array.cols if bias else 0)


class TileStream:
    """The fast path of the weights' way in: column tiles' words from the memory through the
    fetch engine into the weight tiles' slots, as a fluid, tile after tile.

    Each tile's first word arrives after the stream's previous word and once the word
    ``depth`` before it has left the buffer; the loader then takes a word every ``sigma``
    cycles (a field a cycle), the words beyond the buffered ones arriving at the stream's
    rate: the memory's (``min(1, bytes_per_cycle / word bytes)``), the latency's (``depth``
    words a round trip) or the loader's. A tile's words are asked for once the loader has
    started the tile ``queue + 1`` before it (its descriptor queue's room: ``queue``
    descriptors wait, one is being loaded). A tile loads into a slot once the tile two before
    it has been fed (:meth:`fed`).

    Parameters
    ----------
    fmt : TileFormat
    fetch : FetchConfig
    mem_latency, mem_bytes_per_cycle : int
    issue0 : int
        The cycle the issuer offers its first descriptor and fetch command.
    queue : int
        The descriptors' queue between the issuer and the loader (0: handed over directly).
    """

    def __init__(self, fmt, fetch, mem_latency: int, mem_bytes_per_cycle: int, issue0: int,
                 queue: int = 0):
        self._fmt, self._L, self._queue = fmt, mem_latency, queue
        self._rho = min(1.0, mem_bytes_per_cycle / -(-fmt.port_bits // 8))
        self._window = fetch.buffer - fetch.burst / 2   # words in flight, on average
        self._arr_last = issue0 + 1 + mem_latency + 2 - 1 / self._rho
        self._pops: list[tuple[int, float, float]] = []  # per tile: first word, pops
        self._words = 0
        # the loader takes its first descriptor at issue0 (through a queue: a cycle later)
        self._lf_prev = issue0 - 2 + (1 if queue else 0)
        self._feed_end: list[float] = []
        self._loaded: list[float] = []   # per tile: the loader's last field

    def _popped(self, j: float) -> float:
        """When the loader took word ``j`` of the stream (-inf before it)."""
        if j < 0:
            return float("-inf")
        pops = self._pops
        i = bisect.bisect_right(pops, (j, float("inf"), 0.0)) - 1
        w0, p0, p1 = pops[i]
        end = pops[i + 1][0] if i + 1 < len(pops) else self._words
        return p0 + (p1 - p0) * (j - w0) / max(1, end - w0 - 1)

    def load(self, k: int, bias: bool) -> float:
        """The next tile, of ``k`` rows: the loader's last field's cycle."""
        fmt, L, rho, window = self._fmt, self._L, self._rho, self._window
        W, F = fmt.tile_words(k, bias), tile_fields(fmt, k, bias)
        i = len(self._loaded)
        sigma = max(1.0, F / W)
        ahead = 2 + self._queue          # the tile whose start lets this one be asked for
        a_first = max(self._arr_last + 1 / rho, self._popped(self._words - window) + L + 3,
                      self._loaded[i - ahead] + L + 4 if i >= ahead else 0)
        slot = self._feed_end[i - 2] + 1 if i >= 2 else float("-inf")
        f = max(self._lf_prev + 3, slot, a_first + 3)
        ready_words = min(W, window, 1 + (f - 3 - a_first) * rho)
        tw = max(sigma, (L + 3) / window, 1 / rho)
        lf = f - 1 + max(F, ready_words * sigma + (W - ready_words) * tw)
        self._pops.append((self._words, f - 1, lf - 1))
        self._words += W
        self._arr_last = max(a_first + (W - 1) / rho,
                             self._popped(self._words - 1 - window) + L + 3)
        self._lf_prev = lf
        self._loaded.append(lf)
        return lf

    def fed(self, end: float) -> None:
        """The cycle the array took the latest loaded tile's last B beat."""
        self._feed_end.append(end)


class WeightTiles:
    """The weight tiles. The *loader* takes a descriptor on ``tile`` (payload ``(k, bias)``)
    while not loading, then the tile's words on ``words``: a word is taken when it fits the bit
    buffer (one word and one field) after this cycle's field is written; a field (a row of
    ``cols`` codes, in MXFP4 a row of scales after every 32 rows, with ``bias`` the ``cols``
    biases a cycle each) is written a cycle into the next slot once that slot is free and the
    buffer holds it. After the tile's last field the slot is full. The *feeder* takes a command on
    ``cmd`` (payload ``m_tiles``) while idle and the next slot is full, then offers the slot's
    ``k`` B beats ``m_tiles`` times, one as the array takes each, from the next cycle; the
    last frees the slot.

    Parameters
    ----------
    fmt : TileFormat
    tile, words, cmd : input port
    b : output port
    """

    __slots__ = ("_bias", "_bias_i", "_blk_row", "_buf", "_fill", "_fmt", "_full", "_k",
                 "_left", "_need", "_phase", "_row", "_rs", "_slot_k", "_ws", "b", "cmd",
                 "f_beats", "loading", "tile", "words")

    def __init__(self, fmt, tile, words, cmd, b):
        self._fmt, self.tile, self.words, self.cmd, self.b = fmt, tile, words, cmd, b
        C = fmt.array.cols
        self._need = (fmt.row_bits, 8 * C, 32)     # bits of a row, a scale row, a bias
        self._buf = fmt.port_bits + max(self._need)
        self.loading = False
        self._ws = self._rs = self._fill = self._left = self._phase = 0
        self._k = self._row = self._blk_row = self._bias_i = 0
        self._bias = False
        self._full, self._slot_k = [False, False], [0, 0]
        self.f_beats = 0

    # ---- The loader.
    def _writes(self) -> bool:
        return self.loading and not self._full[self._ws] \
            and self._fill >= self._need[self._phase]

    @property
    def words_ready(self) -> bool:
        left = self._fill - (self._need[self._phase] if self._writes() else 0)
        P = self._fmt.port_bits
        return self.loading and self._left != 0 and left + P <= self._buf

    @property
    def tile_ready(self) -> bool:
        return not self.loading

    # ---- The feeder.
    @property
    def cmd_ready(self) -> bool:
        return self.f_beats == 0 and self._full[self._rs]

    @property
    def b_valid(self) -> bool:
        return self.f_beats != 0

    def step(self, t: int) -> None:
        cmd_ready = self.cmd_ready
        # The loader's moves, from the state at the cycle's start (before the feeder frees).
        writes = self._writes()
        pop = self.words_ready and self.words.offers(t)
        self._load(t, writes, pop)
        if self.b_valid and self.b.accepts(t):
            self.b.take(t)
            self.f_beats -= 1
            if self.f_beats == 0:
                self._free()
        if cmd_ready and self.cmd.offers(t):
            m_tiles = self.cmd.payload
            self.cmd.take(t)
            self.f_beats = self._slot_k[self._rs] * m_tiles
            if m_tiles == 0:
                self._free()

    def _free(self) -> None:
        self._full[self._rs] = False
        self._rs ^= 1

    def _load(self, t: int, writes: bool, pop: bool) -> None:
        fmt = self._fmt
        if not self.loading:
            if self.tile.offers(t):
                self._k, self._bias = self.tile.payload
                self.tile.take(t)
                self.loading, self._fill, self._phase = True, 0, 0
                self._row = self._blk_row = self._bias_i = 0
                self._left = fmt.tile_words(self._k, self._bias)
            return
        self._fill -= self._need[self._phase] if writes else 0
        if pop:
            self.words.take(t)
            self._fill += fmt.port_bits
            self._left -= 1
        if writes and self._field_done():
            self.loading, self._fill = False, 0
            self._full[self._ws], self._slot_k[self._ws] = True, self._k
            self._ws ^= 1

    def _field_done(self) -> bool:
        """After a field written: on to the next; true after the tile's last."""
        if self._phase == 0:
            self._row += 1
            self._blk_row += 1
            if not self._fmt.scales:
                if self._row == self._k:
                    self._phase = 2
                    return not self._bias
            elif self._blk_row == MX_BLOCK:
                self._phase = 1
            return False
        if self._phase == 1:
            self._blk_row = 0
            if self._row == self._k:
                self._phase = 2 if self._bias else 0
                return not self._bias
            self._phase = 0
            return False
        self._bias_i += 1
        return self._bias_i == self._fmt.array.cols
