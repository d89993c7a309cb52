#!/usr/bin/env python3
"""Mutation testing: named bugs put into a copy of the RTL, each run on the tests that should
catch it.

Each :class:`Mutation` replaces exact source text in one RTL file (every piece must occur
exactly once, or the script stops and names the mutation) and says which block, parameters and
cocotb tests expose it. The script copies the repository (the working tree as ``git`` sees it:
tracked files and untracked ones that are not ignored; or, with ``--rev``, a commit) into a
temporary folder, applies one mutation to each copy, and simulates every copy in a subprocess
that imports the copy instead of the installed package (the copy first on ``PYTHONPATH``:
the editable install's finder runs after Python's path finder). The
unmutated copy is simulated first, once per block and parameter set, and must pass, or the
results mean nothing. A mutation is *caught* on a simulator when a test fails; it *survives*
when every test passes; a build failure, a missing test result or a timeout is an *error*.
A mutation names the kind of failure it expects (:class:`~scoville.testbenches.failures.Kind`:
a wrong value, a status, a handshake's cycle on a named stream, a counter, the stream
protocol; a few name a second kind their first sign may be, with why); a run whose earliest
failure is of another kind (a test that only timed out included) counts as *caught
otherwise*, not as caught: the suite then catches the bug by chance, not by the check meant
for it.

Writes ``docs/verification.md`` and the outcomes it is written from,
``docs/verification.json``, when every mutation is run; ``--merge`` puts a run's outcomes
(``--block NAME`` or ``--only NAME`` choosing some) into that file in place of the earlier
ones of the same mutations and rewrites the report from all of them, each cell naming its
run (the whole set takes hours on two cores: the decoder's mutations build the whole decoder);
``--out FILE.md`` writes a report of the run alone. Exits non-zero when a baseline fails, a
mutation survives or a run goes wrong.

``--render`` rewrites the report from the stored outcomes without running anything.

Usage: ``python scripts/mutants.py [--only NAME]... [--block NAME]... [--merge] [--render]
[--sim icarus|verilator|both] [--seed N...] [--jobs N] [--out FILE.md] [--rev REV]
[--timeout S] [--keep] [--list]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import hashlib
import importlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scoville.testbenches.failures import Kind, kind_of, stream_of, without_kind
from scoville.testbenches.generate import FEWEST_STAGES

ROOT = Path(__file__).resolve().parents[1]
SIMULATORS = ("icarus", "verilator")
#: The stimulus seeds a mutation runs on by default (the report's).
SEEDS = (1, 2, 3)
#: Blocks whose mutations run on Verilator alone: Icarus interprets the whole decoder's wide
#: datapaths for many minutes a run (a decoder mutation took 1,069 s on Icarus in a CI run).
VERILATOR_ONLY = ("decoder",)
DEFAULT_OUT = "docs/verification.md"
#: Every run's outcomes, from which the report is written (``--merge`` adds to it).
STORE = "docs/verification.json"


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (which must occur exactly once in the file) with ``new``."""

    old: str
    new: str


@dataclass(frozen=True)
class Mutation:
    """One named bug.

    Attributes
    ----------
    name : str
        Unique; ``--only`` selects by it.
    models : str
        What the bug is, in one line.
    file : str
        The RTL file it changes, relative to the repository.
    edits : tuple of Edit
        The replacements, applied in order.
    block : str
        The block simulated.
    params : dict
        Its hardware and workload parameters (``scoville sim --param`` names).
    tests : tuple of str
        The cocotb tests run, the narrowest that should catch it.
    expect : Kind
        The kind of the earliest failure the bug must give (the first failing test's):
        ``TIMING`` for a bug that keeps data and protocol correct and moves only the cycle
        of some handshakes (or stalls the block: a handshake the model predicts never
        comes); never ``TIMEOUT``. ``also`` may name a second.
    why : str
        Why those parameters and tests reach the bug.
    streams : tuple of str, optional
        For ``TIMING``: the streams one of whose handshakes must differ first (the bug moves
        each of them; which comes first depends on the stimulus).
    also : Kind, optional
        A second kind the earliest failure may be (its ``why`` says how): a data bug whose
        first sign can be a handshake it moves, a timing bug whose first sign can be a
        counter of waiting cycles; ``streams`` still name the handshakes of a timing one.
    gap : str, optional
        A known gap of the suite: why it does not catch this bug as expected (reported, not
        counted as a failure of the run; ``--mutants`` never draws it).
    """

    name: str
    models: str
    file: str
    edits: tuple[Edit, ...]
    block: str
    params: dict[str, Any] = field(hash=False)
    tests: tuple[str, ...]
    expect: Kind
    why: str
    streams: tuple[str, ...] = ()
    also: Kind | None = None
    gap: str = ""

    @property
    def timing(self) -> bool:
        return self.expect is Kind.TIMING

    @property
    def kinds(self) -> tuple[Kind, ...]:
        """The kinds its earliest failure may be: ``expect``, then ``also`` if set."""
        return (self.expect,) if self.also is None else (self.expect, self.also)

    def fingerprint(self) -> str:
        """What an outcome of this mutation depends on in its definition (its file, edits,
        block, parameters, tests and expected kinds; not its words): a stored outcome of
        another fingerprint is stale."""
        text = json.dumps([self.file, [[e.old, e.new] for e in self.edits], self.block,
                           self.params, list(self.tests), self.expect.value,
                           self.also.value if self.also else None, list(self.streams)],
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def simulators(self) -> tuple[str, ...]:
        """The simulators the report runs it on (:data:`VERILATOR_ONLY`)."""
        return ("verilator",) if self.block in VERILATOR_ONLY else SIMULATORS

    def expects(self) -> str:
        """The expected failure, in words."""
        on = " or ".join(f"`{s}`" for s in self.streams)
        return " or ".join(kind.value + (f" on {on}" if on and kind is Kind.TIMING else "")
                           for kind in self.kinds)

    def judge(self, kind: Kind | None, stream: str | None) -> str | None:
        """None when a failure of ``kind`` (on ``stream``) is the one expected, else why not."""
        got = "an untyped check" if kind is None else kind.value
        if kind not in self.kinds:
            return f"failed as {got}, expected {self.expects()}"
        if self.streams and kind is Kind.TIMING and stream not in self.streams:
            return f"failed as timing on `{stream}`, expected {self.expects()}"
        return None


class MutationError(RuntimeError):
    """A mutation's source text does not occur exactly once."""


#: A small array; back-pressure and gaps so that the timing bugs fire often, and enough GEMMs
#: (random shapes up to 2 tiles + 2 in M and N) for rows of C to leave back to back.
GEMM = {"rows": 4, "cols": 4, "fmt": "int8", "dataflow": "os", "count": 20, "gap": 0.3,
        "backpressure": 0.3}

#: The default cache (4 tokens a page, 4 sequences, 16 pages: forks share pages and
#: copy-on-write happens often); 2,000 random requests under gaps and back-pressure.
KVCACHE = {"page_tokens": 4, "max_seqs": 4, "count": 2000, "gap": 0.3, "backpressure": 0.3}

#: The edit that lets a gemm mutation declare signals in the engine's shell.
#: gemm_quant with one group of 3 x 4 lines (8 parts a line) under gaps and back-pressure.
GEMM_QUANT = {"array.rows": 3, "array.cols": 4, "groups": 1, "count": 6, "gap": 0.3,
              "backpressure": 0.3}

#: Two KV heads of a group of 2, sinks, a window of 20 (not a multiple of 32), chunks of 32:
#: 41 tokens cross a chunk boundary and start inside a block of 32.
ATTENTION = {"kv.banks": 2, "kv.word_bits": 64, "kv.bank_words": 1024, "kv.page_tokens": 4,
             "kv.max_seqs": 2, "kv.kv_heads": 2, "kv.head_dim": 16, "array.rows": 2,
             "array.cols": 16, "q_heads": 4, "chunk": 32, "sinks": 1, "window": 20,
             "seqs": 2, "context": 40, "steps": 1, "gap": 0.3, "backpressure": 0.3}
#: MLA as the suite runs it: one latent KV head of 96 (32 of value, 64 rotary), six lines a
#: token; P V in two column tiles of 16.
ATTENTION_MLA = {**{k: v for k, v in ATTENTION.items() if k not in ("sinks", "window")},
                 "mla": 1, "kv.kv_heads": 1, "kv.head_dim": 96, "kv.banks": 4,
                 "kv.bank_words": 4096, "q_heads": 2, "scale": 0.1}
#: Prefill: row tiles of two tokens (4 rows, groups of 2), steps of 5 tokens.
ATTENTION_PREFILL = {**ATTENTION, "mode": "prefill", "q_tokens": 8, "array.rows": 4,
                     "tokens": 5}

#: P V in two column tiles (a head of 16 on 8 columns: V read a line of each token per tile).
ATTENTION_TILES = {**ATTENTION, "array.cols": 8}

#: The suite's small MoE layer (4 experts of 32 x 32, top-2, batches of up to 2 tokens, a
#: 2 x 8 array, a 64-bit weight port) on a slow memory, under gaps and back-pressure.
MOE = {"experts": 4, "top_k": 2, "hidden": 32, "intermediate": 32, "tokens": 2,
       "array.rows": 2, "array.cols": 8, "weight_port_bits": 64, "batches": 2,
       "mem_latency": 9, "mem_bytes_per_cycle": 4, "gap": 0.3, "backpressure": 0.3}
#: The linear block's first look, a slow memory and gaps so that tiles queue.
LINEAR = {"array.rows": 2, "array.cols": 8, "tokens": 4, "k_max": 64, "n_max": 32,
          "weight_port_bits": 64, "commands": 4, "mem_latency": 9, "mem_bytes_per_cycle": 4,
          "gap": 0.3, "backpressure": 0.3}
#: The decoder engine's first look, a slow memory and gaps; its arrays at their fewest stages
#: (as the suite's whole-decoder cases: the build takes about two thirds of the time).
DECODER = {"hidden": 64, "act_lines": 128, "linear.array.rows": 2, "linear.array.cols": 8,
           "linear.tokens": 4, "linear.k_max": 128, "linear.n_max": 128,
           "linear.weight_port_bits": 64, "linear.addr_bits": 14, "moe.hidden": 64,
           "moe.intermediate": 32, "moe.experts": 4, "moe.top_k": 2, "moe.tokens": 4,
           "moe.array.rows": 2, "moe.array.cols": 8, "moe.weight_port_bits": 64,
           "moe.act_fmt": "mxfp4", "moe.x_lanes": 1, "rope.dim": 16,
           "attn.kv.kv_heads": 2, "attn.kv.head_dim": 16, "attn.q_heads": 4,
           "attn.array.rows": 4, "attn.array.cols": 16, "attn.kv.banks": 2,
           "attn.kv.word_bits": 64, "attn.kv.bank_words": 1024, "attn.kv.page_tokens": 4,
           "attn.kv.max_seqs": 2, "attn.chunk": 32, "attn.q_tokens": 4, "mem_latency": 9,
           "mem_bytes_per_cycle": 4, "gap": 0.3, "backpressure": 0.3, **FEWEST_STAGES}
#: ROPE's vectors of two lines (joined from lines, split into lines).
DECODER_ROPE64 = {**DECODER, "rope.dim": 64}
#: DeepSeek-shaped: grouped routing and a shared expert.
MOE_DEEPSEEK = {**MOE, "router": "deepseek", "n_group": 2, "topk_group": 1, "shared": 1,
                "routed_scaling_factor": 2.5}

#: Declarations the kvcache mutations add next to the request engine's own.
_KV_DECL = "        read_wait = Signal()\n"

#: The lane and block-dot units: each block the shared stall pipeline's timing bug runs on.
_LANE_BLOCKS = ("fp4_mul", "int_mac", "mx_dot", "nvfp4_dot", "fp32_add", "exp2", "mx_quant")

#: The stall pipeline's input bubble: after a back-pressure release ``i.ready`` stays low one
#: cycle more (the stages advance with a bubble: protocol-legal, data unchanged).
_PIPE_BUBBLE = (
    Edit('    valid = Signal(latency, name="pipe_valid")\n',
         '    valid = Signal(latency, name="pipe_valid")\n'
         '    held = Signal(name="pipe_held")\n'
         "    m.d.sync += held.eq(o.valid & ~o.ready)\n"),
    Edit("        i.ready.eq(en),\n", "        i.ready.eq(en & ~held),\n"),
    Edit("            m.d.sync += valid.eq(i.valid)\n",
         "            m.d.sync += valid.eq(i.valid & ~held)\n"),
    Edit("            m.d.sync += valid.eq((valid << 1) | i.valid)\n",
         "            m.d.sync += valid.eq((valid << 1) | (i.valid & ~held))\n"),
)

#: Fetch under back-pressure on ``o``, so that the buffer fills and requests wait for room.
FETCH = {"count": 200, "mem_latency": 20, "gap": 0.2, "backpressure": 0.6}


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        name="gemm-o-stall-after-release",
        models="after each back-pressure release on `o` the engine resumes one cycle late "
               "(an extra stall, counted as one)",
        file="scoville/rtl/gemm.py",
        edits=(
            Edit(
                "        stall_out = flow.collect & self.o.valid & ~self.o.ready\n",
                "        released = Signal()\n"
                "        m.d.sync += released.eq(flow.collect & self.o.valid & ~self.o.ready)\n"
                "        stall_out = flow.collect & ((self.o.valid & ~self.o.ready) | released)\n",
            ),
        ),
        block="gemm", params=GEMM, tests=("test_workload",),
        expect=Kind.TIMING, streams=("o", "cmd"),
        why="back-pressure 0.3 on `o` releases a stall many times per GEMM; the engine counts "
            "the extra cycle as `stall_out`, so only a model of every handshake sees it",
    ),
    Mutation(
        name="gemm-o-bubble-after-stall",
        models="after a row of C that ended a back-pressure stall, `o.valid` drops for one "
               "cycle before the next row (protocol-legal, data unchanged)",
        file="scoville/rtl/gemm.py",
        edits=(
            Edit(
                "        stall_out = flow.collect & self.o.valid & ~self.o.ready\n",
                "        full = Signal()\n"
                "        held = Signal()\n"
                "        bubble = Signal()\n"
                "        taken = self.o.valid & self.o.ready\n"
                "        m.d.comb += self.o.valid.eq(full & ~bubble)\n"
                "        m.d.sync += [held.eq(self.o.valid & ~self.o.ready), "
                "bubble.eq(taken & held)]\n"
                "        stall_out = flow.collect & full & ~taken\n",
            ),
            Edit(
                "        with m.If(self.o.ready):\n"
                "            m.d.sync += self.o.valid.eq(0)\n"
                "        with m.If(flow.en & flow.collect):\n"
                "            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(row)]\n",
                "        with m.If(taken):\n"
                "            m.d.sync += full.eq(0)\n"
                "        with m.If(flow.en & flow.collect):\n"
                "            m.d.sync += [full.eq(1), self.o.payload.eq(flow.row)]\n",
            ),
        ),
        block="gemm", params=GEMM, tests=("test_workload",), expect=Kind.TIMING, streams=("o",),
        why="the rows of each finished tile leave one per cycle, so a stalled row is often "
            "followed at once by the next; the engine counts the held cycle as a stall",
    ),
    Mutation(
        name="gemm-acc-24-bit",
        models="the integer accumulators are 24 bits wide instead of 32 (wrap at 2**23)",
        file="scoville/rtl/gemm_arith.py",
        edits=(Edit(
            "            self.psum_shape = signed(32)\n",
            "            self.psum_shape = signed(24)\n",
        ),),
        block="gemm", params=GEMM, tests=("test_long_k",), expect=Kind.DATA,
        why="int8: a sum leaves 24 bits only past 512 products of the same sign near "
            "-128 x -128, which random operands never give; test_long_k's column of K = "
            "long_k (32773 by default) products of -128 x -128 reaches 2**29",
    ),
    Mutation(
        name="gemm-no-zero-check-n",
        models="a command with N = 0 is not rejected (only M and K are checked)",
        file="scoville/rtl/gemm.py",
        edits=(Edit(
            "        bad = (cmd.m == 0) | (cmd.k == 0) | (cmd.n == 0)\n",
            "        bad = (cmd.m == 0) | (cmd.k == 0)\n",
        ),),
        block="gemm", params=GEMM, tests=("test_edges",), expect=Kind.DATA,
        why="only a directed command with N = 0 reaches it (the workload's shapes are never 0)",
    ),
    Mutation(
        name="gemm-drops-first-product",
        models="each output's accumulation drops its first product (the sum restarts from 0 "
               "instead of from the first product)",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit(
            '        total = ar.add(m, base, prod, f"{name}_total")\n',
            '        total = ar.cleared(m, ar.add(m, sums, prod, f"{name}_sum1"), a_in.first, '
            'f"{name}_total")\n',
        ),),
        block="gemm", params=GEMM, tests=("test_workload",), expect=Kind.DATA,
        why="every output of every GEMM is wrong unless its first product is 0",
    ),
    Mutation(
        name="gemm-os-block-units-merged",
        models="output-stationary block formats: a column's blocks that end a tile share the "
               "unit of the others",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(
            Edit('lambda e: e.a.bend & ~e.a.last, False)', 'lambda e: e.a.bend, None)'),
            Edit('            units.append(("end", ends, lambda e: e.a.last, True))\n', ''),
        ),
        block="gemm", params={**GEMM, "fmt": "mxfp4"}, tests=("test_edges",), expect=Kind.DATA,
        why="K = 35 leaves a last block of 3 elements: row 0 ends it in the cycle row 3 ends "
            "its first block, and the unit adds their sums together",
    ),
    Mutation(
        name="gemm-os-block-units-past-m",
        models="output-stationary block formats: rows beyond M take their column's block units",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("e.a.valid & e.a.row & event(e)", "e.a.valid & event(e)"),),
        block="gemm", params={**GEMM, "rows": 32, "cols": 1, "fmt": "nvfp4"},
        tests=("test_edges",), expect=Kind.DATA,
        why="a GEMM with M = 1 leaves 31 rows beyond M in the array; the next command's row "
            "r (K = 1) ends its block in the cycle the old row r + 24 ends its last, and the "
            "end unit adds the two rows' blocks together (at the default stages; 18 rows "
            "would leave none that far down)",
    ),
    Mutation(
        name="gemm-os-one-unit-per-column",
        models="output-stationary block formats with more rows than a block: one unit takes "
               "the blocks of every row that do not end a tile",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("for g in range((R + B - 1) // B)]", "for g in range(1)]"),
               Edit("ends[g * B:(g + 1) * B]", "ends")),
        block="gemm", params={**GEMM, "rows": 18, "cols": 1, "fmt": "nvfp4"},
        tests=("test_workload",), expect=Kind.DATA,
        why="rows 0 and 16 end blocks 16 steps apart in K and 16 rows apart in space: with "
            "K > 32 both end one in the same cycle",
    ),
    Mutation(
        name="gemm-os-end-unit-reads-early",
        models="output-stationary block formats with the units' adder cut: the unit of a "
               "tile's last blocks reads the PE's binary32 sum as early as the others do",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("        later = plan.later if last else 0\n",
                    "        later = 0\n"),),
        block="gemm", params={**GEMM, "fmt": "mxfp4"}, tests=("test_edges",), expect=Kind.DATA,
        why="at the default latency its results are written six cycles before their rows "
            "leave (K = 1: the next tile, 4 steps on, overwrites a row's first columns), and "
            "with K = 33 a tile's last block misses the block one step before it",
    ),
    Mutation(
        name="gemm-os-end-unit-keeps-the-sum",
        models="output-stationary block formats: the unit of a tile's last blocks leaves the "
               "PE's binary32 sum as it was, not +0 for the next tile",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("                    m.d.sync += e.fp.eq(0)\n",
                    "                    m.d.sync += e.fp.eq(e.fp)\n"),),
        block="gemm", params={**GEMM, "fmt": "mxfp4"}, tests=("test_edges",), expect=Kind.DATA,
        why="every tile after a PE's first starts from the previous tile's result",
    ),
    Mutation(
        name="gemm-os-nvfp4-cols-early",
        models="output-stationary NVFP4 with its block units cut: the columns of the tile whose "
               "rows leave (the tensor scale's mask) come without the units' delay",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("delay(m, taken, cfg.cols - 1 + cfg.array_delay - early, en,",
                    "delay(m, taken, cfg.cols - 1 - early, en,"),),
        block="gemm", params={**GEMM, "fmt": "nvfp4"}, tests=("test_edges",), expect=Kind.DATA,
        why="at the default latency a tile's rows leave 16 cycles after its columns' mask has "
            "moved on: with K = 1 (tiles 4 steps apart) and N off the grid, a row takes "
            "another tile's mask and loses columns inside N",
    ),
    Mutation(
        name="gemm-os-bf16-sums-unmasked",
        models="output-stationary BF16 with partial sums: the sums no step of the command "
               "added into (K below their count) are added as they are, not as +0",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("kept = last.cols[c] & (last.empty <= L - 1 - j) if j else last.cols[c]",
                    "kept = last.cols[c]"),),
        block="gemm", params={**GEMM, "fmt": "bf16"}, tests=("test_edges",), expect=Kind.DATA,
        why="with K = 1 (and K = 2 below the 3 sums) a row of C adds the sums the adder's "
            "loop held from the steps before the tile's first",
    ),
    Mutation(
        name="gemm-os-bf16-sums-not-reordered",
        models="output-stationary BF16 with partial sums: the sums added in the order they "
               "were written, not by their slot (k mod the sums from the tile's first step)",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("ordered = Mux(last.slot == s, written[(j - 1 - s) % L], ordered)",
                    "ordered = ordered"),),
        block="gemm", params={**GEMM, "fmt": "bf16"}, tests=("test_workload",),
        expect=Kind.DATA,
        why="where K mod 3 is not 1 the sums are added in another order: the last bits of "
            "some outputs differ",
    ),
    Mutation(
        name="gemm-os-bf16-loop-not-cleared",
        models="output-stationary BF16 with partial sums: the adder's loop register is not "
               "cleared for a tile's first steps",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("total if a_next is None else Mux(a_next.head, 0, total)",
                    "total"),),
        block="gemm", params={**GEMM, "fmt": "bf16"}, tests=("test_edges",), expect=Kind.DATA,
        why="each tile's first sums start from what the loop held: the previous tile's sums",
    ),
    Mutation(
        name="gemm-os-bf16-tiles-too-close",
        models="output-stationary BF16 with partial sums: tiles max(K, R, C) steps apart, not "
               "max(K, R, C + add_latency)",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("span.eq(at_least(self.cmd.k, R, C + cfg.add_stages))",
                    "span.eq(at_least(self.cmd.k, R, C))"),),
        block="gemm", params={**GEMM, "fmt": "bf16"}, tests=("test_edges",), expect=Kind.DATA,
        also=Kind.TIMING,
        why="at small K a tile's sums are overwritten by the next tile's before its first "
            "columns are read (and its rows leave two steps sooner than the timed model puts "
            "them)",
    ),
    Mutation(
        name="gemm-os-pe-adds-with-the-products-flags",
        models="output-stationary PEs with a registered product: the PE adds it with the flags "
               "of the step now arriving, not of the step it is the product of",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("(a_out, b_out) if staged else (a_in, b_in))",
                    "(a_in, b_in))"),),
        block="gemm", params={**GEMM, "fmt": "mxfp8"}, tests=("test_edges",), expect=Kind.DATA,
        also=Kind.PROTOCOL,
        why="each block sum takes the product of the step before its first and misses its "
            "last: on Icarus that earlier product can be of an idle step's undriven (X) "
            "elements, which reach a row of C",
    ),
    Mutation(
        name="gemm-os-end-unit-reads-before-the-acc-cut",
        models="output-stationary block formats with the read of the PE's binary32 sum cut: "
               "the unit of a tile's last blocks reads it no later for that cut",
        file="scoville/rtl/gemm_os_dataflow.py",
        edits=(Edit("        return len(self.value.add) + self.acc\n",
                    "        return len(self.value.add)\n"),),
        block="gemm", params={**GEMM, "fmt": "mxfp4"}, tests=("test_edges",), expect=Kind.DATA,
        why="with K = 33 a tile's last block, one step after the block before it, reads the "
            "PE's sum in the cycle that block's sum is written, and misses it",
    ),
    Mutation(
        name="gemm-tensor-scale-rows-early",
        models="NVFP4: a row of C leaves the tensor scale a cycle before its product is through "
               "the stages",
        file="scoville/rtl/gemm_dataflow.py",
        edits=(Edit("delay(m, self.collect, stages, en, name=\"collect\")",
                    "delay(m, self.collect, stages - 1, en, name=\"collect\")"),),
        block="gemm", params={**GEMM, "fmt": "nvfp4"}, tests=("test_edges",),
        expect=Kind.TIMING, also=Kind.DATA,
        why="every row leaves a cycle before the timed model puts it, and takes the product "
            "of the value a stage behind it",
    ),
    Mutation(
        name="gemm-tensor-scales-product-late",
        models="NVFP4: the product of the command's tensor scales is ready a cycle after the "
               "stages it is given (one register too many)",
        file="scoville/rtl/gemm.py",
        edits=(Edit("flow.scale.eq(delay(m, product, min(stages, 1), 1,",
                    "flow.scale.eq(delay(m, product, min(stages, 1) + 1, 1,"),),
        block="gemm", params={**GEMM, "rows": 1, "cols": 1, "fmt": "nvfp4", "unit_latency": 0,
                              "pe_latency": 0, "scale_latency": 2},
        tests=("test_edges", "test_keep_up"), expect=Kind.DATA,
        why="at the bound (a 1 x 1 array, its block units and PEs uncut, 2 stages) a K = 1 "
            "command taken with its beats at hand has its first row at the tensor scale as the "
            "product is due: a cycle late, the row takes the previous command's scale",
    ),
    Mutation(
        name="gemm-tensor-scale-mask-early",
        models="NVFP4: the tensor scale masks a row's columns beyond N with the columns of "
               "the row entering it, not of the row leaving",
        file="scoville/rtl/gemm_dataflow.py",
        edits=(Edit("        cols = delay(m, self.cols, stages, en, name=\"cols\")\n",
                    "        cols = self.cols\n"),),
        block="gemm", params={**GEMM, "fmt": "nvfp4"}, tests=("test_edges",), expect=Kind.DATA,
        why="with K = 1 tiles are 4 steps apart, inside the 5 stages: a row of a tile with N "
            "off the grid takes the next tile's mask",
    ),
    Mutation(
        name="gemm-bf16-ws-stale-top",
        models="weight-stationary bf16: a row's first K tile starts from whatever its column "
               "SRAM holds instead of +0",
        file="scoville/rtl/gemm_ws_dataflow.py",
        edits=(Edit(
            "                self.tops[c].eq(Mux(first, 0, rp.data)),\n",
            "                self.tops[c].eq(rp.data),\n",
        ),),
        block="gemm", params={**GEMM, "fmt": "bf16", "dataflow": "ws", "count": 6},
        tests=("test_workload",), expect=Kind.DATA,
        why="GEMMs follow each other, so every row but those of the first GEMM finds the "
            "previous GEMM's sums in the SRAM",
    ),
    Mutation(
        name="gemm-bf16-ws-read-misses-write",
        models="weight-stationary bf16: a column SRAM read does not see the write of the same "
               "cycle (a row's next K tile starts from its sum of two tiles ago)",
        file="scoville/rtl/gemm_ws_dataflow.py",
        edits=(Edit(
            "            rp = mem.read_port(transparent_for=(wp,))\n",
            "            rp = mem.read_port()\n",
        ),),
        block="gemm", params={**GEMM, "fmt": "bf16", "dataflow": "ws", "count": 6},
        tests=("test_edges",), expect=Kind.DATA,
        why="a chunk of at most `rows` rows (M = 1 with K past a tile in the edge shapes) puts "
            "a row's next K tile right behind its write",
    ),
    Mutation(
        name="gemm-e4m3-nan-dropped",
        models="mxfp8: a NaN element (E4M3 S.1111.111) is taken as the number 480 instead of "
               "making its block NaN",
        file="scoville/rtl/gemm_arith.py",
        edits=(Edit(
            "        m.d.comb += [out.sum.eq(value), out.nan.eq(nana | nanb)]\n",
            "        m.d.comb += [out.sum.eq(value), out.nan.eq(0)]\n",
        ),),
        block="gemm", params={**GEMM, "fmt": "mxfp8", "count": 6}, tests=("test_edges",),
        expect=Kind.DATA,
        why="the edge test's extreme operands are 70% special codes, NaN among them",
    ),
    Mutation(
        name="gemm-nvfp4-one-tensor-scale",
        models="nvfp4: results are multiplied by A's tensor scale only, not by the product of "
               "both",
        file="scoville/rtl/gemm.py",
        edits=(Edit(
            "m.d.comb += flow.scale.eq(delay(m, product, min(stages, 1), 1, name=\"tensor\"))",
            "m.d.comb += flow.scale.eq(delay(m, scales[0], min(stages, 1), 1, name=\"tensor\"))",
        ),),
        block="gemm", params={**GEMM, "fmt": "nvfp4", "count": 6}, tests=("test_workload",),
        expect=Kind.DATA,
        why="random tensor scales are 2^-20..2^20, never 1 for B",
    ),
    Mutation(
        name="gemm-ws-drops-partial-sum",
        models="weight-stationary: the accumulator keeps a row's first K tile of partial "
               "sums and drops every later tile's",
        file="scoville/rtl/gemm_ws_dataflow.py",
        edits=(Edit(
            '                total = ar.add(m, base, psums[c], f"acc{c}_total")\n',
            '                total = wire(m, f"acc{c}_total", Mux(mt.m.first_kt, psums[c], old), '
            'ar.psum_shape)\n',
        ),),
        block="gemm", params={**GEMM, "dataflow": "ws"}, tests=("test_workload",),
        expect=Kind.DATA,
        why="the workload's random shapes have K up to several tiles of 4 rows, so most rows "
            "of C take more than one K tile",
    ),
    Mutation(
        name="reblock-frees-line-at-write",
        models="the reblocking buffer frees a line when its last part is written instead of "
               "when the line is read out (its rows may be overwritten before they leave)",
        file="scoville/rtl/gemm_quant_reblock.py",
        edits=(Edit(
            "        freed = Mux(issue, Const(1, lines) << done.r_data, 0)\n",
            "        freed = Mux(write & part_last, Const(1, lines) << slot, 0)\n",
        ),),
        block="gemm_quant",
        params={"array.rows": 6, "array.cols": 4, "groups": 1, "k": 1, "count": 6, "gap": 0.0,
                "backpressure": 0.9},
        tests=("test_workload",), expect=Kind.DATA, also=Kind.TIMING,
        why="a group of 6 lines is more than the read port, the output register and the "
            "quantizer's 2 stages hold, and with K = 1 the next group's first part comes 6 "
            "steps later, while back-pressure 0.9 lets a block leave every ten cycles or so: "
            "the array is let into lines not yet read. With fewer lines than that (3 x 4, "
            "random K, back-pressure 0.9) every line is read before it is needed and the "
            "mutation survives. Its first sign may be timing: the array, let in early, takes "
            "a handshake a cycle before the model says, before the overwritten rows leave "
            "(the suite's test_edges on 6 x 4 shows it so on some seeds)",
    ),
    Mutation(
        name="reblock-ignores-short-row-tile",
        models="the reblocking buffer assumes every row tile has array.rows rows (M off the "
               "grid puts the next tile's rows in the wrong lines)",
        file="scoville/rtl/gemm_quant_reblock.py",
        edits=(Edit(
            "        row_last = (r == R - 1) | (r + 1 == left)\n",
            "        row_last = r == R - 1\n",
        ),),
        block="gemm_quant", params=GEMM_QUANT, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="test_edges and the random shapes have M off the 3-row grid; the last row tile's "
            "rows then fill the wrong lines and the run never completes its blocks",
    ),
    Mutation(
        name="opbuffer-one-beat-short",
        models="an operand buffer stops taking beats one short of `buffer_depth` (a "
               "capacity off by one; data unchanged)",
        file="scoville/rtl/gemm_opbuffer.py",
        edits=(Edit(
            "            self.i.ready.eq(level != depth),\n",
            "            self.i.ready.eq(level < depth - 1),\n",
        ),),
        block="gemm",
        params={**GEMM, "buffer_depth": 3, "backpressure": 0.9},
        tests=("test_workload",), expect=Kind.TIMING, streams=("a", "b"),
        why="3-beat buffers and 90% back-pressure on `o`: the engine holds for rows of C while "
            "A and B keep arriving, so the buffers fill and the producers wait one beat early",
    ),
    Mutation(
        name="kvcache-wd-bubble-after-gap",
        models="after a cycle without `wd` data while writing an append's lines, `wd.ready` "
               "stays low one more cycle (a restart bubble; counted as a stall)",
        file="scoville/rtl/kvcache_append.py",
        edits=(
            Edit("        j = Signal(_index(TL))\n",
                 "        j = Signal(_index(TL))\n        wd_gap = Signal()\n"),
            Edit(
                '            with m.State("WRITE"):\n'
                "                m.d.comb += self.wd.ready.eq(1)\n",
                '            with m.State("WRITE"):\n'
                "                m.d.comb += self.wd.ready.eq(~wd_gap)\n"
                "                m.d.sync += wd_gap.eq(~self.wd.valid)\n",
            ),
            Edit("                             self.bank_w.en.eq(self.wd.valid)]\n"
                 "                with m.If(self.wd.valid):\n",
                 "                             self.bank_w.en.eq(self.wd.valid & ~wd_gap)]\n"
                 "                with m.If(self.wd.valid & ~wd_gap):\n"),
            Edit("self.wd_stall.eq(lines & ~self.wd.valid)",
                 "self.wd_stall.eq(lines & ~(self.wd.valid & self.wd.ready))"),
            Edit('self.writes.eq(fsm.ongoing("WRITE") & self.wd.valid)',
                 'self.writes.eq(fsm.ongoing("WRITE") & self.wd.valid & self.wd.ready)'),
        ),
        block="kvcache", params=KVCACHE, tests=("test_workload",),
        expect=Kind.TIMING, streams=("wd",),
        why="gap 0.3 on `wd` leaves holes inside most appends; the bubble is counted as a "
            "stall and the write counter counts handshakes, so only the handshake cycles move",
    ),
    Mutation(
        name="kvcache-read-wait-extra",
        models="a request waiting for the read engine waits one cycle more after the engine "
               "goes idle (counted as a read wait)",
        file="scoville/rtl/kvcache.py",
        edits=(
            Edit(_KV_DECL, _KV_DECL + "        was_busy = Signal()\n"
                                      "        m.d.sync += was_busy.eq(reader.busy)\n"),
            Edit(
                '                with m.If(reader.busy & (r.op != Op.APPEND)):\n',
                '                with m.If((reader.busy | was_busy) & (r.op != Op.APPEND)):\n',
            ),
        ),
        block="kvcache", params=KVCACHE, tests=("test_keep_up", "test_workload"),
        expect=Kind.TIMING, streams=("resp",),
        why="every request but an append that follows a read waits for the engine; with "
            "streams that keep up the model's time line sees the cycle, under gaps only a "
            "model of every handshake does",
    ),
    Mutation(
        name="kvcache-rd-bubble-after-stall",
        models="after a read line that ended a back-pressure stall, `rd.valid` drops for one "
               "cycle before the next line (protocol-legal, data unchanged)",
        file="scoville/rtl/kvcache_linereader.py",
        edits=(
            Edit("        advance = Signal()\n",
                 "        advance = Signal()\n"
                 "        rd_held = Signal()\n"
                 "        rd_bubble = Signal()\n"
                 "        m.d.sync += [rd_held.eq(self.rd.valid & ~self.rd.ready),\n"
                 "                     rd_bubble.eq(self.rd.valid & self.rd.ready & rd_held)]\n"),
            Edit(
                "            advance.eq(~out_valid | self.rd.ready),\n"
                "            self.rd.valid.eq(out_valid),\n",
                "            advance.eq(~out_valid | (self.rd.ready & ~rd_bubble)),\n"
                "            self.rd.valid.eq(out_valid & ~rd_bubble),\n",
            ),
            Edit(
                "            self.stall.eq(out_valid & ~self.rd.ready),\n",
                "            self.stall.eq(out_valid & ~(self.rd.valid & self.rd.ready)),\n",
            ),
        ),
        block="kvcache", params=KVCACHE, tests=("test_workload",),
        expect=Kind.TIMING, streams=("rd",),
        why="reads stream a line per cycle and back-pressure 0.3 stalls them often; the "
            "bubble is counted as a read stall, so the engine's busy count stays the model's",
    ),
    Mutation(
        name="kvcache-resp-bubble-after-stall",
        models="after an answer that ended a back-pressure stall, the next answer's "
               "`resp.valid` rises one cycle late (protocol-legal, data unchanged)",
        file="scoville/rtl/kvcache.py",
        edits=(
            Edit(_KV_DECL, _KV_DECL + "        resp_held = Signal()\n"
                                      "        resp_late = Signal()\n"),
            Edit(
                '            with m.State("RESP"):\n'
                "                m.d.comb += self.resp.valid.eq(1)\n"
                "                with m.If(self.resp.valid & self.resp.ready):\n"
                '                    m.next = "IDLE"\n',
                '            with m.State("RESP"):\n'
                "                m.d.comb += self.resp.valid.eq(~resp_late)\n"
                "                m.d.sync += [resp_late.eq(0),\n"
                "                             resp_held.eq(self.resp.valid & ~self.resp.ready)]\n"
                "                with m.If(self.resp.valid & self.resp.ready):\n"
                "                    m.d.sync += resp_late.eq(resp_held)\n"
                '                    m.next = "IDLE"\n',
            ),
            Edit(
                '            | (fsm.ongoing("RESP") & ~self.resp.ready)\n',
                '            | (fsm.ongoing("RESP") & ~(self.resp.valid & self.resp.ready))\n',
            ),
        ),
        block="kvcache", params=KVCACHE, tests=("test_workload",),
        expect=Kind.TIMING, streams=("resp",),
        why="answers come at least 3 cycles apart, so the bubble delays the next answer; "
            "back-pressure 0.3 on `resp` stalls many answers; the late cycle counts as a stall",
    ),
    Mutation(
        name="kvcache-cow-one-line-short",
        models="copy-on-write stops one line early: the page's last line is not copied",
        file="scoville/rtl/kvcache_append.py",
        edits=(Edit(
            "                with m.If(copy == PL):\n",
            "                with m.If(copy == PL - 1):\n",
        ),),
        block="kvcache", params=KVCACHE, tests=("test_edges", "test_workload"),
        expect=Kind.TIMING, streams=("wd",),
        why="page_tokens 4 and max_seqs 4: forks share pages and appends to either side copy "
            "them (test_edges does both sides); the missing line (V, last head, last slot) is "
            "never read before it is written (a page is copied when an append goes into it, so "
            "its last slot is empty or the one being written): no read can show it, and the "
            "copy one cycle short moves `wd`'s next handshake a cycle early",
    ),
    Mutation(
        name="kvcache-cow-skips-first-line",
        models="copy-on-write leaves the new page's first line (K, head 0, first token) "
               "uncopied",
        file="scoville/rtl/kvcache_append.py",
        edits=(Edit("bank_w.en.eq(copy != 0)]", "bank_w.en.eq(copy > 1)]"),),
        block="kvcache", params=KVCACHE, tests=("test_edges", "test_workload"), expect=Kind.DATA,
        why="test_edges reads K head 0 of both sides of a fork from token 0 after copies; the "
            "line is stale, so the read data differ (the copy takes as many cycles as before)",
    ),
    Mutation(
        name="kvcache-cow-refcount-kept",
        models="copy-on-write does not decrement the shared page's reference count",
        file="scoville/rtl/kvcache_append.py",
        edits=(Edit(
            "ref_set.data.eq(ref_old - 1),",
            "ref_set.data.eq(ref_old),",
        ),),
        block="kvcache", params=KVCACHE, tests=("test_edges", "test_workload"), expect=Kind.STATUS,
        why="the shared page is never freed once both sequences are: `free` in the answers "
            "and `free_pages` at the end differ from the model",
    ),
    Mutation(
        name="mx_quant-round-ties-away",
        models="E2M1 rounding breaks ties away from zero instead of to even",
        file="scoville/rtl/mx_quant.py",
        edits=(Edit(
            "        return q + (guard & (rest | q[0]))\n",
            "        return q + guard\n",
        ),),
        block="mx_quant", params={"in_fmt": "bf16"}, tests=("test_directed", "test_workload"),
        expect=Kind.DATA,
        why="test_directed has every tie of the grid; BF16 inputs (8-bit significands) make "
            "ties common in random blocks too",
    ),
    Mutation(
        name="fp32_add-flush-subnormals",
        models="subnormal sums are flushed to zero (sign kept)",
        file="scoville/rtl/lib/fp32.py",
        edits=(Edit(
            "    magnitude = Mux(overflow, 0x7F80_0000, rounded)[:31]\n",
            "    magnitude = Mux(overflow, 0x7F80_0000, "
            "Mux(rounded[23:31] == 0, 0, rounded))[:31]\n",
        ),),
        block="fp32_add", params={}, tests=("test_directed", "test_workload"), expect=Kind.DATA,
        why="test_directed has subnormal sums; a sixth of the random pairs are subnormals "
            "or the smallest normals",
    ),
    Mutation(
        name="fp32_add-cut-keeps-the-gap-unregistered",
        models="fp32_add cut between ordering and aligning: the exponents' gap skips the "
               "register, so an item is aligned by the next item's gap",
        file="scoville/rtl/lib/fp32.py",
        edits=(Edit("    sign, both_neg, special, invalid, subtract, exp_big, dist, sig_big, "
                    "sig_small = flags\n",
                    "    sign, both_neg, special, invalid, subtract, exp_big, _, sig_big, "
                    "sig_small = flags\n"),),
        block="fp32_add", params={"latency": 4}, tests=("test_directed", "test_workload"),
        expect=Kind.DATA,
        why="at latency 4 cut 0 is a register; back-to-back items of different exponents' "
            "gaps (most random pairs) then align by the wrong gap",
    ),
    Mutation(
        name="pipeline-cut-loads-in-stalls",
        models="a LaneUnit's cut registers load every cycle, not only when the pipeline moves",
        file="scoville/rtl/lib/pipeline.py",
        edits=(Edit("    with m.If(en):\n        m.d.sync += reg.eq(value)\n",
                    "    m.d.sync += reg.eq(value)\n"),),
        block="fp32_add", params={"latency": 3}, tests=("test_workload",), expect=Kind.DATA,
        why="the workload runs with ready back-pressure: a stalled item's inner stage takes "
            "the stage before's while its output waits",
    ),
    Mutation(
        name="exp2-truncates-toward-zero",
        models="exp2: a negative x is truncated toward zero instead of floored",
        file="scoville/rtl/lib/fp32.py",
        edits=(Edit("Mux(sign, -(mag + lost), mag)", "Mux(sign, -mag, mag)"),),
        block="exp2", params={}, tests=("test_directed", "test_workload"), expect=Kind.DATA,
        why="test_directed has -2^-17 and minus the smallest subnormal; the random operands "
            "hold small negative values whose bits reach below 2^-16",
    ),
    Mutation(
        name="exp2-chord-off-by-one-entry",
        models="exp2: the chord runs to the entry two places on, not the next one",
        file="scoville/rtl/lib/fp32.py",
        edits=(Edit("zip(table, table[1:], strict=False)",
                    "zip(table, table[2:] + [table[-1]], strict=False)"),),
        block="exp2", params={}, tests=("test_directed", "test_workload"), expect=Kind.DATA,
        why="every x whose low 10 fraction bits are not zero interpolates, and the directed "
            "2^-16 checks the first step of the chord exactly",
    ),
    Mutation(
        name="attention-sum-not-rescaled",
        models="attention: the running sum l is not multiplied by alpha when the max rises",
        file="scoville/rtl/attention_sequencer.py",
        edits=(Edit('self.alpha[r], name=f"lmul{r}")', 'ONE, name=f"lmul{r}")'),),
        block="attention", params=ATTENTION, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="41 tokens are two chunks; a row whose max rises in the second chunk has alpha < 1",
    ),
    Mutation(
        name="attention-window-one-short",
        models="attention: the window starts a position late (W - 1 tokens attended)",
        file="scoville/rtl/attention_walk.py",
        edits=(Edit("pos - (window - 1), 0)", "pos - (window - 2), 0)"),),
        block="attention", params=ATTENTION, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="every step after 20 tokens drops its first attended position",
    ),
    Mutation(
        name="attention-own-window-ignored",
        models="attention: a step's own window (its command's value) ignored, the config's "
               "taken",
        file="scoville/rtl/attention_control.py",
        edits=(Edit("self.window.eq(Mux(own != 0, own, cfg.window))",
                    "self.window.eq(cfg.window)"),),
        block="attention", params=ATTENTION, tests=("test_edges",),
        expect=Kind.DATA,
        why="test_edges' steps with windows of their own (37 and 1 tokens) over 67 tokens",
    ),
    Mutation(
        name="attention-p-unmasked-before-window",
        models="attention: P is not zeroed for the positions read before the window's start",
        file="scoville/rtl/attention_sequencer.py",
        edits=(Edit("masks.append(in_window & (aq_pos <= p_r))", "masks.append(aq_pos <= p_r)"),),
        block="attention", params=ATTENTION, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="the window's start (token 21 of 41) is not a multiple of 32: the read starts at 0",
    ),
    Mutation(
        name="attention-prefill-p-sees-later-tokens",
        models="attention prefill: P is not zeroed for a row tile's positions after the row's "
               "own token (the causal mask)",
        file="scoville/rtl/attention_sequencer.py",
        edits=(Edit("masks.append(in_window & (aq_pos <= p_r))", "masks.append(in_window)"),),
        block="attention", params=ATTENTION_PREFILL, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="row tiles of two tokens: the first token's rows see the second's position",
    ),
    Mutation(
        name="attention-prefill-max-over-the-tile",
        models="attention prefill: a row's running max also takes the scores of the tile's "
               "later tokens",
        file="scoville/rtl/attention_score.py",
        edits=(Edit('j_hi = wire(m, "oc_jhi", oc_p - base_pos', 'j_hi = wire(m, "oc_jhi", '
                    'ocw.hi - base_pos'),),
        block="attention", params=ATTENTION_PREFILL, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="row tiles of two tokens: a larger score at the second token's position raises "
            "the first token's max (p and l change bits, not the answer's value much)",
    ),
    Mutation(
        name="attention-tiles-sum-every-pass",
        models="attention, P V in column tiles: P's exponentials join the running sum on every "
               "replay of P, not the first only",
        file="scoville/rtl/attention_sequencer.py",
        edits=(Edit("with m.If(en & s1 & s1_p & s1_sum):", "with m.If(en & s1 & s1_p):"),),
        block="attention", params=ATTENTION_TILES, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why=("two column tiles: the second pass adds the chunk's sum again; on a head's "
             "first chunk that recomputes the same sum, so only heads of two or more chunks "
             "change (the 41-token step spans two chunks of 32: keep it so)"),
    ),
    Mutation(
        name="attention-tiles-v-window-stale",
        models="attention, P V in column tiles: every V read takes the first tile's lines",
        file="scoville/rtl/attention_walk.py",
        edits=(Edit("req.line0.eq(Mux(walk.sub, vt * VL, 0))", "req.line0.eq(0)"),),
        block="attention", params=ATTENTION_TILES, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="the second column tile of O is computed from V's first 8 elements",
    ),
    Mutation(
        name="kvcache-window-skips-one-short",
        models="kvcache: a windowed read steps to the next token's window a line short",
        file="scoville/rtl/kvcache_linereader.py",
        edits=(Edit("off.eq(off + skip + 1)", "off.eq(off + skip)"),),
        block="kvcache", params=KVCACHE, tests=("test_edges", "test_workload"), expect=Kind.DATA,
        why="half the random reads take a window of a token's 4 lines; with the skip one short "
            "every read of more than one token in a page reads wrong lines from the "
            "second token on, windowed or whole",
    ),
    Mutation(
        name="moe-full-batch-refused",
        models="MoE: a batch of exactly `tokens` tokens is refused as too many",
        file="scoville/rtl/moe_sequencer.py",
        edits=(Edit("bad = (t_ == 0) | (t_ > T)", "bad = (t_ == 0) | (t_ >= T)"),),
        block="moe", params=MOE, tests=("test_edges",), expect=Kind.STATUS,
        why="the directed edges end with a full batch, and the testbench expects its output",
        gap="the refused batch's x beats are never taken and the run hangs; the testbench "
            "reads the status port only after a run ends, so the wrong refusal shows only as "
            "the hang",
    ),
    Mutation(
        name="moe-last-long-unchecked",
        models="MoE: a weight response that runs long (no `last` on its last word) passes; "
               "only early ends are caught",
        file="scoville/rtl/moe_requests.py",
        edits=(Edit("with m.If(self.last != burst_end):",
                    "with m.If(self.last & ~burst_end):"),),
        block="moe", params=MOE, tests=("test_bad_weights",), expect=Kind.DATA,
        why="test_bad_weights flips `last` off a tile's final word: the batch must emit "
            "nothing",
    ),
    Mutation(
        name="moe-tile-queue-one-deep",
        models="MoE: the column-tile descriptors' queue holds one, whatever tile_queue says",
        file="scoville/rtl/lib/queue.py",
        edits=(Edit("room = q.level < D", "room = q.level < 1"),),
        block="moe", params={**MOE_DEEPSEEK, "tile_queue": 2, "fetch_buffer": 64},
        tests=("test_edges",), expect=Kind.TIMING, streams=("req",),
        why="test_edges' first batch (one token): with one descriptor queued, not two, the "
            "fetch engine's requests come later than the timed model has them (request 6 at "
            "cycle 85, not 54)",
    ),
    Mutation(
        name="moe-burst-end-off-by-one",
        models="MoE: the `last` check expects a burst one word longer than the fetch engine's",
        file="scoville/rtl/moe_requests.py",
        edits=(Edit("burst_end = tile_end | (w_beat == cfg.fetch.burst - 1)",
                    "burst_end = tile_end | (w_beat == cfg.fetch.burst)"),),
        block="moe", params=MOE, tests=("test_edges",), expect=Kind.TIMING,
        why="a tile of 32 rows x 8 columns with its biases is 21 words: a burst of 16, then 5; "
            "every good response looks misplaced and every batch emits nothing",
    ),
    Mutation(
        name="moe-output-not-cleared",
        models="MoE: the output memory is not cleared while a batch comes in, so a batch adds "
               "onto the one before",
        file="scoville/rtl/moe_combine.py",
        edits=(Edit("        with m.If(clearing):\n",
                    "        with m.If(clearing & 0):\n"),),
        block="moe", params=MOE, tests=("test_edges",), expect=Kind.DATA,
        why="the directed edges run a one-token batch, then a full one: its first token's "
            "words start from the first batch's sums",
    ),
    Mutation(
        name="moe-shared-weight-two",
        models="MoE, DeepSeek: the shared expert's output is added twice over (weight 2.0)",
        file="scoville/rtl/moe_sequencer.py",
        edits=(Edit("w[i].eq(fp32_bits(1.0))", "w[i].eq(fp32_bits(2.0))"),),
        block="moe", params=MOE_DEEPSEEK, tests=("test_edges",), expect=Kind.DATA,
        why="every token passes through the shared expert",
    ),
    Mutation(
        name="moe-pad-rows-counts-all",
        models="MoE: the pad_rows counter adds an expert's whole row tiles, not their empty "
               "rows",
        file="scoville/rtl/moe.py",
        edits=(Edit('"pad_rows": Mux(starts, (run_n + R - 1) // R * R - run_n, 0),',
                    '"pad_rows": Mux(starts, (run_n + R - 1) // R * R, 0),'),),
        block="moe", params=MOE, tests=("test_edges",), expect=Kind.COUNTER,
        why="the testbench checks every counter against the timed model's",
    ),
    Mutation(
        name="moe-combine-drain-one-late",
        models="MoE: after an expert's last down row the sequencer waits one cycle more for "
               "the combine's write than it needs",
        file="scoville/rtl/moe_sequencer.py",
        edits=(Edit("        entry = self.entry.payload\n",
                    "        entry = self.entry.payload\n        busy_d = Signal()\n"
                    "        m.d.sync += busy_d.eq(self.busy)\n"),
               Edit("with m.Elif(~self.busy):", "with m.Elif(~self.busy & ~busy_d):")),
        block="moe", params=MOE, tests=("test_edges",), expect=Kind.TIMING, streams=("req",),
        why="every expert ends in DRAIN with its last write pending: the next expert, the "
            "output and every handshake after them move a cycle",
    ),
    *(Mutation(
        name=f"{block}-in-bubble-after-stall",
        models="the stall pipeline takes no input the cycle after a back-pressure stall ends "
               "(a bubble in its stages; protocol-legal, data unchanged)",
        file="scoville/rtl/lib/pipeline.py", edits=_PIPE_BUBBLE, block=block, params={},
        tests=("test_workload",), expect=Kind.TIMING, streams=("i",),
        why="back-pressure 0.3 on `o` stalls the unit often; the input beat offered in the "
            "cycle after each release is taken a cycle late",
    ) for block in _LANE_BLOCKS),
    Mutation(
        name="fp4_mul-subnormal-implicit-one",
        models="E2M1 products give subnormal codes (exponent 0) an implicit leading one",
        file="scoville/rtl/lib/fp4.py",
        edits=(Edit("    sig_a = Cat(a.man, a.exp != 0)\n", "    sig_a = Cat(a.man, 1)\n"),),
        block="fp4_mul", params={}, tests=("test_exhaustive",), expect=Kind.DATA,
        why="the exhaustive test has every pair, zeros and 0.5 among them",
    ),
    Mutation(
        name="int_mac-acc-ignored",
        models="a dot product starts from 0, not from the ``acc`` its first beat brings",
        file="scoville/rtl/int_mac.py",
        edits=(Edit('lo_base = Mux(s["first"], s["acc"][:_HALF], lo)',
                    'lo_base = Mux(s["first"], 0, lo)'),
               Edit("hi_base = Mux(h_first, h_acc, hi)", "hi_base = Mux(h_first, 0, hi)")),
        block="int_mac", params={}, tests=("test_workload",), expect=Kind.DATA,
        why="the workload's dot products start from random 32-bit values",
    ),
    Mutation(
        name="int_mac-acc-from-a-later-beat",
        models="the INT32 sum in halves: the high half's starting value comes from the beat "
               "offered at the input, not from the dot product's first beat",
        file="scoville/rtl/int_mac.py",
        edits=(Edit('h_acc.eq(s["acc"][_HALF:])', 'h_acc.eq(i.acc[_HALF:])'),),
        block="int_mac", params={}, tests=("test_workload",), expect=Kind.DATA,
        why="only a dot product's first beat's acc counts; the testbench gives the others "
            "random values",
    ),
    Mutation(
        name="int_mac-halves-drop-the-carry",
        models="the INT32 sum in halves (latencies 3 and 4): the high half never takes the "
               "low half's carry",
        file="scoville/rtl/int_mac.py",
        edits=(Edit("hi.eq(hi_base + h_dot + carry)", "hi.eq(hi_base + h_dot)"),),
        block="int_mac", params={}, tests=("test_exhaustive_pairs", "test_workload"),
        expect=Kind.DATA,
        why="a negative product sign-extends to the high half, which a carry out of the low "
            "half must clear: every sum of mixed signs that crosses zero",
    ),
    Mutation(
        name="mx_dot-b-scale-from-a",
        models="MXFP4 dot products scale each block by A's scale twice, never B's",
        file="scoville/rtl/mx_dot.py",
        edits=(Edit("carry=mx_scale_terms(p.sa, p.sb))", "carry=mx_scale_terms(p.sa, p.sa))"),),
        block="mx_dot", params={}, tests=("test_workload",), expect=Kind.DATA,
        why="random scales differ between A and B in nearly every block",
    ),
    Mutation(
        name="nvfp4_dot-tensor-scale-dropped",
        models="NVFP4 dot products leave out the per-tensor FP32 scale",
        file="scoville/rtl/nvfp4_dot.py",
        edits=(Edit('fp32_mul(m, total, kept["scale"], name="scale_mul", cut=cut)',
                    'fp32_mul(m, total, 0x3F80_0000, name="scale_mul", cut=cut)'),),
        block="nvfp4_dot", params={}, tests=("test_workload",), expect=Kind.DATA,
        why="the workload's tensor scales are random, not 1",
    ),
    Mutation(
        name="blockdot-scale-skips-the-block-stages",
        models="a block dot unit's values that travel with a block (NVFP4's tensor scale) skip "
               "the registers that cut the block's value, reaching the adder's stages early",
        file="scoville/rtl/lib/blockdot.py",
        edits=(Edit('carry = {name: delay(m, v, ahead, en, name=f"blk_{name}")',
                    'carry = {name: delay(m, v, 0, en, name=f"blk_{name}")'),),
        block="nvfp4_dot", params={"lanes": 4, "latency": 12}, tests=("test_workload",),
        expect=Kind.DATA,
        why="at latency 12 the block value's conversion and register are two stages; the "
            "scale comes on a dot product's final beat only (0 elsewhere), so the result "
            "takes the scale of a beat two behind it: 0",
    ),
    Mutation(
        name="blockdot-acc-clears-on-the-entering-block",
        models="the accumulator, its adder cut, is cleared by the last flag of the block "
               "entering the adder, not of the one whose sum leaves it",
        file="scoville/rtl/lib/blockdot.py",
        edits=(Edit("acc.eq(Mux(ends, 0, total))", "acc.eq(Mux(last, 0, total))"),),
        block="mx_dot", params={"lanes": 8, "latency": 9}, tests=("test_workload",),
        expect=Kind.DATA,
        why="at latency 9 the adder is three stages, so the item at its input when a dot "
            "product's sum leaves is a later beat: the accumulator is not cleared and the "
            "next dot product starts from the last one's sum",
    ),
    Mutation(
        name="fetch-next-burst-one-word-back",
        models="each burst after a command's first starts one word before the last one ended "
               "(a word read twice, the command's last never read)",
        file="scoville/rtl/fetch.py",
        edits=(Edit("m.d.sync += [addr.eq(addr + size), left.eq(left - size)]",
                    "m.d.sync += [addr.eq(addr + size - 1), left.eq(left - size)]"),),
        block="fetch", params=FETCH, tests=("test_workload",), expect=Kind.DATA,
        why="commands of up to 255 words take many bursts of 8; the requests are scoreboarded "
            "before the words",
    ),
    Mutation(
        name="fetch-room-freed-a-cycle-late",
        models="a word leaving on `o` frees its reserved room a cycle later (requests wait a "
               "cycle more when the buffer is full; data unchanged)",
        file="scoville/rtl/fetch.py",
        edits=(Edit("        m.d.sync += reserved.eq(reserved + Mux(issue, size, 0) - out)\n",
                    "        out_d = Signal()\n"
                    "        m.d.sync += [out_d.eq(out), "
                    "reserved.eq(reserved + Mux(issue, size, 0) - out_d)]\n"),),
        block="fetch", params=FETCH, tests=("test_workload",), expect=Kind.TIMING,
        streams=("req",),
        why="back-pressure 0.6 on `o` fills the 32-word buffer, so most bursts wait for room "
            "and go a cycle late",
    ),
    Mutation(
        name="reblock-frees-line-a-cycle-late",
        models="the reblocking buffer frees a line a cycle after it is read out (the array "
               "waits a cycle more for a line; data unchanged)",
        file="scoville/rtl/gemm_quant_reblock.py",
        edits=(Edit("        freed = Mux(issue, Const(1, lines) << done.r_data, 0)\n",
                    "        freed = Signal(lines)\n"
                    "        m.d.sync += freed.eq(\n"
                    "            Mux(issue, Const(1, lines) << done.r_data, 0))\n"),),
        block="gemm_quant",
        params={"array.rows": 6, "array.cols": 4, "groups": 1, "k": 1, "count": 6, "gap": 0.0,
                "backpressure": 0.9},
        tests=("test_workload",), expect=Kind.TIMING,
        why="the configuration of reblock-frees-line-at-write: the array is held for free "
            "lines, so each line freed late holds it a cycle more",
    ),
    Mutation(
        name="attention-idle-late-after-answer-stall",
        models="after an answer that waited for `resp.ready`, the controller takes a cycle more "
               "before it is idle for the next command (protocol-legal, data unchanged)",
        file="scoville/rtl/attention_control.py",
        edits=(
            Edit("        tok_left = Signal(9)  # appends still to request\n",
                 "        tok_left = Signal(9)  # appends still to request\n"
                 "        resp_held = Signal()\n"),
            Edit('            with m.State("RESP"):\n'
                 "                m.d.comb += self.resp.valid.eq(1)\n"
                 "                with m.If(self.resp.ready):\n"
                 '                    m.next = "IDLE"\n',
                 '            with m.State("RESP"):\n'
                 "                m.d.comb += self.resp.valid.eq(1)\n"
                 "                m.d.sync += resp_held.eq(~self.resp.ready)\n"
                 "                with m.If(self.resp.ready & resp_held):\n"
                 '                    m.next = "BUBBLE"\n'
                 "                with m.Elif(self.resp.ready):\n"
                 '                    m.next = "IDLE"\n'
                 '            with m.State("BUBBLE"):\n'
                 '                m.next = "IDLE"\n'),
        ),
        block="attention", params=ATTENTION, tests=("test_workload",), expect=Kind.TIMING,
        streams=("cmd",),
        why="back-pressure 0.3 on `resp` holds many answers, and the next command usually "
            "waits on `cmd`: it is taken a cycle late",
    ),
    Mutation(
        name="attention-o-not-rescaled",
        models="the partial output O is not rescaled by alpha when a chunk raises the running "
               "maximum (O * 1 + row)",
        file="scoville/rtl/attention_normalizer.py",
        edits=(Edit("Mux(n1, rec, pv.alpha)", "Mux(n1, rec, 0x3F80_0000)"),),
        block="attention", params=ATTENTION, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="41 tokens in chunks of 32: a second chunk whose maximum is higher rescales O",
    ),
    Mutation(
        name="attention-sink-not-in-log2",
        models="a head's sink logit starts the running maximum as given, not times log2(e) "
               "like every score",
        file="scoville/rtl/attention_score.py",
        edits=(Edit('m0[self.sink_head].eq(fp32_mul(m, self.sink_value, log2e, name="sinkm"))',
                    "m0[self.sink_head].eq(self.sink_value)"),),
        block="attention", params=ATTENTION, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="sinks=1: every head has a sink logit, part of every step's maximum and sum",
    ),
    Mutation(
        name="attention-fp8-subnormal-decode-doubled",
        models="FP8 E4M3 K/V: a subnormal stored code decodes to twice its value",
        file="scoville/rtl/attention_transpose.py",
        edits=(Edit("math.ldexp(man, -9) if exp == 0", "math.ldexp(man, -8) if exp == 0"),),
        block="attention", params={**ATTENTION, "kv.kv_fmt": "fp8_e4m3"},
        tests=("test_edges", "test_workload"), expect=Kind.DATA,
        why="K and V elements are N(0, 1) times 2^-2..2^2: about one in a hundred is below "
            "E4M3's smallest normal (2^-6) over the run's thousands",
    ),
    Mutation(
        name="moe-tokens-of-one-short",
        models="each expert's `tokens_of` counter counts one token fewer per run",
        file="scoville/rtl/moe.py",
        edits=(Edit("tokens_of[e].eq(tokens_of[e] + run_n)",
                    "tokens_of[e].eq(tokens_of[e] + run_n - 1)"),),
        block="moe", params=MOE, tests=("test_edges",), expect=Kind.COUNTER,
        why="every expert run adds its tokens; the testbench checks each expert's counter",
    ),
    Mutation(
        name="moe-router-ties-to-higher",
        models="the router's argmax breaks ties to the higher expert (and group) index",
        file="scoville/rtl/moe_router.py",
        edits=(Edit('right = wire(m, f"{name}_{depth}_{j}_r", kb > ka)',
                    'right = wire(m, f"{name}_{depth}_{j}_r", kb >= ka)'),),
        block="moe", params=MOE_DEEPSEEK, tests=("test_tiny_scores",), expect=Kind.DATA,
        why="test_tiny_scores: sigmoid scores near 1e-21, so the biased scores are the biases; "
            "a kept expert below 0 loses to the masked ones, which all score 0.0: a tie "
            "(test_edges and test_workload let it survive: their kept experts score above 0)",
    ),
    Mutation(
        name="moe-deepseek-group-mask-ignored",
        models="DeepSeek's group choice is ignored: every expert is a candidate",
        file="scoville/rtl/moe_router.py",
        edits=(Edit("            cand = [Mux(kept[e // GS], c[e], 0) for e in range(E)]\n",
                    "            cand = [c[e] for e in range(E)]\n"),),
        block="moe", params=MOE_DEEPSEEK, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="two groups, one kept: half the tokens' best experts are in the other group",
    ),
    Mutation(
        name="moe-norm-eps-dropped",
        models="DeepSeek's norm_topk_prob denominator lacks its + 1e-20",
        file="scoville/rtl/moe_router.py",
        edits=(Edit('                    total = fp32_add(m, total, _EPS, name="sum_eps")\n',
                    "                    total = total\n"),),
        block="moe", params=MOE_DEEPSEEK, tests=("test_tiny_scores",), expect=Kind.DATA,
        why="only a sum of sigmoids near 1e-20 shows it: test_tiny_scores' logits near -48",
    ),
    Mutation(
        name="moe-dispatch-first-choice-weight",
        models="dispatch pairs each of a token's choices with the weight of its first choice",
        file="scoville/rtl/moe_dispatch.py",
        edits=(Edit("sw.data.weight.eq(cr.data.weight[q])",
                    "sw.data.weight.eq(cr.data.weight[0])"),),
        block="moe", params=MOE, tests=("test_edges", "test_workload"), expect=Kind.DATA,
        why="top-2: every token's second expert is weighed by its first's weight",
    ),
    Mutation(
        name="moe-requant-e4m3-ties-away",
        models="the MXFP8 quantizers (of x, and of the SwiGLU output) break E4M3 ties away "
               "from zero",
        file="scoville/rtl/mx_quant.py",
        edits=(Edit("    up = guard & (rest | q[0])\n", "    up = guard\n"),),
        block="moe", params={**MOE, "x_fmt": "bf16"}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="BF16 x (8 significant bits) quantized to E4M3 (4): about one value in sixteen is "
            "a tie (FP32 activations alone let it survive: their ties are rare)",
    ),
    Mutation(
        name="moe-weight-slot-freed-early",
        models="the weight loader's slot is freed at the first beat of its last replay, not "
               "its last beat: the next tile may overwrite weights still being fed",
        file="scoville/rtl/moe_weights.py",
        edits=(Edit("        with m.If(fire & wrap & (m_left == 1)):\n"
                    "            m.d.comb += clr_full.bit_select(rs, 1).eq(1)\n",
                    "        with m.If(fire & (beat == 0) & (m_left == 1)):\n"
                    "            m.d.comb += clr_full.bit_select(rs, 1).eq(1)\n"),),
        block="moe", params=MOE, tests=("test_edges", "test_workload"), expect=Kind.TIMING,
        streams=("req",),
        why="the next tile's request leaves a cycle early (its slot looks free): the first "
            "sign; the weights it then overwrites come later, if at all",
    ),
    Mutation(
        name="attention-mxfp4-half-decoded-as-one",
        models="MXFP4 K/V: the E2M1 magnitude 0.5 decodes as 1.0",
        file="scoville/rtl/attention_transpose.py",
        edits=(Edit("e_of = Array(Const(v, signed(3)) for v in (0, -1, 0, 0, 1, 1, 2, 2))",
                    "e_of = Array(Const(v, signed(3)) for v in (0, 0, 0, 0, 1, 1, 2, 2))"),),
        block="attention", params={**ATTENTION, "kv.kv_fmt": "mxfp4", "kv.kv_heads": 1,
                                   "kv.head_dim": 32, "q_heads": 2, "array.cols": 32,
                                   "chunk": 64},
        tests=("test_edges", "test_workload"), expect=Kind.DATA,
        why="MXFP4 storage: about one element in eight is +-0.5 times its scale",
    ),
    Mutation(
        name="attention-mla-v-reads-v-region",
        models="MLA (the cache stores the latent vector alone): V reads take the lines a V "
               "region would have, not the latent's",
        file="scoville/rtl/kvcache_linereader.py",
        edits=(Edit("            kv = 0 if cfg.k_only else r.kv\n",
                    "            kv = r.kv\n"),),
        block="attention", params=ATTENTION_MLA, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="MLA's P V reads V as the latent's first v_dim elements: every V read of the run "
            "goes to other lines",
    ),
    Mutation(
        name="attention-normalizer-bubble",
        models="the normalizer puts out a row's column tiles every other cycle (a bubble after "
               "each; data unchanged)",
        file="scoville/rtl/attention_normalizer.py",
        edits=(
            Edit("        en_o = ~self.o.valid | self.o.ready\n",
                 "        en_o = ~self.o.valid | self.o.ready\n"
                 "        skip = Signal()\n"
                 "        with m.If(en_o):\n"
                 "            m.d.sync += skip.eq(~skip & (n_left != 0))\n"),
            Edit("            m.d.sync += [n1.eq(n_left != 0), n1_vt.eq(n_vt),\n",
                 "            m.d.sync += [n1.eq((n_left != 0) & ~skip), n1_vt.eq(n_vt),\n"),
            Edit("            with m.If(n_left != 0):\n",
                 "            with m.If((n_left != 0) & ~skip):\n"),
        ),
        block="attention", params={**ATTENTION, "array.cols": 8},
        tests=("test_keep_up", "test_workload"), expect=Kind.TIMING, streams=("o", "resp"),
        why="the outputs leave at the end of each step: every row and column tile (two of "
            "each row with 8 columns) a cycle later",
    ),
    Mutation(
        name="attention-transposer-freed-late",
        models="the K transposer frees a buffer a cycle after its last beat left (protocol-"
               "legal, data unchanged)",
        file="scoville/rtl/attention_transpose.py",
        edits=(Edit("            with m.If(issue & advance & beat_end & (rbuf == b)):\n"
                    "                m.d.sync += full[b].eq(0)\n",
                    '            freed = Signal(name=f"freed{b}")\n'
                    "            m.d.sync += freed.eq(issue & advance & beat_end & (rbuf == b))\n"
                    "            with m.If(freed):\n"
                    "                m.d.sync += full[b].eq(0)\n"),),
        block="attention",
        params={**ATTENTION_PREFILL, "kv.kv_fmt": "fp8_e4m3", "sinks": 0, "window": 0,
                "q_tokens": 4, "tokens": 3},
        tests=("test_edges", "test_workload"), expect=Kind.TIMING, also=Kind.COUNTER,
        streams=("o", "resp", "q", "cmd"),
        why="FP8 prefill (the suite's prefill-fp8-whole): the transposer's tiles are a "
            "token's few lines, so a buffer freed late makes the cache wait a cycle: its "
            "first sign is the cache's idle counter (kv.idle), a cycle off the model's, "
            "before any handshake moves. In BF16 decode the cache's reads are the bottleneck "
            "and cycle counts stay unchanged",
    ),
    Mutation(
        name="attention-v-queue-one-short",
        models="V's token queue holds one token fewer than the config says",
        file="scoville/rtl/attention_transpose.py",
        edits=(Edit("SyncFIFO(width=layout.size, depth=self._depth)",
                    "SyncFIFO(width=layout.size, depth=max(self._depth - 1, 1))"),),
        block="attention", params={**ATTENTION, "array.cols": 8, "window": 0},
        tests=("test_edges", "test_workload"), expect=Kind.TIMING, also=Kind.COUNTER,
        streams=("o", "resp", "q", "cmd"),
        why="P V in two column tiles (8 columns; the suite's bf16-gqa-column-tiles): V's "
            "queue fills while the array works through K, and one token fewer makes the "
            "cache wait: its first sign is the cache's idle counter (kv.idle), before any "
            "handshake moves. With one column tile the queue's depth has slack",
    ),
    Mutation(
        name="moe-router-lanes-left-fold",
        models="moe: the router adds a beat's products left to right, not as a tree",
        file="scoville/rtl/moe_router.py",
        edits=(Edit("""    return fp32_tree_sum(m, products, name=f"xt{e}")""",
                    """    acc = products[0]
    for q in range(1, len(products)):
        acc = fp32_add(m, acc, products[q], name=f"xt{e}_{q}")
    return acc"""),),
        block="moe", params={**MOE, "hidden": 64, "x_lanes": 8, "batches": 16},
        tests=("test_edges", "test_workload"), expect=Kind.DATA,
        why="eight products a beat: the left fold rounds its sums in another order, and the "
            "logits' last bits move a routing weight or, near a tie, an expert chosen",
        gap="another order moves a logit by an ulp or so, which the exp2 and sigmoid units "
            "mostly absorb: 16 random batches catch it on seeds 1 and 3, not on 2. Needs a "
            "directed batch whose logits sit where the orders round apart and the weight's "
            "exp2 input crosses a step",
    ),
    Mutation(
        name="rmsnorm-rsqrt-truncates",
        models="rmsnorm: the reciprocal square root is truncated, not rounded to nearest",
        file="scoville/rtl/rmsnorm_rsqrt.py",
        edits=(Edit("        up = guard & (rest | keep[0])\n", "        up = guard & 0\n"),),
        block="rmsnorm", params={"count": 200}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="half of the random tokens' r round up; every output of such a token moves",
    ),
    Mutation(
        name="rmsnorm-rsqrt-one-step-short",
        models="rmsnorm: the rsqrt recurrence stops a cycle early (its last bits never set)",
        file="scoville/rtl/rmsnorm_rsqrt.py",
        edits=(Edit("            with m.If(j < self._bits):",
                    "            with m.If(j < 2 * self._bits):"),),
        block="rmsnorm", params={"count": 200}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA, also=Kind.TIMING, streams=("o", "i"),
        why="the last bits of r stay 0 (wrong r) and each result comes a cycle early: the "
            "outputs are checked before the handshakes, so data first unless a run's first "
            "token only moves (then timing on o)",
    ),
    Mutation(
        name="rmsnorm-sum-carries-over",
        models="rmsnorm: a token's sum of squares starts from the previous token's",
        file="scoville/rtl/rmsnorm.py",
        edits=(Edit("acc.eq(Mux(sq_first, sq, fp32_add(m, acc, sq, name=\"acc\")))",
                    "acc.eq(fp32_add(m, acc, sq, name=\"acc\"))"),),
        block="rmsnorm", params={"count": 200}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="every token after the first normalizes by the running sum of all before it",
    ),
    Mutation(
        name="rmsnorm-eps-dropped",
        models="rmsnorm: eps is not added to the mean square",
        file="scoville/rtl/rmsnorm.py",
        edits=(Edit("v = fp32_add(m, mean, Const(fp32_bits(cfg.eps), 32), name=\"v\")",
                    "v = mean"),),
        block="rmsnorm", params={"count": 200}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="test_edges' token of zeros gives r = Inf (NaN outputs) instead of rsqrt(eps); "
            "random tokens scaled down to 2^-40 have mean squares below eps",
    ),
    Mutation(
        name="rmsnorm-bubble-between-tokens",
        models="rmsnorm: the input refuses a token's first beat in the cycle after the "
               "previous token's last",
        file="scoville/rtl/rmsnorm.py",
        edits=(Edit("        m.d.comb += [self.i.ready.eq((in_beat != 0) | "
                    "~busy.bit_select(in_slot, 1)),\n",
                    "        gap = Signal()\n        m.d.sync += gap.eq(self.i.valid & "
                    "self.i.ready & (in_beat == n - 1))\n        m.d.comb += "
                    "[self.i.ready.eq((in_beat != 0) | ~busy.bit_select(in_slot, 1) & ~gap),"
                    "\n"),),
        block="rmsnorm", params={"count": 200}, tests=("test_edges", "test_workload"),
        expect=Kind.TIMING, streams=("i", "o"),
        why="test_edges offers its tokens back to back: the second token's first beat comes a "
            "cycle later than the model puts it, the values unchanged",
    ),
    Mutation(
        name="rmsnorm-reciprocal-of-hidden",
        models="rmsnorm: a runtime width's mean divides by hidden, not by the width's values "
               "(every ROM entry fp32(1 / hidden))",
        file="scoville/rtl/rmsnorm.py",
        edits=(Edit("init=[fp32_bits(1.0 / (w * cfg.lanes)) for w in range(1, cfg.beats + 1)]",
                    "init=[fp32_bits(1.0 / cfg.hidden)] * cfg.beats"),),
        block="rmsnorm", params={"hidden": 64, "lanes": 4, "slots": 3, "runtime": 1,
                                 "count": 40},
        tests=("test_widths",), expect=Kind.DATA,
        why="test_widths' first batch is of one-beat tokens: their mean square is 16 times too "
            "small, so every output of a token whose mean square is not far below eps moves",
    ),
    Mutation(
        name="fp32-mul-split-shift-misordered",
        models="fp32_mul cut inside its operands' normalizing shift (point 4): the later "
               "steps' shift bits placed below the earlier ones' in the leading-zero count",
        file="scoville/rtl/lib/fp32.py",
        edits=(Edit("shifted = Cat(*reversed(taken), shifted)",
                    "shifted = Cat(shifted, *reversed(taken))"),),
        block="rope", params={"count": 200}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="at rope's default latency the products cut their operands' shift: test_edges' "
            "subnormal element (1e-40: a shift of 7, the mutant's 28) gets a wrong exponent",
    ),
    Mutation(
        name="rope-second-sum-subtracts",
        models="rope: y2 = x2 c - x1 s instead of x2 c + x1 s",
        file="scoville/rtl/rope.py",
        edits=(Edit("second.append(add(x2c, x1s, f\"y2_{k}\"))",
                    "second.append(add(x2c, x1s ^ (1 << 31), f\"y2_{k}\"))"),),
        block="rope", params={"count": 200}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="every position but 0 has a nonzero sine: the second half of every such vector "
            "moves",
    ),
    Mutation(
        name="rope-interleaved-as-halves",
        models="rope: with interleaved = 1 the pairs are taken as halves",
        file="scoville/rtl/rope.py",
        edits=(Edit("(p.x[2 * k], p.x[2 * k + 1]) if cfg.interleaved else",
                    "(p.x[k], p.x[k + half]) if cfg.interleaved else"),),
        block="rope", params={"interleaved": 1, "count": 200},
        tests=("test_edges", "test_workload"), expect=Kind.DATA,
        why="any vector whose elements differ: the pairs rotate other elements together",
    ),
    Mutation(
        name="argmax-ties-to-higher",
        models="argmax: a tie within a beat goes to the higher index",
        file="scoville/rtl/argmax.py",
        edits=(Edit("b_wins = wire(m, f\"win_{depth}_{j}\", kb > ka)",
                    "b_wins = wire(m, f\"win_{depth}_{j}\", kb >= ka)"),),
        block="argmax", params={"count": 100}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="test_edges has two equal largest values in one beat, -0 beside +0 and a token "
            "of equal values",
    ),
    Mutation(
        name="argmax-nan-chosen",
        models="argmax: a NaN's key is not lowered: it ranks above every number",
        file="scoville/rtl/argmax.py",
        edits=(Edit("    return wire(m, name, Mux(fp32_is_nan(x), 0, ordered), unsigned(32))",
                    "    return wire(m, name, ordered, unsigned(32))"),),
        block="argmax", params={"count": 100}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="test_edges has a NaN beside the largest value and a NaN before -Inf",
    ),
    Mutation(
        name="argmax-place-skips-the-cuts",
        models="argmax: a beat's place in its token (its number, first, last) reaches the "
               "first stage's register straight from the beat counter, not through the "
               "tree's cuts with its logits",
        file="scoville/rtl/argmax.py",
        edits=(Edit("(key, lane, value), (at, first, last) = level[0], place",
                    "(key, lane, value), (at, first, last) = level[0], (beat, beat == 0, "
                    "beat == n - 1)"),),
        block="argmax", params={"count": 100}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="at the default latency (8 lanes: one cut) a beat's best is registered with the "
            "next beat's place: a token's answer takes in the next token's first beat",
    ),
    Mutation(
        name="argmax-later-tie-replaces",
        models="argmax: a later beat's equal value replaces the token's best",
        file="scoville/rtl/argmax.py",
        edits=(Edit("take_new = s1_first | (s1_key > best_key)",
                    "take_new = s1_first | (s1_key >= best_key)"),),
        block="argmax", params={"count": 100}, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="test_edges has a tie across beats and a token of equal values; the workload "
            "plants a tie in an eighth of its tokens",
    ),
    Mutation(
        name="linear-bias-dropped",
        models="linear: a command's bias is never added to its outputs",
        file="scoville/rtl/linear.py",
        edits=(Edit("self.o.payload[q].eq(Mux(seq.run.bias, total, row[q]))",
                    "self.o.payload[q].eq(row[q])"),),
        block="linear", params=LINEAR, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="test_edges' first command has a bias, and half the workload's do",
    ),
    Mutation(
        name="linear-x-truncated",
        models="linear: x is truncated to BF16, not rounded to nearest",
        file="scoville/rtl/linear_parts.py",
        edits=(Edit("rounded[e].eq(fp32_to_bf16(m, self.i.payload[e], name=f\"bf16_{e}\"))",
                    "rounded[e].eq(self.i.payload[e][16:])"),),
        block="linear", params=LINEAR, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="half of the random FP32 inputs round up; every output of their token moves",
    ),
    Mutation(
        name="linear-tile-address-one-short",
        models="linear: each column tile after the first is asked one word too early",
        file="scoville/rtl/linear_parts.py",
        edits=(Edit("addr.eq(addr + words),", "addr.eq(addr + words - 1),"),),
        block="linear", params=LINEAR, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="every command of two or more tiles asks a wrong address (the read requests are "
            "checked as they come)",
    ),
    Mutation(
        name="linear-bad-n-named-bad-k",
        models="linear: a command with a bad N is answered BAD_K",
        file="scoville/rtl/linear_parts.py",
        edits=(Edit("m.d.comb += status.eq(Status.BAD_N)",
                    "m.d.comb += status.eq(Status.BAD_K)"),),
        block="linear", params=LINEAR, tests=("test_edges",),
        expect=Kind.STATUS,
        why="test_edges ends two short runs with a command refused for its N",
    ),
    Mutation(
        name="linear-x-command-waits",
        models="linear: the x store's command of a tile is offered only after another of the "
               "tile's commands is taken",
        file="scoville/rtl/linear_parts.py",
        edits=(Edit("self.x_cmd.valid.eq(~sent_a)]",
                    "self.x_cmd.valid.eq(~sent_a & (sent_g | sent_b))]"),),
        block="linear", params=LINEAR, tests=("test_edges", "test_workload"),
        expect=Kind.TIMING, streams=("o", "x", "req", "rdata", "cmd"),
        why="every tile's first A beat comes a cycle later, and with it the tile's rows",
    ),
    Mutation(
        name="linear-weight-feed-stale",
        models="linear: the weight feeder reads each B beat's row a beat late (the current "
               "row's address, not the next's)",
        file="scoville/rtl/moe_weights.py",
        edits=(Edit("            cr.addr.eq(nxt + Mux(rs, KM, 0)),\n",
                    "            cr.addr.eq(beat + Mux(rs, KM, 0)),\n"),),
        block="linear", params=LINEAR, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="every beat after a tile's first carries its predecessor's row: every output "
            "moves",
    ),
    Mutation(
        name="decoder-overlap-unchecked",
        models="decoder: an ADD whose written lines overtake its first range's reads runs",
        file="scoville/rtl/decoder.py",
        edits=(Edit("(two & (clash(c.a) | clash(c.b)))", "(two & clash(c.b))"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA, also=Kind.STATUS,
        why="test_edges sends an ADD whose destination starts a line after its first range: "
            "it runs, and the OUT after it reads the lines it changed (checked before the "
            "answers, whose status is OK for BAD_RANGE)",
    ),
    Mutation(
        name="decoder-add-reads-a-twice",
        models="decoder: ADD adds the first range to itself",
        file="scoville/rtl/decoder.py",
        edits=(Edit("fp32_add(m, ra.o.payload[q], rb.o.payload[q],",
                    "fp32_add(m, ra.o.payload[q], ra.o.payload[q],"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="the layer's residual adds two different ranges and is read back",
    ),
    Mutation(
        name="decoder-norm-before-weights",
        models="decoder: a NORM runs without waiting for its weights",
        file="scoville/rtl/decoder.py",
        edits=(Edit("seq.loaded.eq(wvec.loaded)]", "seq.loaded.eq(1)]"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA, also=Kind.TIMING, streams=("resp", "cmd", "x", "o", "req", "rdata"),
        why="the weights are words away (the memory's latency): the norm scales by the old "
            "vector's values; its answer also comes earlier, which the model may see first",
    ),
    Mutation(
        name="decoder-placer-token-stride",
        models="decoder: a projection's tokens are placed a line short of each other",
        file="scoville/rtl/decoder_parts.py",
        edits=(Edit("m.d.sync += [tok.eq(tok + 1), row.eq(row + lines)]",
                    "m.d.sync += [tok.eq(tok + 1), row.eq(row + lines - 1)]"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="the layer's projections run two tokens: the second's rows land a line early",
    ),
    Mutation(
        name="decoder-placer-third-token",
        models="decoder: a projection's third token and later land on the second's lines",
        file="scoville/rtl/decoder_parts.py",
        edits=(Edit("m.d.sync += [tok.eq(tok + 1), row.eq(row + lines)]",
                    "m.d.sync += [tok.eq(tok + 1), row.eq(dst + col_line + lines)]"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="test_edges' layer runs the most tokens (four), and random projections of up to "
            "four tokens are read back",
    ),
    Mutation(
        name="decoder-last-line-refused",
        models="decoder: a range that ends at the activation memory's last line is refused",
        file="scoville/rtl/decoder.py",
        edits=(Edit("(writes_dst & (c.dst + writes > N)))",
                    "(writes_dst & (c.dst + writes > N - 1)))"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA, also=Kind.STATUS,
        why="test_edges writes the last two lines and reads them back (the lines, checked "
            "before the answers, are the first sign)",
    ),
    Mutation(
        name="decoder-moe-base-dropped",
        models="decoder: the MoE's weight requests are not offset by its command's address",
        file="scoville/rtl/decoder.py",
        edits=(Edit("(proj.req, 0), (wfetch.req, 0), (moe.req, base)",
                    "(proj.req, 0), (wfetch.req, 0), (moe.req, 0)"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="the layer's MoE weights follow its projections' and norms' in memory: every MoE "
            "request asks the wrong words (the requests are checked as they come)",
    ),
    Mutation(
        name="decoder-moe-placed-as-tiles",
        models="decoder: the MoE's output is placed as a projection's (column tiles of T "
               "tokens), not in order",
        file="scoville/rtl/decoder.py",
        edits=(Edit("(place, c.count, rows), (mplace, 1, 1)",
                    "(place, c.count, rows), (mplace, c.count, 1)"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="the layer's MoE runs several tokens: their outputs land on each other's lines",
    ),
    Mutation(
        name="decoder-norm-starts-late",
        models="decoder: a NORM starts a cycle after its weights are loaded",
        file="scoville/rtl/decoder.py",
        edits=(Edit("seq.loaded.eq(wvec.loaded)]",
                    "seq.loaded.eq(wvec.loaded & loaded_q)]"),
               Edit("        c, run = self.cmd.payload, seq.run\n",
                    "        c, run = self.cmd.payload, seq.run\n"
                    "        loaded_q = Signal()\n"
                    "        m.d.sync += loaded_q.eq(wvec.loaded)\n")),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.TIMING, streams=("resp", "cmd", "x", "o", "req", "rdata"),
        why="every NORM's lines, results and answer come a cycle late, and every command "
            "after it",
    ),
    Mutation(
        name="decoder-rope-cos-sin-swapped",
        models="decoder: a ROPE table row's sines taken as its cosines and its cosines as its "
               "sines",
        file="scoville/rtl/decoder.py",
        edits=(Edit("rot.i.payload.cos.as_value().eq(row[:16 * D]),",
                    "rot.i.payload.cos.as_value().eq(row[16 * D:]),"),
               Edit("rot.i.payload.sin.as_value().eq(row[16 * D:])]",
                    "rot.i.payload.sin.as_value().eq(row[:16 * D])]")),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="every rotated vector is another rotation of itself: the layer's ROPE output "
            "feeds the attention and is read back through the projections",
    ),
    Mutation(
        name="decoder-rope-lane-dropped",
        models="decoder: a ROPE vector narrower than a line is written from lane 0",
        file="scoville/rtl/decoder.py",
        edits=(Edit("wp.en.eq(Const((1 << min(D, LINE)) - 1, LINE) << spot.lane)",
                    "wp.en.eq(Const((1 << min(D, LINE)) - 1, LINE))"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="the layer's vectors of 16 values are two a line: the second lands on the first",
    ),
    Mutation(
        name="decoder-rope-stride-within-line",
        models="decoder: the ROPE walker steps to a token's next vector without leaving the "
               "line it is on",
        file="scoville/rtl/decoder_parts.py",
        edits=(Edit("m.d.comb += nxt.eq(tline + step_hp[5:])",
                    "m.d.comb += nxt.eq(tline + hp[5:])"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="the layer's third vector of a token is in its second line: read and written in "
            "the first",
    ),
    Mutation(
        name="decoder-rope-row-unchecked",
        models="decoder: a ROPE whose last vector runs past its token's row is run",
        file="scoville/rtl/decoder.py",
        edits=(Edit("| ((c.heads > 1) & (c.stride < D)) | (span > c.row * LINE)",
                    "| ((c.heads > 1) & (c.stride < D))"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA, also=Kind.STATUS,
        why="test_edges sends a ROPE whose vector starts where its row ends: it runs, and the "
            "OUT after it reads the line it changed (checked before the answers)",
    ),
    Mutation(
        name="decoder-joiner-order",
        models="decoder: a joiner puts its last beat lowest (a ROPE table row's words, a wide "
               "vector's lines)",
        file="scoville/rtl/decoder_parts.py",
        edits=(Edit("self.o.payload.eq(Cat(*held, self.i.payload))",
                    "self.o.payload.eq(Cat(self.i.payload, *held))"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="a table row is eight words of the 64-bit port: its cosines and sines come "
            "shuffled",
    ),
    Mutation(
        name="decoder-rope-splitter-pass-through",
        models="decoder: the splitter of a ROPE result wider than a line holds the rotation "
               "while its lines are written",
        file="scoville/rtl/decoder.py",
        edits=(Edit("split=Splitter(line_layout(), cfg.rope_lines, held=True)",
                    "split=Splitter(line_layout(), cfg.rope_lines)"),),
        block="decoder", params=DECODER_ROPE64, tests=("test_edges", "test_workload"),
        expect=Kind.TIMING, streams=("resp", "cmd", "x", "o", "req", "rdata"),
        why="the same lines at other cycles: without the register a vector's lines are "
            "written a cycle earlier, and the rotation stalls while its second line goes (the "
            "first ROPE's answer comes a cycle early)",
    ),
    Mutation(
        name="decoder-attn-kv-from-queries",
        models="decoder: ATTN's key and value vectors are walked from the query heads' place",
        file="scoville/rtl/decoder.py",
        edits=(Edit("(attn.kvwalk, cfg.attn_vectors, c.off + A.q_heads * D,",
                    "(attn.kvwalk, cfg.attn_vectors, c.off,"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="the layer's step attends over its own queries as keys and values: other outputs, "
            "read back through the O projection",
    ),
    Mutation(
        name="decoder-attn-out-heads-swapped",
        models="decoder: ATTN's outputs are placed KV head within query head (a group's heads "
               "interleaved with the other group's)",
        file="scoville/rtl/decoder_parts.py",
        edits=(Edit("value.eq(((first + j) * QH + h * G + g) * VD + piece * LINE)",
                    "value.eq(((first + j) * QH + g * KVH + h) * VD + piece * LINE)"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.DATA,
        why="two KV heads of two query heads each: the second and third outputs of every "
            "token trade places",
    ),
    Mutation(
        name="decoder-attn-status-dropped",
        models="decoder: an ATTN is answered OK whatever the attention block answers",
        file="scoville/rtl/decoder.py",
        edits=(Edit("m.d.comb += code.eq(Status[cache_code.name])",
                    "m.d.comb += code.eq(Status.OK)"),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.STATUS,
        why="random ATTN commands name sequences that are not there, heads past the last, "
            "steps longer than the block takes: each answered OK",
    ),
    Mutation(
        name="decoder-argmax-index-dropped",
        models="decoder: an ARGMAX is answered with index 0 whatever the argmax chose",
        file="scoville/rtl/decoder.py",
        edits=(Edit("Const(0, answer.length.shape()), index),",
                    "Const(0, answer.length.shape()), Const(0, 1)),"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.STATUS,
        why="test_edges' first ARGMAX chooses index 3 (the lower of two equal largest)",
    ),
    Mutation(
        name="decoder-argmax-unknown-op-run",
        models="decoder: only the last op code (15) is refused BAD_OP; the others past ROUTER "
               "are checked as ops",
        file="scoville/rtl/decoder.py",
        edits=(Edit("with m.If(Value.cast(c.op) > Op.ROUTER):",
                    "with m.If(Value.cast(c.op) == 15):"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.STATUS,
        why="test_edges' refusals include op 11 (count 0): answered BAD_RANGE, not BAD_OP",
    ),
    Mutation(
        name="decoder-norm-width-of-hidden",
        models="decoder: a NORM's tokens are hidden wide whatever its k",
        file="scoville/rtl/decoder.py",
        edits=(Edit("norm_per = Mux(c.k == 0, hl, c.k[5:])", "norm_per = Mux(c.k == 0, hl, hl)"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA,
        why="strided_edges' NORM of a line a token normalizes two lines a token instead",
    ),
    Mutation(
        name="decoder-norm-row-unwritten",
        models="decoder: a NORM's results are written in consecutive lines, not row apart",
        file="scoville/rtl/decoder.py",
        edits=(Edit("row.eq(Mux(is_norm, now.stride, 1))", "row.eq(Mux(is_norm, now.per, 1))"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA,
        why="strided_edges' NORM writes its three tokens into lines 1, 2 and 3 (not 1, 4, 7)",
    ),
    Mutation(
        name="decoder-linear-stride-ignored",
        models="decoder: a LINEAR reads its tokens packed whatever its stride",
        file="scoville/rtl/decoder.py",
        edits=(Edit("Mux(c.op == Op.LINEAR, c.stride, 0)", "0"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA,
        why="strided_edges' LINEAR reads lines 1, 2, 3 (not 1, 4, 7)",
    ),
    Mutation(
        name="decoder-linear-row-ignored",
        models="decoder: a LINEAR writes its tokens packed whatever its row",
        file="scoville/rtl/decoder.py",
        edits=(Edit("rows = Mux(c.row == 0, c.n // LINE, c.row)", "rows = c.n // LINE"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA,
        why="strided_edges' LINEAR writes two lines a token packed, not three apart",
    ),
    Mutation(
        name="decoder-linear-stride-range-unchecked",
        models="decoder: a LINEAR's read range is counted packed, whatever its stride",
        file="scoville/rtl/decoder.py",
        edits=(Edit("(c.count - 1) * in_stride + kl", "(c.count - 1) * kl + kl"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.STATUS, also=Kind.DATA,
        why="test_edges' refusal of a LINEAR whose strided tokens run past the last line: "
            "run instead",
    ),
    Mutation(
        name="decoder-norm-weights-bound-of-hidden",
        models="decoder: a narrow NORM's weights are bounded as a whole hidden vector's",
        file="scoville/rtl/decoder.py",
        edits=(Edit("(c.addr + norm.per * cfg.norm_line_words > (1 << lin.addr_bits))",
                    "(c.addr + cfg.norm_words > (1 << lin.addr_bits))"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA, also=Kind.STATUS,
        why="top_edges' NORM of the last line alone, its line of weights ending at the "
            "memory's last word, is refused: its weights are never asked for (the read "
            "requests are compared before the status)",
    ),
    Mutation(
        name="decoder-glu-b-unchecked",
        models="decoder: a GLU whose second range runs past the memory is run",
        file="scoville/rtl/decoder.py",
        edits=(Edit("(two & (c.b + reads > N))", "((c.op == Op.ADD) & (c.b + reads > N))"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA, also=Kind.STATUS,
        why="test_edges' refusal of a GLU whose b range ends past the last line runs: the "
            "OUT after it reads the lines it changed (before the status is compared)",
    ),
    Mutation(
        name="decoder-glu-gate-up-swapped",
        models="decoder: GLU gates b by a (silu(b) a), not a by b",
        file="scoville/rtl/decoder.py",
        edits=(Edit("Cat(ra.o.payload.as_value().word_select(b, 32 * G),\n"
                    "                rb.o.payload.as_value().word_select(b, 32 * G))",
                    "Cat(rb.o.payload.as_value().word_select(b, 32 * G),\n"
                    "                ra.o.payload.as_value().word_select(b, 32 * G))"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA,
        why="strided_edges' GLU of two different ranges",
    ),
    Mutation(
        name="decoder-attn-append-of-two",
        models="decoder: an ATTN append of more than one token is passed to the attention "
               "block",
        file="scoville/rtl/decoder.py",
        edits=(Edit("| ((c.aop == AttnOp.APPEND) & (c.count != 1)))",
                    ")"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.STATUS,
        why="test_edges' refusal of an append of two is passed on: the attention answers it "
            "(NO_SEQ, not BAD_SHAPE), having taken one token's keys and values of the two "
            "the walker gives",
    ),
    Mutation(
        name="decoder-attn-command-late",
        models="decoder: the attention block's command is offered a cycle late",
        file="scoville/rtl/decoder.py",
        edits=(Edit('ac = self._offer(m, blk.cmd, start, "attn")',
                    'start_q = Signal()\n        m.d.sync += start_q.eq(start)\n'
                    '        ac = self._offer(m, blk.cmd, start_q, "attn")'),),
        block="decoder", params=DECODER, tests=("test_edges", "test_workload"),
        expect=Kind.TIMING, streams=("resp", "cmd", "x", "o", "req", "rdata"),
        why="every ATTN's answer comes a cycle late, and every command after it",
    ),
    Mutation(
        name="decoder-router-address-stuck",
        models="decoder: ROUTER writes every beat of the router's weights at address 0",
        file="scoville/rtl/decoder.py",
        edits=(Edit("m.d.sync += router.addr.eq(router.addr + 1)",
                    "m.d.sync += router.addr.eq(router.addr)"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA,
        why="the layer's MOE routes with the bias in the first column and the rest of the "
            "weights from an earlier router: the experts chosen differ",
    ),
    Mutation(
        name="decoder-router-not-reset",
        models="decoder: ROUTER's beat address is not cleared when it starts",
        file="scoville/rtl/decoder.py",
        edits=(Edit("        with m.If(seq.start):\n            m.d.sync += router.addr.eq(0)\n"
                    "        with m.Elif(wr.valid & wr.ready):",
                    "        with m.If(wr.valid & wr.ready):"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA,
        why="top_moe loads a router over another: the second ROUTER's beats are written from "
            "where the first left off, past the router's words, and its MOE routes with the "
            "first's weights",
    ),
    Mutation(
        name="decoder-router-last-word-refused",
        models="decoder: a ROUTER whose weights end at the memory's last word is refused",
        file="scoville/rtl/decoder.py",
        edits=(Edit("bad_router = c.addr + cfg.router_words > (1 << lin.addr_bits)",
                    "bad_router = c.addr + cfg.router_words >= (1 << lin.addr_bits)"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA, also=Kind.STATUS,
        why="top_router's ROUTER ends at the last word: refused, its words are never asked "
            "for (the requests are compared before the answers)",
    ),
    Mutation(
        name="decoder-router-count-checked",
        models="decoder: a ROUTER's count (which it ignores) of 0 is refused as an empty range",
        file="scoville/rtl/decoder.py",
        edits=(Edit("((c.count == 0) & (~attn | walks) & ~router)",
                    "((c.count == 0) & (~attn | walks))"),),
        block="decoder", params=DECODER, tests=("test_edges",),
        expect=Kind.DATA, also=Kind.STATUS,
        why="every layer's ROUTER has a count of 0: refused, its router's words are never "
            "asked for (the requests are compared before the answers)",
    ),
)




def by_name() -> dict[str, Mutation]:
    return {mu.name: mu for mu in MUTATIONS}


def mutate(mutation: Mutation, text: str) -> str:
    """``text`` (the content of ``mutation.file``) with the mutation's edits applied.

    Raises
    ------
    MutationError
        A piece of source text does not occur exactly once; the message names the mutation.
    """
    for k, edit in enumerate(mutation.edits):
        found = text.count(edit.old)
        if found != 1:
            first = edit.old.strip().splitlines()[0]
            raise MutationError(
                f"mutation {mutation.name}: edit {k + 1} of {len(mutation.edits)} expects its "
                f"text once in {mutation.file}, found it {found} times: {first!r}"
            )
        text = text.replace(edit.old, edit.new)
    return text


# The copy of the repository, and how a subprocess imports it.


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


def describe_tree(rev: str | None) -> str:
    """What a snapshot holds, in words (no paths)."""
    if rev is not None:
        return f"commit {_git('rev-parse', '--short', rev).strip()}"
    head = _git("rev-parse", "--short", "HEAD").strip()
    dirty = _git("status", "--porcelain", "--untracked-files=no").strip()
    return f"the working tree at {head}" + (" with uncommitted changes" if dirty else "")


def snapshot(dest: Path, rev: str | None) -> None:
    """Copy the repository into ``dest``: commit ``rev``, or the working tree as ``git`` sees
    it (tracked files as they are now, and untracked files that are not ignored)."""
    dest.mkdir(parents=True)
    if rev is not None:
        archive = subprocess.run(["git", "archive", "--format=tar", rev], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    else:
        listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        for name in filter(None, listed.split("\0")):
            source = ROOT / name
            if source.is_file():  # a tracked file deleted in the working tree is skipped
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


#: The packages a worker must import from the copy: the one package, and the parts a mutation
#: edits or a simulation runs.
PACKAGES = ("scoville", "scoville.rtl", "scoville.sim", "scoville.testbenches")


# One simulation, in a subprocess that imports a copy.


def worker(job_file: Path) -> int:
    """Run one job (a JSON file written by :func:`run_job`) and write its result beside it.

    Checks first that every package of the mapping is imported from the copy."""
    job = json.loads(job_file.read_text())
    tree = Path(job["tree"]).resolve()
    out: dict[str, Any] = {"passed": False, "tests": [], "errors": []}
    for name in job["packages"]:
        origin = Path(importlib.import_module(name).__file__).resolve()
        if not origin.is_relative_to(tree):
            out["errors"].append(f"{name} was imported from {origin}, not from the copy")
    if out["errors"]:
        Path(job["result"]).write_text(json.dumps(out))
        return 1
    from scoville.blocks import get_block, parse_params
    from scoville.sim import flow
    from scoville.sim.tools import ToolError, require

    block = get_block(job["block"])
    config, workload = parse_params(block, job["params"])
    out["design_key"] = flow.design_key(block, config)
    start = time.monotonic()
    try:
        out["sim_version"] = require(job["sim"]).version_str
        result = flow.run(block, config, workload, job["sim"], seed=job["seed"],
                          tests=job["tests"])
    except (ToolError, flow.FlowError) as err:
        out["errors"].append(str(err).splitlines()[0])
    else:
        out.update(
            passed=result.passed,
            tests=[{"name": t.name, "passed": t.passed, "message": t.message}
                   for t in result.tests],
            errors=[e.splitlines()[0] for e in result.errors],
            build=Path(result.build_dir).name,
            build_reused=result.build_reused,
            cycles={name: m.get("cycles") for name, m in result.metrics.items()},
        )
        out["foreign"] = _foreign_tests(Path(result.run_dir) / "results.xml", tree)
    out["seconds"] = round(time.monotonic() - start, 1)
    Path(job["result"]).write_text(json.dumps(out))
    return 0


def _foreign_tests(results: Path, tree: Path) -> list[str]:
    """The simulator's Python imported the testbench too: cocotb's results name each test's
    file, which must be in the copy."""
    if not results.is_file():
        return []
    errors = []
    for case in ET.parse(results).getroot().iter("testcase"):
        for prop in case.iter("property"):
            if prop.get("name") == "file" and not Path(prop.get("value")).resolve(
            ).is_relative_to(tree):
                errors.append(f"the simulator ran {case.get('name')} from {prop.get('value')}, "
                              "not from the copy")
    return errors


@dataclass
class Outcome:
    """What one run of one tree on one simulator gave.

    ``status`` is ``caught`` (a test failed), ``passed`` (every test passed: a baseline's
    success, a mutation's survival), ``otherwise`` (a mutation's earliest failure is not the
    kind it expects), ``error`` or ``skipped``. ``kind`` and ``stream``: the earliest
    failure's kind and, for a timing failure, its stream."""

    status: str
    failed: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    message: str = ""
    seconds: float = 0.0
    design_key: str = ""
    build: str = ""
    sim_version: str = ""
    cycles: dict[str, int | None] = field(default_factory=dict)
    reused: bool | None = None
    kind: Kind | None = None
    stream: str | None = None


_DESCRIBE = re.compile(r"^block \S+ \S+?\(.*?\) \S+?\(.*?\) seed \d+: ")


def first_line(message: str, test: str, width: int = 200) -> str:
    """A test's failure message as one line: the assertion's first line, without the run's
    description (block, parameters, seed) and the test's name that the testbenches' messages
    start with."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    line = without_kind(lines[0]) if lines else ""
    line = _DESCRIBE.sub("", line).removeprefix(f"{test}: ")
    return line if len(line) <= width else line[: width - 3] + "..."


#: Workers running now. Each leads a process group of its own (the simulator is its child),
#: so that a timeout or an interrupt can end the whole group.
_RUNNING: set[subprocess.Popen] = set()


def _end(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_worker(script: Path, tree: Path, job: dict, tag: str,
               timeout: float) -> tuple[dict | None, str, float, str]:
    """Run ``script --worker JOB`` on ``job`` (written with its ``result`` file) in a
    subprocess that imports ``tree`` (``PYTHONPATH`` and working folder the copy); a timeout
    ends the subprocess's whole process group. Returns ``(result, error, seconds, log)``: the
    worker's result (None when it wrote none: ``error`` says why) and its log's name."""
    work = tree.parent / "jobs"
    work.mkdir(exist_ok=True)
    job_file, result_file, log = (work / f"{tag}.{ext}" for ext in ("json", "out", "log"))
    job_file.write_text(json.dumps({**job, "tree": str(tree), "result": str(result_file)}))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    start = time.monotonic()
    with open(log, "w") as handle:
        proc = subprocess.Popen([sys.executable, str(script), "--worker", str(job_file)],
                                cwd=tree, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)
        _RUNNING.add(proc)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end(proc)
            return None, f"timed out after {timeout:g} s", time.monotonic() - start, log.name
        finally:
            _RUNNING.discard(proc)
    seconds = time.monotonic() - start
    if not result_file.is_file():
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return None, f"worker exited {proc.returncode}: {tail[0]}", seconds, log.name
    return json.loads(result_file.read_text()), "", seconds, log.name


def run_job(tree: Path, block: str, params: dict, sim: str, seed: int, tests: list[str],
            timeout: float, tag: str) -> Outcome:
    """Simulate ``tree`` in a subprocess that imports it (:func:`run_worker`)."""
    res, error, seconds, _ = run_worker(
        Path(__file__).resolve(), tree, {"block": block, "params": params, "sim": sim,
                                         "seed": seed, "tests": tests,
                                         "packages": list(PACKAGES)},
        f"{tag}-{sim}", timeout)
    if res is None:
        return Outcome("error", message=error, seconds=seconds)
    outcome = Outcome("error", seconds=seconds,
                      design_key=res.get("design_key", ""), build=res.get("build", ""),
                      sim_version=res.get("sim_version", ""), reused=res.get("build_reused"))
    ran = {t["name"]: t for t in res["tests"]}
    outcome.failed = [name for name in tests if name in ran and not ran[name]["passed"]]
    outcome.passed = [name for name in tests if name in ran and ran[name]["passed"]]
    outcome.cycles = res.get("cycles", {})
    missing = [name for name in tests if name not in ran]
    if res.get("foreign"):
        outcome.failed = []
        outcome.message = res["foreign"][0]
    elif outcome.failed:
        outcome.status = "caught"
        message = ran[outcome.failed[0]]["message"]
        outcome.kind, outcome.stream = kind_of(message), stream_of(message)
        outcome.message = first_line(message, outcome.failed[0])
    elif res["errors"]:
        outcome.message = res["errors"][0]
    elif missing:
        outcome.message = f"no result for {', '.join(missing)}"
    elif res["passed"]:
        outcome.status = "passed"
    else:
        outcome.message = "the run did not pass, but no test failed"
    return outcome


# The whole run.


def _against(tests, cycles: dict, unmutated: dict) -> str:
    """What a surviving mutation changed, as far as cycle counts tell."""
    moved = [f"{t} {cycles.get(t)} cycles, unmutated {unmutated.get(t)}" for t in tests
             if cycles.get(t) != unmutated.get(t)]
    if moved:
        return "the bug showed (" + "; ".join(moved) + ") but no check failed"
    return "cycle counts as unmutated (" + ", ".join(
        f"{t} {cycles.get(t)}" for t in tests) + ")"


def _params_text(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "defaults"


def _params_key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def _group(mu: Mutation) -> tuple[str, str]:
    return mu.block, _params_key(mu.params)


def _stored(group: tuple[str, str]) -> str:
    """A baseline group's key in the store (JSON keys are strings)."""
    return " ".join(group)


def prepare(mutations: list[Mutation], rev: str | None, scratch: Path):
    """The unmutated copy and one mutated copy per mutation, all made before anything runs
    (so that no copy holds another's compiled files); returns ``(base, {name: tree})``."""
    base = scratch / "baseline" / "tree"
    snapshot(base, rev)
    trees = {}
    for mu in mutations:
        mutated = mutate(mu, (base / mu.file).read_text())
        tree = scratch / mu.name / "tree"
        shutil.copytree(base, tree, symlinks=True)
        (tree / mu.file).write_text(mutated)
        trees[mu.name] = tree
    return base, trees


def baseline_groups(mutations: list[Mutation]) -> dict[tuple[str, str], dict[str, Any]]:
    """One unmutated run per block and parameter set, on every test its mutations run and
    every simulator they run on."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for mu in mutations:
        entry = groups.setdefault(_group(mu), {"params": mu.params, "tests": [], "sims": []})
        entry["tests"] += [t for t in mu.tests if t not in entry["tests"]]
        entry["sims"] += [s for s in mu.simulators() if s not in entry["sims"]]
    return groups


#: Outcomes from the worst to the best, as one simulator's outcome over the seeds takes them.
_WORST_FIRST = ("passed", "error", "skipped", "otherwise", "caught")


def _over_seeds(outcomes: dict[int, Outcome], good: str) -> Outcome:
    """One simulator's outcome over the seeds (in order): the first seed's when every seed
    gave ``good``, else the first seed's worst (a mutation's survival before an error before a
    catch of another kind; a baseline's failure), its message naming its seed; whether its
    build was found in the cache is the first seed's (the one that built it)."""
    first = next(iter(outcomes.values()))
    bad = [(seed, o) for seed, o in outcomes.items() if o.status != good]
    if not bad:
        return first
    rank = {status: k for k, status in enumerate(_WORST_FIRST)}
    seed, outcome = min(bad, key=lambda item: rank.get(item[1].status, -1))
    outcome.message = f"seed {seed}: {outcome.message}"
    outcome.reused = first.reused
    return outcome


def run_all(mutations: list[Mutation], sims: list[str], seeds: list[int], jobs: int,
            rev: str | None, timeout: float, scratch: Path):
    """Copy, mutate, simulate the baselines and then the mutations, each on every simulator
    and stimulus seed; returns ``(baselines, results)``: ``{(block, params): {"params",
    "tests", sim: Outcome}}`` and ``{name: {sim: Outcome}}``, each simulator's outcome over
    all the seeds (:func:`_over_seeds`: a baseline passes, a mutation is caught, only if it
    does on every seed)."""
    base, trees = prepare(mutations, rev, scratch)
    baselines = baseline_groups(mutations)
    base_jobs = [(n, group, entry, sim) for n, (group, entry) in enumerate(baselines.items())
                 for sim in sims if sim in entry["sims"]]
    mutant_jobs = [(mu, sim) for mu in mutations for sim in sims if sim in mu.simulators()]
    total = len(seeds) * (len(base_jobs) + len(mutant_jobs))
    done = 0
    lock = threading.Lock()

    def report(what: str, sim: str, seed: int, outcome: Outcome) -> None:
        nonlocal done
        with lock:
            done += 1
            detail = f" by {', '.join(outcome.failed)}" if outcome.failed else ""
            note = f": {outcome.message}" if outcome.message else ""
            print(f"[{done}/{total}] {what} on {sim}, seed {seed}: {outcome.status}{detail} "
                  f"({outcome.seconds:.0f} s){note}", file=sys.stderr, flush=True)

    stop = threading.Event()

    def seed_by_seed(tree: Path, block: str, params: dict, sim: str, tests: list[str],
                     tag: str, what: str, good: str, judge=None) -> dict[int, Outcome]:
        """One copy on one simulator, its seeds one after another (the first builds it; the
        others find the build in the cache) until one does not give ``good`` (the later
        seeds could not change the outcome) or the run is stopped."""
        got = {}
        for seed in seeds:
            if stop.is_set():
                break
            try:
                outcome = run_job(tree, block, params, sim, seed, tests, timeout,
                                  f"{tag}-seed{seed}")
                got[seed] = judge(seed, outcome) if judge else outcome
            except Exception as err:   # one copy's fault, not the run's
                got[seed] = Outcome("error", message=f"{type(err).__name__}: {err}")
            report(what, sim, seed, got[seed])
            if got[seed].status != good:
                break
        return got

    def judged(mu: Mutation, sim: str, seed: int, outcome: Outcome) -> Outcome:
        base_outcome = base_runs[(_group(mu), sim)][seed]
        if outcome.design_key and outcome.design_key == base_outcome.design_key:
            outcome.status, outcome.message = "error", (
                "same design key as the baseline: the build cache would not see the "
                "mutation")
        elif outcome.build and outcome.build == base_outcome.build:
            outcome.status, outcome.message = "error", (
                "same Verilog as the baseline: the mutation changes nothing")
        elif outcome.status == "passed":
            outcome.message = _against(mu.tests, outcome.cycles, base_outcome.cycles)
        elif outcome.status == "caught":
            wrong = mu.judge(outcome.kind, outcome.stream)
            if wrong is not None:
                outcome.status, outcome.message = "otherwise", (
                    f"{wrong}: {outcome.message}")
        return outcome

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = {}
        base_runs: dict[tuple, dict[int, Outcome]] = {}
        for n, group, entry, sim in base_jobs:
            fut = pool.submit(seed_by_seed, base, group[0], entry["params"], sim,
                              entry["tests"], f"baseline{n}",
                              f"baseline {group[0]} ({_params_text(entry['params'])})",
                              "passed")
            futures[fut] = (group, sim)
        for fut in concurrent.futures.as_completed(futures):
            base_runs[futures[fut]] = fut.result()
        for (group, sim), outcomes in base_runs.items():
            baselines[group][sim] = _over_seeds(outcomes, "passed")

        mutant_runs: dict[tuple[str, str], dict[int, Outcome]] = {}
        futures = {}
        for mu, sim in mutant_jobs:
            if baselines[_group(mu)][sim].status != "passed":
                mutant_runs[(mu.name, sim)] = {seed: Outcome(
                    "skipped", message="its baseline failed") for seed in seeds}
                with lock:
                    done += len(seeds)
                continue
            fut = pool.submit(seed_by_seed, trees[mu.name], mu.block, mu.params, sim,
                              list(mu.tests), mu.name, mu.name, "caught",
                              lambda seed, o, mu=mu, sim=sim: judged(mu, sim, seed, o))
            futures[fut] = (mu.name, sim)
        for fut in concurrent.futures.as_completed(futures):
            mutant_runs[futures[fut]] = fut.result()
    except BaseException:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(_RUNNING):
            _end(proc)
        raise
    pool.shutdown()
    results: dict[str, dict[str, Outcome]] = {mu.name: {} for mu in mutations}
    for (name, sim), outcomes in mutant_runs.items():
        results[name][sim] = _over_seeds(outcomes, "caught")
    return baselines, results


def _cell(outcome: Outcome | None, *, baseline: bool = False) -> str:
    if outcome is None:
        return "not run"
    text = outcome.message.replace("|", "\\|").replace("`", "'")
    if outcome.status in ("caught", "otherwise"):
        tests = ", ".join(f"`{t}`" for t in outcome.failed)
        also = ", ".join(f"`{t}`" for t in outcome.passed)
        also = f" ({also} passed)" if also else ""
        verb = {"caught": "caught", "otherwise": "**caught otherwise**"}[outcome.status]
        return f"{'**failed**' if baseline else verb} by {tests}{also}: {text}"
    if outcome.status == "passed":
        return "passed" if baseline else f"**survived**: {text}"
    return f"**{outcome.status}**: {text}"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} minutes"


#: The outcome fields a report keeps (:func:`record`).
_KEPT = ("status", "failed", "passed", "message", "sim_version", "reused")


def record(outcome: Outcome) -> dict[str, Any]:
    """What the store keeps of one outcome: enough to write its cell."""
    return {k: getattr(outcome, k) for k in _KEPT}


def recorded(entry: dict[str, Any]) -> Outcome:
    return Outcome(**{k: entry[k] for k in _KEPT if k in entry})


def new_store() -> dict[str, Any]:
    return {"runs": [], "mutations": {}, "baselines": {}}


def add_run(store: dict[str, Any], command: str, tree: str, seeds: list[int],
            sims: list[str], mutations: list[Mutation], baselines: dict, results: dict,
            wall: float) -> dict[str, Any]:
    """``store`` with this run's outcomes in place of any earlier ones of the same mutation
    and simulator (but a ``skipped`` one, its baseline failed, in place of none) or baseline
    and simulator (each with the tests it ran), and the run listed (numbered after the
    last); a mutation's outcome keeps its :meth:`Mutation.fingerprint`. Entries of mutations
    no longer in :data:`MUTATIONS` are dropped, and runs no entry names. Returns ``store``
    (changed in place)."""
    runs = [b[s] for b in baselines.values() for s in sims if s in b]
    runs += [results[mu.name][s] for mu in mutations for s in sims if s in results[mu.name]]
    n = max((r["run"] for r in store["runs"]), default=0) + 1
    ran = [s for s in sims if any(s in b for b in baselines.values())
           or any(s in results[mu.name] for mu in mutations)]
    store["runs"].append({
        "run": n, "command": command, "tree": tree, "seeds": list(seeds), "sims": ran,
        "mutations": len(mutations), "seconds": round(wall), "builds": len(runs),
        "reused": sum(bool(o.reused) for o in runs)})
    for mu in mutations:
        entry = store["mutations"].setdefault(mu.name, {})
        for sim, outcome in results[mu.name].items():
            if outcome.status != "skipped" or sim not in entry:
                entry[sim] = {**record(outcome), "run": n, "fingerprint": mu.fingerprint()}
    for group, b in baselines.items():
        entry = store["baselines"].setdefault(_stored(group), {
            "block": group[0], "params": b["params"], "tests": []})
        entry["tests"] += [t for t in b["tests"] if t not in entry["tests"]]
        for sim in (s for s in sims if s in b):
            entry[sim] = {**record(b[sim]), "run": n, "tests": list(b["tests"])}
    names = {mu.name for mu in MUTATIONS}
    store["mutations"] = {k: v for k, v in store["mutations"].items() if k in names}
    groups = {_stored(_group(mu)) for mu in MUTATIONS}
    store["baselines"] = {k: v for k, v in store["baselines"].items() if k in groups}
    used = {e["run"] for kind in ("mutations", "baselines") for v in store[kind].values()
            for e in v.values() if isinstance(e, dict) and "run" in e}
    store["runs"] = [r for r in store["runs"] if r["run"] in used]
    return store


def _command_text(command: str) -> str:
    """A run's command as the report shows it: more than three ``--only NAME`` as their
    count (the cells that name the run say which)."""
    words = shlex.split(command)
    only = [w for k, w in enumerate(words) if k and words[k - 1] == "--only"]
    if len(only) <= 3:
        return f"`{command}`"
    rest = [w for k, w in enumerate(words) if w != "--only" and (not k or words[k - 1] != "--only")]
    return f"`{shlex.join(rest)}` with `--only` for each of {len(only)} mutations"


def render(store: dict[str, Any], only: list[Mutation] | None = None) -> str:
    """The report of ``store``: a row for every mutation of :data:`MUTATIONS` (or of ``only``;
    ``not run`` where no run has simulated it; ``stale`` where its definition changed after
    its run, not counted), each cell naming the run that gave it."""
    sims = list(SIMULATORS)
    mutations = list(only or MUTATIONS)
    results = {mu.name: store["mutations"].get(mu.name) or {} for mu in mutations}

    def state(mu: Mutation, sim: str) -> str:
        entry = results[mu.name].get(sim)
        if sim not in mu.simulators():
            return "not its simulator"
        if entry is None:
            return "not run"
        if entry.get("fingerprint") != mu.fingerprint():
            return "stale"
        return entry["status"]

    def cell(mu: Mutation, sim: str) -> str:
        st, entry = state(mu, sim), results[mu.name].get(sim)
        if st == "not its simulator":
            return "not run: Verilator alone (`VERILATOR_ONLY`)"
        if entry is None:
            return "not run"
        text = f"{_cell(recorded(entry))} (run {entry['run']})"
        return (f"**stale** (its definition changed after run {entry['run']}): {text}"
                if st == "stale" else text)

    status = {(mu.name, sim): state(mu, sim) for mu in mutations for sim in sims}
    ran_on = {sim: [mu for mu in mutations if sim in mu.simulators()] for sim in sims}
    caught = {sim: sum(status[mu.name, sim] == "caught" for mu in ran_on[sim]) for sim in sims}
    run_count = {sim: sum(status[mu.name, sim] not in ("not run", "stale")
                          for mu in ran_on[sim]) for sim in sims}
    stale = sum(any(status[mu.name, sim] == "stale" for sim in sims) for mu in mutations)
    everywhere = sum(all(status[mu.name, sim] == "caught" for sim in mu.simulators())
                     for mu in mutations)
    otherwise = {sim: sum(status[mu.name, sim] == "otherwise" for mu in mutations)
                 for sim in sims}
    baselines = store["baselines"]
    passed = {sim: sum(b.get(sim, {}).get("status") == "passed" for b in baselines.values())
              for sim in sims}
    kinds = {kind: sum(mu.expect is kind for mu in mutations) for kind in Kind}
    gaps = [f"`{mu.name}`" for mu in mutations if mu.gap]
    versions = {sim: sorted({e[sim]["sim_version"] for kind in ("mutations", "baselines")
                             for e in store[kind].values()
                             if sim in e and e[sim].get("sim_version")}) for sim in sims}
    m = len(mutations)
    lines = [
        "# Verification: mutation testing",
        "",
        "Made by `scripts/mutants.py` (do not edit by hand): its runs' outcomes are kept in "
        "`docs/verification.json`; a run with `--merge` replaces the outcomes of the "
        "mutations it ran (a block's with `--block NAME`) and this report is written from "
        "all of them, each cell naming the run it comes from (`not run`: no run has "
        "simulated it yet; `stale`: its definition (file, edits, parameters, tests, expected "
        "kind) changed after its run; the decoder's mutations run on Verilator alone: Icarus "
        "interprets the whole decoder's wide datapaths for many minutes a run):",
        "",
        "| run | command | tree | seeds | simulators | mutations | took | builds found in "
        "the build cache |",
        "|---:|---|---|---|---|---:|---:|---:|",
    ]
    for r in store["runs"]:
        lines.append(f"| {r['run']} | {_command_text(r['command'])} | {r['tree']} | "
                     f"{', '.join(map(str, r['seeds']))} | {', '.join(r['sims'])} | "
                     f"{r['mutations']} | {_duration(r['seconds'])} | "
                     f"{r['reused']} of {r['builds']} |")
    lines += [
        "",
        "Simulators: " + "; ".join(f"{sim} {', '.join(versions[sim]) or '(version unknown)'}"
                                   for sim in sims) + ".",
        "",
        "Each mutation is a named bug put into a copy of the RTL (`scripts/mutants.py` holds "
        "the exact source text it replaces). The copy is simulated with the block parameters "
        "and on the cocotb tests listed below, the narrowest that should catch it; a mutation "
        "names the kind of failure it expects (*expects*: a wrong value (`data`), a `status`, "
        "a handshake's cycle (`timing`, on the stream named), a `counter`, the stream "
        "`protocol`), and is *caught* on a simulator when its earliest failure (the first "
        "failing test's first failed check, as its message's `[kind]` says) is of that kind "
        "(or of the second kind a few name, each saying why); "
        "*caught otherwise* when a test fails in another way (a test that only timed out among "
        "them: a timeout is never the kind expected); it *survives* when every test passes. "
        "Timing mutations keep data and the stream protocol correct and count their extra "
        "cycles in the block's own stall counters, so only a model that predicts every "
        "handshake can catch them. A run that does not end is explained by its earliest "
        "evidence before it is called a timeout: the outputs so far against the golden "
        "model's, then the handshakes so far against the timed model's (one it put long "
        "before the deadline and the RTL never made). Each block and parameter set is also "
        "simulated unmutated (the baseline), which must pass.",
        "",
        f"**{everywhere} of {m} mutations caught as expected on every simulator they run on** ("
        + ", ".join(f"{sim}: {caught[sim]} of {len(ran_on[sim])}, {run_count[sim]} run"
                    for sim in sims)
        + f"; stale: {stale}; caught otherwise: "
        + ", ".join(f"{sim} {otherwise[sim]}" for sim in sims)
        + "; each on the seeds its run names: a mutation counts as caught on a simulator "
        "when it is caught as expected on every seed). The runs were made at different "
        "trees (the table above): a change to the RTL after a run is not checked until its "
        "mutations run again. Expected kinds: "
        + ", ".join(f"{kind.value} {n}" for kind, n in kinds.items() if n)
        + "; baselines passed: "
        + ", ".join(f"{sim} {passed[sim]} of {sum(sim in b for b in baselines.values())}"
                    for sim in sims) + "."
        + (f" Known gaps of the suite (each says why below): {', '.join(gaps)}." if gaps
           else ""),
        "",
        "## Mutations",
        "",
        "| mutation | file | expects | what it models | " + " | ".join(sims) + " |",
        "|---" * (4 + len(sims)) + "|",
    ]
    for mu in mutations:
        cells = [cell(mu, sim) for sim in sims]
        if mu.gap:
            cells = [c if c.startswith("caught by") else f"**known gap** ({mu.gap}): {c}"
                     for c in cells]
        lines.append(f"| `{mu.name}` | `{mu.file}` | {mu.expects()} | {mu.models} | "
                     + " | ".join(cells) + " |")
    lines += [
        "",
        "## How each mutation is run",
        "",
        "| mutation | block | parameters | tests | why these |",
        "|---|---|---|---|---|",
    ]
    for mu in mutations:
        tests = ", ".join(f"`{t}`" for t in mu.tests)
        lines.append(f"| `{mu.name}` | `{mu.block}` | {_params_text(mu.params)} | {tests} | "
                     f"{mu.why} |")
    lines += [
        "",
        "## Baselines (unmutated)",
        "",
        "| block | parameters | tests | " + " | ".join(sims) + " |",
        "|---" * (3 + len(sims)) + "|",
    ]
    def base_cell(entry: dict, sim: str) -> str:
        if sim not in entry:
            return "not run"
        own = entry[sim].get("tests", entry["tests"])
        on = "" if own == entry["tests"] else " on " + ", ".join(f"`{t}`" for t in own)
        return f"{_cell(recorded(entry[sim]), baseline=True)} (run {entry[sim]['run']}{on})"

    # In the order of the mutations, each parameter set as its first mutation writes it (the
    # store's keys are sorted).
    first: dict[str, tuple[int, dict]] = {}
    for k, mu in enumerate(MUTATIONS):
        first.setdefault(_stored(_group(mu)), (k, mu.params))
    for key, entry in sorted(baselines.items(),
                             key=lambda item: first.get(item[0], (len(MUTATIONS),))[0]):
        params = first.get(key, (0, entry["params"]))[1]
        tests = ", ".join(f"`{t}`" for t in entry["tests"])
        cells = [base_cell(entry, sim) for sim in sims]
        lines.append(f"| `{entry['block']}` | {_params_text(params)} | {tests} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_store(store: dict[str, Any], report: Path,
                only: list[Mutation] | None = None) -> None:
    """``report`` (rendered) and its store beside it (``.json``)."""
    report.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(store, indent=1, sort_keys=True) + "\n"
    report.with_suffix(".json").write_text(text)
    report.write_text(render(json.loads(text), only))   # as it reads back


def choose(only: list[str], blocks: list[str]) -> list[Mutation]:
    """The mutations named (in the order given) and then those of the blocks named (in the
    list's order), each once; every mutation when neither names any."""
    if not only and not blocks:
        return list(MUTATIONS)
    names = by_name()
    chosen = [names[n] for n in dict.fromkeys(only)]
    return chosen + [mu for mu in MUTATIONS if mu.block in blocks and mu not in chosen]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", metavar="NAME",
                   help="run this mutation only (repeatable); --list shows the names")
    p.add_argument("--block", action="append", metavar="NAME",
                   help="run this block's mutations only (repeatable)")
    p.add_argument("--render", action="store_true",
                   help=f"write {DEFAULT_OUT} from {STORE} (a mutation's words changed) and "
                        "exit, running nothing")
    p.add_argument("--merge", action="store_true",
                   help=f"put this run's outcomes into {STORE} in place of earlier ones of "
                        f"the same mutations and write {DEFAULT_OUT} from all of them")
    p.add_argument("--sim", choices=(*SIMULATORS, "both"), default="both")
    p.add_argument("--seed", type=int, nargs="+", default=list(SEEDS),
                   help="stimulus seeds; a mutation is caught only if it is on every one "
                        f"(default {' '.join(map(str, SEEDS))})")
    p.add_argument("--jobs", type=int, default=1, help="simulations at once (default 1)")
    p.add_argument("--out", help=f"report file of this run alone, its outcomes beside it "
                                 f"(.json) (default {DEFAULT_OUT} when every mutation runs; "
                                 "none with --only or --block)")
    p.add_argument("--rev", help="simulate this commit's tree instead of the working tree")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per simulation")
    p.add_argument("--keep", action="store_true", help="keep the copies and logs; print where")
    p.add_argument("--list", action="store_true", help="list the mutations and exit")
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    if args.render:
        write_store(json.loads((ROOT / STORE).read_text()), ROOT / DEFAULT_OUT)
        print(f"wrote {DEFAULT_OUT} from {STORE}", file=sys.stderr)
        return 0
    if args.list:
        for mu in MUTATIONS:
            print(f"{mu.name:<34} {mu.block:<9} {mu.models}")
        return 0
    names = by_name()
    unknown = [n for n in args.only or [] if n not in names]
    if unknown:
        p.error(f"unknown mutation {', '.join(unknown)}; allowed: {', '.join(names)}")
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    blocks = {mu.block for mu in MUTATIONS}
    unknown = [b for b in args.block or [] if b not in blocks]
    if unknown:
        p.error(f"unknown block {', '.join(unknown)}; allowed: {', '.join(sorted(blocks))}")
    if args.merge and args.out:
        p.error("--merge writes the report; give --merge or --out, not both")
    mutations = choose(args.only or [], args.block or [])
    chosen = bool(args.only or args.block)
    sims = list(SIMULATORS) if args.sim == "both" else [args.sim]
    out = args.out or (DEFAULT_OUT if args.merge or not chosen else None)
    command = "python scripts/mutants.py " + shlex.join(argv if argv is not None
                                                          else sys.argv[1:])
    tree = describe_tree(args.rev)
    scratch = Path(tempfile.mkdtemp(prefix="scoville-mutants-"))
    start = time.monotonic()
    try:
        baselines, results = run_all(mutations, sims, list(dict.fromkeys(args.seed)),
                                     args.jobs, args.rev,
                                     args.timeout, scratch)
    except MutationError as err:
        sys.exit(f"mutants: {err}")
    finally:
        if args.keep:
            print(f"copies and logs kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    wall = time.monotonic() - start
    if out:
        path = Path(args.out) if args.out else ROOT / DEFAULT_OUT
        store = (json.loads((ROOT / STORE).read_text()) if args.merge and (ROOT / STORE).is_file()
                 else new_store())
        add_run(store, command.strip(), tree, list(dict.fromkeys(args.seed)), sims, mutations,
                baselines, results, wall)
        write_store(store, path, None if args.merge or not args.out else mutations)
        print(f"wrote {out} (and its outcomes, .json)", file=sys.stderr)
    bad_base = [(block, sim) for (block, _), b in baselines.items() for sim in sims
                if sim in b and b[sim].status != "passed"]
    ran = [(mu, sim) for mu in mutations for sim in sims if sim in results[mu.name]]
    missed = [(mu, sim) for mu, sim in ran if results[mu.name][sim].status != "caught"]
    survivors = [(mu.name, sim) for mu, sim in missed if not mu.gap]
    closed = [mu.name for mu in mutations if mu.gap and results[mu.name]
              and all(o.status == "caught" for o in results[mu.name].values())]
    caught = len(ran) - len(missed)
    print(f"{caught} of {len(ran)} mutation runs caught as expected "
          f"({len(missed) - len(survivors)} more are known gaps); {len(bad_base)} baseline runs "
          f"failed; {_duration(wall)}", file=sys.stderr)
    for name in closed:
        print(f"{name}: caught as expected everywhere: its gap is closed, remove gap=",
              file=sys.stderr)
    return 1 if bad_base or survivors or closed else 0


if __name__ == "__main__":
    sys.exit(main())
