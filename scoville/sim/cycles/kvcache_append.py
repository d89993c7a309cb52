"""Unit model (:mod:`scoville.sim.cycles.unit`) of :class:`scoville.rtl.kvcache_append.Appender`,
from its docstring."""

from __future__ import annotations

import enum

__all__ = ["Append", "Appender"]


class Append(enum.Enum):
    """What an append does, as the reference model's outcome says: its lines dropped (an
    unknown sequence), dropped for want of a free page, written into the token's page, into a
    new page (the token opens one), or into a new page after copying the shared one."""

    DROP = "drop"
    FULL = "full"
    WRITE = "write"
    NEW_PAGE = "new_page"
    COPY = "copy"


class Appender:
    """The append. A cycle with :attr:`start` set (an :class:`Append`) starts it; then one
    step a cycle from the next: the table entry's read, the count's read, the decision (a
    copy waits while :attr:`engine_busy`, :attr:`read_wait` high; with no free page
    :attr:`full` is high that cycle and the lines are dropped), the new page taken
    (:attr:`take`), a copy of ``page_lines + 1`` cycles; then ``beats`` lines, ``wd`` ready in
    every cycle of them (a drop: from the cycle after start); :attr:`done` with the last line
    taken.

    The composed model sets :attr:`start` (None: none this cycle) and :attr:`engine_busy` for
    the cycle about to be stepped; :attr:`full`, :attr:`read_wait`, :attr:`take`,
    :attr:`done`, :attr:`wrote`, :attr:`writes` (a line written), :attr:`copying` (a line
    copied: every copy cycle but the first) and :attr:`wd_stall` (a line due and none
    offered) are the outputs of the cycle just stepped.

    Parameters
    ----------
    page_lines, beats : int
    wd : input port
        The token's lines.
    """

    __slots__ = ("_beats", "_kind", "_left", "_lines", "_page_lines", "_phase", "copying",
                 "done", "engine_busy", "full", "read_wait", "start", "take", "wd", "wd_stall",
                 "writes", "wrote")

    def __init__(self, *, page_lines: int, beats: int, wd):
        self._page_lines, self._beats, self.wd = page_lines, beats, wd
        self._phase = "idle"  # idle, ref, decide, alloc, copy, lines
        self._kind: Append | None = None
        self._left = self._lines = 0
        self.start: Append | None = None
        self.engine_busy = False
        self.done = self.wrote = self.full = self.read_wait = self.take = False
        self.writes = self.copying = self.wd_stall = False

    @property
    def idle(self) -> bool:
        return self._phase == "idle"

    @property
    def wd_ready(self) -> bool:
        return self._phase == "lines"

    def _to_lines(self) -> None:
        self._phase, self._lines = "lines", self._beats

    def step(self, t: int) -> None:
        self.done = self.wrote = self.full = self.read_wait = self.take = False
        self.writes = self.copying = self.wd_stall = False
        phase, kind = self._phase, self._kind
        if phase == "idle":
            if self.start is not None:
                self._kind = self.start
                if self.start is Append.DROP:
                    self._to_lines()
                else:
                    self._phase = "ref"
        elif phase == "ref":
            self._phase = "decide"
        elif phase == "decide":
            if kind is Append.FULL:
                self.full = True
                self._to_lines()
            elif kind is Append.COPY and self.engine_busy:
                self.read_wait = True
            elif kind in (Append.NEW_PAGE, Append.COPY):
                self._phase = "alloc"
            else:
                self._to_lines()
        elif phase == "alloc":
            self.take = True
            if kind is Append.COPY:
                self._phase, self._left = "copy", self._page_lines + 1
            else:
                self._to_lines()
        elif phase == "copy":
            self.copying = self._left <= self._page_lines
            self._left -= 1
            if self._left == 0:
                self._to_lines()
        elif self.wd.offers(t):  # the lines: ready in every cycle of them
            self.wd.take(t)
            written = kind in (Append.WRITE, Append.NEW_PAGE, Append.COPY)
            self.writes = written
            self._lines -= 1
            if self._lines == 0:
                self._phase, self.done, self.wrote = "idle", True, written
        else:
            self.wd_stall = True
