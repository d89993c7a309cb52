"""The MoE block's router: a token's hidden vector in, its ``top_k`` experts and their weights
out, as :func:`scoville.sim.golden.moe.gpt_oss_route` and
:func:`~scoville.sim.golden.moe.deepseek_route` compute them, bit for bit.

The router's weights live on chip: ``W`` (``experts`` x ``hidden`` FP32) in a memory of
``hidden / L`` words (``L`` = ``x_lanes``; one synchronous read a cycle, as an SRAM's), word
``b`` the columns ``W[:, bL .. bL + L - 1]``, and a bias word (GPT-OSS's bias, or DeepSeek's
correction bias, in the word's first column), written through ``wr``. A token then takes:

- ``hidden / L`` cycles, a beat of ``L`` elements of ``x`` a cycle: every expert's lane forms
  the beat's ``L`` products ``fp32(x_h * W_eh)``, adds them as a binary tree (neighbours,
  then neighbouring sums), and adds that to its FP32 sum (the beats in order, from +0; with
  ``L = 1`` the hidden dimension in order);
- GPT-OSS: a cycle adding the bias; DeepSeek: ``experts`` cycles through one sigmoid unit
  (``exp2``, an add and a reciprocal), each expert's biased score ``c`` and its group's two
  largest kept as it passes, then a cycle for the group scores and ``topk_group`` cycles
  choosing groups (the rest score 0.0);
- ``top_k`` cycles choosing experts, each the largest score not yet chosen (ties to the lower
  index);
- a cycle for the weights (GPT-OSS: ``k`` exponentials, their sum in rank order, a
  reciprocal; DeepSeek: the sum, ``+ 1e-20``, a reciprocal, the scale), then the answer on
  ``o`` until taken.
"""

import math

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .lib.comb import wire
from .lib.fp32 import (
    fp32_add,
    fp32_bits,
    fp32_exp2,
    fp32_key,
    fp32_mul,
    fp32_recip,
    fp32_sigmoid,
    fp32_tree_sum,
)

__all__ = ["Router", "choice_layout", "write_layout", "x_lanes_layout"]

_LOG2E = Const(fp32_bits(math.log2(math.e)), 32)
_EPS = Const(fp32_bits(1e-20), 32)


def _word(config):
    """A word of the router's memory: ``x_lanes`` columns of ``experts`` FP32 (one column its
    bare layout)."""
    col = data.ArrayLayout(32, config.experts)
    return col if config.x_lanes == 1 else data.ArrayLayout(col, config.x_lanes)


def write_layout(config) -> data.StructLayout:
    """A ``wr`` beat: ``addr`` below ``hidden / x_lanes`` writes the columns ``W[:, addr L ..
    addr L + L - 1]`` (``data``, the first lowest; one column its bare layout); ``addr`` =
    ``hidden / x_lanes`` the bias (one FP32 per expert, in the first column). All are words of
    the router's memory, kept through a reset."""
    beats = config.hidden // config.x_lanes
    return data.StructLayout({"addr": range(beats + 1), "data": _word(config)})


def x_lanes_layout(config):
    """A beat of the router's ``x``: ``x_lanes`` FP32 elements (one element its bare shape)."""
    return 32 if config.x_lanes == 1 else data.ArrayLayout(32, config.x_lanes)


def choice_layout(config) -> data.StructLayout:
    """An ``o`` beat: the token's ``top_k`` experts (``index``) and weights (``weight``, FP32
    bits), the largest score first."""
    k = config.top_k
    return data.StructLayout({"index": data.ArrayLayout(range(config.experts), k),
                              "weight": data.ArrayLayout(32, k)})


def _beat_sum(m, xs, ws, e):
    """Expert ``e``'s products of a beat, ``fp32(x_q * w_q)``, added as a binary tree."""
    products = [fp32_mul(m, x, w, name=f"xw{e}_{q}")
                for q, (x, w) in enumerate(zip(xs, ws, strict=True))]
    return fp32_tree_sum(m, products, name=f"xt{e}")


def _argmax(m, name, keys, valid):
    """The index of the largest of ``keys`` (unsigned) among those ``valid``, ties to the
    lower index, and whether there was one."""
    level = [(Cat(k, v), Signal(range(max(len(keys), 2)), init=i, name=f"{name}_i{i}"))
             for i, (k, v) in enumerate(zip(keys, valid, strict=True))]
    for i, (_, idx) in enumerate(level):
        m.d.comb += idx.eq(i)
    depth = 0
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level) - 1, 2):
            (ka, ia), (kb, ib) = level[j], level[j + 1]
            right = wire(m, f"{name}_{depth}_{j}_r", kb > ka)  # the lower index on ties
            nxt.append((wire(m, f"{name}_{depth}_{j}_k", Mux(right, kb, ka)),
                        wire(m, f"{name}_{depth}_{j}_i", Mux(right, ib, ia))))
        if len(level) % 2:
            nxt.append(level[-1])
        level, depth = nxt, depth + 1
    return level[0][1]


class Router(wiring.Component):
    """The router (the module says how). ``config`` is a :class:`~scoville.rtl.moe.MoeConfig`.

    Attributes
    ----------
    wr : In(stream.Signature(write_layout(config)))
        The router's weights and bias, a word of ``x_lanes`` columns a beat (taken only
        between tokens).
    x : In(stream.Signature(x_lanes_layout(config)))
        A token's hidden vector, ``x_lanes`` FP32 elements a beat, ``hidden / x_lanes``
        beats.
    o : Out(stream.Signature(choice_layout(config)))
        A beat per token: its experts and weights.
    """

    def __init__(self, config):
        self._config = config
        super().__init__({
            "wr": In(stream.Signature(write_layout(config))),
            "x": In(stream.Signature(x_lanes_layout(config))),
            "o": Out(stream.Signature(choice_layout(config))),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        E, K, L = cfg.experts, cfg.top_k, cfg.x_lanes
        H = cfg.hidden // L  # beats a token, and the bias word's address
        deepseek = cfg.router == "deepseek"
        G, GK = cfg.n_group, cfg.topk_group
        GS = E // G

        m.submodules.w = w_mem = Memory(shape=_word(cfg), depth=H + 1, init=[])
        wp = w_mem.write_port()
        # A synchronous read (an SRAM's), addressed a cycle ahead: while ``x`` comes, the next
        # beat's word; after the last, the bias word (``hidden / x_lanes``), held until the
        # answer is out; then word 0 again.
        rp = w_mem.read_port(transparent_for=(wp,))
        cols = [rp.data] if L == 1 else [rp.data[q] for q in range(L)]
        bias = cols[0]
        acc = Signal(data.ArrayLayout(32, E))
        h = Signal(range(max(H, 2)))
        chosen = Signal(E)
        idx = Signal(data.ArrayLayout(range(max(E, 2)), K))
        val = Signal(data.ArrayLayout(32, K))  # the chosen logits (GPT-OSS) or scores
        j = Signal(range(max(K, E, 2)))
        out = self.o.payload

        # DeepSeek's state: sigmoid scores, biased scores, each group's two largest.
        s = Signal(data.ArrayLayout(32, E))
        c = Signal(data.ArrayLayout(32, E))
        top1 = Signal(data.ArrayLayout(32, G))
        top2 = Signal(data.ArrayLayout(32, G))
        has2 = Signal(G)
        kept = Signal(G)

        m.d.comb += [wp.addr.eq(self.wr.payload.addr), wp.data.eq(self.wr.payload.data),
                     rp.addr.eq(H)]

        # The candidates' keys: GPT-OSS the logits; DeepSeek c, 0.0 outside the kept groups.
        if deepseek:
            cand = [Mux(kept[e // GS], c[e], 0) for e in range(E)]
        else:
            cand = [acc[e] for e in range(E)]
        keys = [fp32_key(m, v, name=f"key{e}") for e, v in enumerate(cand)]
        best = _argmax(m, "best", keys, [~chosen[e] for e in range(E)])

        with m.FSM():
            with m.State("ACC"):
                m.d.comb += [self.x.ready.eq(1), self.wr.ready.eq(h == 0),
                             wp.en.eq(self.wr.valid & (h == 0)),
                             rp.addr.eq(Mux(self.x.valid, Mux(h == H - 1, H, h + 1), h))]
                with m.If(self.x.valid):
                    xs = [self.x.payload] if L == 1 else [self.x.payload[q] for q in range(L)]
                    for e in range(E):
                        beat = _beat_sum(m, xs, [c[e] for c in cols], e)
                        m.d.sync += acc[e].eq(fp32_add(m, acc[e], beat, name=f"acc{e}"))
                    m.d.sync += h.eq(h + 1)
                    with m.If(h == H - 1):
                        m.d.sync += [h.eq(0), j.eq(0), chosen.eq(0), kept.eq(0), has2.eq(0)]
                        m.next = "SIG" if deepseek else "BIAS"
            if not deepseek:
                with m.State("BIAS"):
                    for e in range(E):
                        m.d.sync += acc[e].eq(fp32_add(m, acc[e], bias[e], name=f"b{e}"))
                    m.next = "SELECT"
            else:
                with m.State("SIG"):
                    # One expert a cycle through the sigmoid unit.
                    z = Array(acc[e] for e in range(E))[j]
                    sig = fp32_sigmoid(m, z, name="sig")
                    cj = fp32_add(m, sig, Array(bias[e] for e in range(E))[j], name="sig_c")
                    ckey = fp32_key(m, cj, name="sig_ckey")
                    g = wire(m, "sig_g", j // GS, range(max(G, 2)))
                    t1 = Array(top1[q] for q in range(G))[g]
                    t2 = Array(top2[q] for q in range(G))[g]
                    first = (j % GS) == 0
                    above1 = ckey > fp32_key(m, t1, name="sig_k1")
                    above2 = ckey > fp32_key(m, t2, name="sig_k2")
                    for e in range(E):
                        with m.If(j == e):
                            m.d.sync += [s[e].eq(sig), c[e].eq(cj)]
                    for q in range(G):
                        with m.If(g == q):
                            with m.If(first | above1):
                                m.d.sync += top1[q].eq(cj)
                                with m.If(~first):
                                    m.d.sync += [top2[q].eq(top1[q]), has2[q].eq(1)]
                            with m.Elif(~has2[q] | above2):
                                m.d.sync += [top2[q].eq(cj), has2[q].eq(1)]
                    m.d.sync += j.eq(j + 1)
                    with m.If(j == E - 1):
                        m.d.sync += j.eq(0)
                        m.next = "GROUPS"
                with m.State("GROUPS"):
                    # Each group's score, then topk_group cycles keeping the best.
                    gs = Signal(data.ArrayLayout(32, G))
                    for q in range(G):
                        m.d.sync += gs[q].eq(top1[q] if GS == 1 else
                                             fp32_add(m, top1[q], top2[q], name=f"gs{q}"))
                    m.next = "KEEP"
                with m.State("KEEP"):
                    gkeys = [fp32_key(m, gs[q], name=f"gkey{q}") for q in range(G)]
                    gbest = _argmax(m, "gbest", gkeys, [~kept[q] for q in range(G)])
                    m.d.sync += [kept.bit_select(gbest, 1).eq(1), j.eq(j + 1)]
                    with m.If(j == GK - 1):
                        m.d.sync += j.eq(0)
                        m.next = "SELECT"
            with m.State("SELECT"):
                pick = Array(s[e] for e in range(E))[best] if deepseek else \
                    Array(acc[e] for e in range(E))[best]
                m.d.sync += [chosen.bit_select(best, 1).eq(1),
                             Array(idx[q] for q in range(K))[j].eq(best),
                             Array(val[q] for q in range(K))[j].eq(pick), j.eq(j + 1)]
                with m.If(j == K - 1):
                    m.d.sync += j.eq(0)
                    m.next = "WEIGHTS"
            with m.State("WEIGHTS"):
                if deepseek:
                    terms = [val[q] for q in range(K)]
                else:  # exp(l - l_max), l_max the first chosen
                    terms = []
                    for q in range(K):
                        diff = fp32_add(m, val[q], val[0] ^ 0x8000_0000, name=f"ed{q}")
                        terms.append(fp32_exp2(m, fp32_mul(m, diff, _LOG2E, name=f"et{q}"),
                                               name=f"ex{q}"))
                total = 0
                for q, term in enumerate(terms):
                    total = term if q == 0 else fp32_add(m, total, term, name=f"sum{q}")
                if deepseek and cfg.norm_topk_prob:
                    total = fp32_add(m, total, _EPS, name="sum_eps")
                if deepseek and not cfg.norm_topk_prob:
                    weights = terms
                else:
                    r = fp32_recip(m, total, name="recip")
                    weights = [fp32_mul(m, term, r, name=f"wn{q}") for q, term in
                               enumerate(terms)]
                if deepseek:
                    scale = Const(fp32_bits(cfg.routed_scaling_factor), 32)
                    weights = [fp32_mul(m, wq, scale, name=f"ws{q}") for q, wq in
                               enumerate(weights)]
                m.d.sync += [out.index.eq(idx), out.weight.eq(Cat(*weights)),
                             self.o.valid.eq(1)]
                m.next = "OUT"
            with m.State("OUT"):
                m.d.comb += rp.addr.eq(0)
                with m.If(self.o.ready):
                    m.d.sync += [self.o.valid.eq(0), acc.eq(0)]
                    m.next = "ACC"
        return m
