"""The MoE block's dispatch: a batch's routing choices in, token order; the same choices out
grouped by expert (ascending), each expert's tokens in token order, so that each chosen
expert's weights are fetched once per batch. A counting sort:

``FILL``
    A beat per token (the router's ``index`` and ``weight`` of its ``top_k`` choices, and
    ``last`` on the batch's last token): the beat is stored, and each chosen expert's count
    goes up by one. The ``tokens``-th beat ends the batch whatever its ``last``.
``PREFIX``
    A cycle per expert chosen at all, ascending: its first place in the sorted list (the sum
    of the counts before it).
``SCATTER``
    A cycle per choice, token after token, choice after choice: the choice goes to its
    expert's next place.
``EMIT``
    The sorted list on ``o``, a beat per choice, with the expert, its count and where its
    group starts and ends; then the next batch.

So a batch of T tokens costs T beats in, A (experts chosen) + T k cycles of sorting, and
T k beats out (:func:`scoville.sim.cycles.moe.dispatch_cycles`).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["Dispatch", "entry_layout", "in_layout"]


def in_layout(config) -> data.StructLayout:
    """A ``c`` beat: a token's ``top_k`` experts (``index``) and weights (``weight``, FP32
    bits), and ``last`` on the batch's last token."""
    k = config.top_k
    return data.StructLayout({"index": data.ArrayLayout(range(config.experts), k),
                              "weight": data.ArrayLayout(32, k), "last": 1})


def entry_layout(config) -> data.StructLayout:
    """An ``o`` beat: one choice: ``expert``, ``token`` (its place in the batch), ``weight``;
    ``count`` (the expert's tokens in the batch); ``first`` and ``last`` of the expert's group;
    ``end`` on the batch's last beat."""
    return data.StructLayout({"expert": range(config.experts),
                              "token": range(max(config.tokens, 2)),
                              "weight": 32, "count": range(config.tokens + 1), "first": 1,
                              "last": 1, "end": 1})


def _lowest(m, name, mask, width):
    """The index of the lowest set bit of ``mask`` (0 when none)."""
    out = Signal(range(max(width, 2)), name=name)
    for e in reversed(range(width)):
        with m.If(mask[e]):
            m.d.comb += out.eq(e)
    return out


class Dispatch(wiring.Component):
    """The counting sort (the module says how). ``config`` is a
    :class:`~scoville.rtl.moe.MoeConfig` (``experts``, ``top_k``, ``tokens``).

    Attributes
    ----------
    c : In(stream.Signature(in_layout(config)))
        The batch's choices, a beat per token.
    o : Out(stream.Signature(entry_layout(config)))
        The choices grouped by expert.
    experts : Out(experts)
        The experts the batch chose at all (a bit each), valid from the cycle after its last
        beat in to its last beat out (``sorting``).
    sorting : Out(1)
        High from the cycle after the batch's last beat in to its last beat out.
    """

    def __init__(self, config):
        self._config = config
        super().__init__({"c": In(stream.Signature(in_layout(config))),
                          "o": Out(stream.Signature(entry_layout(config))),
                          "experts": Out(config.experts), "sorting": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        E, K, T = cfg.experts, cfg.top_k, cfg.tokens
        N = T * K
        slot = data.StructLayout({"token": range(max(T, 2)), "weight": 32})
        # Depths and fields of at least 2 (one token or choice): no zero-width addresses.
        m.submodules.choices = cm = Memory(
            shape=data.StructLayout({"index": data.ArrayLayout(range(E), K),
                                     "weight": data.ArrayLayout(32, K)}),
            depth=max(T, 2), init=[])
        m.submodules.sorted = sm = Memory(shape=slot, depth=max(N, 2), init=[])
        cw, sw = cm.write_port(), sm.write_port()
        cr = cm.read_port(transparent_for=(cw,))
        sr = sm.read_port(transparent_for=(sw,))

        count = Array(Signal(range(T + 1), name=f"count{e}") for e in range(E))
        place = Array(Signal(range(N + 1), name=f"place{e}") for e in range(E))
        chosen = Signal(E)      # experts with a choice in the batch
        todo = Signal(E)        # PREFIX: experts not yet placed; EMIT: experts not yet out
        n = Signal(range(T + 1))  # tokens in the batch
        run = Signal(range(N + 1))
        t = Signal(range(max(T, 2)))
        q = Signal(range(max(K, 2)))
        i = Signal(range(N + 1))  # EMIT: the beat
        left = Signal(range(T + 1))  # EMIT: the current expert's beats still to go
        cur = _lowest(m, "cur", todo, E)
        rest = Signal(E)  # todo without cur
        m.d.comb += rest.eq(todo & ~(Const(1, E) << cur)[:E])
        nxt = _lowest(m, "nxt", rest, E)

        beat = self.c.payload
        hits = Signal(E)  # the experts the beat chooses
        m.d.comb += hits.eq(Cat(*(Cat(*(beat.index[k] == e for k in range(K))).any()
                                  for e in range(E))))
        m.d.comb += [cw.addr.eq(t), cw.data.index.eq(beat.index),
                     cw.data.weight.eq(beat.weight)]
        cr_addr = Signal.like(t)
        sr_addr = Signal.like(i)
        m.d.comb += [cr.addr.eq(cr_addr), sr.addr.eq(sr_addr)]

        m.d.comb += self.experts.eq(chosen)
        with m.FSM() as fsm:
            m.d.comb += self.sorting.eq(~fsm.ongoing("FILL"))
            with m.State("FILL"):
                m.d.comb += [self.c.ready.eq(1), cw.en.eq(self.c.valid)]
                with m.If(self.c.valid):
                    for e in range(E):
                        with m.If(hits[e]):
                            m.d.sync += count[e].eq(count[e] + 1)
                    m.d.sync += [chosen.eq(chosen | hits), t.eq(t + 1)]
                    with m.If(beat.last | (t == T - 1)):
                        m.d.sync += [n.eq(t + 1), todo.eq(chosen | hits), run.eq(0)]
                        m.next = "PREFIX"
            with m.State("PREFIX"):
                m.d.sync += [place[cur].eq(run), run.eq(run + count[cur]),
                             todo.eq(rest), t.eq(0), q.eq(0)]
                with m.If(rest == 0):
                    m.next = "SCATTER"
            with m.State("SCATTER"):
                # The choice memory is read a cycle ahead: cr.data is token t's beat.
                e = cr.data.index[q]
                step_t = q == K - 1
                m.d.comb += [cr_addr.eq(Mux(step_t, t + 1, t)),
                             sw.addr.eq(place[e]), sw.data.token.eq(t),
                             sw.data.weight.eq(cr.data.weight[q]), sw.en.eq(1)]
                m.d.sync += [place[e].eq(place[e] + 1), q.eq(Mux(step_t, 0, q + 1))]
                with m.If(step_t):
                    m.d.sync += t.eq(t + 1)
                    with m.If(t == n - 1):
                        m.d.sync += [i.eq(0), todo.eq(chosen)]
                        m.next = "EMIT_FIRST"
            with m.State("EMIT_FIRST"):
                # The expert with the lowest index opens the list.
                m.d.sync += left.eq(count[cur])
                m.next = "EMIT"
            with m.State("EMIT"):
                fire = self.o.valid & self.o.ready
                out = self.o.payload
                ends = left == 1
                end = ends & (rest == 0)
                m.d.comb += [self.o.valid.eq(1), out.expert.eq(cur),
                             out.token.eq(sr.data.token), out.weight.eq(sr.data.weight),
                             out.count.eq(count[cur]), out.first.eq(left == count[cur]),
                             out.last.eq(ends), out.end.eq(end),
                             sr_addr.eq(Mux(fire, i + 1, i))]
                with m.If(fire):
                    m.d.sync += [i.eq(i + 1), left.eq(left - 1)]
                    with m.If(ends):
                        m.d.sync += [todo.eq(rest), left.eq(count[nxt])]
                    with m.If(end):
                        m.d.sync += [t.eq(0), chosen.eq(0), todo.eq(0)]
                        m.d.sync += [count[e].eq(0) for e in range(E)]
                        m.next = "FILL"
        return m
