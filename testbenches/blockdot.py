"""Shared driving of the block dot-product units (MX and NVFP4): rows of element codes and
per-block scales become beats of ``lanes`` element pairs."""

from .kit import check_stream, context, pack


def beats(rows, *, lanes: int, block: int, scale_bits: int, tail=None):
    """Packed beats and their ``emits`` flags for ``rows`` of ``(a, b, sa, sb, ...)``.

    Beat layout, LSB first: ``a`` (lanes x 4), ``b`` (lanes x 4), ``sa``, ``sb``
    (``scale_bits`` each), then ``tail(row)`` as ``(value, width)`` pairs read on a dot
    product's final beat (zero elsewhere), then ``last``.
    """
    per_block = block // lanes
    items, emits = [], []
    for row in rows:
        a, b, sa, sb = row[:4]
        blocks = len(sa)
        extra = tail(row) if tail else []
        for j in range(blocks):
            for t in range(per_block):
                start = j * block + t * lanes
                last = t == per_block - 1 and j == blocks - 1
                word = pack(a[start : start + lanes], 4)
                word |= pack(b[start : start + lanes], 4) << (4 * lanes)
                word |= int(sa[j]) << (8 * lanes) | int(sb[j]) << (8 * lanes + scale_bits)
                offset = 8 * lanes + 2 * scale_bits
                for value, width in extra:
                    if last:
                        word |= int(value) << offset
                    offset += width
                word |= int(last) << offset
                items.append(word)
                emits.append(last)
    return items, emits, offset + 1


async def check_block_dot(dut, test, rows, want, *, block, scale_bits, latency, gaps, tail=None,
                          interrupt=False):
    """Drive ``rows`` through a block dot unit and compare with ``want`` (uint32 bits)."""
    ctx = context()
    items, emits, _ = beats(rows, lanes=ctx.config.lanes, block=block,
                                scale_bits=scale_bits, tail=tail)
    await check_stream(
        dut, ctx, test, items, [f"{int(w):08x}" for w in want],
        decode=lambda w: f"{w:08x}",
        latency=latency, gaps=gaps, emits=emits, interrupt=interrupt,
        describe=lambda k: "row=" + repr([list(map(int, x)) if hasattr(x, "__len__") else x
                                          for x in rows[k]]),
        blocks=sum(len(r[2]) for r in rows),
    )
