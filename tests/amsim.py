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

