"""Golden model of the ``linear`` block (:mod:`scoville.rtl.linear`): ``y = x W^T + b`` as
the block computes it, bit for bit, and the memory the block reads its weights from.

The arithmetic (``docs/linear.md``, :func:`apply`): x (FP32) and W rounded to BF16 (to
nearest, ties to even); each output the FP32 sum of the products each rounded to FP32, in
the array's partial sums (:func:`~scoville.sim.golden.gemm.matmul` in ``bf16``: each from +0 in
K order, then added as a tree); then, with a bias, ``fp32(y + b)``; without one, the sums as
they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .gemm import matmul
from .mx import quantize_bf16

__all__ = ["Command", "apply", "linear", "memory_image", "output_beats", "read_weight",
           "reference", "tile_words"]


def apply(x, w, b=None, *, sums: int | None = None) -> np.ndarray:
    """``x W^T + b`` (``x`` (T, K), ``w`` (N, K) as ``nn.Linear`` holds it, ``b`` (N,) or
    None) in the block's arithmetic (the module says which): (T, N) float32. ``sums``: the
    array's partial sums (:attr:`~scoville.rtl.gemm.GemmConfig.sums`; None: the default
    array's)."""
    x, w = np.asarray(x, np.float32), np.asarray(w)
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"apply: x is {x.shape} and w is {w.shape}; allowed: (T, K) and "
                         "(N, K)")
    y = matmul(x, w.T, "bf16", sums=sums)
    if b is None:
        return y
    with np.errstate(over="ignore", invalid="ignore"):
        return (y + np.asarray(b, np.float32)).astype(np.float32)


def reference(x, w, b=None) -> np.ndarray:
    """``x W^T + b`` in float64, nothing rounded."""
    y = np.asarray(x, np.float64) @ np.asarray(w, np.float64).T
    return y if b is None else y + np.asarray(b, np.float64)


def tile_words(config, w, b=None) -> list[int]:
    """The weight port's words of a weight ``w`` (N, K) and its bias ``b`` (N,) or None as the
    memory holds them (:meth:`~scoville.rtl.linear.LinearConfig.tile_bits`): column tile after
    column tile (``cols`` outputs), each its K rows of ``cols`` BF16 weights (column 0 lowest)
    then its ``cols`` FP32 biases, padded to whole words, bit 0 the lowest of its first word."""
    c, p = config.array.cols, config.weight_port_bits
    codes = quantize_bf16(np.asarray(w, np.float64)).astype(np.int64)
    n, k = codes.shape
    bias = None if b is None else np.asarray(b, np.float32).view(np.uint32).astype(np.int64)
    words = []
    for j in range(0, n, c):
        value, pos = 0, 0
        fields = [(v, 16) for v in codes[j:j + c].T.ravel()]
        if bias is not None:
            fields += [(v, 32) for v in bias[j:j + c]]
        for v, width in fields:
            value |= int(v) << pos
            pos += width
        words += [(value >> (i * p)) & ((1 << p) - 1) for i in range(-(-pos // p))]
    return words


def read_weight(config, memory: Sequence[int], addr: int, k: int, n: int,
                bias: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The weight (N, K) float32 (its BF16 values) and bias (N,) or None that ``memory`` holds
    from word ``addr`` as :func:`tile_words` lays them out."""
    c, p = config.array.cols, config.weight_port_bits
    per = config.tile_words(k, bias)
    w = np.zeros((n, k), np.uint32)
    b = np.zeros(n, np.uint32) if bias else None
    for j in range(n // c):
        words = memory[addr + j * per:addr + (j + 1) * per]
        value = sum(int(v) << (p * i) for i, v in enumerate(words))
        codes = [(value >> (16 * f)) & 0xFFFF for f in range(k * c)]
        w[j * c:(j + 1) * c] = np.array(codes, np.uint32).reshape(k, c).T << 16
        if bias:
            b[j * c:(j + 1) * c] = [(value >> (16 * k * c + 32 * q)) & 0xFFFFFFFF
                                    for q in range(c)]
    return w.view(np.float32), None if b is None else b.view(np.float32)


@dataclass(frozen=True)
class Command:
    """One command of the block: ``x`` (T, K) FP32, the weight ``w`` (N, K) and bias ``b``
    (N,) or None, at word ``addr`` of the weight memory. ``tokens``, ``k``, ``n``: a command
    the block refuses (``x`` and ``w`` None)."""

    x: np.ndarray | None
    w: np.ndarray | None
    b: np.ndarray | None = None
    addr: int = 0
    refused: tuple[int, int, int] | None = None

    @property
    def fields(self) -> dict:
        """The ``cmd`` beat's fields."""
        if self.refused is not None:
            t, k, n = self.refused
        else:
            (t, k), n = self.x.shape, len(self.w)
        return {"tokens": t, "k": k, "n": n, "addr": self.addr, "bias": int(self.b is not None)}


def memory_image(config, commands: Sequence[Command]) -> list[int]:
    """The weight memory holding every command's weight at its ``addr`` (zeros between)."""
    image: list[int] = []
    for c in commands:
        if c.w is None:
            continue
        words = tile_words(config, c.w, c.b)
        end = c.addr + len(words)
        image += [0] * max(0, end - len(image))
        if any(image[c.addr:end]) and image[c.addr:end] != words:
            raise ValueError(f"memory_image: the weights at {c.addr} overlap another's")
        image[c.addr:end] = words
    return image


def output_beats(config, y) -> list[list[int]]:
    """The ``o`` beats of an output ``y`` (T, N): column tile after column tile, each the T
    rows of its ``cols`` values (binary32 bits)."""
    c = config.array.cols
    bits = np.asarray(y, np.float32).view(np.uint32)
    return [bits[t, j:j + c].tolist() for j in range(0, bits.shape[1], c)
            for t in range(bits.shape[0])]


def linear(config, commands: Sequence[Command]) -> list[list[int]]:
    """Every ``o`` beat of ``commands`` (refused ones give none)."""
    return [beat for c in commands if c.x is not None
            for beat in output_beats(config, apply(c.x, c.w, c.b, sums=config.array.sums))]
