"""Stream payloads packed and unpacked by the RTL's layouts agree with Amaranth's own packing
of the same layouts (``Layout.const(...).as_bits()``)."""

import numpy as np
import pytest
from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from scoville.rtl.gemm import Gemm, GemmConfig
from scoville.rtl.kvcache import KvCache, KvCacheConfig
from scoville.testbenches.codec import Codec, codecs

LAYOUTS = [
    data.StructLayout({"a": data.ArrayLayout(signed(4), 3), "b": unsigned(8), "acc": signed(32),
                       "last": 1}),
    data.StructLayout({"x": data.StructLayout({"p": signed(7), "q": 3}),
                       "pairs": data.ArrayLayout(data.StructLayout({"u": 5, "v": signed(2)}), 2)}),
    data.ArrayLayout(32, 5),
    data.ArrayLayout(signed(9), 4),
    # Scalars wider than an int64: 63 and 64 bits, and wider than any NumPy integer.
    data.StructLayout({"w": unsigned(63), "s": signed(64), "big": unsigned(100),
                       "sbig": signed(77), "flag": 1}),
    data.ArrayLayout(signed(70), 3),
]


def _random(shape, rng):
    """A random value of ``shape`` as Amaranth's ``const`` takes it."""
    if isinstance(shape, data.StructLayout):
        return {name: _random(field.shape, rng) for name, field in shape}
    if isinstance(shape, data.ArrayLayout):
        return [_random(shape.elem_shape, rng) for _ in range(shape.length)]
    s = shape if not isinstance(shape, int) else unsigned(shape)
    lo = -(1 << (s.width - 1)) if s.signed else 0
    bits = int.from_bytes(rng.bytes(-(-s.width // 8)), "little") & ((1 << s.width) - 1)
    return lo + bits


def _columns(layout, values):
    """The values as the codec's columns (nested struct and array leaves by dotted name)."""
    cols = {}

    def walk(shape, value, name):
        if isinstance(shape, data.StructLayout):
            for member, field in shape:
                walk(field.shape, value[member], f"{name}.{member}" if name else member)
        elif isinstance(shape, data.ArrayLayout) and isinstance(shape.elem_shape, data.Layout):
            for k, v in enumerate(value):
                walk(shape.elem_shape, v, f"{name}[{k}]")
        else:
            cols.setdefault(name or "_", []).append(value)

    for v in values:
        walk(layout, v, "")
    return cols


@pytest.mark.parametrize("layout", LAYOUTS, ids=range(len(LAYOUTS)))
def test_pack_and_unpack_agree_with_amaranth(layout):
    rng = np.random.default_rng(7)
    values = [_random(layout, rng) for _ in range(50)]
    codec = Codec(layout)
    words = codec.pack(**_columns(layout, values))
    assert words == [layout.const(v).as_bits() for v in values]
    # pack's path for one integer per field and beat, and pack_bytes's, give the same words.
    rows = codec.pack_bytes(**_columns(layout, values))
    assert words == [int.from_bytes(row.tobytes(), "big") for row in rows]
    back = codec.unpack(words)
    for name, column in _columns(layout, values).items():
        assert np.array_equal(back["" if name == "_" else name], np.array(column))


def test_an_array_field_takes_whole_integers_and_unknown_fields_are_named():
    layout = data.StructLayout({"data": data.ArrayLayout(16, 9), "last": 1})
    codec = Codec(layout)
    line = (1 << 144) - 3
    assert codec.pack(data=[line, 5], last=[1, 0]) == [line | 1 << 144, 5]
    rows = codec.pack_bytes(data=[line, 5], last=[1, 0])
    assert [int.from_bytes(r.tobytes(), "big") for r in rows] == [line | 1 << 144, 5]
    with pytest.raises(ValueError, match="no payload field \\['lats'\\]"):
        codec.pack(lats=[1])


def _signature_only(component):
    component._MustUse__silence = True  # built for its signature, never elaborated
    return component


def test_codecs_follow_the_blocks_streams():
    gemm = codecs(_signature_only(Gemm(GemmConfig(rows=2, cols=3, fmt="mxfp4"))))
    assert set(gemm) == {"cmd", "a", "b", "o"}
    assert set(gemm["a"].fields) == {"data", "scale"} and gemm["o"].width == 96
    kv = codecs(_signature_only(KvCache(KvCacheConfig())))
    assert set(kv["rd"].fields) == {"data", "last"}
