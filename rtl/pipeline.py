"""A stalling pipeline: the handshake skeleton shared by the streaming arithmetic units.

All stages advance together when the last stage can move (its output is empty or taken), so
``i.ready = ~o.valid | o.ready``. The cycle model in :mod:`scoville.sim.cycles.stream` mirrors
exactly this rule.
"""

from amaranth.hdl import Module, Signal

__all__ = ["stall_pipeline"]


def stall_pipeline(m: Module, i, o, latency: int) -> Signal:
    """Add the valid chain of a ``latency``-stage pipeline from stream ``i`` to stream ``o``.

    Parameters
    ----------
    m : Module
        The module to add the logic to.
    i, o : stream interfaces
        Input (consumed) and output (produced) streams.
    latency : int
        Number of register stages, at least 1.

    Returns
    -------
    Signal
        The stage enable: data registers of every stage must load only when it is high.
    """
    if latency < 1:
        raise ValueError(f"parameter 'latency' must be >= 1; got {latency}")
    en = Signal(name="pipe_en")
    valid = Signal(latency, name="pipe_valid")
    m.d.comb += [
        en.eq(~o.valid | o.ready),
        i.ready.eq(en),
        o.valid.eq(valid[latency - 1]),
    ]
    with m.If(en):
        if latency == 1:
            m.d.sync += valid.eq(i.valid)
        else:
            m.d.sync += valid.eq((valid << 1) | i.valid)
    return en
