"""``scoville synth``: a block's cells, flip-flops, transistors, logic depth and area."""

from __future__ import annotations

import json

from scoville.blocks import BLOCKS, get_block, parse_params

__all__ = ["add_parser", "run"]


def add_parser(sub):
    from scoville.sim.synth import NODES

    p = sub.add_parser("synth", help="synthesize a block with Yosys: cells, flip-flops, "
                                     "transistors, logic depth, area (SRAM as macros)")
    p.add_argument("block", help=f"one of: {', '.join(BLOCKS)}")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameter (repeatable)")
    p.add_argument("--node", default="n5", help=f"process node: {', '.join(NODES)}")
    p.add_argument("--fpga", action="store_true",
                   help="also place and route on an iCE40 HX8K: luts and fmax_mhz")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def run(args) -> int:
    from scoville.sim.flow import to_verilog
    from scoville.sim.synth import NODES, SynthError, ice40, synthesize

    if args.node not in NODES:
        raise SynthError(f"unknown node {args.node!r}; allowed: {', '.join(NODES)}")
    block = get_block(args.block)
    config, _ = parse_params(block, args.param)
    verilog = to_verilog(block.component(config), block.name)
    result = synthesize(verilog, block.name, args.node)
    params = dict(p.split("=", 1) for p in args.param)
    report = {"block": block.name, "params": params, **result}
    if args.fpga:
        report.update(ice40(verilog, block.name))
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{block.name} at {args.node}: {result['cells']:,} cells, {result['flip_flops']:,} "
          f"flip-flops, {result['transistors']:,} transistors, logic depth "
          f"{result['logic_depth']}, SRAM {result['sram_bits']:,} bits; "
          f"{result['area_mm2']:.5f} mm^2 ({result['logic_mm2']:.5f} logic, "
          f"{result['sram_mm2']:.5f} SRAM)"
          + (f"; iCE40 HX8K {report['luts']:,} LUTs, {report['fmax_mhz']} MHz"
             if args.fpga else ""))
    for name, c in result["components"].items():
        print(f"  {name:<12} {c['cells']:>9,} cells {c['flip_flops']:>7,} FFs "
              f"{c['transistors']:>11,} T depth {c['logic_depth']:>4} SRAM {c['sram_bits']:>9,} "
              f"bits {c['area_mm2']:.5f} mm^2")
    return 0
