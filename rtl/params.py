"""Declaring and checking block parameters.

Every block is described by one frozen dataclass. Its fields are declared with :func:`param`,
which records the allowed values in words; ``__post_init__`` calls the ``check_*`` helpers,
which raise :class:`ValueError` with one line naming the parameter and the allowed values.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["ParamError", "check_choice", "check_int", "check_prob", "param"]


class ParamError(ValueError):
    """A parameter has a bad value; the message is one line naming it and what is allowed."""


def param(default: Any, allowed: str, doc: str = "") -> Any:
    """A dataclass field with its allowed values described for error messages and ``--help``."""
    return dataclasses.field(default=default, metadata={"allowed": allowed, "doc": doc})


def allowed(cls: type, name: str) -> str:
    """The allowed-values text of field ``name`` of config class ``cls``."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f.metadata.get("allowed", "any")
    raise KeyError(name)


def check_int(name: str, value: Any, lo: int, hi: int | None = None, *, choices=None) -> None:
    """Check that ``value`` is an int in ``[lo, hi]`` (and in ``choices`` when given)."""
    if choices is not None:
        text = ", ".join(str(c) for c in choices)
    else:
        text = f"{lo}..{hi}" if hi is not None else f">= {lo}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParamError(f"parameter '{name}' must be an integer; allowed: {text}; got {value!r}")
    if value < lo or (hi is not None and value > hi) or (choices and value not in choices):
        raise ParamError(f"parameter '{name}' = {value} is out of range; allowed: {text}")


def check_choice(name: str, value: Any, choices) -> None:
    """Check that ``value`` is one of ``choices``."""
    if value not in choices:
        text = ", ".join(str(c) for c in choices)
        raise ParamError(f"parameter '{name}' = {value!r} is not allowed; allowed: {text}")


def check_prob(name: str, value: Any, hi: float = 0.95) -> None:
    """Check that ``value`` is a probability in ``[0, hi]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= hi:
        raise ParamError(f"parameter '{name}' must be a number in 0..{hi}; got {value!r}")
