"""Synthesis of a block's Verilog with Debian's Yosys: cells, flip-flops, transistors, logic
depth and area, memories apart as SRAM macros, in total and per sub-component.

The script (:data:`SCRIPT`): Yosys's ``synth`` up to its fine-grained stage, without
flattening and without its ``share`` pass (:data:`SCRIPT`'s comment says why), so every
Amaranth memory stays one ``$mem_v2`` cell (``memory -nomap``); then the
logic is mapped to simple gates (``techmap``, ``abc -g`` :data:`GATES`). Per module: the cells
by type; the longest combinational path in gates (``ltp -noff``); then, flattened, the
block's. Memories are not flip-flops: each ``$mem_v2`` is reported as an SRAM macro (words x
width, ports) and its area estimated from the node's bit cell (:data:`NODES`).

Transistors: Yosys's CMOS cost of each simple gate (its ``stat -tech cmos`` table,
:data:`CMOS`) plus :data:`FF_TRANSISTORS` per flip-flop (Yosys leaves flip-flops out of its
count); SRAM is apart (``sram_*``). Logic area: transistors over the node's logic density at
:data:`UTILIZATION`. Results are cached by the hash of the Verilog, the script, the Yosys that
ran it and the path analysis's format (:data:`~scoville.synth.timing.FORMAT`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import timing

__all__ = ["CMOS", "FF_TRANSISTORS", "GATES", "NODES", "Node", "SRAM_45NM", "SynthError",
           "gate_netlist", "ice40", "netlist_key", "script", "sram_pj_per_bit",
           "stillmaker", "synthesize"]

#: The simple gates ABC maps to.
GATES = "AND,NAND,OR,NOR,XOR,XNOR,ANDNOT,ORNOT,MUX"
#: Transistors per simple gate: Yosys's CMOS cost model (``kernel/cost.h``, the numbers
#: ``stat -tech cmos`` adds up).
CMOS = {"$_NOT_": 2, "$_NAND_": 4, "$_NOR_": 4, "$_AND_": 6, "$_OR_": 6, "$_ANDNOT_": 6,
        "$_ORNOT_": 6, "$_XOR_": 12, "$_XNOR_": 12, "$_AOI3_": 6, "$_OAI3_": 6, "$_AOI4_": 8,
        "$_OAI4_": 8, "$_MUX_": 12, "$_NMUX_": 10, "$_BUF_": 0}
#: Transistors per flip-flop, a stated assumption: a static master-slave D flip-flop with a
#: synchronous reset or enable, about 24 (a plain DFF is 20-24 in standard-cell libraries).
FF_TRANSISTORS = 24
#: Placed-and-routed share of a logic block's area that its cells take.
UTILIZATION = 0.7
#: An SRAM macro's bit cells over its area (the rest: decoders, sense amplifiers, I/O), and
#: what a second port (a read and a write port at once) adds to a bit cell.
SRAM_EFFICIENCY, SECOND_PORT = 0.6, 1.3


#: Stillmaker and Baas, "Scaling equations for the accurate prediction of CMOS device
#: performance from 180 nm to 7 nm", Integration 58 (2017), table 5: energy per operation of a
#: node's high-performance (HP) devices as ``a Vdd^2 + b Vdd + c``.
STILLMAKER = {"45": (1.018, -0.3107, 0.1539), "16": (0.2958, -0.1241, 0.03024),
              "7": (0.1776, -0.09097, 0.02447)}
#: TSMC's N5 against N7 (TSMC, 2019-2020 announcements): 30% less power at the same speed.
N5_VS_N7 = 0.7


def stillmaker(node: str, vdd: float) -> float:
    """Stillmaker and Baas's energy of ``node`` (``45``, ``16`` or ``7``) at ``vdd`` over
    45 nm's at 0.9 V, Horowitz's voltage."""
    a, b, c = STILLMAKER[node]
    a0, b0, c0 = STILLMAKER["45"]
    return (a * vdd ** 2 + b * vdd + c) / (a0 * 0.81 + b0 * 0.9 + c0)


@dataclass(frozen=True)
class Node:
    """A process node: logic density (million transistors per mm^2), the high-density SRAM
    bit cell (um^2) and the energy of an operation against 45 nm at 0.9 V (Horowitz's
    figures), with their sources."""

    name: str
    mtr_per_mm2: float
    bitcell_um2: float
    energy_vs_45nm: float
    source: str


NODES = {
    "n5": Node("n5", 171.3, 0.021, N5_VS_N7 * stillmaker("7", 0.7),
               "WikiChip, 'TSMC Details 5 nm' (2020): 171.3 MTr/mm^2 estimated; 0.021 um^2 "
               "high-density SRAM cell (TSMC, IEDM 2019); energy: n7's x 0.7 (TSMC's N5 "
               "claim)"),
    "n7": Node("n7", 91.2, 0.027, stillmaker("7", 0.7),
               "WikiChip, TSMC N7: 91.2 MTr/mm^2; 0.027 um^2 SRAM cell (TSMC, IEDM 2016); "
               "energy: Stillmaker and Baas HP 7 nm at 0.7 V"),
    "n16": Node("n16", 28.9, 0.074, stillmaker("16", 0.8),
                "WikiChip, TSMC 16FF+: 28.9 MTr/mm^2; 0.074 um^2 SRAM cell; energy: "
                "Stillmaker and Baas HP 16 nm at 0.8 V"),
    "45nm": Node("45nm", 3.3, 0.346, 1.0,
                 "WikiChip, Intel 45 nm: 3.3 MTr/mm^2; 0.346 um^2 SRAM cell (the node of "
                 "Horowitz's energy figures, 0.9 V)"),
}

#: Horowitz's SRAM figures at 45 nm (ISSCC 2014): (macro bytes, pJ per 64-bit read).
SRAM_45NM = ((8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0))


def sram_pj_per_bit(macro_bytes: float, node: str = "45nm") -> float:
    """Energy of one bit read (or written) in a macro of ``macro_bytes``: Horowitz's 45 nm
    points interpolated in log-log (below 8 KB, the 8-32 KB slope continued: energy as the
    square root of size, the bit-line length), scaled to ``node``."""
    pts = SRAM_45NM
    size = max(macro_bytes, 1.0)
    lo, hi = (pts[0], pts[1]) if size <= pts[1][0] else (pts[1], pts[2])
    slope = math.log(hi[1] / lo[1]) / math.log(hi[0] / lo[0])
    pj64 = lo[1] * (size / lo[0]) ** slope
    return pj64 / 64 * NODES[node].energy_vs_45nm


#: ``-noshare``: Yosys's ``share`` (SAT-based sharing of arithmetic behind exclusive
#: multiplexers) merged nothing in the logs we read (it removes cells that are never active,
#: which later passes remove too), and its pairs of candidates grow as the square of an
#: array's PEs (an 8 x 8 wide-format engine: over 20 minutes with it, minutes without). ABC
#: then maps a slightly different netlist: ``scripts/synth_check.py`` gives the differences
#: (``docs/synth-check.md``).
SCRIPT = f"""read_verilog -sv {{src}}
synth -top {{top}} -noshare -run begin:fine
opt -fast -full
techmap
opt -fast
abc -g {GATES}
opt_clean
write_json {{net}}
tee -q -o {{ltp_modules}} ltp -noff
flatten
opt_clean
tee -q -o {{ltp_top}} ltp -noff
write_json {{flat}}
"""


#: The gate netlist that is simulated for energy (:func:`gate_netlist`): the same gates,
#: but the small ROMs Yosys makes of case statements (``proc_rom``) mapped to logic (they are
#: gates in silicon, not SRAM macros), flattened, every net and cell given a public name
#: (``autoname``, hierarchical: ``flow.array...``) so that the Verilog and the JSON name it
#: alike.
NETLIST_SCRIPT = SCRIPT[:SCRIPT.index("techmap")] + "memory_map -rom-only\nopt -fast\n" + \
    SCRIPT[SCRIPT.index("techmap"):SCRIPT.index("write_json")] + """flatten
opt_clean
autoname
write_verilog -noattr -norename {out}
write_json {net}
"""
#: The version of what :func:`gate_netlist` keeps of Yosys's JSON (part of its cache key).
NETLIST_FORMAT = 4
#: A Verilog identifier that needs no escaping, and an escaped one (its name, then a space).
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPED = re.compile(r"\\(\S+)(?= )")


class SynthError(RuntimeError):
    """Yosys is missing or failed: one line, with the fix where there is one."""


def _yosys() -> str:
    path = shutil.which("yosys")
    if path is None:
        raise SynthError("yosys not found; fix: apt-get install -y yosys (Debian's; "
                         "Amaranth's bundled Yosys cannot read Verilog)")
    return path


def _depths(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        if line.startswith("Longest topological path in "):
            name, _, rest = line[len("Longest topological path in "):].partition(" (length=")
            out[name] = int(rest.split(")")[0])
    return out


def _cached(name: str, text: str, compute) -> dict:
    """``compute()``'s result, kept under the build cache by the hash of ``text`` (what it
    depends on); written whole, then renamed, so a parallel run never reads half a file."""
    from ..sim.flow import cache_root, write_whole

    key = hashlib.sha256(text.encode()).hexdigest()[:24]
    cache = cache_root() / "synth" / f"{name}-{key}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    result = compute()
    write_whole(cache, json.dumps(result))
    return result


#: ABC's mapping with the flip-flops passed through it (``-dff``: each domain's registers, a
#: domain a clock, an enable and a reset; its sequential passes, ``scorr`` merging registers,
#: act on them too) and a delay target (``-D 1``, which makes Yosys add ABC's ``retime``,
#: min-area then min-delay, towards a target no netlist meets: as short as it gets, in
#: levels of ABC's and-inverter graph): register retiming, as a synthesis flow pipelines a
#: datapath whose register stages the RTL places after its logic (``lib.pipeline.LaneUnit``).
#: Within each module (ABC runs before the design is flattened), its ports free (an output
#: register may move into the logic); memories stay; ABC computes a moved register's reset
#: value.
RETIME = " -dff -D 1"


#: ABC's mappings of the logic to :data:`GATES` (``abc -g``): ``area``, Yosys's own script,
#: whose ``dc2`` rewrites towards fewer gates at any depth (it turns Yosys's parallel-prefix
#: adders into ripples: a 27-bit adder, 16 levels as Yosys's techmap writes it, is 53 after
#: it); ``delay``, ``strash; dch; map``: ABC's structural choices and its mapper, which maps
#: for the shortest paths and then recovers area along the others, as a timing-driven flow
#: keeps a netlist (the same adder 16 levels, a fifth more gates). docs/synth.md compares them.
MAPPINGS = {"area": "", "delay": " -script +strash;dch;map"}


def script(share: bool = False, retime: bool = False, mapping: str = "area") -> str:
    """:data:`SCRIPT`, or with ``share`` Yosys's ``synth`` whole (its ``share`` pass run);
    with ``retime`` ABC retimes each module's registers (:data:`RETIME`); ``mapping`` one of
    :data:`MAPPINGS` (retiming with the ``area`` one only)."""
    if mapping not in MAPPINGS:
        raise SynthError(f"unknown mapping {mapping!r}; allowed: {', '.join(MAPPINGS)}")
    if retime and mapping != "area":
        raise SynthError(f"--retime: not with --map {mapping} (ABC retimes in its area "
                         "script; docs/synth.md)")
    text = SCRIPT.replace(" -noshare", "") if share else SCRIPT
    if not (retime or MAPPINGS[mapping]):
        return text
    line = f"abc -g {GATES}\n"
    if text.count(line) != 1:
        raise SynthError(f"the synthesis script has {text.count(line)} lines {line.strip()!r}; "
                         "retiming or another mapping needs one")
    return text.replace(line, f"abc -g {GATES}{RETIME if retime else MAPPINGS[mapping]}\n")


def _run(verilog: str, top: str, share: bool = False, retime: bool = False,
         mapping: str = "area") -> dict:
    """Yosys on ``verilog``: per module its cells by type, submodule instances, memories and
    logic depth; the flattened design's depth; the seconds Yosys took. Cached."""
    text = script(share, retime, mapping)
    # What is kept depends on the script, the Yosys that runs it and the path analysis.
    key = f"{text}\0{_yosys_version()}\0{timing.FORMAT}\0{top}\0{verilog}"
    return _cached(top, key, lambda: _yosys_run(verilog, top, text))


@functools.cache
def _yosys_version() -> str:
    return subprocess.run([_yosys(), "-V"], capture_output=True, text=True).stdout.strip()


def _script(d: Path, script: str, verilog: str, top: str, **paths) -> None:
    """Yosys's ``script`` (formatted with the source, ``top`` and ``paths``) on ``verilog``,
    in folder ``d``; a failure is one line."""
    (d / "top.v").write_text(verilog)
    (d / "s.ys").write_text(script.format(src=d / "top.v", top=top, **paths))
    proc = subprocess.run([_yosys(), "-q", "-s", str(d / "s.ys")], capture_output=True,
                          text=True)
    if proc.returncode:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SynthError(f"yosys failed on {top}: {last[0]}")


def _yosys_run(verilog: str, top: str, text: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        paths = {name: d / f"{name}.txt" for name in ("ltp_modules", "ltp_top")}
        start = time.monotonic()
        _script(d, text, verilog, top, net=d / "net.json", flat=d / "flat.json", **paths)
        seconds = time.monotonic() - start
        net = json.loads((d / "net.json").read_text())
        depth = _depths(paths["ltp_modules"].read_text())
        top_depth = _depths(paths["ltp_top"].read_text()).get(top, 0)
        try:
            path = timing.levels(json.loads((d / "flat.json").read_text())["modules"][top])
        except ValueError as err:
            raise SynthError(f"{top}: {err}") from None
    modules = {}
    for name, mod in net["modules"].items():
        if mod.get("attributes", {}).get("blackbox"):
            continue
        cells, subs, mems = {}, [], []
        for cname, cell in mod["cells"].items():
            t = cell["type"]
            if t in net["modules"]:
                subs.append((cname, t))
            elif t.startswith("$mem"):
                p = {k: int(v, 2) for k, v in cell["parameters"].items()
                     if k in ("SIZE", "WIDTH", "RD_PORTS", "WR_PORTS")}
                mems.append({"name": f"{name}.{cname}", "words": p["SIZE"],
                             "width": p["WIDTH"], "read_ports": p["RD_PORTS"],
                             "write_ports": p["WR_PORTS"]})
            else:
                cells[t] = cells.get(t, 0) + 1
        modules[name] = {"cells": cells, "subs": subs, "memories": mems,
                         "depth": depth.get(name, 0)}
    return {"modules": modules, "top_depth": top_depth, "path": path,
            "seconds": round(seconds, 1)}


@functools.cache
def netlist_key() -> str:
    """What a gate netlist depends on besides the Verilog: the script, the format of what is
    kept and the Yosys that runs it (the netlist build's cache key holds it too); asked of
    Yosys once a process."""
    return f"{NETLIST_FORMAT}\0{NETLIST_SCRIPT}\0{_yosys_version()}"


def gate_netlist(verilog: str, top: str) -> dict:
    """Yosys's flattened gate netlist of module ``top`` (:data:`NETLIST_SCRIPT`): ``verilog``,
    its text (memories as behavioural arrays); ``nets``, per net name the id of each of its
    bits (least significant first; ``None`` for a constant); ``bits``, per id ``[fanout,
    driver, component]`` (the cell input pins and output ports it feeds; the type of the
    cell that drives it, ``""`` for an input port; the top-level instance that cell is in,
    ``""`` for the top's own); ``clocks``, the ids that feed clock inputs; ``ffs``, the
    flip-flops by type. Cached like :func:`synthesize`."""
    return _cached(f"{top}-netlist", netlist_key() + top + "\0" + verilog,
                   lambda: _netlist_run(verilog, top))


def _netlist_run(verilog: str, top: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        _script(d, NETLIST_SCRIPT, verilog, top, out=d / "gates.v", net=d / "net.json")
        text = (d / "gates.v").read_text()
        mod = json.loads((d / "net.json").read_text())["modules"][top]
    fanout: dict[int, int] = {}
    driver: dict[int, tuple[str, str]] = {}
    ffs: dict[str, int] = {}
    clocks: set[int] = set()
    for cname, cell in mod["cells"].items():
        t = cell["type"]
        if timing.is_ff(t):
            ffs[t] = ffs.get(t, 0) + 1
        comp = timing.component(cname)
        for port, bits in cell["connections"].items():
            out = cell["port_directions"].get(port) == "output"
            for b in bits:
                if isinstance(b, int):
                    if out:
                        driver[b] = (t, comp)
                    else:
                        fanout[b] = fanout.get(b, 0) + 1
                        if port in timing.CLOCK_PORTS:  # the clock term, apart
                            clocks.add(b)
    for port in mod["ports"].values():
        for b in port["bits"]:
            if isinstance(b, int):
                if port["direction"] == "input":
                    driver.setdefault(b, ("", ""))
                else:
                    fanout[b] = fanout.get(b, 0) + 1
    upto = [name for name, n in mod["netnames"].items() if n.get("upto")]
    if upto:
        raise SynthError(f"gate netlist of {top}: net {upto[0]} is declared [lo:hi]; only "
                         "[hi:lo] nets are mapped to their coverage")
    # Autoname's names chain the cells they pass (a kilobyte a line at times): every net whose
    # name is escaped in Verilog gets a short one, ``n<k>_``, in the text and here alike
    # (a public name that starts with "$" has a backslash before it in the JSON, not in
    # Verilog). Ports and memories keep theirs.
    ports = set(mod["ports"])
    short = {}
    for name in mod["netnames"]:
        bare = name.removeprefix("\\")
        if bare not in ports and not _PLAIN.fullmatch(bare):
            short[bare] = f"n{len(short)}_"
    text = _ESCAPED.sub(lambda m: short.get(m.group(1), m.group(0)), text)
    nets = {short.get(n, n): [b if isinstance(b, int) else None for b in mod["netnames"][k]["bits"]]
            for k in mod["netnames"] for n in [k.removeprefix("\\")]}
    bits = {str(b): [fanout.get(b, 0), *driver.get(b, ("", ""))]
            for b in {*fanout, *driver}}
    return {"verilog": text, "nets": nets, "bits": bits, "clocks": sorted(clocks), "ffs": ffs}


def _totals(modules: dict, name: str, node: Node) -> dict:
    """The keys of module ``name`` with everything under it."""
    cells, mems, depth = {}, [], modules[name]["depth"]

    def walk(m):
        nonlocal depth
        mod = modules[m]
        for t, n in mod["cells"].items():
            cells[t] = cells.get(t, 0) + n
        mems.extend(mod["memories"])
        depth = max(depth, mod["depth"])
        for _, sub in mod["subs"]:
            walk(sub)

    walk(name)
    ffs = sum(n for t, n in cells.items() if timing.is_ff(t))
    transistors = sum(CMOS.get(t, 0) * n for t, n in cells.items()) + FF_TRANSISTORS * ffs
    sram_bits = sum(m["words"] * m["width"] for m in mems)
    sram_um2 = sum(m["words"] * m["width"] * node.bitcell_um2 / SRAM_EFFICIENCY
                   * (SECOND_PORT if m["read_ports"] + m["write_ports"] > 1 else 1.0)
                   for m in mems)
    logic = transistors / (node.mtr_per_mm2 * 1e6) / UTILIZATION
    return {"cells": sum(cells.values()), "cells_by_type": dict(sorted(cells.items())),
            "flip_flops": ffs, "transistors": transistors, "logic_depth": depth,
            "sram_bits": sram_bits, "memories": mems, "logic_mm2": logic,
            "sram_mm2": sram_um2 * 1e-6, "area_mm2": logic + sram_um2 * 1e-6}


def synthesize(verilog: str, top: str, node: str = "n5", *, share: bool = False,
               retime: bool = False, mapping: str = "area") -> dict:
    """The block's synthesis results at ``node`` (:data:`NODES`): the totals (the keys of
    ``scoville synth --json``) and ``components``, the same keys for each sub-component (each
    instance the top module holds); ``yosys_s``, the seconds Yosys took when it ran (a cached
    result keeps them). ``share``: with Yosys's ``share`` pass (:data:`SCRIPT`); ``retime``:
    with each module's registers retimed (:data:`RETIME`); ``mapping``: ABC's, one of
    :data:`MAPPINGS`."""
    if node not in NODES:
        raise SynthError(f"unknown node {node!r}; allowed: {', '.join(NODES)}")
    n = NODES[node]
    run = _run(verilog, top, share, retime, mapping)
    modules = run["modules"]
    out = _totals(modules, top, n)
    out["logic_depth"] = run["top_depth"]
    path = run["path"]
    out["levels"] = path["levels"]
    out["levels_path"] = {k: path[k] for k in ("gates", "start", "end")}
    out["fmax_ghz"] = round(timing.fmax_ghz(path["levels"], node), 3)
    out["node"] = node
    out["retimed"] = retime
    out["mapping"] = mapping
    out["yosys_s"] = run["seconds"]
    out["components"] = {inst.lstrip("\\"): _totals(modules, sub, n)
                         for inst, sub in modules[top]["subs"]}
    for name, comp in out["components"].items():
        comp["levels"] = path["components"].get(name, 0)
    return out


#: The FPGA the check places and routes on: Lattice iCE40 HX8K (CT256 package).
ICE40 = ("--hx8k", "--package", "ct256")


def _ports(verilog: str, top: str) -> list[tuple[str, str, int]]:
    """``(direction, name, width)`` of the top module's ports, from its declarations."""
    body = verilog[verilog.index(f"module {top}("):]
    body = body[:body.index("endmodule")]
    out = []
    for m in re.finditer(r"^\s*(input|output)\s+(?:reg\s+|wire\s+)?(?:\[(\d+):0\]\s+)?"
                         r"([\\\w.$]+)\s*;", body, re.M):
        out.append((m.group(1), m.group(3), int(m.group(2) or 0) + 1))
    return out


def _wrapper(verilog: str, top: str) -> str:
    """A top for the FPGA: the block's inputs (but the clock and reset) from a shift register
    fed one bit a cycle, its outputs registered and XOR-reduced to one pin, so that any
    block fits the package's pins and none of its logic is optimized away."""
    ports = [p for p in _ports(verilog, top) if p[1] not in ("clk", "rst")]
    n_in = sum(w for d, _, w in ports if d == "input") or 1
    n_out = sum(w for d, _, w in ports if d == "output") or 1
    conns, at_in, at_out = [], 0, 0
    for d, name, w in ports:
        if d == "input":
            conns.append(f".{name}(sr[{at_in + w - 1}:{at_in}])")
            at_in += w
        else:
            conns.append(f".{name}(o[{at_out + w - 1}:{at_out}])")
            at_out += w
    return (f"module fpga_top(input clk, input rst, input sin, output reg sout);\n"
            f"  reg [{n_in}:0] sr;\n  wire [{n_out - 1}:0] o;\n  reg [{n_out - 1}:0] oq;\n"
            f"  always @(posedge clk) begin sr <= {{sr[{n_in - 1}:0], sin}}; oq <= o; "
            f"sout <= ^oq; end\n"
            f"  {top} dut(.clk(clk), .rst(rst), {', '.join(conns)});\nendmodule\n")


def ice40(verilog: str, top: str) -> dict:
    """The block on an iCE40 HX8K: ``luts`` (Yosys ``synth_ice40``'s SB_LUT4 cells of the
    block alone) and ``fmax_mhz`` (``nextpnr-ice40``'s maximum frequency of the clock, the
    block wrapped by :func:`_wrapper` so its pins fit). Cached like :func:`synthesize`."""
    return _cached(f"{top}-ice40", "ice40" + top + "\0" + verilog,
                   lambda: _ice40_run(verilog, top))


def _ice40_run(verilog: str, top: str) -> dict:
    yosys = _yosys()
    nextpnr = shutil.which("nextpnr-ice40")
    if nextpnr is None:
        raise SynthError("nextpnr-ice40 not found; fix: apt-get install -y nextpnr-ice40")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "top.v").write_text(verilog)
        (d / "wrap.v").write_text(_wrapper(verilog, top))
        stat = d / "stat.txt"
        for args in ([f"read_verilog -sv {d / 'top.v'}; synth_ice40 -top {top}; "
                      f"tee -q -o {stat} stat"],
                     [f"read_verilog -sv {d / 'top.v'} {d / 'wrap.v'}; "
                      f"synth_ice40 -top fpga_top -json {d / 'wrap.json'}"]):
            proc = subprocess.run([yosys, "-q", "-p", *args], capture_output=True, text=True)
            if proc.returncode:
                raise SynthError(f"yosys synth_ice40 failed on {top}")
        luts = int(re.search(r"SB_LUT4\s+(\d+)", stat.read_text()).group(1))
        proc = subprocess.run([nextpnr, *ICE40, "--json", str(d / "wrap.json"),
                               "--pcf-allow-unconstrained", "--timing-allow-fail",
                               "--freq", "12"], capture_output=True, text=True)
        found = re.findall(r"Max frequency for clock '[^']*': ([\d.]+) MHz", proc.stderr)
        if proc.returncode or not found:
            raise SynthError(f"nextpnr-ice40 failed on {top}")
    return {"luts": luts, "fmax_mhz": float(found[-1])}
