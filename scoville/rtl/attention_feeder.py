"""Attention's append feeder: the K and V vectors a step or an append brings, into the cache's
append lines (``docs/attention.md``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lib.formats import FP32, MX_BLOCK
from .lib.fp32 import fp32_to_bf16
from .mx_quant import block_codes, block_max_exp, round_e4m3

__all__ = ["AppendFeeder", "encode_vector"]


def encode_vector(m, vec, kv_fmt: str, dim: int):
    """The stored bits of a K or V vector (``dim`` binary32 values end to end) in
    ``kv_fmt``: BF16 rounded to nearest even; FP8 E4M3 rounded to nearest even, NaN beyond
    464 (as ``ml_dtypes``' cast); MXFP4 blocks of 32 (:func:`~scoville.rtl.mx_quant
    .block_codes`), codes then scales."""
    xs = [vec[32 * e: 32 * e + 32] for e in range(dim)]
    if kv_fmt == "bf16":
        return Cat(*(fp32_to_bf16(m, x, name=f"kv_bf16_{e}") for e, x in enumerate(xs)))
    if kv_fmt == "fp8_e4m3":
        codes = []
        for e, x in enumerate(xs):
            x = data.View(FP32, x)
            code = round_e4m3(m, Cat(x.man, x.exp != 0), x.exp, 0, f"kv_e4m3_{e}",
                              saturate=False)
            # 2**9 and above (Inf, NaN) would not fit the rounding's fixed point.
            nan = (x.exp >= 127 + 9) | (code >= 0x7F)
            codes.append(Cat(Mux(nan, 0x7F, code[:7]), x.sign))
        return Cat(*codes)
    codes, scales = [], []
    for b in range(dim // MX_BLOCK):
        block = xs[MX_BLOCK * b: MX_BLOCK * (b + 1)]
        max_exp, special = block_max_exp(m, block, name=f"kv_mx{b}")
        c, scale = block_codes(m, block, max_exp, special, "mxfp4", name=f"kv_mx{b}_")
        codes += c
        scales.append(scale)
    return Cat(*codes, *scales)

class AppendFeeder(wiring.Component):
    """The new tokens' K and V vectors in, the cache's append lines out: each token's K of
    every KV head, then its V of every head (MLA: the latent vector alone, on ``k``), each
    encoded as the cache stores it (:func:`encode_vector`) into ``token_lines`` lines.

    A cycle with ``start`` high loads a command's count: the ``sections * kv_heads`` vectors of
    a token and ``tokens`` more tokens. ``idle`` is high when none is left to take. With
    ``drop`` high the vectors are taken and dropped (a step refused for its length). The
    controller raises ``start`` only while ``idle``, and changes ``drop`` only while no line
    is offered (a vector taken while dropping would replace the lines still being offered).

    Timing: a vector is taken when one is left to take and the line register is empty, or its
    last line is taken in that cycle (at once while dropping); its lines are offered from the
    next cycle, one a cycle as ``wd`` takes them.

    Attributes
    ----------
    k, v : In(stream.Signature(ArrayLayout(32, dim)))
        K (or the latent vector) and V (not with ``mla``), binary32.
    wd : Out(stream.Signature(line_bits))
        The lines.
    start : In(1)
    tokens : In(9)
        Tokens after the current one, loaded with ``start``.
    drop : In(1)
    idle : Out(1)
    """

    def __init__(self, *, kv_heads: int, dim: int, token_lines: int, line_bits: int,
                 kv_fmt: str, mla: bool):
        self._h, self._d, self._tl, self._lb = kv_heads, dim, token_lines, line_bits
        self._fmt, self._mla = kv_fmt, mla
        vec = stream.Signature(data.ArrayLayout(32, dim))
        super().__init__({
            "k": In(vec), **({} if mla else {"v": In(vec)}),
            "wd": Out(stream.Signature(line_bits)),
            "start": In(1), "tokens": In(9), "drop": In(1), "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        H, TL, LB = self._h, self._tl, self._lb
        per_token = H if self._mla else 2 * H
        feed_left = Signal(range(per_token + 1))  # the current token's vectors
        feed_tok = Signal(9)  # tokens after the current one
        fvec = Signal(TL * LB)
        fvalid = Signal()
        fline = Signal(range(max(TL, 2)))
        with m.If(self.start):
            m.d.sync += [feed_left.eq(per_token), feed_tok.eq(self.tokens)]
        m.d.comb += self.idle.eq((feed_left == 0) & (feed_tok == 0))
        if self._mla:  # the latent vector alone
            from_k = Const(1, 1)
            src_valid, src = self.k.valid, self.k.payload.as_value()
        else:
            from_k = feed_left > H
            src_valid = Mux(from_k, self.k.valid, self.v.valid)
            src = Mux(from_k, self.k.payload.as_value(), self.v.payload.as_value())
        wd_take = fvalid & self.wd.ready
        in_ready = (feed_left != 0) & (self.drop | ~fvalid | (wd_take & (fline == TL - 1)))
        m.d.comb += self.k.ready.eq(in_ready & from_k)
        if not self._mla:
            m.d.comb += self.v.ready.eq(in_ready & ~from_k)
        m.d.comb += [self.wd.valid.eq(fvalid), self.wd.payload.eq(fvec.word_select(fline, LB))]
        with m.If(wd_take):
            m.d.sync += fline.eq(fline + 1)
            with m.If(fline == TL - 1):
                m.d.sync += [fline.eq(0), fvalid.eq(0)]
        with m.If(in_ready & src_valid):
            m.d.sync += [fline.eq(0), feed_left.eq(feed_left - 1),
                         fvec.eq(encode_vector(m, src, self._fmt, self._d))]
            with m.If(~self.drop):
                m.d.sync += fvalid.eq(1)
            with m.If((feed_left == 1) & (feed_tok != 0)):
                m.d.sync += [feed_left.eq(per_token), feed_tok.eq(feed_tok - 1)]
        return m
