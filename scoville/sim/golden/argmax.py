"""Greedy sampling as the ``argmax`` block computes it: for each token's logits, the lowest
index of the largest value, comparing as IEEE 754 does (-0 equals +0), a NaN never chosen
(below -Inf); a token of NaNs only gives index 0. The value handed on with the index is the
chosen logit (the canonical quiet NaN for a token of NaNs)."""

from __future__ import annotations

import numpy as np

from .fp32_add import canonical_bits

__all__ = ["argmax", "greedy"]


def greedy(logits) -> np.ndarray:
    """The chosen index of each row of ``logits`` (n, V), any float dtype."""
    x = np.asarray(logits)
    x = x.reshape(1, -1) if x.ndim == 1 else x
    nan = np.isnan(x)
    best = np.where(nan, -np.inf, x).max(axis=1, initial=-np.inf)
    hit = (x == best[:, None]) & ~nan  # -0 == +0
    return np.where(hit.any(axis=1), hit.argmax(axis=1), 0)


def argmax(config, logits) -> tuple[np.ndarray, np.ndarray]:
    """The ``argmax`` block's outputs for tokens of ``config.vocab`` float32 logits (n, V):
    ``(indices (n,), values (n,) as float32 bits)``."""
    x = np.asarray(logits, np.float32).reshape(-1, config.vocab)
    idx = greedy(x)
    return idx, canonical_bits(x[np.arange(len(x)), idx])
