"""Command, status and state codes are ``amaranth.lib.enum`` enums: every code field of every
block's ports has an enum's shape (so waveforms and the Verilog name its values), its docstring
says so, and the name tables are the enums'."""

import re

import pytest
from amaranth.lib import data, enum

from scoville.blocks import BLOCKS
from scoville.rtl.lib.codes import names

#: Port fields that carry codes.
_CODE_FIELDS = ("op", "status")


def _code_fields(component):
    """``(port path, shape)`` of every code field of the component's ports: a ``status``
    port, and ``op`` / ``status`` fields of stream payloads."""
    for name, member in component.signature.members.items():
        if name in _CODE_FIELDS and member.is_port:
            yield name, member.shape
        elif not member.is_port and {"payload", "valid", "ready"} <= set(
                member.signature.members):
            layout = member.signature.members["payload"].shape
            if isinstance(layout, data.StructLayout):
                for field in _CODE_FIELDS:
                    if field in layout.members:
                        yield f"{name}.payload.{field}", layout[field].shape


_WITH_CODES = [b for b in BLOCKS.values()
               if any(True for _ in _code_fields(b.component(b.config())))]


def test_the_blocks_with_codes_are_found():
    """The scan sees every block that has codes (a scan that finds none checks nothing)."""
    assert {b.name for b in _WITH_CODES} == {"gemm", "gemm_quant", "kvcache", "attention",
                                             "moe", "linear", "decoder"}


@pytest.mark.parametrize("block", _WITH_CODES, ids=lambda b: b.name)
def test_every_code_field_is_an_enum(block):
    component = block.component(block.config())
    for path, shape in _code_fields(component):
        assert isinstance(shape, enum.EnumType), f"{block.name}: {path} is {shape!r}"
        assert issubclass(shape, enum.IntEnum), f"{block.name}: {path} is not an IntEnum"
        # The width follows from the codes: no spare bit, none missing.
        assert shape.as_shape().width == max(1, max(m.value for m in shape).bit_length()), (
            f"{block.name}: {path} is {shape.as_shape()} for codes up to "
            f"{max(m.value for m in shape)}")


@pytest.mark.parametrize("block", _WITH_CODES, ids=lambda b: b.name)
def test_the_docstring_gives_the_status_port_its_enum(block):
    component = block.component(block.config())
    if "status" not in component.signature.members:
        pytest.skip("no status port")
    shape = component.signature.members["status"].shape
    doc = type(component).__doc__
    said = re.search(r"^\s*status : Out\((\w+)\)", doc, re.M)
    assert said and said[1] == shape.__name__, (
        f"{block.name}'s docstring says status is {said and said[0].strip()!r}, the port is "
        f"Out({shape.__name__})")


def test_names_are_lower_case_members():
    class Code(enum.IntEnum, shape=2):
        OK = 0
        BAD_THING = 2

    assert names(Code) == {"ok": Code.OK, "bad_thing": Code.BAD_THING}
