"""Energy per operation from switching activity on the gate netlist.

:func:`measure` simulates the block's gate netlist (Yosys's simple gates, flattened:
:func:`~scoville.synth.yosys.gate_netlist`) in the free-running harness on Verilator over the
block's random workload, with toggle coverage of every net and branch coverage
(:func:`~scoville.sim.flow.run` with ``netlist``). The energy is three sums:

- **switching**: per net bit, its toggles times ``1/2 C V^2``, where ``C`` is the load of its
  fanout (:data:`C_PIN_FF` per cell input pin, local wire included) and the driving cell's own
  output and internal nodes (its transistors over four, in pins: a NAND2 is one pin, an XOR
  three, a flip-flop six); the clock net is left to the next term;
- **clock**: every flip-flop's clock load, :data:`CLOCK_PINS` pins (its clock pin among
  them), charged once a cycle;
- **SRAM**: each memory's accesses (its write and read enables' branch counts; an
  asynchronous read port reads every cycle) times its width times the energy of a bit read
  from a macro of its size (:func:`sram_pj_per_bit`, Horowitz's 45 nm SRAM figures).

At 45 nm and :data:`VDD` (Horowitz's node and voltage); another node scales all three by its
``energy_vs_45nm`` (:data:`~scoville.synth.yosys.NODES`). A zero-delay simulation has no
glitches: the switching sum is a lower bound for logic whose inputs arrive at different times
(the multipliers' partial-product trees above all).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..sim.flow import run as flow_run
from ..sim.flow import to_verilog
from .timing import is_ff
from .yosys import (
    CMOS,
    FF_TRANSISTORS,
    NODES,
    SynthError,
    gate_netlist,
    sram_pj_per_bit,
)

__all__ = ["CLOCK_PINS", "C_PIN_FF", "EnergyError", "VDD", "coverage", "energy_from",
           "measure", "memory_accesses"]

#: Supply voltage of the 45 nm figures (Horowitz, ISSCC 2014: 45 nm, 0.9 V).
VDD = 0.9
#: Load of one cell input pin with its share of local wire at 45 nm, fF: the Nangate 45 nm
#: Open Cell Library's X1 inputs are 1.6-1.7 fF (NAND2_X1 1.60, INV_X1 1.70); a short local wire
#: (about 2 um at 0.2 fF/um) is the rest. A stated assumption.
C_PIN_FF = 2.0
#: A flip-flop's clock load in input pins (its clock pin and the internal clock inverters, and
#: its share of the clock tree's last stage). A stated assumption.
CLOCK_PINS = 3


class EnergyError(SynthError):
    """The netlist run failed or measured nothing: one line."""


def _cell_pins(driver: str) -> float:
    """A driving cell's own load, in input pins: its transistors over four."""
    if is_ff(driver):
        return FF_TRANSISTORS / 4
    return CMOS.get(driver, 4) / 4 if driver else 0.0


_FIELD = re.compile("\x01([^\x02]*)\x02([^\x01]*)")
_BIT = re.compile(r"\[(\d+)\]:[01]->[01]$")


def coverage(path: Path, module: str) -> tuple[dict, dict, int]:
    """Verilator's ``coverage.dat`` for ``module``: ``toggles`` by declaration line, then bit
    index (-1 for a one-bit signal), both directions summed; ``branches`` by line, then
    ``if``/``else``; and the clock cycles (the most any clocked block ran)."""
    toggles: dict[int, dict[int, int]] = {}
    branches: dict[int, dict[str, int]] = {}
    cycles = 0
    with open(path, encoding="latin-1") as f:
        for line in f:
            if not line.startswith("C '"):
                continue
            body, _, count = line.rpartition("' ")
            fields = dict(_FIELD.findall(body))
            page, _, mod = fields.get("page", "").partition("/")
            if mod != module:
                continue
            n, at, what = int(count), int(fields["l"]), fields.get("o", "")
            if page == "v_toggle":
                m = _BIT.search(what)
                bits = toggles.setdefault(at, {})
                i = int(m.group(1)) if m else -1
                bits[i] = bits.get(i, 0) + n
            elif page == "v_branch":
                branches.setdefault(at, {})[what] = n
            elif page == "v_line" and what == "block":
                cycles = max(cycles, n)
    return toggles, branches, cycles


_DECL = re.compile(r"^\s*(?:wire|reg|input|output|inout)\s+(?:signed\s+)?"
                   r"(?:\[(-?\d+):(-?\d+)\]\s+)?(\\\S+|[A-Za-z_]\w*)\s*(?:=[^;]*)?;")
_MEM = re.compile(r"^\s*reg\s+(?:\[(\d+):(\d+)\]\s+)?(\\\S+|[A-Za-z_]\w*)\s+\[(\d+):(\d+)\];")
_GUARD = re.compile(r"^(?:end\s+)?(?:else\s+)?if\s*\(")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _guard(lines: list[str], i: int) -> int | None:
    """The 1-based line of the ``if`` that guards statement ``lines[i]`` (the nearest line
    above it, less indented, that opens an ``if`` or ``else if``), or None when the statement
    is not guarded (its ``always`` block or an ``assign`` comes first)."""
    at = _indent(lines[i])
    for j in range(i - 1, -1, -1):
        text = lines[j].strip()
        if not text or _indent(lines[j]) >= at:
            continue
        if _GUARD.match(text):
            return j + 1
        if text.startswith(("always", "assign", "module", "initial")):
            return None
        if text.startswith(("else", "end else", "case")):
            raise EnergyError(f"line {i + 1} of the gate netlist: a memory access under "
                              f"'{text[:30]}' (only 'if' guards are counted)")
        at = _indent(lines[j])
    return None


def _address(line: str, at: int) -> str:
    """The text inside the brackets that open at ``line[at]`` (brackets nested)."""
    depth = 0
    for k in range(at, len(line)):
        depth += {"[": 1, "]": -1}.get(line[k], 0)
        if depth == 0:
            return line[at + 1:k].strip()
    return line[at + 1:].strip()


def memory_accesses(verilog: str, branches: dict, cycles: int) -> list[dict]:
    """Each memory of Yosys's written netlist with its ``width``, ``words``, ``reads`` and
    ``writes``: a read or write statement counts its guarding ``if``'s branch count (each
    ``if`` its own: the nearest less indented one), or every cycle where no ``if`` guards it
    (an asynchronous read port's ``assign``). A write port's enable slices (statements of one
    clocked block at the same address) count once, the most of them."""
    lines = verilog.splitlines()
    mems = {}
    for line in lines:
        m = _MEM.match(line)
        if m:
            width = abs(int(m.group(1) or 0) - int(m.group(2) or 0)) + 1
            words = abs(int(m.group(4)) - int(m.group(5))) + 1
            mems[m.group(3)] = {"name": m.group(3).lstrip("\\"), "width": width,
                                "words": words, "reads": 0, "writes": 0}
    if not mems:
        return []
    names = "|".join(re.escape(k) for k in mems)
    pattern = re.compile(rf"(<=|=)\s*({names})\s*\[|^\s*({names})\s*\[.*<=")
    block, writes = 0, {}
    for i, line in enumerate(lines):
        if "always @(" in line:
            block = i
        m = pattern.search(line)
        if not m or line.lstrip().startswith(("reg ", "initial")):
            continue
        if m.group(3) is None and m.group(1) == "=" and not line.lstrip().startswith("assign"):
            continue  # an initializer
        guard = _guard(lines, i)
        if guard is None:
            count = cycles
        elif "if" not in branches.get(guard, {}):
            raise EnergyError(f"line {guard} of the gate netlist guards a memory access but "
                              "has no branch coverage")
        else:
            count = branches[guard]["if"]
        if m.group(3) is not None:
            key = (m.group(3), block, _address(line, line.index("[", m.end(3))))
            writes[key] = max(writes.get(key, 0), count)
        else:
            mems[m.group(2)]["reads"] += count
    for (name, _, _), n in writes.items():
        mems[name]["writes"] += n
    return list(mems.values())


def _declarations(verilog: str) -> dict[int, tuple[str, int]]:
    """Declaration line (1-based) -> (net name, its least significant index)."""
    out = {}
    for i, line in enumerate(verilog.splitlines(), 1):
        m = _DECL.match(line)
        if m:
            lo = min(int(m.group(1) or 0), int(m.group(2) or 0))
            out[i] = (m.group(3).lstrip("\\"), lo)
    return out


def energy_from(net: dict, toggles: dict, branches: dict, cycles: int, node: str) -> dict:
    """The energy of one run from its coverage (:func:`coverage`) on ``net``
    (:func:`~scoville.synth.yosys.gate_netlist`), in pJ at ``node``: ``switching``, ``clock``,
    ``sram`` and ``total``; ``components``, switching and SRAM by the top's instance that
    drives the net (``top`` for the top's own); ``sram_accesses``; ``toggles``, ``bits``
    and ``bits_covered`` (net bits the coverage named)."""
    scale = NODES[node].energy_vs_45nm
    fj = 0.5 * C_PIN_FF * VDD ** 2 * scale  # fJ per pin of load per toggle
    decl = _declarations(net["verilog"])
    seen: dict[str, int] = {}
    for at, bits in toggles.items():
        if at not in decl:
            continue
        name, lo = decl[at]
        ids = net["nets"].get(name)
        if ids is None:
            continue
        for i, n in bits.items():
            pos = 0 if i < 0 else i - lo
            if 0 <= pos < len(ids) and ids[pos] is not None:
                b = str(ids[pos])
                if b in net["bits"]:
                    seen[b] = max(n, seen.get(b, 0))
    clocks = {str(b) for b in net["clocks"]}
    by_comp: dict[str, float] = {}
    switching = 0.0
    for b, n in seen.items():
        if b in clocks:
            continue  # the clock term below
        fanout, driver, comp = net["bits"][b]
        e = n * (fanout + _cell_pins(driver)) * fj * 1e-3  # pJ
        switching += e
        by_comp[comp or "top"] = by_comp.get(comp or "top", 0.0) + e
    ffs = sum(net["ffs"].values())
    clock = ffs * cycles * CLOCK_PINS * 2 * fj * 1e-3  # C V^2 a cycle = 2 x (1/2 C V^2)
    mems = memory_accesses(net["verilog"], branches, cycles)
    sram = 0.0
    for m in mems:
        e = (m["reads"] + m["writes"]) * m["width"] * sram_pj_per_bit(
            m["words"] * m["width"] / 8, node)
        m["energy_pj"] = e
        sram += e
        comp = m["name"].split(".", 1)[0] if "." in m["name"] else "top"
        by_comp[comp] = by_comp.get(comp, 0.0) + e
    return {"switching": switching, "clock": clock, "sram": sram,
            "total": switching + clock + sram, "components": dict(sorted(by_comp.items())),
            "sram_accesses": mems, "toggles": sum(seen.values()), "bits": len(net["bits"]),
            "bits_covered": len(seen)}


def measure(block, config, workload, *, node: str = "n5", seed: int = 1) -> dict:
    """Energy of ``block`` with ``config`` over ``workload`` (its ``workload_test``), at
    ``node``: ``energy_pj_per_op`` (per the block's ``operation``), ``op``, ``ops``,
    ``cycles``, ``energy_pj`` (``switching``, ``clock``, ``sram``, ``total``),
    ``energy_components`` (switching and SRAM pJ by the top's instance that drives the net),
    the memories' accesses (``sram_accesses``), ``toggles``, ``bits`` (the netlist's net
    bits) and ``bits_covered`` (those the coverage named), ``flip_flops`` and ``run_dir``
    (the run's folder: Verilator's ``coverage.dat``, the metrics)."""
    if node not in NODES:
        raise SynthError(f"unknown node {node!r}; allowed: {', '.join(NODES)}")
    if block.operation is None:
        raise EnergyError(f"block {block.name} has no operation to count energy per")
    unit, count = block.operation
    top, dut = block.name, f"{block.name}_dut"
    net = gate_netlist(to_verilog(block.component(config), dut), dut)
    result = flow_run(block, config, workload, "verilator", seed=seed,
                      tests=[block.workload_test], netlist=True)
    if not result.passed:
        why = result.errors[0] if result.errors else next(
            (t.message for t in result.tests if not t.passed), "failed")
        raise EnergyError(f"the gate netlist of {top} failed its workload: "
                          f"{why.splitlines()[0] if why else 'failed'} (see {result.log})")
    path = Path(result.run_dir) / "coverage.dat"
    try:
        toggles, branches, cycles = coverage(path, dut)
    except (OSError, KeyError, ValueError) as err:
        raise EnergyError(f"cannot read Verilator's coverage {path}: {err}") from None
    if not toggles or not cycles:
        raise EnergyError(f"no toggle coverage for {dut} in {path}")
    e = energy_from(net, toggles, branches, cycles, node)
    try:
        ops = count(result.metrics.get(block.workload_test, {}))
    except KeyError as err:
        raise EnergyError(f"the workload of {top} recorded no metric {err}") from None
    if not ops:
        raise EnergyError(f"the workload of {top} counted no {unit}s")
    return {"energy_pj_per_op": e["total"] / ops, "op": unit, "ops": ops, "cycles": cycles,
            "energy_pj": {k: e[k] for k in ("switching", "clock", "sram", "total")},
            "energy_components": e["components"], "sram_accesses": e["sram_accesses"],
            "toggles": e["toggles"], "bits": e["bits"], "bits_covered": e["bits_covered"],
            "flip_flops": sum(net["ffs"].values()), "run_dir": result.run_dir}
