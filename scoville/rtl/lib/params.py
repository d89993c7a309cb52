"""Declaring and checking block parameters.

Every block is described by one frozen dataclass. Its fields are declared with :func:`param`,
which records the allowed values in words; ``__post_init__`` calls the ``check_*`` helpers,
which raise :class:`ValueError` with one line naming the parameter and the allowed values.

A composed block's config holds its parts' configs as fields (declared with :func:`part`):
each parameter has one source, and outside the config it is named by its dotted path
(``array.rows``). :func:`param_tree` lists every parameter of a config class by that path,
:func:`flat_params` gives a config's values by path, and :func:`build_config` makes a config
from values by path, naming the full path in any error.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

__all__ = [
    "Param",
    "ParamError",
    "build_config",
    "check_choice",
    "check_parts",
    "check_int",
    "check_prob",
    "flat_params",
    "param",
    "param_tree",
    "part",
]


class ParamError(ValueError):
    """A parameter has a bad value; the message is one line naming it and what is allowed."""

    def within(self, prefix: str, names=()) -> ParamError:
        """The same error for the parameters of the part ``prefix`` of a composed config:
        every ``parameter 'NAME'`` in the message becomes ``parameter 'PREFIX.NAME'``, and
        every ``NAME=`` of one of ``names`` (the part's parameters) ``PREFIX.NAME=``."""
        text = re.sub(r"parameter '([\w.]+)'", rf"parameter '{prefix}.\1'", str(self))
        for name in names:
            text = re.sub(rf"(?<![\w.']){name}=", f"{prefix}.{name}=", text)
        return ParamError(text)


class Param(NamedTuple):
    """One parameter of a config class, parts' included (:func:`param_tree`)."""

    name: str  # the dotted name
    owner: type  # the class that declares it
    field: dataclasses.Field
    default: Any  # its default in this config (a composition may change a part's)
    allowed: str  # its allowed values in this config, in words


def param(default: Any, allowed: str, doc: str = "") -> Any:
    """A dataclass field with its allowed values described for error messages and ``--help``."""
    return dataclasses.field(default=default, metadata={"allowed": allowed, "doc": doc})


def part(default: Any, doc: str = "", restrict: dict[str, tuple] | None = None) -> Any:
    """A dataclass field holding a part's config (a frozen dataclass instance): its parameters
    are the composed config's, named ``FIELD.NAME``. ``restrict`` narrows some of them to the
    values the composition works with (``{"dataflow": ("os",)}``); :func:`build_config` checks
    them before it builds the part, :func:`check_parts` (from the composed config's
    ``__post_init__``) on any instance, and :func:`param_tree` lists them as the allowed
    values."""
    if not dataclasses.is_dataclass(default) or isinstance(default, type):
        raise TypeError(f"part() takes a config instance; got {default!r}")
    return dataclasses.field(default=default, metadata={"part": True, "doc": doc,
                                                        "restrict": dict(restrict or {})})


def check_parts(config: Any) -> None:
    """Check the parameters of every part of ``config`` against the values its composition
    allows (``part(..., restrict=...)``); the error names the full dotted path."""
    for f in dataclasses.fields(config):
        if is_part(f):
            value = getattr(config, f.name)
            fields = {g.name: getattr(value, g.name) for g in dataclasses.fields(value)}
            _check_restricted(f"{f.name}.", fields, f.metadata["restrict"])


def _check_restricted(prefix: str, values: dict[str, Any], restrict: dict[str, tuple]) -> None:
    for name, choices in restrict.items():
        if name in values:
            check_choice(f"{prefix}{name}", values[name], choices)


def is_part(f: dataclasses.Field) -> bool:
    """Whether field ``f`` holds a part's config."""
    return bool(f.metadata.get("part"))


def param_tree(cls: type, prefix: str = "") -> Iterator[Param]:
    """Every parameter of config class ``cls``, parts' parameters included, in declaration
    order."""
    yield from _tree(cls, prefix, None, {})


def _tree(cls, prefix, instance, restrict):
    for f in dataclasses.fields(cls):
        name = f"{prefix}{f.name}"
        default = f.default if instance is None else getattr(instance, f.name)
        if is_part(f):
            yield from _tree(type(default), f"{name}.", default, f.metadata["restrict"])
        else:
            yield Param(name, cls, f, default, _allowed(f, restrict))


def _allowed(f: dataclasses.Field, restrict: dict[str, tuple]) -> str:
    """The allowed values of field ``f`` in words: its own, or those its composition keeps."""
    if f.name in restrict:
        return ", ".join(map(str, restrict[f.name]))
    return f.metadata.get("allowed", "any")


def flat_params(config: Any, prefix: str = "") -> dict[str, Any]:
    """The values of ``config`` by dotted name (parts' parameters included)."""
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if is_part(f):
            out.update(flat_params(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = value
    return out


def build_config(cls: type, values: dict[str, Any],
                 coerce: Callable[[str, Any, type, str], Any] | None = None,
                 base: Any = None) -> Any:
    """A ``cls`` config from ``values`` by dotted name (a part's values may also come as a
    nested dict), the others at their defaults; a part starts from its default in ``cls``
    (or from ``base``'s part).

    ``coerce(name, value, type, allowed)`` converts each value first (text from the command
    line); the names it and the checks see are the full dotted names.

    Raises
    ------
    ParamError
        An unknown name (with the allowed ones), or a bad value (naming its full path).
    """
    return _build(cls, values, coerce, base, "", {})


def _build(cls, values, coerce, base, prefix, restrict):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    own: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        head, dot, rest = name.partition(".")
        f = fields.get(head)
        if f is not None and is_part(f) and not dot:
            if isinstance(value, dict):
                nested.setdefault(head, {}).update(value)
                continue
            if isinstance(value, type(f.default)):
                nested.setdefault(head, {}).update(flat_params(value))
                continue
            names = [p.name for p in param_tree(type(f.default), f"{prefix}{name}.")]
            raise ParamError(f"parameter '{prefix}{name}' is a part: set its parameters as "
                             f"'{prefix}{name}.NAME'; allowed: {', '.join(names)}")
        if f is None or is_part(f) != bool(dot):
            known = [p.name for p in param_tree(cls, prefix)]
            raise ParamError(f"unknown parameter '{prefix}{name}'; allowed: {', '.join(known)}")
        if dot:
            nested.setdefault(head, {})[rest] = value
        else:
            if coerce is not None:
                value = coerce(f"{prefix}{name}", value, hints[name], _allowed(f, restrict))
            own[name] = value
    # What the composition allows is checked first: it says why a part's value is out.
    _check_restricted(prefix, own, restrict)
    for head, sub in nested.items():
        start = getattr(base, head) if base is not None else fields[head].default
        own[head] = _build(type(start), sub, coerce, start, f"{prefix}{head}.",
                           fields[head].metadata["restrict"])
    try:
        if base is not None:
            return dataclasses.replace(base, **own)
        return cls(**own)
    except ParamError as err:
        if not prefix:
            raise
        raise err.within(prefix.rstrip("."), fields) from None


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
