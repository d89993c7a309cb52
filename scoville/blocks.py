"""The block table: every block the flow and the CLI know, one entry each.

Adding a block is one :class:`Block` entry in :data:`BLOCKS`.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scoville.rtl.fetch import Fetch, FetchConfig
from scoville.rtl.fp4 import Fp4Mul, Fp4MulConfig
from scoville.rtl.fp32 import Fp32Add, Fp32AddConfig
from scoville.rtl.gemm import Gemm, GemmConfig
from scoville.rtl.intmac import IntMac, IntMacConfig
from scoville.rtl.kvcache import KvCache, KvCacheConfig
from scoville.rtl.mxdot import MxDot, MxDotConfig
from scoville.rtl.mxquant import MxQuant, MxQuantConfig
from scoville.rtl.nvfp4dot import Nvfp4Dot, Nvfp4DotConfig
from scoville.rtl.params import ParamError
from scoville.sim.workload import FetchWorkload, GemmWorkload, KvCacheWorkload, StreamWorkload

__all__ = ["BLOCKS", "Block", "get_block", "parse_params"]


@dataclass(frozen=True)
class Block:
    """One registered block.

    Attributes
    ----------
    name : str
        The name used on the command line.
    summary : str
        One line saying what it is.
    config : type
        Frozen dataclass of the hardware parameters; the RTL, golden and timed models take it.
    workload : type
        Frozen dataclass of the testbench's workload parameters.
    component : callable
        ``config -> wiring.Component``.
    testbench : str
        The cocotb test module.
    workload_test : str
        The cocotb test that runs the random workload (what ``scoville sim`` runs).
    """

    name: str
    summary: str
    config: type
    workload: type
    component: Callable[[Any], Any]
    testbench: str
    workload_test: str = "test_workload"

    def param_fields(self) -> dict[str, tuple[type, dataclasses.Field]]:
        """Every parameter name, with the class that owns it and its field."""
        out = {}
        for cls in (self.config, self.workload):
            for f in dataclasses.fields(cls):
                out[f.name] = (cls, f)
        return out


BLOCKS: dict[str, Block] = {
    block.name: block
    for block in [
        Block(
            name="fp4_mul",
            summary="exact FP4 (E2M1) x FP4 multiplier, products in quarters",
            config=Fp4MulConfig,
            workload=StreamWorkload,
            component=Fp4Mul,
            testbench="scoville.testbenches.fp4_mul",
        ),
        Block(
            name="fp32_add",
            summary="IEEE-754 binary32 adder, bit-exact to NumPy float32 (canonical NaN)",
            config=Fp32AddConfig,
            workload=StreamWorkload,
            component=Fp32Add,
            testbench="scoville.testbenches.fp32_add",
        ),
        Block(
            name="int_mac",
            summary="INT4/INT8 dot-product MAC with wrapping INT32 accumulation",
            config=IntMacConfig,
            workload=StreamWorkload,
            component=IntMac,
            testbench="scoville.testbenches.int_mac",
        ),
        Block(
            name="mx_dot",
            summary="MXFP4 block dot products (exact block sums) with FP32 accumulation",
            config=MxDotConfig,
            workload=StreamWorkload,
            component=MxDot,
            testbench="scoville.testbenches.mx_dot",
        ),
        Block(
            name="nvfp4_dot",
            summary="NVFP4 block dot products, FP32 accumulation, per-tensor FP32 scale",
            config=Nvfp4DotConfig,
            workload=StreamWorkload,
            component=Nvfp4Dot,
            testbench="scoville.testbenches.nvfp4_dot",
        ),
        Block(
            name="mx_quant",
            summary="MXFP4 quantizer: 32 FP32/BF16 values to E2M1 codes and an E8M0 scale",
            config=MxQuantConfig,
            workload=StreamWorkload,
            component=MxQuant,
            testbench="scoville.testbenches.mx_quant",
        ),
        Block(
            name="gemm",
            summary="tiled GEMM engine on an R x C systolic array (os/ws; int8, int4, mxfp4)",
            config=GemmConfig,
            workload=GemmWorkload,
            component=Gemm,
            testbench="scoville.testbenches.gemm",
        ),
        Block(
            name="kvcache",
            summary="KV-cache scratchpad: banked SRAM, paged sequences, fork with copy-on-write",
            config=KvCacheConfig,
            workload=KvCacheWorkload,
            component=KvCache,
            testbench="scoville.testbenches.kvcache",
        ),
        Block(
            name="fetch",
            summary="read-fetch engine: commands to bursts of memory reads, words out in order",
            config=FetchConfig,
            workload=FetchWorkload,
            component=Fetch,
            testbench="scoville.testbenches.fetch",
        ),
    ]
}


def get_block(name: str) -> Block:
    """The block called ``name``, or a one-line :class:`ParamError`."""
    try:
        return BLOCKS[name]
    except KeyError:
        raise ParamError(f"unknown block {name!r}; allowed: {', '.join(BLOCKS)}") from None


def _coerce(name: str, text: str, kind: type, allowed: str) -> Any:
    try:
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        return kind(text)
    except ValueError:
        raise ParamError(
            f"parameter '{name}' must be {'an' if kind is int else 'a'} {kind.__name__}; "
            f"allowed: {allowed}; got {text!r}"
        ) from None


def parse_params(block: Block, items: list[str] | dict[str, Any]) -> tuple[Any, Any]:
    """Build ``(config, workload)`` of ``block`` from ``NAME=VALUE`` strings or a dict.

    Raises
    ------
    ParamError
        One line naming the parameter and the allowed values.
    """
    fields = block.param_fields()
    values: dict[type, dict[str, Any]] = {block.config: {}, block.workload: {}}
    pairs = items.items() if isinstance(items, dict) else [_split(item) for item in items]
    for name, value in pairs:
        if name not in fields:
            raise ParamError(
                f"unknown parameter '{name}' for block '{block.name}'; "
                f"allowed: {', '.join(fields)}"
            )
        cls, f = fields[name]
        kind = typing.get_type_hints(cls)[name]
        if isinstance(value, str):
            value = _coerce(name, value, kind, f.metadata.get("allowed", "any"))
        values[cls][name] = value
    return block.config(**values[block.config]), block.workload(**values[block.workload])


def _split(item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name:
        raise ParamError(f"--param takes NAME=VALUE; got {item!r}")
    return name.strip(), value.strip()
