"""cocotb testbench of :class:`scoville.rtl.decoder.Decoder` against its golden model
(:class:`scoville.sim.golden.decoder.DecoderModel`) and its timed model
(:func:`scoville.sim.cycles.decoder.timing`), the weights (the norms' vectors and the
projections' tiles) served by the harness's memory agent from one memory image.

Every test runs a program of commands (``cmd`` and ``x`` in, ``o`` and ``resp`` out) and
checks every ``OUT`` line bit for bit, every answer's status, every read request against the
golden fetch of the program's weights, the status of the last command, and the cycle of every
handshake on ``cmd``, ``x``, ``o``, ``resp``, ``req`` and ``rdata`` and every counter against
the timed model fed the same schedules and memory. What a refused command would have changed
is read back by the ``OUT`` commands after it.

Tests: directed edges (a layer's shape with special values; every kind of refused command
between good ones, then read back; each refusal as the last command); the workload (a layer's
shape on ``tokens`` tokens, then random commands, under gaps and back-pressure on every
stream); a reset in the middle of a run (``test_reset``).
"""

from __future__ import annotations

import dataclasses

import cocotb
import numpy as np
from amaranth.hdl import Shape

from scoville.rtl.decoder import LINE, OPS, AttnOp, Op, Status, command_layout
from scoville.sim.cycles.decoder import fast as fast_path
from scoville.sim.cycles.decoder import timing
from scoville.sim.cycles.memory import MemoryAgent
from scoville.sim.golden import moe as moe_golden
from scoville.sim.golden import rope as rope_golden
from scoville.sim.golden.decoder import (
    COMMAND_FIELDS,
    DecoderModel,
    check,
    norm_words,
    router_words,
)
from scoville.sim.golden.fetch import fetch
from scoville.sim.golden.linear import tile_words

from .bench import BlockBench
from .failures import Failure, Kind
from .freerun import Memory, read_int
from .kit import context, join_words

SOURCES = ("cmd", "x")
SINKS = ("req", "o", "resp")

#: Streams whose beats cannot wait (no stall bin): the fetch engines reserve room for a burst
#: before they ask.
NEVER_WAITS = {"rdata": "the fetch engines reserve room for a burst before they ask"}

#: The block's counters, as the testbench reads them.
COUNTERS = ("commands", "refused", "weight_words")

#: Coverage bins (:mod:`scoville.testbenches.coverage`), hit from each command.
BINS = {
    **{f"op:{name}": f"{'an' if name[0] in 'aeiou' else 'a'} {name.upper()} command run"
       for name in OPS},
    "op:in_place": "an ADD, GLU or NORM written over its own input",
    "op:norm_narrow": "a NORM of tokens narrower than hidden (its k)",
    "op:strided": "a NORM or LINEAR whose tokens lie apart (its row or stride)",
    "op:linear_bias": "a projection with a bias",
    "op:linear_tokens": "a projection of the most tokens the block takes",
    "op:moe_tokens": "a MoE layer of the most tokens the MoE holds",
    "op:rope_heads": "a ROPE of more than one vector a token",
    "op:attn_step": "an ATTN step the attention block attends",
    "op:attn_tokens": "an ATTN step of more than one token (that the attention attends)",
    "op:attn_partial_tile": "an ATTN step (that the attention attends) whose last row tile is "
                            "partial",
    "op:attn_answered": "an ATTN the attention block answers with other than OK",
    "op:rope_offset": "a ROPE whose vectors start past their token's first value",
    **{f"cmd:refused_{s}": f"a command refused with status {s}"
       for s in ("bad_range", "bad_shape", "bad_op")},
    "op:argmax_ties": "an ARGMAX whose largest logit is there twice (or every logit NaN)",
}


def unreachable(cfg) -> list[str]:
    """Left out of the runs of a configuration that cannot reach them: with one token a step
    (a step the attention attends), `op:attn_tokens` and `op:attn_partial_tile`; with row
    tiles of one token, `op:attn_partial_tile`."""
    out = []
    if cfg.attn.max_step_tokens == 1:
        out.append("op:attn_tokens")
    if cfg.attn.tile_tokens == 1:
        out.append("op:attn_partial_tile")
    return out


class Program:
    """A program being written: its commands, ``IN``'s lines and the weight memory (the
    norms' vectors, the projections' tiles, the routers' and experts' weights, ``ROPE``'s
    table rows, each at the next free word)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.commands: list[dict] = []
        self.x: list[np.ndarray] = []
        self.image: list[int] = []
        #: The MoE layers' weights by address (their experts' words there: the golden model
        #: is told them).
        self.moe: dict[int, moe_golden.MoeWeights] = {}

    def cmd(self, op: Op, **fields) -> None:
        """A command of ``fields`` (a missing one 0); each must fit its field of ``cmd``."""
        c = {f: int(fields.get(f, 0)) for f in COMMAND_FIELDS} | {"op": int(op)}
        widths = command_layout(self.cfg)
        for f, v in c.items():
            bits = Shape.cast(widths[f].shape).width
            if not 0 <= v < 1 << bits:
                raise ValueError(f"command field {f!r} = {v} does not fit its {bits} bits")
        self.commands.append(c)

    def load(self, dst: int, x) -> None:
        """``IN``: ``x`` (lines, 32) FP32 into lines ``dst`` on."""
        x = np.asarray(x, np.float32).reshape(-1, LINE)
        self.x.append(x)
        self.cmd(Op.IN, dst=dst, count=len(x))

    def golden(self) -> DecoderModel:
        """A golden model of this program's weight memory, told its MoE layers' weights."""
        model = DecoderModel(self.cfg, self.image or [0])
        for addr, w in self.moe.items():
            model.load_moe(addr, w)
        return model

    def attn(self, aop: AttnOp, **fields) -> None:
        """An ``ATTN`` of the attention block's command ``aop``."""
        self.cmd(Op.ATTN, aop=int(aop), **fields)

    def norm_weight(self, w) -> int:
        """The address of a new norm weight vector ``w`` (H values, or a narrower NORM's
        ``k``)."""
        return self.norm_weight_at(w, len(self.image))

    def linear_weight(self, w, b=None) -> int:
        """The address of a new projection weight ``w`` (N, K) and bias ``b``."""
        return self._put(tile_words(self.cfg.linear, w, b))

    def moe_weights(self, w, addr: int | None = None) -> int:
        """The address of a new MoE layer's experts' weights (of ``w``, a
        :class:`~scoville.sim.golden.moe.MoeWeights`; at ``addr``, or the next free word)."""
        addr = self._put(moe_golden.memory_image(self.cfg.moe, w), addr)
        self.moe[addr] = w
        return addr

    def router_weights(self, w, addr: int | None = None) -> int:
        """The address of a router's weights (``w``'s ``router_weight`` and ``router_bias``,
        as ``ROUTER`` reads them: :func:`~scoville.sim.golden.decoder.router_words`; at
        ``addr``, or the next free word)."""
        return self._put(router_words(self.cfg, w.router_weight, w.router_bias), addr)

    def _put(self, words: list[int], addr: int | None = None) -> int:
        """``words`` at the next free word, or at ``addr`` (zeros before it)."""
        addr = len(self.image) if addr is None else addr
        self.image += [0] * (addr - len(self.image))
        assert len(self.image) == addr, "weights placed over others"
        self.image += words
        return addr

    def rope_table(self, positions, theta: float = 10000.0) -> int:
        """The address of new ``ROPE`` table rows for ``positions`` (Hugging Face's default
        rotary frequencies of ``rope.dim`` at base ``theta``: each row ``dim / 2`` cosines,
        then the sines)."""
        return self.table(*rope_golden.table({"rope_theta": theta}, self.cfg.rope.dim,
                                             positions))

    def table(self, cos, sin) -> int:
        """The address of new ``ROPE`` table rows: row ``t`` the cosines ``cos[t]`` then the
        sines ``sin[t]`` (``rope.dim / 2`` FP32 values each)."""
        bits = np.concatenate([cos, sin], axis=1).astype(np.float32).view(np.uint32)
        per = self.cfg.linear.weight_port_bits // 32
        return self._put([join_words(row[j:j + per].tolist(), 32) for row in bits
                          for j in range(0, len(row), per)])

    def norm_weight_at(self, w, addr: int) -> int:
        """A norm weight vector at ``addr`` (after every weight placed so far)."""
        p = self.cfg.linear.weight_port_bits
        bits = np.asarray(w, np.float32).view(np.uint32).tolist()
        per = p // 32
        return self._put([join_words(bits[j:j + per], 32) for j in range(0, len(bits), per)],
                         addr)


def fill(prog: Program, rng) -> None:
    """``IN`` of random values into every line: the activation memory keeps its lines
    through a reset (an earlier test's, here), so a program writes what it reads."""
    prog.load(0, rng.standard_normal((prog.cfg.act_lines, LINE)))


def layer(prog: Program, rng, tokens: int, specials: bool = False) -> None:
    """A layer's shape on ``tokens`` tokens: x in, ``h = norm(x)``, ``u = h W1^T + b1`` (N =
    the projections' most), its heads rotated; where u holds a token's query, key and value
    heads, attention over them (a new sequence, the sinks set, steps of the most tokens a
    step takes, freed) into u's first lines and ``d = o W2^T``, else ``d = u W2^T`` (back
    to H), ``x = x + d`` in place, x out; ``h =
    norm(x)``, the MoE of h over h (its first ``moe.tokens`` tokens), ``x = x + h``, x out;
    then ``norm`` in place and out (``specials``: NaN, infinities and huge values in x)."""
    cfg = prog.cfg
    H, hl, N = cfg.hidden, cfg.hidden // LINE, min(cfg.linear.n_max, cfg.linear.k_max)
    N -= N % LINE
    x = rng.standard_normal((tokens, H)).astype(np.float32)
    if specials:
        x[0, :5] = [np.nan, np.inf, -np.inf, 3.4e38, 1e-45]
    X, Hd = 0, tokens * hl                     # x, then h (and d over it)
    U = Hd + tokens * hl                       # u
    prog.load(X, x)
    prog.cmd(Op.NORM, a=X, dst=Hd, count=tokens,
             addr=prog.norm_weight(1 + rng.standard_normal(H) / 4))
    w1 = (rng.standard_normal((N, H)) / np.sqrt(H)).astype(np.float32)
    prog.cmd(Op.LINEAR, a=Hd, dst=U, count=tokens, k=H, n=N, bias=1,
             addr=prog.linear_weight(w1, rng.standard_normal(N).astype(np.float32)))
    A = cfg.attn
    dh, qkv = A.kv.head_dim, (A.q_heads + cfg.attn_vectors) * A.kv.head_dim
    out = A.q_heads * A.v_dim           # a token's outputs
    attends = qkv <= N and out % LINE == 0
    d = cfg.rope.dim
    if N >= d:      # u's heads rotated in place, the tokens at positions p0 on
        p0 = int(rng.integers(0, 4096))
        heads = A.q_heads + A.kv.kv_heads if attends and d == dh else N // d
        prog.cmd(Op.ROPE, a=U, count=tokens, heads=heads, stride=d, row=N // LINE,
                 addr=prog.rope_table(p0 + np.arange(tokens)))
    k = N
    if attends:     # attention over a new sequence, its outputs over u's first lines
        prog.attn(AttnOp.ALLOC)
        for h in range(A.q_heads if A.sinks else 0):
            prog.attn(AttnOp.SINK, heads=h, value=int(np.float32(rng.standard_normal())
                                                       .view(np.uint32)))
        for t in range(0, tokens, A.max_step_tokens):    # steps of the most it takes
            prog.attn(AttnOp.STEP, seq=0, count=min(A.max_step_tokens, tokens - t),
                      a=U + t * (N // LINE), row=N // LINE, dst=U + t * out // LINE)
        prog.attn(AttnOp.FREE, seq=0)
        k = out
    w2 = (rng.standard_normal((H, k)) / np.sqrt(k)).astype(np.float32)
    prog.cmd(Op.LINEAR, a=U, dst=Hd, count=tokens, k=k, n=H, addr=prog.linear_weight(w2))
    prog.cmd(Op.ADD, a=X, b=Hd, dst=X, count=tokens * hl)
    prog.cmd(Op.OUT, a=X, count=tokens * hl)
    prog.cmd(Op.NORM, a=X, dst=Hd, count=tokens, addr=prog.norm_weight(rng.standard_normal(H)))
    moe = moe_golden.random_weights(cfg.moe, rng)
    prog.cmd(Op.ROUTER, addr=prog.router_weights(moe))
    # Not the NaN token itself (the attention has spread NaN over the others' values; the
    # router ranks NaN first in both models).
    first = 1 if specials and tokens > 1 else 0
    prog.cmd(Op.MOE, a=Hd + first * hl, dst=Hd + first * hl,
             count=min(tokens - first, cfg.moe.tokens), addr=prog.moe_weights(moe))
    prog.cmd(Op.ADD, a=X, b=Hd, dst=X, count=tokens * hl)
    prog.cmd(Op.OUT, a=X, count=tokens * hl)
    prog.cmd(Op.NORM, a=X, dst=X, count=tokens, addr=prog.norm_weight(rng.standard_normal(H)))
    prog.cmd(Op.OUT, a=X, count=tokens * hl)


def refusals(cfg) -> list[tuple[Status, dict]]:
    """One command refused for each reason the config can give: the status it is answered
    with, its fields (each within its field of ``cmd``)."""
    lin, N, hl = cfg.linear, cfg.act_lines, cfg.hidden // LINE
    top = 1 << lin.addr_bits
    K, R, S = LINE, Status.BAD_RANGE, Status.BAD_SHAPE
    V = cfg.argmax.beats
    out = [
        (Status.BAD_OP, {"op": len(Op)}), (Status.BAD_OP, {"op": 15, "count": 1}),
        (R, {"op": Op.ARGMAX, "a": N - V + 1, "count": V}),
        (S, {"op": Op.ARGMAX, "a": 0, "count": V + 1}),
        (S, {"op": Op.ARGMAX, "a": 0, "count": V - 1}),
        (R, {"op": Op.MOE, "a": N - hl, "dst": 0, "count": 2}),
        (R, {"op": Op.IN, "count": 0}), (R, {"op": Op.OUT, "a": N - 1, "count": 2}),
        (R, {"op": Op.ADD, "a": 0, "b": N - 1, "dst": 2, "count": 2}),
        (R, {"op": Op.ADD, "a": 4, "b": 0, "dst": 5, "count": 2}),    # dst over a, shifted
        (R, {"op": Op.ADD, "a": 0, "b": 5, "dst": 4, "count": 2}),    # dst over b, shifted
        (R, {"op": Op.NORM, "a": 0, "dst": 1, "count": 2}),           # dst over a, shifted
        (R, {"op": Op.NORM, "a": 0, "dst": N - hl, "count": 2}),
        (R, {"op": Op.NORM, "a": N - 3, "dst": 0, "count": 2, "k": K, "row": 3}),
        (R, {"op": Op.GLU, "a": 0, "b": N - 1, "dst": 2, "count": 2}),
        (R, {"op": Op.GLU, "a": 0, "b": 5, "dst": 4, "count": 2}),    # dst over b, shifted
        (R, {"op": Op.LINEAR, "a": 0, "dst": N - 3, "count": 2, "k": K, "n": LINE,
             "row": 3}),
        (R, {"op": Op.LINEAR, "a": N - 3, "dst": 0, "count": 2, "k": K, "n": LINE,
             "stride": 3}),
        (S, {"op": Op.NORM, "a": 0, "dst": 0, "count": 1, "k": K // 2}),
        (S, {"op": Op.NORM, "a": 0, "dst": 0, "count": 1, "k": cfg.hidden + K}),
        (S, {"op": Op.LINEAR, "a": 0, "dst": 8, "count": 2, "k": 2 * K, "n": LINE,
             "stride": 1}),
        (S, {"op": Op.LINEAR, "a": 0, "dst": 8, "count": 2, "k": K, "n": 2 * LINE,
             "row": 1}),
        (S, {"op": Op.LINEAR, "a": 0, "dst": 8, "count": lin.tokens + 1, "k": K, "n": LINE}),
        (S, {"op": Op.LINEAR, "a": 0, "dst": 8, "count": 1, "k": K + 1, "n": LINE}),
        (S, {"op": Op.LINEAR, "a": 0, "dst": 8, "count": 1, "k": lin.k_max + K, "n": LINE}),
        (S, {"op": Op.LINEAR, "a": 0, "dst": 8, "count": 1, "k": K, "n": LINE + LINE // 2}),
        (S, {"op": Op.LINEAR, "a": 0, "dst": 0, "count": 1, "k": K, "n": lin.n_max + LINE}),
    ]
    d, g, rl = cfg.rope.dim, min(cfg.rope.dim, LINE), cfg.rope_lines
    rope = {"op": Op.ROPE, "a": 0, "count": 1, "heads": 1, "stride": d, "row": rl}
    out += [
        (R, rope | {"a": N - rl, "row": rl + 1}),              # past the last line
        (S, rope | {"heads": 0}),
        (S, rope | {"off": g // 2, "row": rl + 1}),              # off the vectors' grid
        (S, rope | {"heads": 2, "stride": 0, "row": 2 * rl}),   # overlapping
        (S, rope | {"heads": 2, "stride": d + g // 2, "row": 3 * rl + 1}),   # off the grid
        (S, rope | {"off": LINE * rl}),                          # past its token's row
    ]
    A = cfg.attn
    qkv = (A.q_heads + cfg.attn_vectors) * A.kv.head_dim
    rows = -(-qkv // LINE)
    step = {"op": Op.ATTN, "aop": AttnOp.STEP, "a": 0, "count": 1, "row": rows, "dst": 0}
    out += [
        (R, step | {"count": 0}),
        (R, step | {"a": N - rows, "row": rows + 1}),             # past the last line
        (R, step | {"dst": N - 1, "count": -(-2 * LINE // (A.q_heads * A.v_dim))}),
        (S, step | {"row": rows - 1}),                             # a row too short
        (S, step | {"aop": AttnOp.APPEND, "count": 2, "row": rows}),
    ]
    if 257 * rows <= N and cfg.attn_out_lines(257) <= N:     # more than a step's field
        out.append((S, step | {"count": 257}))
    if A.kv.head_dim > 1:       # off the heads' grid
        out.append((S, step | {"off": min(A.kv.head_dim, LINE) // 2, "row": rows + 1}))
    if cfg.rope_words > 1:     # a row past the memory's last word
        out.append((S, rope | {"addr": top - cfg.rope_words + 1}))
    longest = (1 << cfg.norm_fetch.len_bits) // cfg.rope_words    # rows of one fetch, and one
    if (longest + 1) * rl <= N and longest < 1 << 16:
        out.append((S, rope | {"count": longest + 1}))
    if cfg.norm_words > 1:    # weights that run past the memory's last word
        out.append((S, {"op": Op.NORM, "a": 0, "dst": 0, "count": 1,
                        "addr": top - cfg.norm_words + 1}))
    line_words = cfg.norm_line_words
    if line_words > 1:        # a narrow NORM's weights past the memory's last word
        out.append((S, {"op": Op.NORM, "a": 0, "dst": 0, "count": 1, "k": K,
                        "addr": top - line_words + 1}))
    if hl > 1:                # a NORM's tokens that overlap
        out.append((S, {"op": Op.NORM, "a": 0, "dst": 0, "count": 2, "row": hl - 1}))
    if (cfg.moe.tokens + 1) * hl <= N:
        out.append((S, {"op": Op.MOE, "a": 0, "dst": 0, "count": cfg.moe.tokens + 1}))
    if cfg.moe_words > 1:
        out.append((S, {"op": Op.MOE, "a": 0, "dst": 0, "count": 1,
                        "addr": top - cfg.moe_words + 1}))
    out.append((S, {"op": Op.ROUTER, "addr": top - cfg.router_words + 1}))
    if lin.weight_words(K, LINE, False) > 1:
        out.append((S, {"op": Op.LINEAR, "a": 0, "dst": 8, "count": 1, "k": K, "n": LINE,
                        "addr": top - lin.weight_words(K, LINE, False) + 1}))
    return out


def top_edges(prog: Program, rng) -> None:
    """Good commands at the top of both memories: ``IN`` and ``ADD`` on the last two lines,
    an in-place ``NORM`` of the last token with its weights ending at the last word (and one
    of the last line alone, its line of weights ending there), a
    ``LINEAR`` of the last line onto itself with its weights ending there too, each read
    back (the weights only where the memory's image can hold them: ``addr_bits`` at most
    16); :func:`edge_commands` before those."""
    cfg, lin = prog.cfg, prog.cfg.linear
    N, hl, top = cfg.act_lines, cfg.hidden // LINE, 1 << lin.addr_bits
    prog.load(N - 2, rng.standard_normal((2, LINE)))
    prog.cmd(Op.ADD, a=N - 2, b=N - 2, dst=N - 2, count=2)
    prog.cmd(Op.OUT, a=N - 2, count=2)
    edge_commands(prog)
    if lin.addr_bits > 16:
        return
    w = (rng.standard_normal((LINE, LINE)) / 4).astype(np.float32)
    words = lin.weight_words(LINE, LINE, False)
    lin_at = prog._put(tile_words(lin, w), top - cfg.norm_words - words)
    norm_at = prog.norm_weight_at(rng.standard_normal(cfg.hidden), top - cfg.norm_words)
    prog.cmd(Op.NORM, a=N - hl, dst=N - hl, count=1, addr=norm_at)
    if hl > 1:      # a line's NORM whose weights (the last line of those) end there too
        prog.cmd(Op.NORM, a=N - 1, dst=N - 1, count=1, k=LINE,
                 addr=top - cfg.norm_line_words)
    prog.cmd(Op.LINEAR, a=N - 1, dst=N - 1, count=1, k=LINE, n=LINE, addr=lin_at)
    prog.cmd(Op.OUT, a=N - hl, count=hl)


def strided_edges(prog: Program, rng) -> None:
    """Tokens apart: ``GLU`` of special values (infinities, NaN, a huge gate, -0); a ``NORM``
    of a line a token (narrower than ``hidden``) in place on three tokens three lines apart;
    a ``LINEAR`` of those lines (a ``stride`` of three) into two lines a token three apart (a
    ``row``); ``GLU`` of their first lines and the next ones; each read back."""
    cfg = prog.cfg
    if cfg.act_lines < 40 or cfg.linear.n_max < 2 * LINE or cfg.linear.tokens < 3:
        return
    x = rng.standard_normal((40, LINE)) * 2
    # GLU's special values (lines 30 on: its gate, lines 31 on: its up): inf and NaN through
    # the sigmoid, a huge gate times inf, -0
    x[30, :6] = [np.inf, -np.inf, np.nan, -100.0, 1e30, -0.0]
    x[31, :6] = [1.0, 1.0, 2.0, np.inf, np.inf, 3.0]
    prog.load(0, x)
    prog.cmd(Op.GLU, a=30, b=31, dst=38, count=2)
    prog.cmd(Op.NORM, a=1, dst=1, count=3, k=LINE, row=3,
             addr=prog.norm_weight(rng.standard_normal(LINE)))
    w = (rng.standard_normal((2 * LINE, LINE)) / 4).astype(np.float32)
    prog.cmd(Op.LINEAR, a=1, dst=12, count=3, k=LINE, n=2 * LINE, stride=3, row=3,
             addr=prog.linear_weight(w))
    prog.cmd(Op.GLU, a=12, b=13, dst=30, count=8)
    prog.cmd(Op.OUT, a=0, count=40)


def edge_commands(prog: Program) -> None:
    """A ``ROPE`` of a vector a line into its token's row, on the memory's last lines, read
    back; an ``ATTN`` step of three tokens (one in decode: a partial row tile either way
    where a tile holds two or more) over the first lines, its outputs read back; a free of a
    sequence never allocated (the attention block's ``NO_SEQ``); ``ARGMAX`` of logits on the
    memory's last lines: the largest twice (the lower index chosen) after a NaN and an
    infinity's negative, then every logit NaN (index 0), then -0 before +0 and negatives (-0
    chosen: it equals +0)."""
    cfg = prog.cfg
    A = cfg.attn
    N, row = cfg.act_lines, cfg.rope_lines + 1
    V = cfg.argmax.vocab
    if V // LINE <= N:
        lines = V // LINE
        x = -np.abs(np.arange(V, dtype=np.float32) % 7) - 1
        x[[0, 1]] = [np.nan, -np.inf]
        x[[3, V - 1]] = 2.5
        for logits in (x, np.full(V, np.nan, np.float32),
                       np.concatenate([[-1.0, -0.0], np.full(V - 3, -2.0), [0.0]])):
            prog.load(N - lines, np.asarray(logits, np.float32))
            prog.cmd(Op.ARGMAX, a=N - lines, count=lines)
    prog.cmd(Op.ROPE, a=N - row, count=1, heads=1, off=LINE, row=row,
             addr=prog.rope_table([4095]))
    prog.cmd(Op.OUT, a=N - row, count=row)
    t = min(3, A.max_step_tokens)
    rows = -(-(A.q_heads + cfg.attn_vectors) * A.kv.head_dim // LINE)
    out = cfg.attn_out_lines(t)
    if t * rows + out <= N:
        prog.attn(AttnOp.ALLOC)
        prog.attn(AttnOp.STEP, seq=0, count=t, a=0, row=rows, dst=t * rows)
        prog.cmd(Op.OUT, a=t * rows, count=out)
        prog.attn(AttnOp.FREE, seq=0)
    prog.attn(AttnOp.FREE, seq=A.kv.max_seqs - 1)


def top_moe(prog: Program, rng) -> None:
    """A ``MOE`` of the most tokens it holds, over the activation memory's last tokens in
    place, read back: its experts' weights ending at the memory's last word, its router's
    before them, loaded over another router (where the image can hold them; else both
    where they fit)."""
    cfg = prog.cfg
    N, hl, top = cfg.act_lines, cfg.hidden // LINE, 1 << cfg.linear.addr_bits
    t = min(cfg.moe.tokens, N // hl)
    w = moe_golden.random_weights(cfg.moe, rng)
    # An image of 2**addr_bits words past 64 Ki is too big to build: placed at the next
    # free words instead of at the top.
    if cfg.linear.addr_bits > 16:
        prog.cmd(Op.ROUTER, addr=prog.router_weights(w))
        addr = prog.moe_weights(w)
    else:
        other = moe_golden.random_weights(cfg.moe, rng)     # a router loaded over another
        prog.cmd(Op.ROUTER, addr=prog.router_weights(other))
        prog.cmd(Op.ROUTER, addr=prog.router_weights(w))
        addr = prog.moe_weights(w, top - cfg.moe_words)
    prog.cmd(Op.MOE, a=N - t * hl, dst=N - t * hl, count=t, addr=addr)
    prog.cmd(Op.OUT, a=N - t * hl, count=t * hl)


def top_router(prog: Program, rng) -> None:
    """A ``ROUTER`` whose words end at the memory's last word (where the image can hold them),
    then a ``MOE`` that routes with it, read back."""
    cfg = prog.cfg
    N, hl, top = cfg.act_lines, cfg.hidden // LINE, 1 << cfg.linear.addr_bits
    if cfg.linear.addr_bits > 16:
        return
    w = moe_golden.random_weights(cfg.moe, rng)
    addr = prog.moe_weights(w)
    prog.cmd(Op.ROUTER, addr=prog.router_weights(w, top - cfg.router_words))
    t = min(cfg.moe.tokens, N // hl)
    prog.cmd(Op.MOE, a=0, dst=0, count=t, addr=addr)
    prog.cmd(Op.OUT, a=0, count=t * hl)


def random_commands(prog: Program, rng, count: int) -> None:
    """``count`` random commands over the first lines of the activation memory (each op;
    in place or over another's lines now and then; one in eight refused), then every one of
    those lines out. Once the weights placed so far reach the top of the weight memory, the
    ops that would place new ones are drawn no more (a weight running past the top is
    refused, and tested, as any other)."""
    cfg, lin = prog.cfg, prog.cfg.linear
    hl, span = cfg.hidden // LINE, min(cfg.act_lines // 2, 16 * cfg.hidden // LINE)
    placing = (Op.NORM, Op.ROPE, Op.ROUTER, Op.LINEAR)
    for _ in range(count):
        op = Op(int(rng.integers(0, len(Op))))
        if rng.random() < 1 / 8:
            bad = refusals(cfg)
            prog.cmd(**bad[int(rng.integers(0, len(bad)))][1])
            continue
        if op in placing and len(prog.image) >= 1 << lin.addr_bits:
            continue
        if op == Op.IN:
            n = int(rng.integers(1, 5))
            prog.load(int(rng.integers(0, span - n)), rng.standard_normal((n, LINE)) * 4)
        elif op == Op.OUT:
            n = int(rng.integers(1, 9))
            prog.cmd(Op.OUT, a=int(rng.integers(0, 2 * span - n)), count=n)
        elif op in (Op.ADD, Op.GLU):
            n = int(rng.integers(1, 9))
            a, b = (int(v) for v in rng.integers(0, span - n, 2))
            dst = [a, b, span + int(rng.integers(0, span - n))][int(rng.integers(0, 3))]
            if check(cfg, {f: 0 for f in COMMAND_FIELDS} | {
                    "op": op, "a": a, "b": b, "dst": dst, "count": n}) != Status.OK:
                dst = span + int(rng.integers(0, span - n))
            prog.cmd(op, a=a, b=b, dst=dst, count=n)
        elif op == Op.NORM:
            # all of hidden or fewer lines a token, packed or apart
            kl = hl if rng.random() < 0.5 else int(rng.integers(1, hl + 1))
            row = 0 if rng.random() < 0.5 else kl + int(rng.integers(0, 3))
            t = int(rng.integers(1, 3))
            lines = (t - 1) * (row or kl) + kl
            a = int(rng.integers(0, span - lines + 1))
            dst = a if rng.random() < 0.5 else span + int(rng.integers(0, span - lines + 1))
            prog.cmd(Op.NORM, a=a, dst=dst, count=t, k=0 if kl == hl else kl * LINE, row=row,
                     addr=prog.norm_weight(rng.standard_normal(kl * LINE)))
        elif op == Op.ROPE:
            d, g = cfg.rope.dim, min(cfg.rope.dim, LINE)
            heads = int(rng.integers(1, 4))
            stride = d + g * int(rng.integers(0, 3))
            off = g * int(rng.integers(0, 3))
            row = -(-(off + (heads - 1) * stride + d) // LINE) + int(rng.integers(0, 2))
            t = int(rng.integers(1, max(2, min(4, 2 * span // row))))
            if t * row > 2 * span:
                continue
            p0 = int(rng.integers(0, 100_000))
            prog.cmd(Op.ROPE, a=int(rng.integers(0, 2 * span - t * row + 1)), count=t,
                     heads=heads, stride=stride, off=off, row=row,
                     addr=prog.rope_table(p0 + np.arange(t)))
        elif op == Op.ATTN:
            _random_attn(prog, rng, span)
        elif op == Op.ARGMAX:
            n = cfg.argmax.beats
            if n <= 2 * span:
                prog.cmd(Op.ARGMAX, a=int(rng.integers(0, 2 * span - n + 1)), count=n)
        elif op == Op.ROUTER:      # a new router (its count ignored)
            w = moe_golden.random_weights(cfg.moe, rng)
            prog.cmd(Op.ROUTER, count=int(rng.integers(0, 3)), addr=prog.router_weights(w))
        elif op == Op.MOE:
            routed = any(c["op"] == Op.ROUTER and not check(cfg, c) for c in prog.commands)
            if not prog.moe or not routed:
                continue
            t = int(rng.integers(1, cfg.moe.tokens + 1))
            a = hl * int(rng.integers(0, 2 * span // hl - t + 1))
            dst = hl * int(rng.integers(0, 2 * span // hl - t + 1))   # over x or not
            prog.cmd(Op.MOE, a=a, dst=dst, count=t, addr=next(iter(prog.moe)))
        else:
            t = int(rng.integers(1, lin.tokens + 1))
            k = LINE * int(rng.integers(1, min(lin.k_max // LINE, 2 * span // t) + 1))
            n = LINE * int(rng.integers(1, min(lin.n_max // LINE, 4) + 1))
            b = rng.standard_normal(n).astype(np.float32) if rng.random() < 0.5 else None
            w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
            # packed, or the tokens apart (a row of their outputs, a stride of their x)
            stride = 0 if rng.random() < 0.6 else k // LINE + int(rng.integers(0, 3))
            row = 0 if rng.random() < 0.6 else n // LINE + int(rng.integers(0, 3))
            reads = (t - 1) * (stride or k // LINE) + k // LINE
            writes = (t - 1) * (row or n // LINE) + n // LINE
            if max(reads, writes) > 2 * span:
                continue
            a = int(rng.integers(0, 2 * span - reads + 1))
            dst = int(rng.integers(0, 2 * span - writes + 1))   # over x or not
            prog.cmd(Op.LINEAR, a=a, dst=dst, count=t, k=k, n=n, bias=b is not None,
                     stride=stride, row=row, addr=prog.linear_weight(w, b))
    prog.cmd(Op.OUT, a=0, count=2 * span)


def _random_attn(prog: Program, rng, span: int) -> None:
    """A random ``ATTN``: mostly a step (of one token to one more than a step takes) of a
    sequence that may not be there, over rows of random places and room, its outputs over
    its rows or not; an alloc, a free, a sink (of a head that may not be there), an
    append, or an unknown command of the attention block."""
    cfg = prog.cfg
    A = cfg.attn
    d = A.kv.head_dim
    qkv = (A.q_heads + cfg.attn_vectors) * d
    g = min(d, LINE)
    seq = int(rng.integers(0, A.kv.max_seqs + 1))
    kind = rng.choice(["step"] * 4 + ["alloc", "free", "sink", "append", "bad"])
    if kind == "alloc":
        prog.attn(AttnOp.ALLOC)
    elif kind == "free":
        prog.attn(AttnOp.FREE, seq=seq)
    elif kind == "sink":
        prog.attn(AttnOp.SINK, heads=int(rng.integers(0, A.q_heads + 1)),
                  value=int(np.float32(rng.standard_normal()).view(np.uint32)))
    elif kind == "bad":
        prog.attn(int(rng.integers(5, 8)), seq=seq)
    else:
        off = g * int(rng.integers(0, 2))
        row = -(-(off + qkv) // LINE) + int(rng.integers(0, 2))
        t = 1 if kind == "append" else int(rng.integers(1, A.max_step_tokens + 2))
        if t * row > 2 * span:
            return
        a = int(rng.integers(0, 2 * span - t * row + 1))
        out = cfg.attn_out_lines(t)
        dst = a if rng.random() < 0.5 else int(rng.integers(0, 2 * span - out + 1))
        prog.attn(AttnOp.APPEND if kind == "append" else AttnOp.STEP, seq=seq, count=t, a=a,
                  row=row, off=off, dst=dst)


def _cover(cov, cfg, c: dict) -> None:
    status = check(cfg, c)
    if status:
        cov.hit(f"cmd:refused_{status.name.lower()}")
        return
    op = Op(c["op"])
    cov.hit(f"op:{op.name.lower()}")
    cov.hit_if("op:in_place", op in (Op.ADD, Op.GLU, Op.NORM)
               and c["dst"] in (c["a"], c["b"]))
    cov.hit_if("op:norm_narrow", op == Op.NORM and 0 < c["k"] < cfg.hidden)
    cov.hit_if("op:strided", (op == Op.NORM and c["row"] > (c["k"] or cfg.hidden) // LINE)
               or (op == Op.LINEAR and (c["stride"] > c["k"] // LINE
                                        or c["row"] > c["n"] // LINE)))
    cov.hit_if("op:linear_bias", op == Op.LINEAR and c["bias"])
    cov.hit_if("op:linear_tokens", op == Op.LINEAR and c["count"] == cfg.linear.tokens)
    cov.hit_if("op:moe_tokens", op == Op.MOE and c["count"] == cfg.moe.tokens)
    cov.hit_if("op:rope_heads", op == Op.ROPE and c["heads"] > 1)
    cov.hit_if("op:rope_offset", op == Op.ROPE and c["off"] > 0)
    step = op == Op.ATTN and c["aop"] == AttnOp.STEP
    attended = step and c["count"] <= cfg.attn.max_step_tokens
    cov.hit_if("op:attn_tokens", attended and c["count"] > 1)
    tile = cfg.attn.tile_tokens
    cov.hit_if("op:attn_partial_tile", attended and tile > 1 and c["count"] % tile != 0)


def _cover_argmax(cov, model: DecoderModel, c: dict) -> None:
    """An ``ARGMAX`` (run by ``model``) whose largest logit is there twice, or every one NaN."""
    if c["op"] != Op.ARGMAX or check(model.config, c):
        return
    x = model.act[c["a"]:c["a"] + c["count"]].view(np.float32).ravel()
    finite = x[~np.isnan(x)]
    cov.hit_if("op:argmax_ties", not finite.size or np.sum(finite == finite.max()) > 1)


def timed_commands(cfg, commands: list[dict], model: DecoderModel) -> list[dict]:
    """``commands`` as the timed model takes them: each good ``MOE`` with its expert
    ``groups`` and each good ``ATTN`` with the attention model's ``result``, from ``model``
    (the golden model that ran them)."""
    routes, results = iter(model.routes), iter(model.results)
    out = []
    for c in commands:
        if not check(cfg, c) and c["op"] == Op.MOE:
            c = {**c, "groups": next(routes)}
        elif not check(cfg, c) and c["op"] == Op.ATTN:
            c = {**c, "result": next(results)}
        out.append(c)
    return out


def _requests(cfg, image, commands, routes) -> tuple[list, int]:
    """The read requests of the program's good commands, in order (one op at a time), each
    op's split by its fetch engine's bursts, and their words; ``routes`` each ``MOE``'s
    expert groups."""
    requests, words = [], 0
    routes = iter(routes)
    port = dataclasses.replace(cfg.norm_fetch, len_bits=cfg.len_bits)
    for c in commands:
        if check(cfg, c):
            continue
        if c["op"] == Op.NORM:
            got = fetch(port, image, [(c["addr"], norm_words(cfg, c))])
        elif c["op"] == Op.ROPE:
            got = fetch(port, image, [(c["addr"], c["count"] * cfg.rope_words)])
        elif c["op"] == Op.ROUTER:
            got = fetch(port, image, [(c["addr"], cfg.router_words)])
        elif c["op"] == Op.LINEAR:
            n = cfg.linear.tile_words(c["k"], bool(c["bias"]))
            got = fetch(port, image, [(c["addr"] + j * n, n)
                                      for j in range(c["n"] // cfg.linear.array.cols)])
        elif c["op"] == Op.MOE:
            experts = [e for e, _ in next(routes)] + ([cfg.moe.experts] if cfg.moe.shared
                                                       else [])
            tiles = moe_golden.tile_commands(cfg.moe, experts)
            got = fetch(dataclasses.replace(port, burst=cfg.moe.fetch.burst), image,
                        [(c["addr"] + a, n) for a, n in tiles])
        else:
            continue
        requests += got.requests
        words += len(got.words)
    return requests, words


async def run_program(dut, ctx, test: str, prog: Program, *, gaps: bool,
                      latency: int | None = None, bytes_per_cycle: int | None = None,
                      interrupt: bool = False, model: DecoderModel | None = None,
                      reset_first: bool = True, want=None) -> dict:
    """Run ``prog`` and check the ``OUT`` lines, the answers, the requests, the status and
    every handshake's cycle. ``interrupt``: first run it partway and reset the block.
    ``model``: the golden model that ran the programs before (its memory the program's
    image), which goes on from their state, as the block does when ``reset_first`` is false
    (the block idle after them). ``want``: what the ``OUT`` lines must be (float32 arrays,
    in order), checked against the golden model's before the block runs."""
    cfg, wl, codec = ctx.config, ctx.workload, ctx.codecs
    latency = wl.mem_latency if latency is None else latency
    bpc = wl.mem_bytes_per_cycle if bytes_per_cycle is None else bytes_per_cycle
    image = prog.image or [0]
    if model is None:
        model = prog.golden()
    model.routes, model.results = [], []
    xs = iter(prog.x)
    want_o, answers = [], []
    for c in prog.commands:
        _cover(ctx.coverage, cfg, c)
        _cover_argmax(ctx.coverage, model, c)
        good_in = c["op"] == Op.IN and check(cfg, c) == Status.OK
        x = next(xs).view(np.uint32) if good_in else None
        status, o = model.apply(c, x)
        answers.append((int(status), *model.answer))
        if c["op"] == Op.ATTN and not check(cfg, c):
            ctx.coverage.hit_if("op:attn_step", model.results[-1].out is not None)
            ctx.coverage.hit_if("op:attn_answered", status != Status.OK)
        if o is not None:
            want_o += [row.tolist() for row in o]
    if want is not None:
        _check_want(test, want_o, want)
    status_, seq_, length_, index_ = zip(*answers, strict=True)
    want_resp = codec["resp"].pack(status=list(status_), seq=list(seq_), length=list(length_),
                                   index=list(index_))
    beats = [join_words(row, 32) for x in prog.x for row in np.asarray(x).view(np.uint32)]
    requests, words = _requests(cfg, image, prog.commands, model.routes)
    tb = BlockBench(dut, ctx, test, sources=SOURCES, memories=("rdata",), sinks=SINKS,
                    gaps=gaps,
                    detail=f" (mem_latency={latency}, mem_bytes_per_cycle={bpc})")
    cmds = prog.commands
    timed_cmds = timed_commands(cfg, cmds, model)
    tb.source["cmd"].send(codec["cmd"].pack(**{f: [c[f] for c in cmds]
                                               for f in COMMAND_FIELDS}))
    tb.source["x"].send(beats)
    size = cfg.linear.weight_port_bits // 8
    rows = np.array([list(int(w).to_bytes(size, "big")) for w in image], np.uint8)
    tb.memory["rdata"] = Memory(rows, words, latency, bpc, tb.memory_valid["rdata"])
    tb.sink["req"].expect(requests, label="read requests", decode=lambda req: list(
        zip(np.asarray(req["addr"]).tolist(), np.asarray(req["len"]).tolist(), strict=True)))
    tb.sink["o"].expect(want_o, label="OUT lines", decode=lambda f: f[""].tolist())
    tb.sink["resp"].expect(want_resp, label="answers", kind=Kind.STATUS)
    timed = tb.predict(timing, cfg, timed_cmds, tb.valid, tb.ready,
                       MemoryAgent(latency, bpc, cfg.linear.weight_port_bits,
                                   tb.memory_valid["rdata"]))
    seen = await tb.run(timed, slack=5000, zero=("counters", "status"), interrupt=interrupt,
                        reset_first=reset_first)
    status = read_int(dut.status, "status")
    if status != answers[-1][0]:
        raise Failure(Kind.STATUS, f"{test}: status {status} after the last command, "
                                   f"expected {answers[-1][0]}")
    deliverable = seen.cycles * min(bpc, size)
    # The fast path's cycles where the streams keep up, as it assumes (None under gaps).
    fast_cycles = None if gaps else fast_path(cfg, timed_cmds, latency, bpc)["cycles"]
    return tb.check(COUNTERS, commands=len(cmds), requests=len(requests),
                    fast_cycles=fast_cycles,
                    weight_words=words,
                    weight_bandwidth_utilization=words * size / max(1, deliverable))


def _check_want(test: str, got: list, want) -> None:
    """The golden model's ``OUT`` lines ``got`` (binary32 bits, a list a line) against
    ``want`` (float32 arrays of lines, in order), bit for bit."""
    lines = [row.tolist() for v in want for row in np.asarray(v, np.float32).view(np.uint32)]
    if lines != got:
        bad = next((i for i, (a, b) in enumerate(zip(lines, got, strict=False))
                    if a != b),
                   min(len(lines), len(got)))
        raise Failure(Kind.DATA, f"{test}: the engine's golden model's OUT line {bad} is not "
                                  f"the layer model's ({len(got)} lines, {len(lines)} wanted)")


@cocotb.test()
async def test_edges(dut):
    """A layer's shape with NaN, infinities and huge values in x on a memory that keeps up;
    every refusal between good commands, each followed by reading back what it would have
    changed; good commands at the top of both memories (:func:`top_edges`); then each
    refusal as the last command of a short run (the status it leaves); then a ``MOE`` at the
    top of both (:func:`top_moe`); then a ``ROUTER`` at the top of the weights
    (:func:`top_router`)."""
    ctx = context()
    cfg = ctx.config
    rng = ctx.rng(1)
    fast = {"latency": 1, "bytes_per_cycle": cfg.linear.weight_port_bits // 8}
    prog = Program(cfg)
    fill(prog, rng)
    layer(prog, rng, cfg.linear.tokens, specials=True)
    prog.load(0, np.full((1, LINE), 2.0, np.float32))
    for want, bad in refusals(cfg):
        fields = {f: 0 for f in COMMAND_FIELDS} | bad
        if check(cfg, fields) != want:
            raise Failure(Kind.STATUS, f"test_edges: the refusal {bad} is "
                                       f"{check(cfg, fields).name} for this config, not "
                                       f"{want.name}")
        prog.cmd(**bad)
        prog.cmd(Op.OUT, a=0, count=min(cfg.act_lines, 16))
    strided_edges(prog, rng)
    top_edges(prog, rng)
    await run_program(dut, ctx, "test_edges", prog, gaps=False, **fast)
    for i, (_, bad) in enumerate(refusals(cfg)):
        prog = Program(cfg)
        prog.load(0, rng.standard_normal((1, LINE)))
        prog.cmd(**bad)
        await run_program(dut, ctx, f"test_edges[refusal {i}]", prog, gaps=False, **fast)
    prog = Program(cfg)
    fill(prog, rng)
    top_moe(prog, rng)
    await run_program(dut, ctx, "test_edges[top moe]", prog, gaps=False, **fast)
    prog = Program(cfg)
    fill(prog, rng)
    top_router(prog, rng)
    await run_program(dut, ctx, "test_edges[top router]", prog, gaps=False, **fast)


@cocotb.test()
async def test_workload(dut):
    """A layer's shape on ``tokens`` tokens, then ``commands`` random commands, under gaps
    and back-pressure on every stream, the workload's memory."""
    ctx = context()
    rng = ctx.rng(3)
    prog = Program(ctx.config)
    fill(prog, rng)
    layer(prog, rng, min(ctx.workload.tokens, ctx.config.linear.tokens))
    random_commands(prog, rng, ctx.workload.commands)
    await run_program(dut, ctx, "test_workload", prog, gaps=True)


@cocotb.test()
async def test_reset(dut):
    """A reset in the middle of a layer's shape under gaps and back-pressure (weights in
    flight, a norm or a projection half done): the block must come back idle with its
    counters and status at 0, then run the same program from the start correctly."""
    ctx = context()
    rng = ctx.rng(5)
    prog = Program(ctx.config)
    fill(prog, rng)
    layer(prog, rng, min(2, ctx.config.linear.tokens))
    await run_program(dut, ctx, "test_reset", prog, gaps=True, interrupt=True)
