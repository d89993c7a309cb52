"""Small helpers for writing combinational datapaths."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal

__all__ = ["leading_one", "max_tree", "no_cut", "normalize", "wire"]


def wire(m, name, value, shape=None):
    """A named combinational signal driven by ``value``.

    Reusing a Python expression duplicates its logic in the Verilog and in Amaranth's simulator
    each time it is used; a signal is emitted once and shared.
    """
    sig = Signal(shape if shape is not None else value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def no_cut(i, *values):
    """The ``cut`` of a function with cut points left whole: every cut point passes its
    values on unregistered (:class:`~scoville.rtl.lib.pipeline.CutPoints` registers them)."""
    return values


def normalize(m, name, value, probe=None):
    """Shift ``value`` left by the leading-zero count of ``probe`` (``value`` itself by
    default; both as wide as ``value``).

    A logarithmic shifter: each stage shifts by 16, 8, 4, 2, 1 (the powers of two below the
    width) when the top bits of the probe are zero. A probe with a sentinel bit caps the shift.
    Returns the shifted value and the shift.
    """
    width = len(value)
    steps = [1 << k for k in reversed(range((width - 1).bit_length()))]
    value, _, taken = normalize_steps(m, name, value, probe, steps)
    return value, wire(m, f"{name}_shift", Cat(*reversed(taken)))


def normalize_steps(m, name, value, probe, steps):
    """Some stages of :func:`normalize`'s shifter, ``steps`` (the shifts they try, largest
    first), for a pipeline to cut between: returns the value and the probe after them, and
    each stage's bit of the shift (taken: the top ``step`` bits of the probe were zero), in
    ``steps``' order. ``probe`` None: the value is its own probe."""
    width = len(value)
    # Each stage reads its inputs twice: signals, so that an expression is not emitted twice.
    value = wire(m, f"{name}_norm_in{steps[0]}", value)
    if probe is not None:
        probe = wire(m, f"{name}_probe_in{steps[0]}", probe, width)
    taken = []
    for step in steps:
        zero = wire(m, f"{name}_zero{step}",
                    (value if probe is None else probe)[width - step :] == 0)
        if probe is not None:
            probe = wire(m, f"{name}_probe{step}", Mux(zero, probe << step, probe)[:width])
        value = wire(m, f"{name}_norm{step}", Mux(zero, value << step, value)[:width])
        taken.append(zero)
    return value, probe, taken


def leading_one(m: Module, name, value, *, chain: bool = False) -> Signal:
    """The position of the highest set bit of ``value`` (0 when ``value`` is 0).

    A tree of depth ``log2(len(value))``: each node of two neighbouring groups of bits says
    whether any is set and where the highest is (the upper group's position, with its bit
    on top, when the upper group has a set bit; else the lower group's). With ``chain``, a
    multiplexer per bit, the highest last: deeper, but a bit's path to the result is shorter
    the higher it is, for a value whose high bits come last (a product's)."""
    lead = Signal(range(max(len(value), 2)), name=name)
    if chain:
        for k in range(len(value)):
            with m.If(value[k]):
                m.d.comb += lead.eq(k)
        return lead
    # (any bit set, position of the highest within the group) for groups of 2, 4, 8, ...
    # bits: a pair's position is its upper bit.
    bits = [value[k] for k in range(len(value))] + [Const(0, 1)] * (len(value) % 2)
    nodes = [(bits[k] | bits[k + 1], bits[k + 1]) for k in range(0, len(bits), 2)]
    level = 1
    while len(nodes) > 1:
        if len(nodes) % 2:
            nodes.append((Const(0, 1), Const(0, level)))
        pairs = zip(nodes[0::2], nodes[1::2], strict=True)
        nodes = [(wire(m, f"{name}_any{level}_{k}", lo[0] | hi[0]),
                  wire(m, f"{name}_at{level}_{k}", Cat(Mux(hi[0], hi[1], lo[1]), hi[0])))
                 for k, (lo, hi) in enumerate(pairs)]
        level += 1
    m.d.comb += lead.eq(nodes[0][1])
    return lead


def max_tree(m, name, values):
    """The largest of the unsigned ``values``, by a tree of pairwise comparisons (an odd one
    out passes to the next level)."""
    level = list(values)
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level) - 1, 2):
            a, b = level[j], level[j + 1]
            nxt.append(wire(m, f"{name}_{len(level)}_{j}", Mux(a > b, a, b)))
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]
