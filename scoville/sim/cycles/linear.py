"""Cycle model of the ``linear`` block (:class:`scoville.rtl.linear.Linear`).

:func:`timing` is the block's picture in unit models (:mod:`scoville.sim.cycles.unit`), one per
RTL unit, joined by wires as the RTL connects them and stepped together cycle by cycle: the
sequencer, the x store and the weight requests (:mod:`~scoville.sim.cycles.linear_parts`),
the fetch engine and the memory (:mod:`~scoville.sim.cycles.fetch`,
:mod:`~scoville.sim.cycles.memory`), the weight tiles
(:mod:`~scoville.sim.cycles.moe_weights`) and the array (:mod:`~scoville.sim.cycles.gemm`),
whose rows pass the bias adders to ``o`` in the cycle they leave. :func:`fast` is the fast
path.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

from scoville.rtl.gemm import COUNTERS as GEMM_COUNTER_LAYOUT
from scoville.rtl.linear import OWN_COUNTERS

from . import fetch as fetch_timed
from . import gemm as gemm_timed
from .linear_parts import Sequencer, TileRequests, XStore, check
from .memory import MemoryAgent
from .moe_weights import TileStream, WeightTiles
from .stream import ALWAYS, Consumer, Producer, Schedule, Source, Timing
from .unit import Wire, run

__all__ = ["COUNTERS", "Parts", "fast", "timing"]

#: Every counter of the block, as the testbench reads them: the array's, then its own.
COUNTERS = (*(f"array.{c}" for c, _ in GEMM_COUNTER_LAYOUT), *OWN_COUNTERS)


def timing(config, commands, sources: dict[str, Source] | None = None,
           ready: dict[str, Schedule] | None = None,
           memory: MemoryAgent | None = None) -> Timing:
    """The cycle of every handshake on ``cmd``, ``x``, ``req``, ``rdata`` and ``o`` for
    ``commands`` (each the ``cmd`` beat's fields: ``tokens``, ``k``, ``n``, ``addr``,
    ``bias``; :attr:`scoville.sim.golden.linear.Command.fields`), ``sources`` of ``cmd`` and
    ``x``, ``ready`` of ``o`` and ``req``, the memory answering as ``memory`` does (a fresh
    :class:`~scoville.sim.cycles.memory.MemoryAgent`; the model steps it)."""
    cfg, commands, sources, ready = config, list(commands), sources or {}, ready or {}
    good = [c for c in commands if check(cfg, c) == 0]
    n_out = sum(c["tokens"] * (c["n"] // cfg.array.cols) for c in good)
    cmd = Producer(sources.get("cmd", Source()), len(commands), commands)
    x = Producer(sources.get("x", Source()), sum(c["tokens"] * c["k"] // 32 for c in good))
    o = Consumer(ready.get("o", ALWAYS))
    req, rdata = Wire(), Wire()
    mem = memory or MemoryAgent(1, cfg.weight_port_bits // 8, cfg.weight_port_bits)
    mem.attach(req, rdata, ready.get("req", ALWAYS))
    block = Parts(cfg, cmd, x, o, req, rdata)

    def cycle(t: int) -> int:
        req.set(block.fetch.req_valid, mem.req_ready(t), block.fetch.req_size)
        rdata.set(mem.offers(t), block.fetch.rdata_ready)
        block.wires(t)
        block.step(t)
        mem.step(t)
        return t + 1

    run("linear", cycle, lambda: len(o.cycles) == n_out and cmd.sent == len(commands),
        50_000_000, lambda: {**block.parts(), "mem": mem})
    own = {"weight_words": len(mem.cycles), "tiles": block.tiles_run,
           "rejected": block.seq.refused}
    counters = {**{f"array.{c}": v for c, v in block.array.counters.items()}, **own}
    return Timing({"cmd": cmd.cycles, "x": x.cycles, "req": req.cycles, "rdata": mem.cycles,
                   "o": o.cycles}, counters)


class Parts:
    """The block's unit models and the wires between them, as the RTL connects them, between
    its ports: ``cmd`` and ``x`` (input ports), ``o`` (an output port) and the weight port's
    ``req`` and ``rdata`` (wires the caller sets from :attr:`fetch` and the memory, or a
    memory mux, before :meth:`wires`). A composed block steps it beside its other parts: each
    cycle :meth:`wires`, then :meth:`step`."""

    def __init__(self, cfg, cmd, x, o, req, rdata):
        C, R = cfg.array.cols, cfg.array.rows
        self.cfg, self.o = cfg, o
        self.w = w = SimpleNamespace(**{name: Wire() for name in (
            "fcmd", "tile", "words", "g_cmd", "g_a", "g_b", "feed", "xcmd")})
        self.seq = Sequencer(cfg, cmd)
        self.xs = XStore(R, x, w.xcmd, w.g_a)
        self.requests = TileRequests(cfg, w.fcmd, w.tile)
        self.fetch = fetch_timed.Engine(cfg.fetch, w.fcmd, req, rdata, w.words)
        self.tiles = WeightTiles(cfg.tile_format, w.tile, w.words, w.feed, w.g_b)
        self.array = gemm_timed.Engine(cfg.array, w.g_cmd, w.g_a, w.g_b, o)
        self.tiles_run = 0

        @functools.cache
        def program(m, k):
            return gemm_timed.programs(cfg.array, [(m, k, C)])[0]

        self.program = program

    def parts(self) -> dict:
        """The unit models, then the wires between them, by name (a trace's columns)."""
        units = ("seq", "xs", "requests", "fetch", "tiles", "array")
        return {**{name: getattr(self, name) for name in units},
                **{f"w.{name}": wire for name, wire in vars(self.w).items()}}

    def wires(self, t: int) -> None:
        """Cycle ``t``'s wires between the units, from their state at its start."""
        w, seq, xs, req, fetch, tiles, array = (
            self.w, self.seq, self.xs, self.requests, self.fetch, self.tiles, self.array)
        f_valid, t_valid = req.fetch_valid, req.tile_valid
        w.fcmd.set(f_valid, fetch.ready, req.fetch_payload if f_valid else None)
        w.tile.set(t_valid, tiles.tile_ready, req.tile_payload if t_valid else None)
        w.words.set(fetch.o_valid, tiles.words_ready)
        g, b, a = seq.tile_valid()
        r = seq.run
        if g:
            w.g_cmd.set(True, array.ready, self.program(r.tokens, r.lines * 32))
        else:
            w.g_cmd.set(False)
        w.feed.set(b, tiles.cmd_ready, -(-r.tokens // self.cfg.array.rows) if b else None)
        w.xcmd.set(a, not xs.busy, r.tokens if a else None)
        w.g_a.set(xs.busy, array.a_ready)
        w.g_b.set(tiles.b_valid, array.b_ready)

    @property
    def x_ready(self) -> bool:
        """``x.ready``: the x store takes a line."""
        return self.xs.i_ready

    @property
    def o_valid(self) -> bool:
        """``o.valid``: a row leaves the array (through the bias adders)."""
        return self.array.o_valid

    def step(self, t: int) -> None:
        """Cycle ``t``: every unit steps (the memory is the caller's)."""
        w, seq, xs = self.w, self.seq, self.xs
        taken = tuple(p.valid and p.ready for p in (w.g_cmd, w.feed, w.xcmd))
        row = self.array.o_valid and self.o.accepts(t)
        self.tiles_run += taken[0]
        started = seq.step(t, count=xs.count, want=xs.want, taken=taken, row=row)
        if started is not None:
            xs.clear(started.tokens * started.lines, started.lines)
            self.requests.start(started)
        for unit in (xs, self.requests, self.fetch, self.tiles, self.array):
            unit.step(t)


def fast(config, commands, mem_latency: int, mem_bytes_per_cycle: int) -> dict:
    """The fast path: ``commands`` (``(tokens, k, n, bias)``, each the block can run) back to
    back with streams that keep up (each command and its x offered as soon as the block takes
    them), the memory agent at ``mem_latency`` and ``mem_bytes_per_cycle``: ``cycles`` from the
    first command's handshake to the cycle after the last output, ``weight_words``,
    ``array_busy`` (the array's command cycles) and ``macs``, at any size.

    It follows the column tiles, not the cycles: the sequencer's states and the array's
    command cycles (:func:`~scoville.sim.cycles.gemm.command_cycles`) are exact; the weights
    are the fluid of :class:`~scoville.sim.cycles.moe_weights.TileStream`, a command's stream
    starting the cycle after its handshake. ``tests/test_linear.py`` holds it to the cycle
    model where the harness's memory queue (:data:`~scoville.sim.harness.MEM_QUEUE` requests)
    holds a round trip's words (``mem_latency`` times the words a cycle at most 256): a
    memory that keeps more requests in flight than that agent does, as a real one does."""
    cfg = config
    C, R = cfg.array.cols, cfg.array.rows
    t0 = 0                      # the command's handshake
    words = busy = macs = 0
    o_last = -1
    for tokens, k, n, bias in commands:
        stream = TileStream(cfg.tile_format, cfg.fetch, mem_latency, mem_bytes_per_cycle,
                            t0 + 1)
        tau = t0 + tokens * (k // 32) + 2       # TILE, once x is stored
        cc = gemm_timed.command_cycles(cfg.array, tokens, k, C)
        rt = -(-tokens // R)
        for _ in range(n // C):
            le = math.ceil(stream.load(k, bias) + 1)
            s = max(tau, le)
            stream.fed(s + (rt - 1) * cfg.array.tile_steps(k) + k)
            o_last = s + cc + 1
            tau = o_last + 1
        words += cfg.weight_words(k, n, bias)
        busy += cc * (n // C)
        macs += tokens * k * n
        t0 = o_last + 1
    return {"cycles": o_last + 1, "weight_words": words, "array_busy": busy, "macs": macs}
