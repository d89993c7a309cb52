"""IEEE-754 binary32 addition as :class:`scoville.rtl.fp32_add.Fp32Add` computes it.

The model is NumPy float32 addition (round to nearest even, subnormals kept, no flush to
zero, overflow to +-Inf, IEEE signed zeros) with one change: every NaN result is the canonical
quiet NaN 0x7FC00000, because the RTL does not propagate NaN payloads or signs.
"""

import numpy as np

from scoville.rtl.lib import formats

__all__ = ["FP32_QNAN", "canonical_bits", "fp32_add", "sum_in_order", "tree_sum"]

#: The one NaN encoding the RTL produces.
FP32_QNAN = np.uint32(formats.FP32_QNAN)


def fp32_add(a_bits, b_bits) -> np.ndarray:
    """The binary32 sums of encodings ``a_bits`` and ``b_bits`` (broadcast), as uint32 bits.

    Every bit of every result equals NumPy's float32 ``a + b``, except that each NaN is
    :data:`FP32_QNAN`.

    Raises
    ------
    ValueError
        If an operand is not an integer in 0..0xFFFFFFFF.
    """
    a = _encodings("a_bits", a_bits)
    b = _encodings("b_bits", b_bits)
    with np.errstate(over="ignore", invalid="ignore"):
        total = a.view(np.float32) + b.view(np.float32)
    return canonical_bits(total)


def canonical_bits(values) -> np.ndarray:
    """The bits of float32 ``values`` as uint32, every NaN as :data:`FP32_QNAN`."""
    values = np.asarray(values, dtype=np.float32)
    return np.where(np.isnan(values), FP32_QNAN, values.view(np.uint32)).astype(np.uint32)


def sum_in_order(columns) -> np.ndarray:
    """Row sums of the float32 array ``columns`` (shape ``(n, k)``), added column by column
    into a float32 accumulator that starts at +0: each addition rounds once, in order."""
    columns = np.asarray(columns, dtype=np.float32)
    acc = np.zeros(columns.shape[0], dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(columns.shape[1]):
            acc = (acc + columns[:, j]).astype(np.float32)
    return acc


def tree_sum(values) -> np.ndarray:
    """Sums along the last axis of float32 ``values`` (a power of two of them) as a binary
    tree: neighbours, then neighbouring sums, each addition rounded once."""
    level = np.asarray(values, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        while level.shape[-1] > 1:
            level = (level[..., 0::2] + level[..., 1::2]).astype(np.float32)
    return level[..., 0]


def _encodings(name, bits) -> np.ndarray:
    """``bits`` as uint32, or a :class:`ValueError` if they are not 32-bit integer encodings."""
    bits = np.asarray(bits)
    if bits.dtype.kind not in "iu":
        raise ValueError(f"{name}: binary32 encodings must be integers; got dtype {bits.dtype}")
    if bits.size and (bits.min() < 0 or bits.max() > 0xFFFF_FFFF):
        raise ValueError(f"{name}: binary32 encodings must be in 0..0xFFFFFFFF")
    return bits.astype(np.uint32)
