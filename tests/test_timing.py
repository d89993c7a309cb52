"""The critical path in levels (:mod:`scoville.synth.timing`) on hand-built Yosys netlists:
fanout trees, memories as stages, clock pins, the clock at a node."""

import pytest

from scoville.synth.timing import (
    LEVEL_FO4,
    REGISTER_FO4,
    buffer_levels,
    fmax_ghz,
    levels,
)

GATE_IN = {"A": "input", "B": "input", "Y": "output"}
FF = {"C": "input", "D": "input", "Q": "output"}


class Netlist:
    """A flattened Yosys JSON module built a cell at a time; bits are numbered from 2."""

    def __init__(self):
        self.cells, self.nets, self.ports = {}, {}, {"clk": {"direction": "input", "bits": [1]}}
        self.next = 2

    def bit(self, name: str | None = None) -> int:
        b = self.next
        self.next += 1
        if name:
            self.nets[name] = {"hide_name": 0, "bits": [b]}
        return b

    def gate(self, name, a, b=None, kind="$_AND_") -> int:
        y = self.bit()
        conns = {"A": [a], "Y": [y]}
        if b is not None:
            conns["B"] = [b]
        self.cells[name] = {"type": kind, "port_directions": GATE_IN, "connections": conns}
        return y

    def ff(self, name, d, q_name) -> int:
        q = self.bit(q_name)
        self.cells[name] = {"type": "$_DFF_P_", "port_directions": FF,
                            "connections": {"C": [1], "D": [d], "Q": [q]}}
        return q

    def module(self) -> dict:
        return {"cells": self.cells, "netnames": self.nets, "ports": self.ports}


def test_buffer_levels_are_a_tree_of_four():
    assert [buffer_levels(f) for f in (0, 1, 4, 5, 16, 17, 64, 65, 256, 257)] == \
        [0, 0, 0, 1, 1, 2, 2, 3, 3, 4]


def test_a_chain_between_registers_counts_its_gates():
    n = Netlist()
    loop = n.bit()  # the first register's D, driven by the chain's end below
    q = n.ff("$r0", loop, "r0")
    y = n.gate("$g2", n.gate("$g1", q, kind="$_NOT_"), q)
    n.ff("$r1", y, "r1")
    n.cells["$r0"]["connections"]["D"] = [y]
    out = levels(n.module())
    assert (out["levels"], out["gates"], out["start"]) == (2, 2, "r0")
    assert out["end"] in ("r0", "r1")


def test_a_broadcast_is_a_tree_not_one_level():
    """A register read by 64 gates: its tree adds two levels before any of them."""
    n = Netlist()
    q = n.ff("$src", n.bit(), "src")
    for i in range(64):
        n.ff(f"$dst{i}", n.gate(f"$g{i}", q, kind="$_NOT_"), f"dst{i}")
    out = levels(n.module())
    assert out["levels"] == 1 + buffer_levels(64) == 3 and out["gates"] == 1


def test_a_memory_read_is_a_stage_of_its_own():
    """register -> gate -> address; read data -> two gates -> register: two levels, not three."""
    n = Netlist()
    q = n.ff("$r", n.bit(), "r")
    addr = n.gate("$a", q, kind="$_NOT_")
    data = n.bit("mem_data")
    n.cells["$mem"] = {"type": "$mem_v2",
                       "port_directions": {"RD_ADDR": "input", "RD_DATA": "output",
                                           "RD_CLK": "input"},
                       "connections": {"RD_ADDR": [addr], "RD_DATA": [data], "RD_CLK": [1]}}
    y = n.gate("$b2", n.gate("$b1", data, kind="$_NOT_"), q)
    n.ff("$out", y, "out")
    out = levels(n.module())
    assert (out["levels"], out["start"], out["end"]) == (2, "mem_data", "out")


def test_clock_pins_are_not_fanout_and_ports_are_ends():
    """A clock into a thousand flip-flops adds nothing; an output port ends a path."""
    n = Netlist()
    for i in range(1000):
        n.ff(f"$r{i}", n.bit(), f"r{i}")
    a = n.bit("a")
    n.ports["a"] = {"direction": "input", "bits": [a]}
    y = n.gate("$g", a, kind="$_NOT_")
    n.ports["y"] = {"direction": "output", "bits": [y]}
    out = levels(n.module())
    assert (out["levels"], out["start"], out["end"]) == (1, "a", "y")


def test_the_longest_path_is_kept_per_component():
    n = Netlist()
    q = n.ff("$r", n.bit(), "r")
    n.ff("$flatten\\flow.$ff1", n.gate("$flatten\\flow.$g2",
                                       n.gate("$flatten\\flow.$g1", q, kind="$_NOT_"), q), "f")
    n.ff("$flatten\\abuf.$ff2", n.gate("$flatten\\abuf.$g", q, kind="$_NOT_"), "b")
    assert levels(n.module())["components"] == {"abuf": 1, "flow": 2}


def test_a_combinational_loop_is_an_error():
    n = Netlist()
    a = n.bit()
    y = n.gate("$g1", a, kind="$_NOT_")
    n.cells["$g2"] = {"type": "$_NOT_", "port_directions": GATE_IN,
                      "connections": {"A": [y], "Y": [a]}}
    with pytest.raises(ValueError, match="combinational loop"):
        levels(n.module())


def test_the_clock_is_levels_and_a_register_at_the_nodes_fo4():
    assert fmax_ghz(40, "n5") == pytest.approx(1000 / ((40 * LEVEL_FO4 + REGISTER_FO4) * 2.16))
    assert fmax_ghz(40, "45nm") < fmax_ghz(40, "n16") < fmax_ghz(40, "n7") < fmax_ghz(40, "n5")


def test_enables_resets_and_memory_writes_end_paths_and_their_clocks_do_not_count():
    """A deep path into a flip-flop's enable (``$_SDFFE_PP0P_``: data, enable, reset) ends
    there; a path into a memory's write address ends there; the memory's clocks, shared with
    a thousand flip-flops, add no level; a ``$_FF_`` (global clock) is a register too. The
    register ``r`` drives four pins: no tree."""
    n = Netlist()
    q = n.ff("$r", n.bit(), "r")
    for i in range(1000):
        n.ff(f"$x{i}", n.bit(), f"x{i}")
    deep = q
    for i in range(5):
        deep = n.gate(f"$e{i}", deep, kind="$_NOT_")
    held = n.bit("held")
    n.cells["$en"] = {"type": "$_SDFFE_PP0P_",
                      "port_directions": {"C": "input", "D": "input", "E": "input",
                                          "R": "input", "Q": "output"},
                      "connections": {"C": [1], "D": [q], "E": [deep], "R": [n.bit()],
                                      "Q": [held]}}
    waddr = n.gate("$w2", n.gate("$w1", q, kind="$_NOT_"), q)
    n.cells["$mem"] = {"type": "$mem_v2",
                       "port_directions": {"WR_ADDR": "input", "WR_CLK": "input",
                                           "RD_CLK": "input"},
                       "connections": {"WR_ADDR": [waddr], "WR_CLK": [1], "RD_CLK": [1]}}
    out = levels(n.module())
    assert (out["levels"], out["end"]) == (5, "held")
    # Through the enable's flip-flop: its output starts a path of its own.
    n.ff("$after", n.gate("$a", held, kind="$_NOT_"), "after")
    assert levels(n.module())["levels"] == 5
    # The memory's write address alone: two levels.
    for i in range(5):
        del n.cells[f"$e{i}"]
    n.cells["$en"]["connections"]["E"] = [q]
    assert levels(n.module())["levels"] == 2
    g = n.bit("g")
    n.cells["$g"] = {"type": "$_FF_", "port_directions": {"D": "input", "Q": "output"},
                     "connections": {"D": [g], "Q": [g]}}
    assert levels(n.module())["levels"] == 2
