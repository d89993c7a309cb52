"""Performance counters behind one member.

A block's counters are the fields of one ``data.StructLayout`` on one ``Out`` port named
``counters``: a testbench reads them all at once, and a composed block gathers its parts'
counters as fields of its own layout (``counters.array.busy``) without naming each port.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data

__all__ = ["count", "counter_layout"]


def counter_layout(widths: dict[str, int]) -> data.StructLayout:
    """The layout of counters ``name: bits``, in that order; each wraps at ``2**bits``."""
    return data.StructLayout({name: unsigned(bits) for name, bits in widths.items()})


def count(m, counters, increments: dict) -> None:
    """Add each of ``increments`` (``name: value``, a condition or a small number) to its field
    of ``counters`` (a view of a :func:`counter_layout`) every cycle."""
    for name, inc in increments.items():
        field = getattr(counters, name)
        m.d.sync += field.eq(field + inc)
