"""Small helpers for writing combinational datapaths."""

from amaranth.hdl import Signal

__all__ = ["wire"]


def wire(m, name, value, shape=None):
    """A named combinational signal driven by ``value``.

    Reusing a Python expression duplicates its logic in the Verilog and in Amaranth's simulator
    each time it is used; a signal is emitted once and shared.
    """
    sig = Signal(shape if shape is not None else value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig
