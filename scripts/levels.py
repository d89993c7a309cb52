#!/usr/bin/env python3
"""Every block at its default configuration against issue #36's budget of 40 levels a cycle:
``scoville synth BLOCK --json``'s critical path in levels (fanout counted, an SRAM read a
stage of its own; ``docs/synth.md``), where it starts and ends, and the clock bound it gives;
beside it the same with each module's registers retimed (``--retime``) and mapped for delay
(``--map delay``). Then the units whose register stages follow their logic (``latency``) at
every latency they allow, retimed: how far stages alone take each towards the budget; and
the units whose stages cut their logic as written (fp32_add, exp2, mx_quant, mx_dot,
nvfp4_dot, argmax, rope, int_mac, and gemm_quant's block units), at every latency (some),
mapped for area and for delay; last, the GEMM array in each format at 4 x 4, mapped for delay.

A synthesis that takes longer than ``--timeout`` seconds is listed as not measured.

Writes ``docs/levels.md``.

Usage: ``python scripts/levels.py [--jobs 2] [--timeout 90] [--out FILE.md]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
from pathlib import Path

from scoville.blocks import BLOCKS
from scoville.rtl.gemm import (
    ADD_LATENCY,
    BF16_PE_LATENCY,
    PE_LATENCY,
    SCALE_LATENCY,
    UNIT_LATENCY,
    GemmConfig,
)
from scoville.synth.timing import BUDGET, FO4_PS, LEVEL_FO4, REGISTER_FO4

ROOT = Path(__file__).resolve().parent.parent
#: The units whose ``latency`` register stages follow their logic (``lib.pipeline``'s
#: ``LaneUnit`` without cut points, and its kind), with the latencies their configs allow.
STAGED = {"fp4_mul": range(1, 5)}
#: The units whose stages cut their logic as written (``LaneUnit.CUTS``,
#: ``lib.blockdot.dot_cuts``), with the latencies their configs allow at their default lanes.
CUT = {"fp32_add": range(1, 7), "exp2": range(1, 6), "mx_quant": range(2, 6),
       "mx_dot": range(3, 10), "nvfp4_dot": range(4, 15), "argmax": range(2, 6),
       "rope": (1, 5, 9, 11), "int_mac": range(2, 5), "gemm_quant": (0, 6)}
#: The parameter each of :data:`CUT` sets (``latency`` unless named here): gemm_quant's MXFP4
#: array's block units (its default is in the first table).
CUT_PARAM = {"gemm_quant": "array.unit_latency"}
#: The GEMM array in each format pair on ``os`` at 4 x 4 (its other parameters at their
#: defaults), mapped for delay.
GEMM_FORMATS = ("int8", "int4", "mxfp4", "mxfp8", "mxfp8/mxfp4", "nvfp4", "bf16")
#: The block units of the 4 x 4 array at fewer stages than their default (formats, latencies).
UNIT_FEWER = (("mxfp4", "nvfp4"), (8, 9, 10))
#: The block formats of the 4 x 4 array at the other ``pe_latency`` than their default (1 with
#: MXFP8 elements of A, else 0).
PE_OTHER = ("mxfp4", "mxfp8", "mxfp8/mxfp4", "nvfp4")
#: BF16's 4 x 4 array at other ``pe_latency`` and ``add_latency`` than its defaults: uncut,
#: the product registered, then cut once and twice (one sum, or the default three), and the
#: adder cut three times (four sums).
BF16_OTHER = ((0, 0), (1, 0), (2, 2), (3, 1), (3, 3), (4, 2))
#: How each block is synthesized: as written and mapped for area (the default), retimed, and
#: mapped for delay.
HOW = {"area": {}, "retimed": {"retime": True}, "delay": {"mapping": "delay"}}


def _gemm_params(pair: str) -> dict:
    """The parameters of the 4 x 4 ``os`` array in ``pair`` (``fmt`` or ``fmt/b_fmt``)."""
    fmt, _, b_fmt = pair.partition("/")
    return {"rows": 4, "cols": 4, "fmt": fmt, **({"b_fmt": b_fmt} if b_fmt else {})}


def _other_pe(pair: str) -> int:
    """The ``pe_latency`` that the array in ``pair`` does not take by default."""
    fmt, _, b_fmt = pair.partition("/")
    return 1 - GemmConfig(fmt=fmt, b_fmt=b_fmt or "same").pe_stages


def _gemm_row(got: dict, pair: str, params: dict, label: str) -> str:
    """A table row of the 4 x 4 array in ``pair`` with ``params`` set, mapped for delay:
    ``label``'s cells, then flip-flops, levels, levels over the budget and the path."""
    d = got[("gemm", tuple({**_gemm_params(pair), **params}.items()), "delay")]
    if d is None:
        return f"| {label} | not measured | | | | |"
    path = d["levels_path"]
    return (f"| {label} | {d['flip_flops']:,} | {d['levels']} | {d['levels'] / BUDGET:.1f}x | "
            f"`{path['start']}` | `{path['end']}` |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--out", default=str(ROOT / "docs" / "levels.md"))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "scripts"))
    from area import synth  # its runner of ``scoville synth --json``, with the timeout

    node = "n5"
    runs = [(b, {}, how) for b in BLOCKS for how in HOW]
    runs += [(b, {"latency": n}, "retimed") for b, lat in STAGED.items() for n in lat]
    runs += [(b, {CUT_PARAM.get(b, "latency"): n}, how) for b, lat in CUT.items() for n in lat
             for how in ("area", "delay")]
    runs += [("gemm", _gemm_params(f), "delay") for f in GEMM_FORMATS]
    runs += [("gemm", {**_gemm_params(f), "unit_latency": n}, "delay")
             for f in UNIT_FEWER[0] for n in UNIT_FEWER[1]]
    runs += [("gemm", {**_gemm_params(f), "pe_latency": _other_pe(f)}, "delay")
             for f in PE_OTHER]
    runs += [("gemm", {**_gemm_params("bf16"), "pe_latency": pe, "add_latency": add}, "delay")
             for pe, add in BF16_OTHER]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        got = dict(zip(((b, tuple(p.items()), how) for b, p, how in runs),
                       pool.map(lambda x: synth(x[0], x[1], node, timeout=args.timeout,
                                                **HOW[x[2]]), runs), strict=True))
    lines = [
        "# Levels a cycle, every block at its defaults",
        "",
        "Made by `python scripts/levels.py`; do not edit by hand. `scoville synth BLOCK` at the "
        "block's default parameters: *depth* is Yosys's gates on the longest path (`ltp`); "
        "*levels* the critical path with fanout trees of four and an SRAM read a stage of its "
        "own ([synth.md](synth.md)); the budget of issue #36 is "
        f"**{BUDGET} levels** a cycle; *fmax bound* at {node} is (levels x {LEVEL_FO4} + "
        f"{REGISTER_FO4}) FO4 of {FO4_PS[node][0]} ps (devices alone: optimistic). *Retimed*: "
        "`scoville synth --retime`, ABC moving each module's registers across its logic "
        "towards the shortest path, as a synthesis flow pipelines a datapath whose stages "
        "the RTL writes after its logic (within a module: ABC runs before flattening). "
        "*Delay*: `scoville synth --map delay`, ABC mapping for the shortest paths and then "
        "recovering area (`strash; dch; map`) instead of Yosys's area script, whose `dc2` "
        "turns parallel-prefix adders into ripples ([synth.md](synth.md)): its levels and its "
        "transistors over the area mapping's. A "
        f"synthesis that took over {args.timeout:.0f} s (`--timeout`) is not measured.",
        "",
        "| block | gate cells | flip-flops | depth | levels | levels / budget | fmax bound GHz "
        "(n5) | critical path from | to | retimed: flip-flops | retimed: levels | delay: "
        "levels | delay: transistors |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    over = {how: [] for how in HOW}
    unmeasured = {how: [] for how in HOW}
    for name in BLOCKS:
        r, t, d = (got[(name, (), how)] for how in HOW)
        for how, x in zip(HOW, (r, t, d), strict=True):
            if x is None:
                unmeasured[how].append(name)
            elif x["levels"] > BUDGET:
                over[how].append(name)
        retimed = (f"{t['flip_flops']:,} | {t['levels']}" if t is not None
                   else "not measured | not measured")
        if r is None:
            # The delay mapping's levels stand alone; its transistors have no ratio.
            delay = f"{d['levels']} | " if d is not None else "not measured | not measured"
            lines.append(f"| {name} | not measured (synthesis over {args.timeout:.0f} s) "
                         f"| | | | | | | | {retimed} | {delay} |")
            continue
        path = r["levels_path"]
        delay = (f"{d['levels']} | {d['transistors'] / r['transistors']:.2f}x" if d is not None
                 else "not measured | not measured")
        lines.append(f"| {name} | {r['cells']:,} | {r['flip_flops']:,} | {r['logic_depth']} | "
                     f"{r['levels']} | {r['levels'] / BUDGET:.1f}x | {r['fmax_ghz']:.2f} | "
                     f"`{path['start']}` | `{path['end']}` | {retimed} | {delay} |")
    def listed(how):
        names, left = over[how], unmeasured[how]
        measured = len(BLOCKS) - len(left)
        return (f"{len(names)} of the {measured} measured"
                + (f": {', '.join(names)}" if names else "")
                + (f" (not measured: {', '.join(left)})" if left else "") + ".")

    lines += ["", f"Over the budget as written: {listed('area')} Retimed at their defaults: "
                  f"{listed('retimed')} Mapped for delay: {listed('delay')}", ""]
    lines += [
        "## Register stages, retimed",
        "",
        "The units whose `latency` register stages follow their logic, at every latency "
        "their configs allow, retimed (`--retime`): levels and flip-flops. A unit's timed "
        "model takes its latency from the config, so a deeper setting costs cycles of "
        "latency, not throughput (one item a cycle still).",
        "",
        "| unit | latency | flip-flops | levels | levels / budget | fmax bound GHz (n5) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    within = []
    for name, lat in STAGED.items():
        for n in lat:
            t = got[(name, (("latency", n),), "retimed")]
            if t is None:
                lines.append(f"| {name} | {n} | not measured | | | |")
                continue
            if t["levels"] <= BUDGET:
                within.append(f"{name} at {n}")
            lines.append(f"| {name} | {n} | {t['flip_flops']:,} | {t['levels']} | "
                         f"{t['levels'] / BUDGET:.1f}x | {t['fmax_ghz']:.2f} |")
    lines += ["", f"Within the budget retimed: {', '.join(within) or 'none'}. A retimed unit's "
              "output register may have moved into its logic (ABC takes a module's ports as "
              "free): its levels assume the next unit registers its input ([synth.md](synth.md)).",
              "", "## Register stages inside the logic, as written", "",
              "The units whose `latency` register stages cut their logic where the RTL says, at "
              "every latency at their default lanes (rope at 1, 5, 9 and 11: a synthesis of it "
              "takes minutes), not retimed, mapped for area and for delay: "
              "fp32_add after ordering its operands, aligning, adding, and half and whole "
              "normalizing, exp2 after finding its reducing shift, reducing, reading its table "
              "and the chord's product (`LaneUnit.CUTS`); mx_quant after the largest exponent "
              "of each eighth of its block and of the block, the shared exponent, and each "
              "element's fixed point (`MxQuant.CUTS`); mx_dot and nvfp4_dot past their "
              "block sums "
              "(`lib.blockdot.dot_cuts`) in the block value's conversion, a register before the "
              "accumulator, the accumulator's adder (at most a block's beats less one cuts: its "
              "sum must be back before the next block's value) and NVFP4's product by the tensor "
              "scale; argmax in its lanes' order keys and its tree of comparisons "
              "(`argmax.cut_sites`); rope in its products and sums (`rope.cuts`); int_mac "
              "between its INT32 sum's halves (3) and after its products (4); "
              "gemm_quant's MXFP4 array in its columns' block units, after the picks of the PE "
              "whose block ends and of its binary32 sum, then in the block value's conversion, "
              "a register before the adder and the adder (`gemm_os_dataflow.unit_cuts`). The "
              "stages "
              "load together (one stalling pipeline), so a deeper setting costs cycles of "
              "latency, which the timed models take from the config.", "",
              "| unit | latency | flip-flops | levels | delay: levels | delay: levels / budget "
              "| delay: fmax bound GHz (n5) | delay: critical path from | to |",
              "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    within = []
    for name, lat in CUT.items():
        for n in lat:
            key = CUT_PARAM.get(name, "latency")
            a, d = (got[(name, ((key, n),), how)] for how in ("area", "delay"))
            unit = name if key == "latency" else f"{name} ({key})"
            if d is None:
                lines.append(f"| {unit} | {n} | not measured | | | | | | |")
                continue
            if d["levels"] <= BUDGET:
                within.append(f"{unit} at {n}")
            path = d["levels_path"]
            area = (f"{a['flip_flops']:,} | {a['levels']}" if a is not None
                    else "not measured | not measured")
            lines.append(f"| {unit} | {n} | {area} | "
                         f"{d['levels']} | {d['levels'] / BUDGET:.1f}x | {d['fmax_ghz']:.2f} | "
                         f"`{path['start']}` | `{path['end']}` |")
    lines += ["", f"Within the budget mapped for delay: {', '.join(within) or 'none'}."]
    lines += ["", "## The GEMM array in each format", "",
              "`scoville synth gemm` at 4 x 4, `os`, each format pair (`fmt`/`b_fmt`) at its "
              f"defaults (the block formats' `unit_latency` {UNIT_LATENCY}, MXFP8 A's (mxfp8, "
              f"mxfp8/mxfp4) `pe_latency` {PE_LATENCY}, nvfp4's `scale_latency` "
              f"{SCALE_LATENCY}, bf16's `pe_latency` {BF16_PE_LATENCY} and `add_latency` "
              f"{ADD_LATENCY}: [gemm.md](gemm.md)), mapped for delay.", "",
              "| format | flip-flops | levels | levels / budget | fmax bound GHz (n5) | "
              "critical path from | to |", "|---|---:|---:|---:|---:|---|---|"]
    for f in GEMM_FORMATS:
        d = got[("gemm", tuple(_gemm_params(f).items()), "delay")]
        if d is None:
            lines.append(f"| {f} | not measured | | | | | |")
            continue
        path = d["levels_path"]
        lines.append(f"| {f} | {d['flip_flops']:,} | {d['levels']} | "
                     f"{d['levels'] / BUDGET:.1f}x | {d['fmax_ghz']:.2f} | `{path['start']}` | "
                     f"`{path['end']}` |")
    lines += ["", f"The block units at fewer stages than their default ({UNIT_LATENCY}), the same "
              "4 x 4 array mapped for delay:", "",
              "| format | unit_latency | flip-flops | levels | levels / budget | "
              "critical path from | to |", "|---|---:|---:|---:|---:|---|---|"]
    lines += [_gemm_row(got, f, {"unit_latency": n}, f"{f} | {n}")
              for f in UNIT_FEWER[0] for n in UNIT_FEWER[1]]
    lines += ["", "The block formats at the other `pe_latency` than their default (0: each PE's "
              "product and its block sum in one cycle; 1: the product registered), the same "
              "4 x 4 array mapped for delay:", "",
              "| format | pe_latency | flip-flops | levels | levels / budget | "
              "critical path from | to |", "|---|---:|---:|---:|---:|---|---|"]
    lines += [_gemm_row(got, f, {"pe_latency": _other_pe(f)}, f"{f} | {_other_pe(f)}")
              for f in PE_OTHER]
    lines += ["", f"BF16 at other `pe_latency` (0: the product and the sum in one cycle; 1: "
              f"the product registered; 2 to 4: cut 1 to 3 times) and `add_latency` (the "
              f"PE's adder cut that many times: one more partial sums) than its defaults "
              f"({BF16_PE_LATENCY} and {ADD_LATENCY}), the same 4 x 4 array mapped for delay:",
              "", "| pe_latency | add_latency | flip-flops | levels | levels / budget | "
              "critical path from | to |", "|---:|---:|---:|---:|---:|---|---|"]
    lines += [_gemm_row(got, "bf16", {"pe_latency": pe, "add_latency": add}, f"{pe} | {add}")
              for pe, add in BF16_OTHER]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
