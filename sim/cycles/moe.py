"""Cycle model of the MoE block's parts (:mod:`scoville.rtl.moe_router` so far).

The router takes a token's ``hidden`` elements of ``x`` one a cycle (as the stream gives
them), then works alone for :func:`route_latency` cycles before its answer is valid on ``o``;
it takes the next token's ``x`` once the answer has been taken.
"""

from __future__ import annotations

__all__ = ["route_latency"]


def route_latency(config) -> int:
    """Cycles from the clock edge that takes a token's last ``x`` element to the first cycle
    its answer is valid on ``o``: GPT-OSS the bias (1), the choices (``top_k``) and the weights
    (1); DeepSeek one sigmoid a cycle (``experts``), the group scores (1), the kept groups
    (``topk_group``), the choices (``top_k``) and the weights (1)."""
    if config.router == "deepseek":
        return config.experts + 1 + config.topk_group + config.top_k + 1
    return 1 + config.top_k + 1
