"""Functional coverage: named bins that a block's testbench declares and its runs hit.

A testbench module declares its block's bins in ``BINS``, a dict of name to what hits it
(every status and command, special float classes, page boundaries, window edges, expert load
extremes...); every block also has one bin per stream, ``stall:NAME``: a beat of ``NAME``
waited (``valid`` high, ``ready`` low) at least one cycle (an input's wait is the block's
back-pressure, an output's the testbench's), counted by the harness; but a stream the
testbench's ``NEVER_WAITS`` names, with the reason its beats cannot wait. A test hits bins through
the run's :func:`coverage` and :func:`~scoville.testbenches.kit.record` writes what it hit
into the test's metrics (``coverage``: every declared bin with its count, zeros included);
the flow sums them over the run's tests (``RunResult.coverage``, the ``coverage`` of
``scoville sim --json``). ``./scripts/test`` fails when a declared bin of a block it simulated
stays empty over all its runs (``--coverage``, tests/conftest.py); ``docs/coverage.md`` lists
the bins (``python scripts/coverage_bins.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["FP32_CLASSES", "STALL", "Coverage", "bins_of", "command_bins", "declared",
           "fp32_classes", "stall_bins"]

#: The prefix of a stream's stall bin.
STALL = "stall:"


def stall_bins(streams: Iterable[str]) -> dict[str, str]:
    """One stall bin per stream."""
    return {f"{STALL}{name}": f"a beat of `{name}` waited (valid high, ready low)"
            for name in streams}


#: The classes of binary32 results, as bins.
FP32_CLASSES = {
    "result:nan": "a NaN result",
    "result:inf": "an infinite result",
    "result:zero": "a zero result",
    "result:subnormal": "a subnormal result",
}


def fp32_classes(bits) -> dict[str, int]:
    """How many of the binary32 ``bits`` fall in each class of :data:`FP32_CLASSES`."""
    f = np.asarray(bits, np.uint32).view(np.float32)
    return {"result:nan": int(np.isnan(f).sum()), "result:inf": int(np.isinf(f).sum()),
            "result:zero": int((f == 0).sum()),
            "result:subnormal": int(((f != 0) & (np.abs(f) < np.finfo(np.float32).tiny)).sum())}


def command_bins(what: str, ops: Iterable[str], statuses: Iterable[str]) -> dict[str, str]:
    """A bin per operation (``op:NAME``), one for an opcode of none (``op:undefined``) and one
    per answer status (``status:NAME``) of a block that takes ``what``s (a command, a request)
    and answers each."""
    return {**{f"op:{name}": f"a `{name}` {what}" for name in ops},
            "op:undefined": f"a {what} with an opcode of none of the operations",
            **{f"status:{name}": f"an answer `{name}`" for name in statuses}}


def bins_of(testbench: str, streams: Iterable[str], config=None) -> dict[str, str]:
    """The bins of a testbench module (its ``BINS``) for a component with ``streams``: a stall
    bin for each stream but those its ``NEVER_WAITS`` names (each with the reason a beat of it
    cannot wait: the block is always ready for it, or the runs leave it idle). Given the run's
    ``config``, without the bins the module's ``unreachable(config)`` names (a configuration
    that cannot reach them: the decoder's attention in steps of one token has no step of
    more)."""
    module = importlib.import_module(testbench)
    never = getattr(module, "NEVER_WAITS", {})
    bins = {**getattr(module, "BINS", {}),
            **stall_bins(name for name in streams if name not in never)}
    if config is not None and hasattr(module, "unreachable"):
        for name in module.unreachable(config):
            del bins[name]
    return bins


def declared(block) -> dict[str, str]:
    """Every bin of ``block`` (a :class:`~scoville.blocks.Block`), for the streams of its
    default configuration's component (:func:`bins_of`)."""
    from scoville.blocks import parse_params
    from scoville.sim.harness import stream_names

    config, _ = parse_params(block, {})
    return bins_of(block.testbench, stream_names(block.component(config)))


class Coverage:
    """The hits of one run's declared bins, taken test by test (:meth:`take`)."""

    def __init__(self, bins: Mapping[str, str]):
        self.bins = dict(bins)
        self._counts = dict.fromkeys(self.bins, 0)

    def hit(self, name: str, count: int = 1) -> None:
        """Count ``count`` hits of bin ``name`` (a name not declared is an error: a typo would
        leave the bin it meant empty)."""
        if name not in self._counts:
            raise KeyError(f"coverage bin {name!r} is not declared; declared: "
                           f"{', '.join(self.bins)}")
        self._counts[name] += int(count)

    def hit_if(self, name: str, condition) -> None:
        """Hit ``name`` once when ``condition`` holds."""
        if condition:
            self.hit(name)

    def hits(self, counts: Mapping[str, int]) -> None:
        """Count each of ``counts`` (a bin not declared may be counted 0: a class the unit's
        contract never produces)."""
        for name, count in counts.items():
            if count or name in self._counts:
                self.hit(name, count)

    def stalls(self, waited: Mapping[str, int]) -> None:
        """Each stream's cycles with a beat waiting, as the harness counted them."""
        for stream, cycles in waited.items():
            if f"{STALL}{stream}" in self._counts:
                self.hit(f"{STALL}{stream}", cycles)

    def take(self) -> dict[str, int]:
        """Every bin's hits since the last take (zeros included), and start again."""
        counts, self._counts = self._counts, dict.fromkeys(self.bins, 0)
        return counts
