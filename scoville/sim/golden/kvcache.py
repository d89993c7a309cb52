"""Reference model of the KV-cache scratchpad (:class:`scoville.rtl.kvcache.KvCache`), and the
storage formats of K and V.

:func:`encode_heads` turns real K or V vectors into the lines the cache stores (bf16 and
fp8_e4m3 codes through ``ml_dtypes``, round to nearest even; mxfp4 through
:func:`~scoville.sim.golden.mx.quantize_mxfp4`), element 0 in the lowest bits, mxfp4 scales
after the elements, zero-padded to whole lines; :func:`decode_heads` turns them back into
values.

:class:`KvCacheModel` is the cache as a program: sequences as lists of tokens (each token the
lines of all its heads), pages counted with reference counts, the same checks in the same
order as the RTL. It predicts every answer (status, sequence, length, free pages) and every
line a read returns; its :class:`Outcome` carries what the timed model
(:mod:`scoville.sim.cycles.kvcache`) needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from scoville.rtl.kvcache import STATUS, Op, request_layout, response_layout
from scoville.rtl.lib.formats import MX_BLOCK

from .mx import dequantize_mxfp4, quantize_mxfp4

__all__ = ["KvCacheModel", "Outcome", "Request", "decode_heads", "encode_heads", "stored_values"]

_DTYPES = {"bf16": (ml_dtypes.bfloat16, np.uint16), "fp8_e4m3": (ml_dtypes.float8_e4m3fn, np.uint8)}


def _codes(config, values: np.ndarray) -> np.ndarray:
    """Element codes and (mxfp4) scale codes of ``values`` (..., head_dim), as fields of
    ``bits`` and 8 bits: an integer array (..., fields) and the field widths."""
    if config.kv_fmt == "mxfp4":
        codes, scales = quantize_mxfp4(values, axis=-1)
        return np.concatenate([codes, scales], axis=-1).astype(np.uint64)
    dtype, raw = _DTYPES[config.kv_fmt]
    return np.asarray(values, dtype=np.float64).astype(dtype).view(raw).astype(np.uint64)


def stored_values(kv_fmt: str, values) -> np.ndarray:
    """The values the cache holds for ``values`` (..., head_dim) stored in ``kv_fmt``, as
    float64: what :func:`decode_heads` returns for the lines :func:`encode_heads` makes (mxfp4
    blocks along the last axis)."""
    values = np.asarray(values, dtype=np.float64)
    if kv_fmt == "mxfp4":
        return dequantize_mxfp4(*quantize_mxfp4(values, axis=-1), axis=-1).astype(np.float64)
    if kv_fmt not in _DTYPES:
        raise ValueError(f"parameter 'kv_fmt' = {kv_fmt!r} is not allowed; allowed: bf16, "
                         "fp8_e4m3, mxfp4")
    return values.astype(_DTYPES[kv_fmt][0]).astype(np.float64)


def _widths(config) -> list[int]:
    scales = config.head_dim // MX_BLOCK if config.kv_fmt == "mxfp4" else 0
    return [config.bits] * config.head_dim + [8] * scales


def encode_heads(config, values) -> list[int]:
    """The lines of head vectors: ``values`` is (heads, head_dim) real numbers (one token's K
    or V has ``kv_heads`` of them; any number may be encoded at once); returns
    ``heads * token_lines`` line words, head by head."""
    values = np.asarray(values, dtype=np.float64)
    codes = _codes(config, values)
    heads = codes.shape[0]
    # Each head's word as bits, lowest first: fields of equal width a run at a time, each
    # field's low ``width`` bits of its little-endian bytes.
    widths = np.array(_widths(config))
    runs = np.flatnonzero(np.diff(widths, prepend=-1, append=-1))
    fields = np.unpackbits(codes.astype("<u8").view(np.uint8).reshape(heads, -1, 8), axis=-1,
                           bitorder="little")
    parts = [fields[:, lo:hi, :widths[lo]].reshape(heads, -1)
             for lo, hi in zip(runs[:-1], runs[1:], strict=True)]
    bits = np.zeros((heads, config.token_lines * config.line_bits), dtype=np.uint8)
    used = np.concatenate(parts, axis=1)
    bits[:, :used.shape[1]] = used
    lines = np.packbits(bits.reshape(heads * config.token_lines, config.line_bits), axis=1,
                        bitorder="little")
    return [int.from_bytes(line.tobytes(), "little") for line in lines]


def decode_heads(config, lines: list[int]) -> np.ndarray:
    """The values of ``lines`` (a multiple of ``token_lines`` line words, one head vector per
    ``token_lines``), as float64 (heads, head_dim)."""
    tl = config.token_lines
    widths = _widths(config)
    out = []
    for h in range(len(lines) // tl):
        word = sum(line << (k * config.line_bits) for k, line in enumerate(lines[h * tl:][:tl]))
        codes, shift = [], 0
        for width in widths:
            codes.append((word >> shift) & ((1 << width) - 1))
            shift += width
        out.append(codes)
    codes = np.array(out, dtype=np.uint64).reshape(len(out), -1)
    if config.kv_fmt == "mxfp4":
        elems = codes[:, : config.head_dim].astype(np.uint8)
        scales = codes[:, config.head_dim:].astype(np.uint8)
        return dequantize_mxfp4(elems, scales, axis=-1).astype(np.float64)
    dtype, raw = _DTYPES[config.kv_fmt]
    return codes.astype(raw).view(dtype).astype(np.float64)


@dataclass(frozen=True)
class Request:
    """One request (the fields of :func:`scoville.rtl.kvcache.request_layout`) and, for an
    append, its ``append_beats`` lines (K heads, then V heads unless ``k_only``)."""

    op: int
    seq: int = 0
    kv: int = 0
    head: int = 0
    start: int = 0
    count: int = 0
    lines: tuple[int, ...] = ()
    line0: int = 0
    nlines: int = 0

    def word(self) -> int:
        """The packed ``req`` payload."""
        return _pack(_REQUEST, op=self.op, seq=self.seq, kv=self.kv, head=self.head,
                     start=self.start, count=self.count, line0=self.line0,
                     nlines=self.nlines)


@dataclass(frozen=True)
class Outcome:
    """What one request does.

    Attributes
    ----------
    status, seq, length, free : int
        The answer.
    data : list of int
        Lines a read returns.
    walked : int
        Pages a free or fork walks.
    new_page, copied : bool
        An append took a page from the free list; it copied a shared page first.
    reached : str
        How far an append got before failing: ``decode`` (bad sequence) or ``page``
        (no page free); ``done`` otherwise.
    """

    op: int
    status: int
    seq: int
    length: int
    free: int
    data: list = field(default_factory=list)
    walked: int = 0
    new_page: bool = False
    copied: bool = False
    reached: str = "done"


    def word(self) -> int:
        """The packed ``resp`` payload."""
        return _pack(_RESPONSE, status=self.status, seq=self.seq, length=self.length,
                     free=self.free)


_REQUEST, _RESPONSE = request_layout(), response_layout()


def _pack(layout, **fields) -> int:
    """``fields`` packed into one integer at the offsets of ``layout``'s fields."""
    return sum(int(fields[name]) << member.offset for name, member in layout)


@dataclass
class _Seq:
    tokens: list = field(default_factory=list)
    pages: list = field(default_factory=list)


class KvCacheModel:
    """The cache, request by request (see the module docstring)."""

    def __init__(self, config):
        self.config = config
        self.seqs: dict[int, _Seq] = {}
        self.refs: dict[int, int] = {}
        self._next_page = 0

    @property
    def free(self) -> int:
        return self.config.pages - len(self.refs)

    def lowest_free_slot(self) -> int | None:
        return next((s for s in range(self.config.max_seqs) if s not in self.seqs), None)

    def _page(self) -> int:
        self._next_page += 1
        self.refs[self._next_page] = 1
        return self._next_page

    def _unref(self, page: int) -> None:
        self.refs[page] -= 1
        if not self.refs[page]:
            del self.refs[page]

    def _answer(self, req: Request, status: str, seq: int | None = None, **kw) -> Outcome:
        seq = req.seq if seq is None else seq
        length = len(self.seqs[seq].tokens) if seq in self.seqs else 0
        return Outcome(req.op, STATUS[status], seq, length, self.free, **kw)

    def apply(self, req: Request) -> Outcome:
        """Carry out ``req``; return its :class:`Outcome`."""
        cfg = self.config
        pt = cfg.page_tokens
        s = self.seqs.get(req.seq)
        if req.op == Op.ALLOC:
            new = self.lowest_free_slot()
            if new is None:
                return self._answer(req, "too_many")
            self.seqs[new] = _Seq()
            return self._answer(req, "ok", new)
        if req.op == Op.FREE:
            if s is None:
                return self._answer(req, "no_seq")
            for page in s.pages:
                self._unref(page)
            del self.seqs[req.seq]
            return self._answer(req, "ok", walked=len(s.pages))
        if req.op == Op.FORK:
            new = self.lowest_free_slot()
            if s is None:
                return self._answer(req, "no_seq")
            if req.count > len(s.tokens):
                return self._answer(req, "bad_range")
            if new is None:
                return self._answer(req, "too_many")
            shared = s.pages[: -(-req.count // pt)]
            for page in shared:
                self.refs[page] += 1
            self.seqs[new] = _Seq(list(s.tokens[: req.count]), list(shared))
            return self._answer(req, "ok", new, walked=len(shared))
        if req.op == Op.APPEND:
            if len(req.lines) != cfg.append_beats:
                raise ValueError(f"append takes {cfg.append_beats} lines; got {len(req.lines)}")
            if s is None:
                return self._answer(req, "no_seq", reached="decode")
            n = len(s.tokens)
            slot, index = n % pt, n // pt
            shared = slot != 0 and self.refs[s.pages[index]] > 1
            need = slot == 0 or shared
            if need and not self.free:
                return self._answer(req, "full", reached="page")
            if shared:
                self._unref(s.pages[index])
                s.pages[index] = self._page()
            elif slot == 0:
                s.pages.append(self._page())
            s.tokens.append(tuple(req.lines))
            return self._answer(req, "ok", new_page=need, copied=shared)
        if req.op == Op.READ:
            if s is None:
                return self._answer(req, "no_seq")
            if req.head >= cfg.kv_heads:
                return self._answer(req, "bad_head")
            tl = cfg.token_lines
            if (req.count == 0 or req.start + req.count > len(s.tokens) or req.line0 >= tl
                    or req.line0 + req.nlines > tl):
                return self._answer(req, "bad_range")
            first = ((0 if cfg.k_only else req.kv) * cfg.kv_heads + req.head) * tl + req.line0
            width = req.nlines or tl - req.line0
            lines = [line for token in s.tokens[req.start: req.start + req.count]
                     for line in token[first: first + width]]
            return self._answer(req, "ok", data=lines)
        return self._answer(req, "bad_op")
