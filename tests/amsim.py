"""Stream handshakes for testbenches in Amaranth's own simulator: each samples the handshake
before the clock edge that may complete it, and counts the edges."""


class Edges:
    """A count of the clock edges a testbench has waited for."""

    def __init__(self):
        self.n = 0

    async def tick(self, ctx):
        await ctx.tick()
        self.n += 1


async def _hold(ctx, port, payload, edges: Edges) -> int:
    """Offer one beat on ``port`` until an edge takes it; returns the handshake's cycle."""
    ctx.set(port.payload, payload)
    ctx.set(port.valid, 1)
    while True:
        taken = ctx.get(port.ready)
        await edges.tick(ctx)
        if taken:
            return edges.n - 1


async def send(ctx, port, payload, edges: Edges, *, rng=None, gap=0.0) -> int:
    """Put one beat on ``port`` (an ``In`` stream of the DUT) after random idle cycles (each
    with probability ``gap``); returns the handshake's cycle."""
    while rng is not None and rng.random() < gap:
        ctx.set(port.valid, 0)
        await edges.tick(ctx)
    return await _hold(ctx, port, payload, edges)


async def receive(ctx, port, edges: Edges, *, rng=None, backpressure=0.0):
    """Take one beat from ``port`` (an ``Out`` stream of the DUT), ``ready`` low each cycle
    with probability ``backpressure``; returns ``(payload, first)``, ``first`` the edge count
    when the beat was first valid."""
    first = None
    while True:
        ready = rng is None or rng.random() >= backpressure
        ctx.set(port.ready, ready)
        valid, payload = ctx.get(port.valid), ctx.get(port.payload)
        if valid and first is None:
            first = edges.n
        await edges.tick(ctx)
        if ready and valid:
            ctx.set(port.ready, 0)
            return payload, first



def handshakes(dut, sources: dict, sinks: dict, *, limit: int = 100_000,
               each_cycle=None, extra: int = 16) -> dict:
    """Run ``dut`` in Amaranth's simulator with its streams driven as the timed models assume
    (:mod:`scoville.sim.cycles.stream`): ``sources`` maps an ``In`` stream's name to
    ``(payloads, valid)`` (a schedule, or a ``Source`` with arrivals: beat ``k`` offered from
    the first cycle it allows, held until taken), ``sinks`` an ``Out`` stream's name to
    ``(beats, ready schedule)``; ``each_cycle(ctx, t)``, if given, drives the unit's other
    inputs in each cycle before the handshakes are sampled. After the expected beats it runs
    ``extra`` cycles more, failing on any further handshake (a unit that emits a beat too
    many). Returns each stream's handshake cycles, for a unit model run on the same schedules
    to be compared with, handshake for handshake."""
    from amaranth.sim import Simulator

    from scoville.sim.cycles.stream import Consumer, Producer, Source

    prods = {n: Producer(s if isinstance(s, Source) else Source(s), len(p), p)
             for n, (p, s) in sources.items()}
    cons = {n: (Consumer(s), beats) for n, (beats, s) in sinks.items()}

    def done():
        return (all(p.sent == p.count for p in prods.values())
                and all(len(c.cycles) == beats for c, beats in cons.values()))

    async def bench(ctx):
        t = 0
        after = None  # the cycle the run was done: it goes on a few cycles to see no more
        while after is None or t < after + extra:
            if after is None and done():
                after = t
            assert t < limit, f"no progress after {t} cycles"
            fired = []
            for name, p in prods.items():
                port, offer = getattr(dut, name), p.offers(t)
                ctx.set(port.valid, offer)
                if offer:  # a payload as bits (an int) or as the layout's fields
                    payload = port.payload
                    if isinstance(p.payload, int) and hasattr(payload, "as_value"):
                        payload = payload.as_value()
                    ctx.set(payload, p.payload)
                fired.append((p, offer))
            for name, (c, _) in cons.items():
                ctx.set(getattr(dut, name).ready, c.accepts(t))
            if each_cycle is not None:
                await each_cycle(ctx, t)
            fired = [(p, offer and ctx.get(getattr(dut, name).ready))
                     for (p, offer), name in zip(fired, prods, strict=True)]
            fired += [(c, ctx.get(getattr(dut, name).valid) and c.accepts(t))
                      for name, (c, _) in cons.items()]
            await ctx.tick()
            for port, fire in fired:
                if fire:
                    assert after is None, f"a handshake after the expected beats, cycle {t}"
                    port.take(t)
            t += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return {**{n: p.cycles for n, p in prods.items()},
            **{n: c.cycles for n, (c, _) in cons.items()}}


def step_alone(name: str, unit, done, limit: int = 100_000) -> int:
    """Step a unit model alone (no input of its own set between cycles), cycle after cycle
    from 0, until ``done()``; the unit model side of :func:`handshakes`."""
    from scoville.sim.cycles.unit import run

    def cycle(t):
        unit.step(t)
        return t + 1

    return run(name, cycle, done, limit)
