"""cocotb testbench of :class:`scoville.rtl.linear.Linear` against its golden model
(:mod:`scoville.sim.golden.linear`) and its timed model
(:func:`scoville.sim.cycles.linear.timing`), the weights served by the harness's memory agent
from :func:`~scoville.sim.golden.linear.memory_image` on the block's own requests.

Every test runs commands (``cmd`` and ``x`` in, ``o`` out) and checks every output value bit
for bit, every read request against the golden fetch of the commands' tiles, the status of the
last command, and the cycle of every handshake on ``cmd``, ``x``, ``req``, ``rdata`` and ``o``
and every counter (the array's and the block's own) against the timed model fed the same
schedules and memory.

Tests: directed edges (one token with a bias; every kind of refused command between good ones;
the most tokens with the largest K and no bias; special values: NaN, infinities, values that
round to infinity in BF16, subnormals) on a memory that keeps up; the workload (random
commands under gaps and back-pressure on every stream, the workload's memory); a reset in the
middle of a run (``test_reset``).
"""

from __future__ import annotations

import cocotb
import numpy as np

from scoville.rtl.linear import LINE, STATUS
from scoville.sim.cycles.linear import COUNTERS, timing
from scoville.sim.cycles.linear_parts import check
from scoville.sim.cycles.memory import MemoryAgent
from scoville.sim.golden.fetch import fetch
from scoville.sim.golden.linear import Command, linear, memory_image, reference

from .bench import BlockBench
from .failures import Failure, Kind
from .freerun import Memory, read_int
from .kit import context, join_words

SOURCES = ("cmd", "x")
SINKS = ("req", "o")

#: Streams whose beats cannot wait (no stall bin): the fetch engine reserves room for a burst
#: before it asks.
NEVER_WAITS = {"rdata": "the fetch engine reserves room for a burst before it asks"}

#: Coverage bins (:mod:`scoville.testbenches.coverage`), hit from each command.
BINS = {
    "cmd:one_token": "a command of one token",
    "cmd:full": "a command of the most tokens the block takes",
    "cmd:row_tiles": "a command of more tokens than the array has rows",
    "cmd:k_max": "a command of the largest K",
    "cmd:bias": "a command with a bias",
    "cmd:no_bias": "a command without a bias",
    **{f"cmd:refused_{s}": f"a command refused with status {s}"
       for s in STATUS if s != "ok"},
}


def _bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32).astype(np.int64)


def x_beats(x) -> list[int]:
    """``x`` (T, K) as the block's beats: lines of 32 FP32 values, the first lowest."""
    bits = _bits(x).ravel().tolist()
    return [join_words(bits[k:k + LINE], 32) for k in range(0, len(bits), LINE)]


def _image_rows(cfg, words: list[int]) -> np.ndarray:
    size = cfg.weight_port_bits // 8
    return np.array([list(int(w).to_bytes(size, "big")) for w in words], np.uint8)


def _cover(cov, cfg, c: Command) -> None:
    status = check(cfg, c.fields)
    if status:
        cov.hit(f"cmd:refused_{status.name.lower()}")
        return
    t, k = c.x.shape
    cov.hit_if("cmd:one_token", t == 1)
    cov.hit_if("cmd:full", t == cfg.tokens)
    cov.hit_if("cmd:row_tiles", t > cfg.array.rows)
    cov.hit_if("cmd:k_max", k == cfg.k_max)
    cov.hit("cmd:bias" if c.b is not None else "cmd:no_bias")


def place(cfg, specs) -> list[Command]:
    """Commands from ``specs`` (``(x, w, b)``, or a refused command's ``(tokens, k, n, addr,
    bias)``), each good weight at the next free word after the previous one's."""
    out, addr = [], 0
    for s in specs:
        if len(s) == 5:
            t, k, n, a, bias = s
            out.append(Command(None, None, np.zeros(1) if bias else None, a, (t, k, n)))
            continue
        x, w, b = s
        out.append(Command(x, w, b, addr))
        addr += cfg.weight_words(w.shape[1], len(w), b is not None)
    return out


async def run_commands(dut, ctx, test: str, commands: list[Command], *, gaps: bool,
                       latency: int | None = None, bytes_per_cycle: int | None = None,
                       interrupt: bool = False) -> dict:
    """Run ``commands`` and check outputs, requests, the status and every handshake's cycle.
    ``interrupt``: first run the same commands partway and reset the block in the middle."""
    cfg, wl, codec = ctx.config, ctx.workload, ctx.codecs
    latency = wl.mem_latency if latency is None else latency
    bpc = wl.mem_bytes_per_cycle if bytes_per_cycle is None else bytes_per_cycle
    image = memory_image(cfg, commands) or [0]
    tiles, beats, err, macs = [], [], 0.0, 0
    for c in commands:
        _cover(ctx.coverage, cfg, c)
        if check(cfg, c.fields):
            continue
        (t, k), n = c.x.shape, len(c.w)
        words = cfg.tile_words(k, c.b is not None)
        tiles += [(c.addr + j * words, words) for j in range(n // cfg.array.cols)]
        beats += x_beats(c.x)
        macs += t * k * n
    want_o = linear(cfg, commands)
    for c in commands:
        if c.x is not None and np.all(np.isfinite(c.x)):
            got = linear(cfg, [c])
            ref = reference(c.x, c.w, c.b)
            y = np.asarray(got, np.uint32).view(np.float32)
            err = max(err, float(np.abs(np.asarray(y).reshape(-1) - _tiles(cfg, ref)).max()
                                 / max(np.abs(ref).max(), 1e-30)))
    want_req = fetch(cfg.fetch, image, tiles)
    words = len(want_req.words)
    tb = BlockBench(dut, ctx, test, sources=SOURCES, memories=("rdata",), sinks=SINKS,
                    gaps=gaps, detail=f" (mem_latency={latency}, mem_bytes_per_cycle={bpc})")
    fields = [c.fields for c in commands]
    tb.source["cmd"].send(codec["cmd"].pack(**{f: [c[f] for c in fields] for f in fields[0]}))
    tb.source["x"].send(beats)
    tb.memory["rdata"] = Memory(_image_rows(cfg, image), words, latency, bpc,
                                tb.memory_valid["rdata"])
    tb.sink["req"].expect(want_req.requests, label="read requests", decode=lambda req: list(
        zip(np.asarray(req["addr"]).tolist(), np.asarray(req["len"]).tolist(), strict=True)))
    tb.sink["o"].expect(want_o, label="outputs", decode=lambda f: f[""].tolist())
    model = tb.predict(timing, cfg, fields, tb.valid, tb.ready,
                       MemoryAgent(latency, bpc, cfg.weight_port_bits, tb.memory_valid["rdata"]))
    seen = await tb.run(model, slack=5000, zero=("counters", "status"), interrupt=interrupt)
    status, want_status = read_int(dut.status, "status"), int(check(cfg, fields[-1]))
    if status != want_status:
        raise Failure(Kind.STATUS, f"{test}: status {status} after the last command, "
                                   f"expected {want_status}")
    word_bytes = cfg.weight_port_bits // 8
    deliverable = seen.cycles * min(bpc, word_bytes)
    return tb.check(
        COUNTERS, commands=len(commands), requests=len(want_req.requests), weight_words=words,
        weight_bandwidth_utilization=words * word_bytes / max(1, deliverable),
        array_utilization=macs / max(1, cfg.array.rows * cfg.array.cols * seen.cycles),
        max_rel_err_vs_f64=err)


def _tiles(cfg, y) -> np.ndarray:
    """``y`` (T, N) in the order of the ``o`` beats, flattened."""
    c = cfg.array.cols
    return np.concatenate([y[:, j:j + c].ravel() for j in range(0, y.shape[1], c)])


def _draw(cfg, rng, t: int, k: int, n: int, bias: bool):
    x = rng.standard_normal((t, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    return x, w, b


def _refusals(cfg) -> list[tuple]:
    """One command refused for each reason: ``(tokens, k, n, addr, bias)``."""
    C, T, K = cfg.array.cols, cfg.tokens, cfg.k_max
    over = (1 << cfg.addr_bits) - cfg.weight_words(LINE, C, True) + 1
    return [(0, LINE, C, 0, 1), (T + 1, LINE, C, 0, 1), (1, LINE + 1, C, 0, 0),
            (1, K + LINE, C, 0, 0), (1, LINE, C + 1, 0, 0), (1, LINE, cfg.n_max + C, 0, 0),
            (1, LINE, C, over, 1)]


@cocotb.test()
async def test_edges(dut):
    """One token with a bias; every refusal between good commands (the weights and x after
    them are the good ones'); the most tokens with the largest K and two tiles without a
    bias; special values; then each refusal as the last command of a short run (the status
    it leaves)."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(1)
    C, T, K = cfg.array.cols, cfg.tokens, cfg.k_max
    specials = _draw(cfg, rng, min(T, 3), LINE, C, True)
    xs = specials[0]
    xs[0, :6] = [np.nan, np.inf, -np.inf, 3.4e38, -1e-40, 1e-45]
    ws = specials[1]
    ws[1, :3] = [np.inf, 0.0, -0.0]
    specs = [_draw(cfg, rng, 1, LINE, C, True), *_refusals(cfg),
             _draw(cfg, rng, T, K, 2 * C, False), (xs, ws, specials[2])]
    fast = {"latency": 1, "bytes_per_cycle": cfg.weight_port_bits // 8}
    await run_commands(dut, ctx, "test_edges", place(cfg, specs), gaps=False, **fast)
    for i, refusal in enumerate(_refusals(cfg)):
        await run_commands(dut, ctx, f"test_edges[refusal {i}]",
                           place(cfg, [_draw(cfg, rng, 1, LINE, C, False), refusal]),
                           gaps=False, **fast)


@cocotb.test()
async def test_workload(dut):
    """``commands`` random commands (the first with the most tokens) under gaps and
    back-pressure on every stream, the workload's memory."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(3)
    C = cfg.array.cols
    specs = []
    for i in range(ctx.workload.commands):
        t = cfg.tokens if i == 0 else int(rng.integers(1, cfg.tokens + 1))
        k = LINE * int(rng.integers(1, cfg.k_max // LINE + 1))
        n = C * int(rng.integers(1, min(cfg.n_max // C, 8) + 1))
        specs.append(_draw(cfg, rng, t, k, n, bool(rng.integers(0, 2))))
    await run_commands(dut, ctx, "test_workload", place(cfg, specs), gaps=True)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of random commands under gaps and back-pressure (weights in
    flight, x half stored, rows in the array): the block must come back idle with its
    counters and status at 0, then run the same commands from the start correctly."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(5)
    C = cfg.array.cols
    specs = [_draw(cfg, rng, cfg.tokens, cfg.k_max, 2 * C, True),
             _draw(cfg, rng, 1, LINE, C, False), _refusals(cfg)[0]]
    await run_commands(dut, ctx, "test_reset", place(cfg, specs), gaps=True, interrupt=True)
