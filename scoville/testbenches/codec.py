"""Stream payloads packed and unpacked by the RTL's own ``data`` layouts, so no testbench writes
a bit offset by hand.

A :class:`Codec` reads a payload shape (a ``data.StructLayout``, a ``data.ArrayLayout`` or a
plain shape) once into its fields: each leaf of the layout with its offset, element width,
signedness and element count (an array of scalars is one field of ``count`` elements). It then
packs whole columns of values (NumPy arrays, one row per beat) into payload words and unpacks
words back into columns, vectorized.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data, stream

__all__ = ["Codec", "Field", "codecs"]


@dataclass(frozen=True)
class Field:
    """One leaf of a payload layout: ``count`` elements of ``width`` bits from ``offset``
    (``count`` is 0 for a scalar, else the length of an array of scalars)."""

    name: str
    offset: int
    width: int
    signed: bool
    count: int


def _fields(shape, name: str = "", offset: int = 0) -> list[Field]:
    if isinstance(shape, data.StructLayout):
        out = []
        for member, field in shape:
            path = f"{name}.{member}" if name else member
            out += _fields(field.shape, path, offset + field.offset)
        return out
    if isinstance(shape, data.ArrayLayout) and not isinstance(shape.elem_shape, data.Layout):
        elem = Shape.cast(shape.elem_shape)
        return [Field(name, offset, elem.width, elem.signed, shape.length)]
    if isinstance(shape, data.ArrayLayout):
        elem = shape.elem_shape
        return [f for k in range(shape.length)
                for f in _fields(elem, f"{name}[{k}]", offset + k * elem.size)]
    plain = Shape.cast(shape)
    return [Field(name, offset, plain.width, plain.signed, 0)]


def _place(words: np.ndarray, values: np.ndarray, offset: int, width: int) -> None:
    """OR ``values`` (uint64, one per beat, at most ``width`` bits each) into bits ``offset``
    on of each row of 64-bit ``words`` (lowest word first)."""
    q, r = divmod(offset, 64)
    words[:, q] |= values << np.uint64(r)
    if r + width > 64:
        words[:, q + 1] |= values >> np.uint64(64 - r)


class Codec:
    """Packs and unpacks the payloads of one stream (see the module docstring).

    Attributes
    ----------
    width : int
        Bits of a payload.
    fields : dict of str to Field
        The layout's leaves by name (``""`` for a payload that is one scalar or one array).
    """

    def __init__(self, shape):
        self.width = Shape.cast(shape).width
        self.fields = {f.name: f for f in _fields(shape)}

    def pack(self, **columns) -> list[int]:
        """Payload words from columns: ``name=values``, an array of one value per beat (a
        scalar field) or of one row of ``count`` values per beat (an array field; or one
        integer per beat holding all of its bits, element 0 lowest); for the unnamed field
        pass ``_=values``. Missing fields are 0; values are two's complement cut to their
        width."""
        named = {("" if k == "_" else k): v for k, v in columns.items()}
        if named and set(named) <= set(self.fields) and all(
                np.ndim(v) == 1 for v in named.values()):
            # One integer per beat per field: OR the fields into Python integers directly.
            beats = {len(v) for v in named.values()}
            if len(beats) != 1:
                raise ValueError(f"columns of different lengths: {sorted(beats)}")
            words = [0] * beats.pop()
            for name, values in named.items():
                f = self.fields[name]
                mask, at = (1 << (max(f.count, 1) * f.width)) - 1, f.offset
                words = [w | ((int(v) & mask) << at) for w, v in zip(words, values, strict=True)]
            return words
        return [int.from_bytes(row.tobytes(), "big") for row in self.pack_bytes(**columns)]

    def pack_bytes(self, **columns) -> np.ndarray:
        """The payloads of :meth:`pack` as bytes: a uint8 array of one row per beat, each
        payload's whole bytes, most significant first (as the harness's rings load them:
        :class:`~scoville.testbenches.freerun.FreeRun` takes it as it is)."""
        columns = {("" if k == "_" else k): v for k, v in columns.items()}
        unknown = set(columns) - set(self.fields)
        if unknown:
            raise ValueError(f"no payload field {sorted(unknown)}; fields: {sorted(self.fields)}")
        beats = {len(np.asarray(v)) for v in columns.values()}
        if len(beats) != 1:
            raise ValueError(f"columns of different lengths: {sorted(beats)}")
        (n,) = beats
        words = np.zeros((n, -(-self.width // 64) + 1), dtype=np.uint64)
        for name, values in columns.items():
            f = self.fields[name]
            span = max(f.count, 1) * f.width
            if f.width > 62 and not (f.count and np.ndim(values) == 1):
                # Elements too wide for int64: each beat's as one Python integer.
                mask = (1 << f.width) - 1
                rows = values if f.count else [[v] for v in values]
                values = [sum((int(v) & mask) << (j * f.width) for j, v in enumerate(row))
                          for row in rows]
            if f.width > 62 or (f.count and np.ndim(values) == 1):
                # An array field given as one integer per beat (its bits, element 0 lowest),
                # or elements too wide for int64: through Python integers, 64 bits at a time.
                size = 8 * -(-span // 64)
                raw = np.frombuffer(b"".join((int(v) & ((1 << span) - 1)).to_bytes(size, "little")
                                             for v in values), dtype="<u8").reshape(n, -1)
                for j in range(raw.shape[1]):
                    _place(words, raw[:, j], f.offset + 64 * j, min(64, span - 64 * j))
            else:
                values = np.asarray(values, dtype=np.int64).reshape(n, max(f.count, 1))
                elems = (values & ((1 << f.width) - 1)).astype(np.uint64)
                for j in range(elems.shape[1]):
                    _place(words, elems[:, j], f.offset + j * f.width, f.width)
        size = -(-self.width // 8)
        return np.ascontiguousarray(words.astype("<u8").view(np.uint8)[:, size - 1::-1])

    def unpack(self, words) -> dict[str, np.ndarray]:
        """Columns from payload words: each field as an int64 array of one value per beat (a
        scalar field) or of shape (beats, count) (an array field); signed fields
        sign-extended. Fields wider than 62 bits come as object arrays of Python integers."""
        words = list(words)
        n = len(words)
        size = -(-self.width // 8)
        raw = np.frombuffer(b"".join(int(w).to_bytes(size, "little") for w in words),
                            dtype=np.uint8).reshape(n, size)
        bits = np.unpackbits(raw, axis=1, bitorder="little")
        out = {}
        for name, f in self.fields.items():
            k = max(f.count, 1)
            if f.width > 62:
                # Too wide for int64 arithmetic: Python integers, in an object array.
                chunk = bits[:, f.offset:f.offset + k * f.width].reshape(n * k, f.width)
                rows = np.packbits(chunk, axis=1, bitorder="little")
                values = np.array([int.from_bytes(r.tobytes(), "little") for r in rows] or [],
                                  dtype=object).reshape(n, k)
                if f.signed:
                    top = 1 << (f.width - 1)
                    values = np.array([[v - 2 * top if v >= top else v for v in row]
                                       for row in values], dtype=object).reshape(n, k)
                out[name] = values if f.count else values[:, 0]
                continue
            size = next(s for s in (1, 2, 4, 8) if 8 * s >= f.width)
            chunk = np.zeros((n, k, 8 * size), dtype=np.uint8)
            chunk[:, :, :f.width] = bits[:, f.offset:f.offset + k * f.width].reshape(n, k, -1)
            values = np.packbits(chunk, axis=2, bitorder="little").view(f"<u{size}")[:, :, 0]
            values = values.astype(np.int64)
            if f.signed:
                values = np.where(values >> (f.width - 1) & 1, values - (1 << f.width), values)
            out[name] = values if f.count else values[:, 0]
        return out


def codecs(component) -> dict[str, Codec]:
    """A :class:`Codec` for each stream of ``component``, by name."""
    return {name: Codec(member.signature.members["payload"].shape)
            for name, member in component.signature.members.items()
            if member.is_signature and isinstance(member.signature, stream.Signature)}
