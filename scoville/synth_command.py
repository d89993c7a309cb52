"""``scoville synth``: a block's cells, flip-flops, transistors, logic depth and area."""

from __future__ import annotations

import json

from scoville.blocks import BLOCKS, get_block, parse_params
from scoville.synth.yosys import MAPPINGS

__all__ = ["add_parser", "run"]


def add_parser(sub):
    from scoville.synth.yosys import NODES

    p = sub.add_parser("synth", help="synthesize a block with Yosys: cells, flip-flops, "
                                     "transistors, logic depth, area (SRAM as macros)")
    p.add_argument("block", help=f"one of: {', '.join(BLOCKS)}")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameter (repeatable)")
    p.add_argument("--node", default="n5", help=f"process node: {', '.join(NODES)}")
    p.add_argument("--fpga", action="store_true",
                   help="also place and route on an iCE40 HX8K: luts and fmax_mhz")
    p.add_argument("--energy", action="store_true",
                   help="also simulate the gate netlist on Verilator over the block's random "
                        "workload (its parameters by --param; no gaps or back-pressure unless "
                        "given): energy_pj_per_op")
    p.add_argument("--seed", type=int, default=1, help="the energy workload's seed")
    p.add_argument("--share", action="store_true",
                   help="run Yosys's share pass too (slow on arrays; it merges nothing in "
                        "the blocks docs/synth-check.md compares)")
    p.add_argument("--retime", action="store_true",
                   help="let ABC retime each module's registers (a pipeline's stages moved "
                        "into its logic; levels, flip-flops and area of the retimed netlist)")
    p.add_argument("--map", default="area", choices=tuple(MAPPINGS),
                   help="ABC's mapping: area (Yosys's script, the default) or delay (the "
                        "shortest paths, then area: as a timing-driven flow; docs/synth.md)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


#: Workload parameters an energy run sets unless given: the block at its full rate.
FULL_RATE = {"gap": 0.0, "backpressure": 0.0}


def run(args) -> int:
    from scoville.sim.flow import to_verilog
    from scoville.synth.yosys import NODES, SynthError, ice40, script, synthesize

    if args.node not in NODES:
        raise SynthError(f"unknown node {args.node!r}; allowed: {', '.join(NODES)}")
    block = get_block(args.block)
    for option, on in (("--retime", args.retime), (f"--map {args.map}", args.map != "area")):
        if on and (args.energy or args.fpga):
            raise SynthError(f"{option}: not with --energy or --fpga (they run the netlist "
                             "as written and mapped for area; docs/synth.md)")
    script(args.share, args.retime, args.map)   # a combination it cannot run: one line, now
    if args.energy and block.operation is None:
        allowed = ", ".join(b.name for b in BLOCKS.values() if b.operation)
        raise SynthError(f"--energy: block {block.name} has no operation to count energy "
                         f"per; allowed: {allowed}")
    config, workload = parse_params(block, args.param)
    try:
        verilog = to_verilog(block.component(config), block.name)
    except Exception as err:  # elaboration's own errors: one line
        raise SynthError(f"{block.name} does not elaborate with these parameters: "
                         f"{str(err).splitlines()[0] if str(err) else type(err).__name__}"
                         ) from None
    result = synthesize(verilog, block.name, args.node, share=args.share, retime=args.retime,
                        mapping=args.map)
    params = dict(p.split("=", 1) for p in args.param)
    report = {"block": block.name, "params": params, **result}
    if args.fpga:
        report.update(ice40(verilog, block.name))
    if args.energy:
        report.update(_energy(block, args, config, workload, set(params)))
    if args.json:
        print(json.dumps(report))
        return 0
    how = "".join((", retimed" if args.retime else "",
                   f", mapped for {args.map}" if args.map != "area" else ""))
    print(f"{block.name} at {args.node}{how}: {result['cells']:,} cells, "
          f"{result['flip_flops']:,} "
          f"flip-flops, {result['transistors']:,} transistors, logic depth "
          f"{result['logic_depth']}, {result['levels']} levels (fmax bound "
          f"{result['fmax_ghz']:.2f} GHz), SRAM {result['sram_bits']:,} bits; "
          f"{result['area_mm2']:.5f} mm^2 ({result['logic_mm2']:.5f} logic, "
          f"{result['sram_mm2']:.5f} SRAM)"
          + (f"; iCE40 HX8K {report['luts']:,} LUTs, {report['fmax_mhz']} MHz"
             if args.fpga else "")
          + (f"; {report['energy_pj_per_op']:.4g} pJ per {report['op']} over "
             f"{report['ops']:,} ({report['energy_pj']['switching']:.4g} pJ switching, "
             f"{report['energy_pj']['clock']:.4g} clock, {report['energy_pj']['sram']:.4g} "
             f"SRAM)" if args.energy else ""))
    for name, c in result["components"].items():
        print(f"  {name:<12} {c['cells']:>9,} cells {c['flip_flops']:>7,} FFs "
              f"{c['transistors']:>11,} T depth {c['logic_depth']:>4} SRAM {c['sram_bits']:>9,} "
              f"bits {c['area_mm2']:.5f} mm^2")
    return 0


def _energy(block, args, config, workload, given: set[str]) -> dict:
    """``energy_pj_per_op`` and its parts (:func:`scoville.synth.energy.measure`), the workload at
    full rate unless ``--param`` set its gaps (``given``: the parameters set)."""
    import dataclasses

    from scoville.sim.flow import FlowError
    from scoville.sim.tools import ToolError
    from scoville.synth.energy import measure
    from scoville.synth.yosys import SynthError

    fields = {f.name for f in dataclasses.fields(workload)}
    workload = dataclasses.replace(workload, **{k: v for k, v in FULL_RATE.items()
                                                if k in fields and k not in given})
    try:
        return measure(block, config, workload, node=args.node, seed=args.seed)
    except (FlowError, ToolError) as err:
        raise SynthError(str(err).splitlines()[0]) from None

