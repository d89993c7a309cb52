"""Command, status and state codes: ``amaranth.lib.enum.IntEnum`` classes of an explicit shape
(without one Amaranth makes a plain Python enum, and a signal of it a bare integer)."""

from amaranth.lib import enum

__all__ = ["names"]


def names(codes: type[enum.IntEnum]) -> dict[str, enum.IntEnum]:
    """``{name: member}`` of a code enum, the names in lower case: the keys that reports,
    testbench statistics and the command line use (``STATUS["ok"] is Status.OK``)."""
    return {member.name.lower(): member for member in codes}
