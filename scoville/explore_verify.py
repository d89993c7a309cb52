"""``scoville explore --verify``: the blocks a ``blocks`` chip is timed by, run in RTL on
Verilator at reduced size, against the models the exploration uses.

- ``gemm`` on an 8 x 8 MXFP4 array, GEMMs of one shape: the RTL's cycles, the timed model's,
  and the closed form (:func:`~scoville.sim.cycles.gemm.run_cycles`) at the array config the
  blocks chip's GEMM times come from (``scoville.explore.blocks.gemm_config``): all three
  equal.
- ``moe`` at H = I = 64, 8 experts, top-2, on an 8 x 8 array: the RTL's cycles and the timed
  model's (equal), and the MoE fast path the blocks chip uses, for the routing the RTL made
  (within its tolerance, 2.5%).
- ``attention`` decode on an 8 x 16 array, KV lines of 256 bits (P V in four column tiles;
  the blocks chip's 8 x 64 BF16 array takes Amaranth past 24 GB): the RTL's cycles and the
  timed model's (equal; the decode fast path the blocks chip uses equals the timed model,
  ``tests/test_attention.py``, this point among its cases).
- ``decoder``: tiny GPT-OSS's two layers and head in the decoder block (``scoville generate``,
  a prompt of 4 and one token: the prefill pass, a program a layer): the RTL's cycles, the
  timed model's (equal) and the decoder's fast path (:func:`scoville.sim.cycles.decoder.fast`,
  within its tolerance, 2%), the model's token the golden model's.

Streams keep up (no gaps, no back-pressure), as the exploration assumes.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from scoville.blocks import get_block
from scoville.explore import blocks
from scoville.sim import flow
from scoville.sim.cycles import gemm as gemm_timed
from scoville.sim.cycles import moe as moe_timed

__all__ = ["verify"]

#: The MoE fast path's tolerance against the cycle model (``tests/test_moe_fast.py``).
MOE_TOLERANCE = 0.025
#: The decoder fast path's (``tests/test_decoder.py``, ``tests/test_generate.py``).
DECODER_TOLERANCE = 0.02


def _run(name: str, params: dict, seed: int):
    block = get_block(name)
    from scoville.blocks import parse_params

    config, workload = parse_params(block, [f"{k}={v}" for k, v in params.items()])
    result = flow.run(block, config, workload, "verilator", seed=seed)
    if not result.passed:
        raise RuntimeError(f"{name}: the RTL run failed ({result.log})")
    return config, result.metrics[block.workload_test]


def _generate(model: str, prompt_len: int, tokens: int, seed: int) -> dict:
    """``scoville generate --json`` of ``model`` on Verilator: its report."""
    import argparse

    from scoville.generate_command import run

    args = argparse.Namespace(model=model, weights=None, prompt_len=prompt_len, tokens=tokens,
                              sim="verilator", seed=seed, json=True)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        run(args)
    return json.loads(buf.getvalue())


def verify(seed: int = 1, out=sys.stdout) -> int:
    """Run the four blocks; print a table; 0 when every model agrees, else 1."""
    rows, ok = [], True
    shape = (16, 64, 32)
    params = {"rows": 8, "cols": 8, "fmt": "mxfp4", "m": shape[0], "k": shape[1],
              "n": shape[2], "count": 3, "gap": 0, "backpressure": 0}
    _, m = _run("gemm", params, seed)
    # The closed form at the array config the exploration times the blocks chip's GEMMs with.
    closed = gemm_timed.run_cycles(blocks.gemm_config(8, 8), [shape] * 3)
    good = m["cycles"] == m["model_cycles"] == closed
    ok &= good
    rows.append(("gemm 8x8 mxfp4, 3 x (16, 64, 32)", m["cycles"], m["model_cycles"], closed,
                 "closed form", good))

    params = {"experts": 8, "top_k": 2, "hidden": 64, "intermediate": 64, "tokens": 8,
              "array.rows": 8, "array.cols": 8, "weight_port_bits": 64, "batches": 1,
              "mem_latency": 20, "mem_bytes_per_cycle": 8, "gap": 0, "backpressure": 0}
    cfg, m = _run("moe", params, seed)
    groups = [(e, n) for e, n in enumerate(m["tokens_per_expert"][:cfg.experts]) if n]
    fast = moe_timed.layer(cfg, cfg.tokens, groups, 20, 8)["cycles"]
    good = (m["cycles"] == m["model_cycles"]
            and abs(fast / m["cycles"] - 1) <= MOE_TOLERANCE)
    ok &= good
    rows.append(("moe H=I=64, 8 experts top-2, 8x8, 8 tokens", m["cycles"], m["model_cycles"],
                 fast, "fast path", good))

    # An array of 8 x 16 (P V in four column tiles), KV lines of 256 bits: at 8 x 64 Amaranth
    # takes more than 24 GB to elaborate the 512 BF16 PEs, and at 8 x 32 the built-in
    # (WebAssembly) Yosys runs out of its 4 GB writing the Verilog.
    params = {"kv.kv_heads": 2, "kv.head_dim": 64, "q_heads": 16, "array.rows": 8,
              "array.cols": 16, "kv.banks": 4, "seqs": 1, "context": 100, "steps": 2,
              "gap": 0, "backpressure": 0}
    _, m = _run("attention", params, seed)
    good = m["cycles"] == m["model_cycles"]
    ok &= good
    rows.append(("attention decode, 2 KV heads x 8, 8x16, 100 tokens, 2 steps", m["cycles"],
                 m["model_cycles"], None, "", good))

    m = _generate("tiny-gpt-oss", 4, 1, seed)
    if not m["passed"]:
        raise RuntimeError(f"decoder: the RTL run failed ({m['log']})")
    good = (m["cycles"] == m["model_cycles"]
            and abs(m["fast_cycles"] / m["cycles"] - 1) <= DECODER_TOLERANCE)
    ok &= good
    rows.append((f"decoder: tiny GPT-OSS, 2 layers and head, prefill of 4 "
                 f"({m['commands']} commands)", m["cycles"], m["model_cycles"],
                 m["fast_cycles"], "fast path", good))

    print("| block, point | RTL cycles | timed model | exploration's model | agrees |",
          file=out)
    print("|---|---:|---:|---:|---|", file=out)
    for what, rtl, model, explore, kind, good in rows:
        ex = "(the timed model)" if explore is None else (
            f"{explore:,} ({kind}, {explore / rtl - 1:+.2%})")
        print(f"| {what} | {rtl:,} | {model:,} | {ex} | {'yes' if good else 'NO'} |",
              file=out)
    return 0 if ok else 1
