"""Banked SRAM addressed as lines: one word of every bank at the same row."""

from amaranth.hdl import Module, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from .lib.ports import read_port, write_port

__all__ = ["Banks"]


class Banks(wiring.Component):
    """``banks`` SRAMs (``amaranth.lib.memory``) of ``depth`` words of ``word_bits`` each, one
    read and one write port each, all addressed together: row ``r`` of every bank is line
    ``r``, so every line read or written touches each bank once and no two accesses of a cycle
    can conflict.

    Attributes
    ----------
    read : In(read_port(range(depth), line, enable=True))
        Reads line ``addr`` when ``en`` is high; ``data`` (word ``k`` from bank ``k``) holds it
        from the next cycle until the next enabled read (one-cycle latency, not transparent).
    write : In(write_port(range(depth), line))
        Writes line ``addr`` at the end of a cycle where ``en`` is high.
    """

    def __init__(self, banks: int, word_bits: int, depth: int):
        self._banks, self._word_bits, self._depth = banks, word_bits, depth
        line = data.ArrayLayout(unsigned(word_bits), banks)
        super().__init__({
            "read": In(read_port(range(depth), line, enable=True)),
            "write": In(write_port(range(depth), line)),
        })

    def elaborate(self, platform):
        m = Module()
        for k in range(self._banks):
            mem = Memory(shape=unsigned(self._word_bits), depth=self._depth, init=[])
            m.submodules[f"bank{k}"] = mem
            rp, wp = mem.read_port(), mem.write_port()
            m.d.comb += [
                rp.addr.eq(self.read.addr), rp.en.eq(self.read.en),
                self.read.data[k].eq(rp.data),
                wp.addr.eq(self.write.addr), wp.data.eq(self.write.data[k]),
                wp.en.eq(self.write.en),
            ]
        return m
