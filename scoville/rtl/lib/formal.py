"""A block's own invariants, for the formal checks (``scoville formal``)."""

from __future__ import annotations

from amaranth.hdl import Assert

__all__ = ["invariant"]


def invariant(m, platform, test, text: str) -> None:
    """Assert ``test`` in every cycle, only when the design is elaborated for a proof
    (``platform == "formal"``, as Amaranth's FIFOs keep their properties): simulation and
    synthesis see none of it. ``text`` names the unit and what broke, in a few words, written
    in the call (a counterexample names the call's line, and the text from it)."""
    if platform == "formal":
        m.d.comb += Assert(test, text, src_loc_at=1)
