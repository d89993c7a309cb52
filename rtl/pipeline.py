"""A stalling pipeline: the handshake skeleton shared by the streaming arithmetic units.

All stages advance together when the last stage can move (its output is empty or taken), so
``i.ready = ~o.valid | o.ready``. The cycle model in :mod:`scoville.sim.cycles.stream` mirrors
exactly this rule.
"""

from amaranth.hdl import Module, Signal

__all__ = ["stall_chain", "stall_pipeline"]


def stall_pipeline(m: Module, i, o, latency: int) -> Signal:
    """Like :func:`stall_chain` with every item emitting; returns the stage enable only."""
    return stall_chain(m, i, o, latency)[0]


def stall_chain(m: Module, i, o, latency: int, *, emits=None) -> tuple[Signal, Signal]:
    """Add the valid chain of a ``latency``-stage pipeline from stream ``i`` to stream ``o``.

    Parameters
    ----------
    m : Module
        The module to add the logic to.
    i, o : stream interfaces
        Input (consumed) and output (produced) streams.
    latency : int
        Number of register stages, at least 1.
    emits : Value, optional
        For reducing units: true when the item in the last stage produces an output. Items
        that do not emit leave the pipeline without an output handshake. Always by default.

    Returns
    -------
    (Signal, Signal)
        The stage enable (data registers load only when it is high) and the valid chain
        (bit ``s`` is high when stage ``s`` holds an item).
    """
    if latency < 1:
        raise ValueError(f"parameter 'latency' must be >= 1; got {latency}")
    en = Signal(name="pipe_en")
    valid = Signal(latency, name="pipe_valid")
    m.d.comb += [
        en.eq(~o.valid | o.ready),
        i.ready.eq(en),
        o.valid.eq(valid[latency - 1] & (1 if emits is None else emits)),
    ]
    with m.If(en):
        if latency == 1:
            m.d.sync += valid.eq(i.valid)
        else:
            m.d.sync += valid.eq((valid << 1) | i.valid)
    return en, valid
