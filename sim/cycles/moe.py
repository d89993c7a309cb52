"""Cycle model of the MoE block's parts (:mod:`scoville.rtl.moe_router`,
:mod:`scoville.rtl.moe_dispatch` so far).

The router takes a token's ``hidden`` elements of ``x`` one a cycle (as the stream gives
them), then works alone for :func:`route_latency` cycles before its answer is valid on ``o``;
it takes the next token's ``x`` once the answer has been taken.

The dispatch takes a batch's beats one a cycle (as the stream gives them), then sorts for
:func:`dispatch_latency` cycles; its sorted beats are then valid on ``o`` every cycle until
the last is taken, and the next batch's first beat is taken from the cycle after.
"""

from __future__ import annotations

__all__ = ["dispatch_latency", "route_latency"]


def route_latency(config) -> int:
    """Cycles from the clock edge that takes a token's last ``x`` element to the first cycle
    its answer is valid on ``o``: GPT-OSS the bias (1), the choices (``top_k``) and the weights
    (1); DeepSeek one sigmoid a cycle (``experts``), the group scores (1), the kept groups
    (``topk_group``), the choices (``top_k``) and the weights (1)."""
    if config.router == "deepseek":
        return config.experts + 1 + config.topk_group + config.top_k + 1
    return 1 + config.top_k + 1


def dispatch_latency(config, tokens: int, experts: int) -> int:
    """Cycles from the clock edge that takes a batch's last beat to the first cycle its first
    sorted beat is valid: a cycle per expert chosen at all (``experts``), one per choice
    (``tokens * top_k``), and one to open the first expert's group."""
    return experts + tokens * config.top_k + 1
