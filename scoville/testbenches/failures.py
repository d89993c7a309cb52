"""What kind of check failed: every failing check of the testbenches says its kind first.

A testbench's failure is :class:`Failure` (an ``AssertionError``) whose message starts with its
kind in brackets, ``[timing] block gemm ...: first differing handshake: stream o beat 3: ...``,
so a test's message (cocotb's ``results.xml``, ``scoville sim``'s output) tells a wrong value
from a late handshake or a run that never ended without reading further. The mutation runner
(``scripts/mutants.py``) checks each mutation's failure against the kind it expects with
:func:`kind_of`, and the stream of a timing failure with :func:`stream_of`.
"""

from __future__ import annotations

import enum
import re

__all__ = ["Failure", "Kind", "kind_of", "stream_of", "without_kind"]


class Kind(enum.Enum):
    """The kinds of failure, by what differs."""

    #: An output's value, or the number of outputs, differs from the golden model's.
    DATA = "data"
    #: A status or answer code differs from the golden model's.
    STATUS = "status"
    #: A handshake's cycle (or the run's cycle count) differs from the timed model's.
    TIMING = "timing"
    #: A performance or state counter differs from the timed or golden model's.
    COUNTER = "counter"
    #: The stream rules are broken: ``valid`` dropped or the payload changed while a beat
    #: waited, an X or Z on a stream, a bad memory request, an output offered in reset.
    PROTOCOL = "protocol"
    #: The run did not end by its deadline.
    TIMEOUT = "timeout"


class Failure(AssertionError):
    """A failed check of kind ``kind``; its message is ``[kind] message``."""

    def __init__(self, kind: Kind, message: str):
        super().__init__(f"[{kind.value}] {message}")
        self.kind, self.message = kind, message

    def __reduce__(self):
        """Pickled as its kind and message (a Dask worker's failure reaches the client)."""
        return type(self), (self.kind, self.message), self.__dict__


_TAG = re.compile(r"\s*(?:\w+: )?\[(\w+)\] ")
_STREAM = re.compile(r"first differing handshake: stream (\S+) ")


def kind_of(message: str) -> Kind | None:
    """The kind a failure message starts with (after the exception's class name, if the
    message carries it: ``Failure: [data] ...``); None when it names none (a plain ``assert``
    of a test's own, or the harness's own trouble)."""
    found = _TAG.match(message)
    if found is None:
        return None
    try:
        return Kind(found.group(1))
    except ValueError:
        return None


def without_kind(message: str) -> str:
    """``message`` without its leading kind (and the exception's class name before it)."""
    found = _TAG.match(message)
    return message[found.end():] if found else message


def stream_of(message: str) -> str | None:
    """The stream of a timing failure's first differing handshake, if it names one."""
    found = _STREAM.search(message)
    return found.group(1) if found else None
