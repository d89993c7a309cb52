#!/usr/bin/env python3
"""The decoder layer's benchmark (issue #34's configuration), as far as the ``decoder`` block
runs it today: memory busy and array busy over the layer.

The configuration: GPT-OSS-shaped, hidden 256, 8 query and 2 KV heads of 32, 16 experts
top-4 of intermediate 256, an 8 x 16 array, a 256-bit weight port, the memory at the array's
weight rate (8 bytes a cycle) 500 cycles away, a 1k context.

The layer as the ``decoder`` block runs it (its commands: ``IN``, ``NORM``, the Q/K/V
projection, ``ROPE`` of the query and key heads (one command a sequence in decode, its
position's table row; in prefill one a chunk of 64 consecutive positions), ``ATTN`` (decode: a
step a sequence, each over a cache of ``CONTEXT`` tokens; prefill: one sequence, steps of
``STEP_TOKENS`` tokens after ``CONTEXT``), the O projection on the attention's output, the
residual ``ADD``, the second ``NORM``, ``ROUTER`` (the router's weights from memory), the
``MOE`` (router, experts, combine; each token's four experts drawn uniformly at random,
seeded), the residual, ``OUT``), from its cycle-level timed model (which the testbench holds to
the RTL's every handshake at other sizes) and its fast path beside it; prefill from the fast
path alone (the cycle model takes minutes there). The attention steps' cache reads are the
golden model's without the values (:func:`scoville.sim.cycles.attention.synthetic_step`: the
timing does not depend on them; ``tests/test_attention.py`` holds it to the golden model's
steps). The attention block has its own array of as many PEs as the projections', shaped
``ATTN_ARRAY`` (its rows a decode step's group of 4 query heads), fed by a KV cache of 4 banks
of ``KV_WORD_BITS`` bits.

Memory busy = weight bytes delivered / (cycles x 8); array busy = useful MACs / (128 PEs x
cycles), both over the whole of what the row covers.

Writes ``docs/decoder-bench.md``.

Usage: ``python scripts/decoder_bench.py [--seed N] [--out FILE.md]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from scoville.rtl.decoder import AttnOp, DecoderConfig, Op
from scoville.rtl.lib.params import build_config
from scoville.sim.cycles import attention as attention_timed
from scoville.sim.cycles import decoder as decoder_timed
from scoville.sim.cycles import moe as moe_timed
from scoville.sim.cycles.memory import MemoryAgent
from scoville.sim.golden.decoder import COMMAND_FIELDS, check

ROOT = Path(__file__).resolve().parents[1]
H, Q_HEADS, KV_HEADS, HEAD = 256, 8, 2, 32
EXPERTS, TOP_K, INTER = 16, 4, 256
ARRAY = {"rows": 8, "cols": 16}
#: The attention block's own array: as many PEs, its rows a decode step's group of query
#: heads (a decode step fills ``group`` = 4 rows), fed by a KV cache of 4 banks of 128 bits.
ATTN_ARRAY = {"rows": 4, "cols": 32}
KV_WORD_BITS = 128
#: Tokens an attention step takes in prefill (the attention block's ``q_tokens``).
STEP_TOKENS = 16
PORT, LATENCY, BPC, CONTEXT = 256, 500, 8, 1024
ENGINE_HEAD = ("| case | cycles | fast path | fast vs model | weight bytes | memory busy | "
               "array busy | model wall s |\n|---|---:|---:|---:|---:|---:|---:|---:|")
#: Fetch buffers that cover the memory's round trip (latency x words a cycle, and a burst).
BUFFER = 512
#: The MoE's column-tile descriptors queued ahead of its loader (its requests run up to
#: three tiles ahead of the tile being loaded: the words in flight cover the round trip).
TILE_QUEUE = 2


def engine_config(tokens: int) -> DecoderConfig:
    return build_config(DecoderConfig, {
        "hidden": H, "act_lines": max(1024, tokens * 40),
        "linear.array.rows": ARRAY["rows"], "linear.array.cols": ARRAY["cols"],
        "linear.tokens": max(tokens, 8), "linear.k_max": 512, "linear.n_max": 1024,
        "linear.weight_port_bits": PORT, "linear.fetch_buffer": BUFFER,
        "moe.experts": EXPERTS, "moe.top_k": TOP_K, "moe.hidden": H,
        "moe.intermediate": INTER, "moe.array.rows": ARRAY["rows"],
        "moe.array.cols": ARRAY["cols"], "moe.weight_port_bits": PORT,
        "moe.fetch_buffer": BUFFER, "moe.tile_queue": TILE_QUEUE,
        "moe.tokens": max(tokens, 8), "rope.dim": HEAD,
        "attn.kv.kv_heads": KV_HEADS, "attn.kv.head_dim": HEAD, "attn.q_heads": Q_HEADS,
        "attn.sinks": 1, "attn.kv.banks": 4, "attn.kv.word_bits": KV_WORD_BITS,
        "attn.kv.bank_words": 32768, "attn.kv.max_seqs": 8, "attn.q_tokens": STEP_TOKENS,
        "attn.array.rows": ATTN_ARRAY["rows"], "attn.array.cols": ATTN_ARRAY["cols"]})


def engine_program(cfg: DecoderConfig, tokens: int, rng) -> list[dict]:
    """The engine's commands of a GPT-OSS-shaped layer on ``tokens`` tokens: x in, its norm,
    Q/K/V (with biases), the query and key heads rotated (decode, up to 8 tokens: a
    sequence each, a command each; prefill: chunks of 64 positions), the O projection of
    the attention's output (here the lines Q/K/V left: the data does not change the
    cycles), the residual, the MoE's norm, the MoE (each
    token's four experts drawn uniformly at random), the residual, out."""
    hl = H // 32
    qkv = (Q_HEADS + 2 * KV_HEADS) * HEAD
    X, N, QKV = 0, tokens * hl, 2 * tokens * hl
    OUT = QKV + tokens * qkv // 32    # the attention's outputs
    addr = 0

    def weights(words: int) -> int:
        nonlocal addr
        addr += words
        return addr - words

    chosen = np.array([rng.choice(EXPERTS, TOP_K, replace=False) for _ in range(tokens)])
    counts = np.bincount(chosen.ravel(), minlength=EXPERTS)
    groups = tuple((e, int(n)) for e, n in enumerate(counts) if n)
    lin = cfg.linear
    table = weights(CONTEXT * 2 * cfg.rope_words)   # rows for positions 0 .. 2 * CONTEXT - 1
    row = qkv // 32
    chunk = 1 if tokens <= 8 else 64
    rope = [{"op": Op.ROPE, "a": QKV + t * row, "count": min(chunk, tokens - t),
             "heads": Q_HEADS + KV_HEADS, "stride": HEAD, "row": row,
             "addr": table + (CONTEXT + t) * cfg.rope_words}
            for t in range(0, tokens, chunk)]
    if tokens <= 8:     # decode: a step a sequence, each over CONTEXT tokens
        step = attention_timed.synthetic_step(cfg.attn, CONTEXT)
        attend = [{"op": Op.ATTN, "aop": AttnOp.STEP, "seq": t, "count": 1,
                   "a": QKV + t * row, "row": row, "dst": OUT + t * cfg.attn_out_lines(1),
                   "result": step} for t in range(tokens)]
    else:               # prefill: one sequence, steps of STEP_TOKENS after CONTEXT tokens
        attend = [{"op": Op.ATTN, "aop": AttnOp.STEP, "seq": 0, "count": n,
                   "a": QKV + t * row, "row": row, "dst": OUT + cfg.attn_out_lines(t),
                   "result": attention_timed.synthetic_step(cfg.attn, CONTEXT + t + n,
                                                            tokens=n)}
                  for t in range(0, tokens, STEP_TOKENS)
                  for n in [min(STEP_TOKENS, tokens - t)]]
    return [{"op": Op.IN, "dst": X, "count": tokens * hl},
            {"op": Op.NORM, "a": X, "dst": N, "count": tokens, "addr": weights(cfg.norm_words)},
            {"op": Op.LINEAR, "a": N, "dst": QKV, "count": tokens, "k": H, "n": qkv,
             "bias": 1, "addr": weights(lin.weight_words(H, qkv, True))},
            *rope, *attend,
            {"op": Op.LINEAR, "a": OUT, "dst": N, "count": tokens, "k": Q_HEADS * HEAD,
             "n": H, "bias": 1, "addr": weights(lin.weight_words(Q_HEADS * HEAD, H, True))},
            {"op": Op.ADD, "a": X, "b": N, "dst": X, "count": tokens * hl},
            {"op": Op.NORM, "a": X, "dst": N, "count": tokens, "addr": weights(cfg.norm_words)},
            {"op": Op.ROUTER, "addr": weights(cfg.router_words)},
            {"op": Op.MOE, "a": N, "dst": N, "count": tokens, "addr": weights(cfg.moe_words),
             "groups": groups},
            {"op": Op.ADD, "a": X, "b": N, "dst": X, "count": tokens * hl},
            {"op": Op.OUT, "a": X, "count": tokens * hl}]


def engine_macs(tokens: int, attention: bool = True) -> int:
    """The useful MACs: the projections', the router's, the experts' and (``attention``) the
    attention's (:func:`attention_macs`)."""
    proj = tokens * H * ((Q_HEADS + 2 * KV_HEADS) * HEAD + Q_HEADS * HEAD)
    attn = attention_macs(tokens) if attention else 0
    return proj + tokens * H * EXPERTS + tokens * TOP_K * 3 * H * INTER + attn


def attention_macs(tokens: int) -> int:
    """The attention's useful MACs: ``Q K^T`` and ``P V`` of each query head over the
    positions it attends (decode, up to 8 tokens: ``CONTEXT`` each; prefill: token ``i`` the
    ``CONTEXT + i + 1`` up to its own)."""
    attended = (tokens * CONTEXT if tokens <= 8
                else sum(CONTEXT + i + 1 for i in range(tokens)))
    return 2 * Q_HEADS * HEAD * attended


def run_engine(tokens: int, rng, cycle_model: bool) -> dict:
    cfg = engine_config(tokens)
    cmds = engine_program(cfg, tokens, rng)
    refused = [c for c in cmds if check(cfg, {f: c.get(f, 0) for f in COMMAND_FIELDS})]
    assert not refused, f"the bench's program has refused commands: {refused[:1]}"
    fast = decoder_timed.fast(cfg, cmds, LATENCY, BPC)
    out = {"fast": fast["cycles"], "macs": engine_macs(tokens), "wall": None,
           "macs_no_attention": engine_macs(tokens, attention=False),
           "cycles": fast["cycles"], "bytes": fast["weight_words"] * PORT // 8}
    if cycle_model:
        start = time.perf_counter()
        model = decoder_timed.timing(cfg, cmds, memory=MemoryAgent(LATENCY, BPC, PORT))
        out.update(cycles=model.cycles, wall=time.perf_counter() - start,
                   bytes=model.counters["weight_words"] * PORT // 8)
    return out


#: The decode rows the breakdown splits.
BREAKDOWN = {"decode, batch 1": 1, "decode, batch 8": 8}


def _breakdown(rng) -> str:
    """Rows of the breakdown table: each op's fast-path cycles (its commands run alone,
    summed) and its weight bytes' cycles at the memory's rate, per decode row."""
    by_op: dict[str, list[str]] = {}
    for tokens in BREAKDOWN.values():
        cfg = engine_config(tokens)
        sums: dict[str, list[float]] = {}
        for c in engine_program(cfg, tokens, rng):
            got = decoder_timed.fast(cfg, [c], LATENCY, BPC)
            cell = sums.setdefault(Op(c["op"]).name, [0.0, 0.0])
            cell[0] += got["cycles"]
            cell[1] += got["weight_words"] * PORT / 8 / BPC
        for name, (cycles, stream) in sums.items():
            by_op.setdefault(name, []).append(f"{cycles:,.0f} | {stream:,.0f}")
    return "\n".join(f"| {name} | {' | '.join(cells)} |" for name, cells in by_op.items())


def batch_bound(tokens: int, weight_bytes: int, target: float = 0.9) -> SimpleNamespace:
    """What the decode layer of ``tokens`` sequences (its weights ``weight_bytes``) leaves to
    reach ``target`` memory busy: the cycles it may spend not streaming (``allowed``); the
    attention's (its steps', and their compute floor: MACs on the attention's PEs), which
    must finish before the MoE's experts are known; the stream of the weights that do not
    wait for it (the O projection's, the second norm's, the router's), all that could flow
    meanwhile; and the most memory busy with nothing else exposed."""
    cfg = engine_config(tokens)
    stream = weight_bytes // BPC
    floor = -(-attention_macs(tokens) // (ATTN_ARRAY["rows"] * ATTN_ARRAY["cols"]))
    steps = tokens * attention_timed.decode_step(cfg.attn, CONTEXT)["cycles"]
    free = (cfg.linear.weight_words(Q_HEADS * HEAD, H, True) + cfg.router_words
            + cfg.norm_words) * PORT // 8 // BPC
    return SimpleNamespace(floor=floor, steps=steps, free=free,
                           allowed=round(stream / target) - stream,
                           busy=stream / (stream + max(0, floor - free)))


def busy(part: dict) -> tuple[float, float]:
    pes = ARRAY["rows"] * ARRAY["cols"]
    return (part["bytes"] / (part["cycles"] * BPC), part["macs"] / (pes * part["cycles"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="docs/decoder-bench.md")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    engine_rows, no_attention = [], []
    moe_cfg = engine_config(8).moe
    moe_note = ("the MoE's weight stream does not hide the round trip "
                "(`moe_timed.buffer_covers` is false)"
                if not moe_timed.buffer_covers(moe_cfg, LATENCY, BPC)
                else "the MoE's weights stream at the memory's rate (its column tiles' "
                f"descriptors queued {TILE_QUEUE} deep, its requests run up to "
                f"{TILE_QUEUE + 1} tiles ahead of the tile being loaded: "
                "`moe_timed.buffer_covers`)")
    breakdown = _breakdown(np.random.default_rng(args.seed))
    for label, tokens in (("decode, batch 1", 1), ("decode, batch 8", 8),
                          ("prefill, 256 tokens", 256)):
        e = run_engine(tokens, rng, cycle_model=tokens <= 8)
        mem, arr = busy(e)
        no_attention.append(f"{label} {busy({**e, 'macs': e['macs_no_attention']})[1]:.1%}")
        model = f"{e['cycles']:,}" if e["wall"] is not None else "(fast path only)"
        wall = f"{e['wall']:.1f}" if e["wall"] is not None else ""
        engine_rows.append(
            f"| {label} | {model} | {e['fast']:,.0f} | "
            + (f"{e['fast'] / e['cycles'] - 1:+.2%}" if e["wall"] is not None else "")
            + f" | {e['bytes']:,} | {mem:.1%} | {arr:.1%} | {wall} |")
        print(engine_rows[-1], file=sys.stderr)
        if tokens == 8:
            bound = batch_bound(tokens, e["bytes"])
    text = f"""# The decoder layer's benchmark

Generated by `python scripts/decoder_bench.py --seed {args.seed}`; do not edit by hand.
`docs/decoder.md` says how the block works; the script's docstring says what each row runs.

The configuration (issue #34): GPT-OSS-shaped, hidden {H}, {Q_HEADS} query and {KV_HEADS} KV
heads of {HEAD}, {EXPERTS} experts top-{TOP_K} of intermediate {INTER}, an
{ARRAY['rows']} x {ARRAY['cols']} BF16 array for the projections (MXFP4 weights for the
experts), a {PORT}-bit weight port, the memory at {BPC} bytes a cycle and {LATENCY} cycles
away, fetch buffers of {BUFFER} words (the MoE's column-tile descriptors queued
{TILE_QUEUE} deep), a {CONTEXT}-token context. **Memory busy** = weight
bytes delivered / (cycles x {BPC}); **array busy** = useful MACs / ({ARRAY['rows']} x
{ARRAY['cols']} PEs x cycles), over everything the row covers. The targets: decode at batch 1
and 8 memory busy at least 90%; prefill of 256 tokens after 1k of context array busy at least
70%.

## The layer in the `decoder` block

The commands `IN`, `NORM`, Q/K/V projection (N = {(Q_HEADS + 2 * KV_HEADS) * HEAD}, biases),
`ROPE` of the query and key heads (their table rows from memory: counted in the weight
bytes), `ATTN` (decode: a step for each sequence over {CONTEXT} tokens of its cache; prefill:
steps of {STEP_TOKENS} tokens after {CONTEXT}), O projection, residual `ADD`, `NORM`, `ROUTER`
(the router's weights from memory: counted in the weight bytes), `MOE`, residual `ADD`, `OUT`,
one at a time: cycles from the timed model (cycle for cycle the RTL's,
as the testbench checks at other sizes), the fast path beside. The attention block has its own
array of {ATTN_ARRAY['rows'] * ATTN_ARRAY['cols']} PEs, {ATTN_ARRAY['rows']} x
{ATTN_ARRAY['cols']} (a decode step's group of {Q_HEADS // KV_HEADS} query heads fills its
rows), its KV cache read {KV_WORD_BITS * 4} bits a cycle (4 banks). The array busy counts every
part's useful MACs (the attention's too, over the positions each query attends) over one
array's {ARRAY['rows'] * ARRAY['cols']} PEs.

{ENGINE_HEAD}
{chr(10).join(engine_rows)}

The attention runs on its own array, the projections and experts on theirs; the commands run
one at a time, so at most one of them works in a cycle, and the array busy above counts both's
MACs over one array's PEs. The projections', router's and experts' MACs alone over the same
cycles: {'; '.join(no_attention)}.

Where the cycles go (the fast path of each command run alone, summed by op; **stream** =
its weight bytes at {BPC} bytes a cycle, the least the memory lets it take):

| op | {' | '.join(f'{label}: cycles | stream' for label in BREAKDOWN)} |
|---|{'---:|---:|' * len(BREAKDOWN)}
{breakdown}

What stands between these and the targets, read off the rows: {moe_note}; each command pays
the memory's latency once before its weights flow (a command waits for the one before it);
in decode the attention steps leave the memory idle (their K and V are on chip, and nothing
fetches the next command's weights meanwhile). At batch 8 the target leaves
{bound.allowed:,} cycles of the layer not streaming weights, and the attention steps alone
take {bound.steps:,} (their compute floor on the
attention's PEs {bound.floor:,}). Only the weights that do not wait for them (the O
projection's, the second norm's and the router's: {bound.free:,} cycles of stream) could flow
during them: the MoE's experts, most of the weights, depend on the router, which waits for
every sequence's attention. With the attention at its floor, buffers holding all of those
weights and nothing else exposed (no latency, norms or rotations) the memory would be busy
{bound.busy:.1%}: the target needs nearly all of that, or the next layer's weights fetched
during this one's attention (weights staged on chip), or a larger attention array.
"""
    (ROOT / args.out).write_text(text)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
