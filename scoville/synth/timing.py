"""A block's critical path in gate levels, fanout counted, and its clock at a node.

:func:`levels` walks Yosys's flattened gate netlist (simple gates, flip-flops, memories as
``$mem_v2`` cells). A path starts at an input port, a flip-flop's output or a memory's read
data, and ends at a flip-flop's input (data, enable, reset), a memory's input (address, write
data, enables) or an output port: **an SRAM read is a stage of its own** (a macro's access
takes its cycle, so the data it reads starts a path and the address that reaches it ends one).
Each gate is one level; a net that drives more than :data:`FANOUT` input pins is driven
through a tree of buffers, each driving :data:`FANOUT`: ``ceil(log_FANOUT(F)) - 1`` more
levels for a fanout of ``F`` (a 64-wide broadcast: two levels beyond its gate). A source with
such a fanout (a flip-flop, a port) pays its tree too. Clock pins are not paths.

The clock (:func:`fmax_ghz`): a cycle is its levels, each :data:`LEVEL_FO4` FO4 delays, and a
register's overhead (:data:`REGISTER_FO4`), at the node's FO4 delay (:data:`FO4_PS`, with its
source and conditions).
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["BUDGET", "CLOCK_PORTS", "FANOUT", "FO4_PS", "FORMAT", "LEVEL_FO4", "REGISTER_FO4",
           "buffer_levels", "component", "cycle_ps", "fmax_ghz", "is_ff", "levels"]

#: The input pins one gate drives at one level's delay: a fan-out of four, the load of the
#: FO4 delay that a level's delay is quoted at.
FANOUT = 4
#: The clock pins of flip-flops and memories: not data paths.
CLOCK_PORTS = frozenset({"C", "CLK", "RD_CLK", "WR_CLK"})
#: Issue #36's budget: levels a cycle that every block's default is to meet.
BUDGET = 40
#: The version of what :func:`levels` computes: part of the synthesis cache's key (raise it
#: when the analysis changes; the delays below are applied after the cache).
FORMAT = 1
#: One level in FO4 delays: Hrishikesh et al., "The optimal logic depth per pipeline stage is
#: 6 to 8 FO4 inverter delays" (ISCA 2002), appendix A: a gate equivalent (a 4-input NAND
#: driving a 5-input NAND) is 1.36 FO4 in SPICE.
LEVEL_FO4 = 1.36
#: A register's overhead a cycle, FO4: the same paper's table 1 (latch 1.0, clock skew 0.3,
#: jitter 0.5). A flip-flop's clock-to-output and setup cost more than its pulse latch.
REGISTER_FO4 = 1.8
#: The FO4 inverter delay at each node, ps, with its source and conditions: Stillmaker and
#: Baas's scaling equations (Integration 58, 2017; HSPICE on PTM high-performance devices, at
#: the node's nominal supply, no wire load) with the 2017 IRDS projections below 7 nm, as
#: tabulated by Fuchs and Wentzlaff's Rankine (HPCA 2019, ``rankine.py``'s
#: ``cmos_latency_ps``). Devices alone: a library's cells with their wires are slower (see
#: ``docs/synth.md``), so the clocks these give are optimistic.
FO4_PS: dict[str, tuple[float, str]] = {
    "45nm": (10.9, "45 nm HP at 0.97 V"),
    "n16": (6.12, "16 nm HP at 0.88 V"),
    "n7": (2.47, "7 nm HP at 0.70 V"),
    "n5": (2.16, "5 nm at 0.65 V (IRDS 2017 projection)"),
}


def buffer_levels(fanout: int) -> int:
    """Levels a net adds for its fanout: a buffer tree of :data:`FANOUT` a stage after the gate
    that drives it."""
    if fanout <= FANOUT:
        return 0
    return math.ceil(math.log(fanout) / math.log(FANOUT) - 1e-9) - 1


def is_ff(cell_type: str) -> bool:
    """Whether a Yosys cell type holds state a cycle: a flip-flop (``$_DFF_P_``,
    ``$_SDFFE_PP0P_``, ``$_FF_``, a coarse ``$dff``...), a latch or an SR cell."""
    t = cell_type.upper()
    return "DFF" in t or "DLATCH" in t or t.startswith("$_SR") or t in ("$_FF_", "$FF")


def component(cell: str) -> str:
    """The top-level instance a flattened cell came from (``""``: the top's own): Yosys's
    ``flatten`` names a cell ``$flatten\\inst.\\sub.$...`` or, when public (and after
    ``autoname``), ``\\inst.sub.x``; a name that starts with ``$`` is not an instance's."""
    if "$flatten\\" in cell:
        return cell.split("$flatten\\", 1)[1].split(".", 1)[0]
    name = cell.removeprefix("\\")
    return name.split(".", 1)[0] if "." in name and not name.startswith("$") else ""


def levels(module: dict) -> dict:
    """The longest path of a flattened Yosys JSON ``module`` in levels (see the module's
    docstring): ``levels``, ``gates`` (the gates on that path, no buffers), ``start`` and
    ``end`` (the net it starts from, the cell or port it ends at), and ``components``: per
    top-level instance, the longest path that ends in it."""
    cells = module["cells"]
    fanout: dict[int, int] = {}
    for cell in cells.values():
        dirs = cell["port_directions"]
        for port, bits in cell["connections"].items():
            if dirs.get(port) == "input" and port not in CLOCK_PORTS:
                for b in bits:
                    if isinstance(b, int):
                        fanout[b] = fanout.get(b, 0) + 1
    for port in module["ports"].values():
        if port["direction"] == "output":
            for b in port["bits"]:
                if isinstance(b, int):
                    fanout[b] = fanout.get(b, 0) + 1
    # Arrival of each bit in levels, and the gates behind it (for the report).
    arrival: dict[int, tuple[int, int]] = {}
    source: dict[int, int] = {}
    for port in module["ports"].values():
        if port["direction"] == "input":
            for b in port["bits"]:
                if isinstance(b, int):
                    arrival[b] = (buffer_levels(fanout.get(b, 0)), 0)
                    source[b] = b
    gates: dict[str, tuple[list[int], list[int]]] = {}
    ends: list[tuple[str, list[int]]] = []
    for name, cell in cells.items():
        t, dirs = cell["type"], cell["port_directions"]
        ins = [b for p, bits in cell["connections"].items()
               if dirs.get(p) == "input" and p not in CLOCK_PORTS for b in bits
               if isinstance(b, int)]
        outs = [b for p, bits in cell["connections"].items() if dirs.get(p) == "output"
                for b in bits if isinstance(b, int)]
        if is_ff(t) or t.startswith("$mem"):
            for b in outs:
                arrival[b] = (buffer_levels(fanout.get(b, 0)), 0)
                source[b] = b
            # A flip-flop is named by the register it holds (its output), a memory by itself.
            ends.append((name, ins, outs[0] if is_ff(t) and outs else None))
        else:
            gates[name] = (ins, outs)
    # Gates in topological order (Kahn): a gate is ready when all its inputs have arrived.
    waiting: dict[int, list[str]] = {}
    missing: dict[str, int] = {}
    ready = deque()
    for name, (ins, _) in gates.items():
        n = 0
        for b in set(ins):
            if b not in arrival:
                waiting.setdefault(b, []).append(name)
                n += 1
        missing[name] = n
        if n == 0:
            ready.append(name)
    done = 0
    while ready:
        name = ready.popleft()
        done += 1
        ins, outs = gates[name]
        best, count, src = 0, 0, None
        for b in ins:
            a = arrival[b]
            if src is None or a > (best, count):
                best, count, src = a[0], a[1], source[b]
        for b in outs:
            arrival[b] = (best + 1 + buffer_levels(fanout.get(b, 0)), count + 1)
            source[b] = src if src is not None else b
            for nxt in waiting.pop(b, ()):
                missing[nxt] -= 1
                if missing[nxt] == 0:
                    ready.append(nxt)
    if done != len(gates):
        names = _bit_names(module)
        stuck = next(b for b, cells_ in waiting.items() if cells_)
        raise ValueError(f"{len(gates) - done} gates are on a combinational loop or wait for "
                         f"an undriven net (net {names.get(stuck, stuck)})")
    for port_name, port in module["ports"].items():
        if port["direction"] == "output":
            ends.append((port_name, [b for b in port["bits"] if isinstance(b, int)], None))
    names = _bit_names(module)
    best = {"levels": 0, "gates": 0, "start": "", "end": ""}
    comps: dict[str, int] = {}
    for end, bits, held in ends:
        for b in bits:
            if b not in arrival:
                continue
            lv, n = arrival[b]
            comp = component(end) if end in cells else ""
            comps[comp] = max(comps.get(comp, 0), lv)
            if lv > best["levels"]:
                best = {"levels": lv, "gates": n, "start": names.get(source[b], str(source[b])),
                        "end": names.get(held, "") if held is not None else
                        end.removeprefix("\\")}
    best["components"] = {k: v for k, v in sorted(comps.items()) if k}
    return best


def _bit_names(module: dict) -> dict[int, str]:
    """A readable name for each bit: a public net's ``name[i]`` where there is one."""
    out: dict[int, str] = {}
    for public in (False, True):
        for name, net in module["netnames"].items():
            if bool(net.get("hide_name")) == public:
                continue
            for i, b in enumerate(net["bits"]):
                if isinstance(b, int):
                    out[b] = name.removeprefix("\\") + (f"[{i}]" if len(net["bits"]) > 1 else "")
    return out


def cycle_ps(levels_: int, node: str) -> float:
    """A cycle of ``levels_`` levels at ``node``: each :data:`LEVEL_FO4` FO4 delays, plus a
    register's :data:`REGISTER_FO4`, at the node's FO4 delay (:data:`FO4_PS`)."""
    return (levels_ * LEVEL_FO4 + REGISTER_FO4) * FO4_PS[node][0]


def fmax_ghz(levels_: int, node: str) -> float:
    """The clock a path of ``levels_`` levels allows at ``node`` (:func:`cycle_ps`)."""
    return 1000.0 / cycle_ps(levels_, node)
