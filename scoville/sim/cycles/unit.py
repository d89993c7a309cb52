"""The protocol every unit model follows, the wire between two of them, and the one run loop.

A *unit model* is the timed model of one RTL unit, stepped once per cycle. It is built with
its ports and follows one rule:

- what it shows its neighbours in a cycle (its outputs' ``valid``, its inputs' ``ready``) is a
  property of its state at the cycle's start (a unit whose ``ready`` passes its consumer's
  ``ready`` through, as a stalling pipeline does, shows it as a method of the cycle);
- :meth:`step` ``(t)`` commits cycle ``t``: the unit takes what its input ports offer when it is
  ready (``port.offers(t)``, ``port.payload``, ``port.take(t)``), hands its output over when the
  output port accepts (``port.accepts(t)``, ``port.take(t)``), and moves to its next state.

A port is a :class:`~scoville.sim.cycles.stream.Producer` or a
:class:`~scoville.sim.cycles.stream.Consumer` at the block's boundary (a stream the testbench
drives, by its schedule), or a :class:`Wire` between two units, which the composed model sets
each cycle from the two units' properties before it steps them (both units see the
handshake; either may call ``take``). So a unit model is the same object alone (checked
against its RTL unit) and inside a block.

:func:`run` is the loop of the timed models: cycle after cycle until the run is done, with
one check that the model makes progress (MoE's model keeps its own loop until its units are
unit models, issue #33).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Wire", "run"]


class Wire:
    """A stream between two unit models, for the cycle about to be stepped: the producer's
    ``valid`` and ``payload`` and the consumer's ``ready`` (set by the composed model with
    :meth:`set`), ``taken`` once the consumer took the beat in it, and ``cycles``, the cycle
    of every handshake so far. It is both an input port (:meth:`offers`) and an output port
    (:meth:`accepts`)."""

    __slots__ = ("cycles", "payload", "ready", "taken", "valid")

    def __init__(self):
        self.valid = self.ready = self.taken = False
        self.payload: Any = None
        self.cycles: list[int] = []

    def set(self, valid: bool, ready: bool = True, payload: Any = None) -> None:
        """The cycle's ``valid``, ``ready`` and ``payload``; not yet taken."""
        self.valid, self.ready, self.payload, self.taken = valid, ready, payload, False

    def offers(self, t: int) -> bool:
        return self.valid

    def accepts(self, t: int) -> bool:
        return self.ready

    def take(self, t: int) -> None:
        """The handshake of cycle ``t`` (either side may call it; it counts once)."""
        if not self.taken:
            self.taken = True
            self.cycles.append(t)


def run(name: str, cycle: Callable[[int], int], done: Callable[[], bool], limit: int) -> int:
    """Step a timed model: ``cycle(t)`` models cycle ``t`` (and may skip cycles where nothing
    can change) and returns the next cycle to model, until ``done()``. Raises one line naming
    the model when it runs past ``limit`` cycles (a model that makes no progress, or a run
    whose streams never let it finish). Returns the first cycle not modelled."""
    t = 0
    while not done():
        if t > limit:
            raise RuntimeError(f"{name} timed model: no progress after {t} cycles")
        t = cycle(t)
    return t
