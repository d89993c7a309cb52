"""What :class:`scoville.rtl.mx_quant.MxQuant` computes: each beat's 32 values, as the block
receives them in its ``in_fmt``, quantized to its ``out_fmt`` by
:func:`scoville.sim.golden.mx.quantize_mxfp4` or :func:`scoville.sim.golden.mx.quantize_mxfp8`
(the OCP MX v1.0 rule; ``docs/numerics.md``)."""

from __future__ import annotations

import numpy as np

from scoville.rtl.lib.formats import MX_BLOCK

from .mx import quantize_mxfp4, quantize_mxfp8

__all__ = ["mx_quant"]


def mx_quant(config, blocks) -> tuple[np.ndarray, np.ndarray]:
    """Element codes ``(beats, 32)`` (E2M1 or E4M3) and E8M0 scales ``(beats,)`` (uint8) of
    ``blocks``, float32 values of shape ``(beats, 32)``.

    Raises
    ------
    ValueError
        A value the block cannot receive: not a BF16 value when ``in_fmt`` is ``bf16``.
    """
    x = np.asarray(blocks, dtype=np.float32).reshape(-1, MX_BLOCK)
    if config.in_fmt == "bf16" and (x.view(np.uint32) & np.uint32(0xFFFF)).any():
        raise ValueError("parameter 'blocks': in_fmt bf16 takes BF16 values (the low 16 bits "
                         "of each float32 zero)")
    quantize = quantize_mxfp8 if config.out_fmt == "mxfp8" else quantize_mxfp4
    codes, scales = quantize(x, axis=-1)
    return codes, scales[:, 0]
