"""Every block's pieces are found by the block's own name (``docs/adding-a-block.md``): for a block
``B``, the component in ``scoville/rtl/B.py``, the golden model in ``scoville/sim/golden/B.py``, the
timed model in ``scoville/sim/cycles/B.py`` (or the shared stalling-pipeline model), the testbench
in ``scoville/testbenches/B.py`` and the tests in ``tests/test_B.py``."""

import dataclasses
from pathlib import Path

import pytest

from scoville.blocks import BLOCKS
from scoville.rtl.lib.params import is_part
from scoville.sim.cycles.stream import pipeline_timing

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("block", BLOCKS.values(), ids=lambda b: b.name)
def test_a_block_is_found_by_its_name(block):
    name = block.name
    assert block.component.__module__ == f"scoville.rtl.{name}"
    assert block.config.__module__ == f"scoville.rtl.{name}"
    assert block.golden.__module__ == f"scoville.sim.golden.{name}"
    assert block.golden.__name__ in (name, block.component.__name__ + "Model")
    if block.timed is not pipeline_timing:
        assert block.timed.__module__ == f"scoville.sim.cycles.{name}"
        assert block.timed.__name__ == "timing"
    assert block.testbench == f"scoville.testbenches.{name}"
    for path in (f"scoville/rtl/{name}.py", f"scoville/sim/golden/{name}.py",
                 f"scoville/testbenches/{name}.py", f"tests/test_{name}.py"):
        assert (ROOT / path).is_file(), path


def test_every_part_of_a_composed_block_is_a_block():
    for block in BLOCKS.values():
        fields = {f.name for f in dataclasses.fields(block.config) if is_part(f)}
        assert fields == set(block.parts), f"{block.name}: parts {block.parts}, fields {fields}"
        for field, part in block.parts.items():
            assert part in BLOCKS, f"{block.name}.{field}: no block {part!r}"
            assert isinstance(getattr(block.config(), field), BLOCKS[part].config)


def test_no_parameter_is_both_hardware_and_workload():
    for block in BLOCKS.values():
        hardware = {f.name for f in dataclasses.fields(block.config)}
        workload = {f.name for f in dataclasses.fields(block.workload)}
        assert not hardware & workload, f"{block.name}: {hardware & workload}"
