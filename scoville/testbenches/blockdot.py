"""Shared driving of the block dot-product units (MX and NVFP4): rows of element codes and
per-block scales become beats of ``lanes`` element pairs."""

import numpy as np

from .bench import check_stream
from .kit import context


def beats(rows, *, lanes: int, block: int, tail=None) -> tuple[dict, list[bool]]:
    """The input columns (one row per beat: ``a``, ``b``, ``sa``, ``sb``, the ``tail(row)``
    fields read on a dot product's final beat and zero elsewhere, ``last``) and the ``emits``
    flags of ``rows`` of ``(a, b, sa, sb, ...)``."""
    per_block = block // lanes
    cols = {"a": [], "b": [], "sa": [], "sb": [], "last": []}
    for row in rows:
        a, b, sa, sb = row[:4]
        blocks = len(sa)
        beats_ = blocks * per_block
        cols["a"].append(np.asarray(a).reshape(beats_, lanes))
        cols["b"].append(np.asarray(b).reshape(beats_, lanes))
        cols["sa"].append(np.repeat(np.asarray(sa), per_block))
        cols["sb"].append(np.repeat(np.asarray(sb), per_block))
        last = np.zeros(beats_, np.int64)
        last[-1] = 1
        cols["last"].append(last)
        for name, value in (tail(row) if tail else {}).items():
            cols.setdefault(name, []).append(last * int(value))
    cols = {name: np.concatenate(parts) for name, parts in cols.items()}
    return cols, [bool(x) for x in cols["last"]]


def by_length(rows, model) -> list:
    """``model`` (a golden block dot product over whole arrays) applied to ``rows`` of ``(a,
    b, sa, sb, *rest)``: one call for all the rows of each number of blocks, the results in
    the order of ``rows``. ``rest`` are per-row scalars, passed as arrays."""
    groups: dict[int, list[int]] = {}
    for k, row in enumerate(rows):
        groups.setdefault(len(row[2]), []).append(k)
    out = [None] * len(rows)
    for ks in groups.values():
        columns = [np.stack([np.asarray(rows[k][c]) for k in ks]) for c in range(len(rows[0]))]
        for k, value in zip(ks, model(*columns), strict=True):
            out[k] = value
    return out


async def check_block_dot(dut, test, rows, want, *, block, gaps, tail=None, interrupt=False):
    """Drive ``rows`` through a block dot unit and compare with ``want`` (uint32 bits); the
    timed model takes the unit's latency from its component."""
    ctx = context()
    inputs, emits = beats(rows, lanes=ctx.config.lanes, block=block, tail=tail)
    await check_stream(
        dut, ctx, test, inputs, [f"{int(w):08x}" for w in want],
        decode=lambda out: [f"{int(w):08x}" for w in out[""]],
        latency=ctx.component.latency, gaps=gaps, emits=emits, interrupt=interrupt,
        describe=lambda k: "row=" + repr([list(map(int, x)) if hasattr(x, "__len__") else x
                                          for x in rows[k]]),
        blocks=sum(len(r[2]) for r in rows),
    )
