"""A stalling pipeline: the handshake skeleton shared by the streaming arithmetic units.

All stages advance together when the last stage can move (its output is empty or taken), so
``i.ready = ~o.valid | o.ready``. The timed model in :mod:`scoville.sim.cycles.stream` mirrors
exactly this rule.
"""

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["CutPoints", "LaneUnit", "delay", "offer_together", "stall_chain", "stall_pipeline"]


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


class LaneUnit(wiring.Component):
    """``lanes`` copies of a combinational function of :attr:`OPERANDS` behind one stream, in
    ``latency`` register stages: some inside the function, at the cut points :attr:`CUTS`
    chooses, the rest after it (for synthesis to retime).

    Subclasses define :meth:`lane` (and :attr:`OPERANDS`, if not ``a`` and ``b``; :attr:`CUTS`
    where the function offers cut points). The config has ``lanes`` and ``latency``.

    Attributes
    ----------
    i : In(stream.Signature(...))
        One payload field per operand (``a`` and ``b`` by default), each an array of ``lanes``
        operands of ``in_width`` bits; lane ``k`` in bits ``in_width * k`` upward of each
        field, the first operand's field lowest.
    o : Out(stream.Signature(ArrayLayout(out_shape, lanes)))
        Lane ``k`` is ``lane(a[k], b[k])``.
    latency : int
        Cycles from an input handshake to its result being valid, with no back-pressure.
    """

    #: The payload fields of the input stream, one per operand of :meth:`lane`.
    OPERANDS = ("a", "b")
    #: The cut points that become register stages inside the lane's logic, by how many of
    #: them the latency holds: ``{n: (i, ...)}``, the ``i`` of :meth:`lane`'s ``cut(i, ...)``
    #: calls. A latency of ``L`` takes the largest ``n`` up to ``L - 1``; its other stages
    #: follow the logic. Empty: every stage follows it.
    CUTS: dict[int, tuple[int, ...]] = {}

    def __init__(self, config, in_width: int, out_shape):
        self._config = config
        lanes = config.lanes
        self.in_layout = data.StructLayout(
            {name: data.ArrayLayout(in_width, lanes) for name in self.OPERANDS}
        )
        self.out_layout = data.ArrayLayout(out_shape, lanes)
        super().__init__(
            {
                "i": In(stream.Signature(self.in_layout)),
                "o": Out(stream.Signature(self.out_layout)),
            }
        )

    @property
    def config(self):
        return self._config

    @property
    def latency(self) -> int:
        return self._config.latency

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for n, cuts in cls.CUTS.items():
            if len(set(cuts)) != n:
                raise TypeError(f"{cls.__name__}.CUTS[{n}] = {cuts}: {n} distinct cut points "
                                "wanted")

    @property
    def cuts(self) -> tuple[int, ...]:
        """The cut points registered inside the lane's logic at this latency (:attr:`CUTS`)."""
        inside = [n for n in self.CUTS if n <= self.latency - 1]
        return self.CUTS[max(inside)] if inside else ()

    def lane(self, m: Module, k: int, *operands, cut=None):
        """The result of lane ``k`` for its operands, in :attr:`OPERANDS` order (logic added
        to ``m``). A function with cut points calls ``cut(i, *values)`` at each, in order, and
        goes on with the values it returns: registered where ``i`` is among :attr:`cuts`
        (loaded with the pipeline's other stages), else the same values."""
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        en = stall_pipeline(m, self.i, self.o, self.latency)
        p = self.i.payload
        active = self.cuts

        def lane(k):
            cut = CutPoints(m, en, active, f"lane{k}")
            result = self.lane(m, k, *(p[name][k] for name in self.OPERANDS), cut=cut)
            # Every stage the valid chain counts must hold the data: each active cut once.
            cut.check(f"{type(self).__name__}: lane {k}")
            return result

        results = [lane(k) for k in range(self._config.lanes)]
        after = self.latency - len(active)
        stages = [Signal(self.out_layout, name=f"lanes_s{s}") for s in range(after)]
        with m.If(en):
            m.d.sync += [stages[0][k].eq(r) for k, r in enumerate(results)]
            for s in range(1, after):
                m.d.sync += stages[s].eq(stages[s - 1])
        m.d.comb += self.o.payload.eq(stages[-1])
        return m


class CutPoints:
    """The ``cut`` of a function with cut points (:func:`~scoville.rtl.lib.fp32.fp32_add`'s):
    called as ``cut(i, *values)``, it returns the values through registers that load when
    ``en`` is high where ``i`` is among ``active`` (named ``{name}_cut{i}_{j}``), else the values
    themselves; :meth:`check` says whether each active point was called once."""

    def __init__(self, m: Module, en, active, name: str):
        self._m, self._en, self._name = m, en, name
        self.active = tuple(active)
        self.called: list[int] = []

    def __call__(self, i, *values):
        self.called.append(i)
        if i not in self.active:
            return values
        return tuple(_register(self._m, v, self._en, f"{self._name}_cut{i}_{j}")
                     for j, v in enumerate(values))

    def check(self, owner: str) -> None:
        """Raise unless each active cut point was called once (each stage the valid chain
        counts must hold the data)."""
        if sorted(i for i in self.called if i in self.active) != sorted(self.active):
            raise RuntimeError(f"{owner} called its cut points {self.called}; the latency "
                               f"registers {self.active}, each once")


def through_cuts(m: Module, en, active, name: str, owner: str, build):
    """``build(cut)``: the logic of a function with cut points, ``cut`` registering the points
    ``active`` (:class:`CutPoints` named ``name``); then checked that each active point was
    called once (``owner`` names the logic in the error). Returns what ``build`` returns."""
    cut = CutPoints(m, en, active, name)
    out = build(cut)
    cut.check(owner)
    return out


def _register(m: Module, value, en, name: str):
    """``value`` through a register that loads when ``en`` is high (a view stays a view of
    its layout)."""
    shape = value.shape() if hasattr(value, "shape") else Value.cast(value).shape()
    reg = Signal(shape, name=name)
    with m.If(en):
        m.d.sync += reg.eq(value)
    return reg


def delay(m: Module, value, cycles: int, en, *, name: str, shape=None):
    """``value`` delayed by ``cycles`` register stages that load when ``en`` is high.

    Returns ``value`` itself when ``cycles`` is 0, else the last stage (a signal of ``shape``,
    by default the shape of ``value``).
    """
    shape = value.shape() if shape is None else shape
    for k in range(cycles):
        stage = Signal(shape, name=f"{name}_d{k + 1}")
        with m.If(en):
            m.d.sync += stage.eq(value)
        value = stage
    return value


def offer_together(m: Module, ports, enable, *, name: str) -> Signal:
    """Beats offered together on ``ports`` (output streams) while ``enable`` is high, each held
    until taken (one may be taken before another): drives each port's ``valid``. Returns the
    signal high in the cycle the last of them is taken; the next cycle offers a fresh set."""
    sent = [Signal(name=f"{name}_sent{i}") for i in range(len(ports))]
    done = [s | (p.valid & p.ready) for s, p in zip(sent, ports, strict=True)]
    taken = Signal(name=f"{name}_taken")
    m.d.comb += [p.valid.eq(enable & ~s) for s, p in zip(sent, ports, strict=True)]
    m.d.comb += taken.eq(enable & Cat(*done).all())
    with m.If(enable):
        m.d.sync += [s.eq(d) for s, d in zip(sent, done, strict=True)]
        with m.If(taken):
            m.d.sync += [s.eq(0) for s in sent]
    return taken
