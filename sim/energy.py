"""Energy per operation from switching activity on the gate netlist.

:func:`measure` simulates the block's gate netlist (Yosys's simple gates, flattened:
:func:`~scoville.sim.synth.gate_netlist`) in the free-running harness on Verilator over the
block's random workload, with toggle coverage of every net and branch coverage
(:func:`~scoville.sim.flow.run` with ``netlist``). The energy is three sums:

- **switching**: per net bit, its toggles times ``1/2 C V^2``, where ``C`` is the load of its
  fanout (:data:`C_PIN_FF` per cell input pin, local wire included) and the driving cell's own
  output and internal nodes (its transistors over four, in pins: a NAND2 is one pin, an XOR
  three, a flip-flop six);
- **clock**: every flip-flop's clock load, :data:`CLOCK_PINS` pins, charged once a cycle;
- **SRAM**: each memory's accesses (its write and read enables' branch counts; an
  asynchronous read port reads every cycle) times its width times the energy of a bit read
  from a macro of its size (:func:`sram_pj_per_bit`, Horowitz's 45 nm SRAM figures).

At 45 nm and :data:`VDD` (Horowitz's node and voltage); another node scales all three by its
``energy_vs_45nm`` (:data:`~scoville.sim.synth.NODES`). A zero-delay simulation has no
glitches: the switching sum is a lower bound for logic whose inputs arrive at different times
(the multipliers' partial-product trees above all).
"""

from __future__ import annotations

import re
from pathlib import Path

from .flow import run as flow_run
from .flow import to_verilog
from .synth import (
    CMOS,
    FF_TRANSISTORS,
    NODES,
    SynthError,
    _is_ff,
    gate_netlist,
    sram_pj_per_bit,
)

__all__ = ["CLOCK_PINS", "C_PIN_FF", "EnergyError", "VDD", "coverage", "measure",
           "memory_accesses"]

#: Supply voltage of the 45 nm figures (Horowitz, ISSCC 2014: 45 nm, 0.9 V).
VDD = 0.9
#: Load of one cell input pin with its share of local wire at 45 nm, fF: the Nangate 45 nm
#: Open Cell Library's X1 inputs are about 1.5-1.6 fF (INV_X1, NAND2_X1); a short local wire
#: (about 2 um at 0.2 fF/um) is the rest. A stated assumption.
C_PIN_FF = 2.0
#: A flip-flop's clock load in input pins (its clock pin and the internal clock inverters, and
#: its share of the clock tree's last stage). A stated assumption.
CLOCK_PINS = 3


class EnergyError(SynthError):
    """The netlist run failed or measured nothing: one line."""


def _cell_pins(driver: str) -> float:
    """A driving cell's own load, in input pins: its transistors over four."""
    if _is_ff(driver):
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
_IF = re.compile(r"^\s*if \(")


def memory_accesses(verilog: str, branches: dict, cycles: int) -> list[dict]:
    """Each memory of Yosys's written netlist with its ``width``, ``words``, ``reads`` and
    ``writes``: a write (or read) statement's count is its enclosing ``if``'s branch count
    (writes with several enable slices in one clocked block count once, the most of them);
    a read outside any ``if`` (an asynchronous port's ``assign``) reads every cycle."""
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
    pattern = re.compile(r"(<=|=)\s*(" + "|".join(re.escape(k) for k in mems) + r")\s*\[|"
                         r"^\s*(" + "|".join(re.escape(k) for k in mems) + r")\s*\[.*<=")
    block, writes = 0, {}
    for i, line in enumerate(lines):
        if "always @(posedge" in line:
            block = i
        m = pattern.search(line)
        if not m or line.lstrip().startswith(("reg ", "initial")):
            continue
        if m.group(3) is None and m.group(1) == "=" and not line.lstrip().startswith("assign"):
            continue  # an initializer
        guard = lines[i - 1] if i else ""
        count = branches.get(i, {}).get("if", 0) if _IF.match(guard) else cycles
        if m.group(3) is not None:
            key = (m.group(3), block)
            writes[key] = max(writes.get(key, 0), count)
        else:
            mems[m.group(2)]["reads"] += count
    for (name, _), n in writes.items():
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


def _component(name: str, components: set[str]) -> str:
    head = name.split(".", 1)[0]
    return head if head in components else "top"


def measure(block, config, workload, *, node: str = "n5", seed: int = 1,
            components: tuple[str, ...] = ()) -> dict:
    """Energy of ``block`` with ``config`` over ``workload`` (its ``workload_test``), at
    ``node``: ``energy_pj_per_op`` (per the block's ``operation``), ``op``, ``ops``,
    ``cycles``, ``energy_pj`` (``switching``, ``clock``, ``sram``, ``total``),
    ``energy_components`` (switching and SRAM pJ per sub-component, by net name), the
    memories' accesses (``sram_accesses``), ``toggles``, ``bits`` (the netlist's net bits) and
    ``bits_covered`` (those the coverage named), ``flip_flops`` and ``run_dir`` (the run's
    folder: Verilator's ``coverage.dat``, the metrics)."""
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
    toggles, branches, cycles = coverage(Path(result.run_dir) / "coverage.dat", dut)
    if not toggles or not cycles:
        raise EnergyError(f"no toggle coverage for {dut} in {result.run_dir}")
    scale = NODES[node].energy_vs_45nm
    fj = 0.5 * C_PIN_FF * VDD ** 2 * scale  # fJ per pin of load per toggle
    decl = _declarations(net["verilog"])
    seen: dict[str, int] = {}
    owner: dict[str, str] = {}
    names = set(components)
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
                if n > seen.get(b, -1):
                    seen[b] = n
                    owner[b] = _component(name, names)
    by_comp: dict[str, float] = {}
    switching = 0.0
    for b, n in seen.items():
        fanout, driver = net["bits"].get(b, [0, ""])
        e = n * (fanout + _cell_pins(driver)) * fj * 1e-3  # pJ
        switching += e
        by_comp[owner[b]] = by_comp.get(owner[b], 0.0) + e
    ffs = sum(net["ffs"].values())
    clock = ffs * cycles * CLOCK_PINS * 2 * fj * 1e-3  # C V^2 a cycle = 2 x (1/2 C V^2)
    mems = memory_accesses(net["verilog"], branches, cycles)
    sram = 0.0
    for m in mems:
        e = (m["reads"] + m["writes"]) * m["width"] * sram_pj_per_bit(
            m["words"] * m["width"] / 8, node)
        m["energy_pj"] = e
        sram += e
        comp = _component(m["name"], names)
        by_comp[comp] = by_comp.get(comp, 0.0) + e
    metrics = result.metrics.get(block.workload_test, {})
    ops = count(metrics)
    if not ops:
        raise EnergyError(f"the workload of {top} counted no {unit}s")
    total = switching + clock + sram
    return {"energy_pj_per_op": total / ops, "op": unit, "ops": ops, "cycles": cycles,
            "energy_pj": {"switching": switching, "clock": clock, "sram": sram,
                          "total": total},
            "energy_components": dict(sorted(by_comp.items())), "sram_accesses": mems,
            "toggles": sum(seen.values()), "bits": len(net["bits"]), "bits_covered": len(seen),
            "flip_flops": ffs, "run_dir": result.run_dir}
