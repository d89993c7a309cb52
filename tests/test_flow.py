"""The flow itself: a wrong design fails, builds are cached, lint waivers are explained."""

import dataclasses
from pathlib import Path

import pytest
from amaranth.hdl import Module

from scoville.blocks import get_block
from scoville.rtl.fp4 import Fp4Mul
from scoville.sim import flow
from scoville.sim.lint import WAIVED

from .simcheck import explain, simulate


class WrongFp4Mul(Fp4Mul):
    """Fp4Mul with one wrong product: 6 x 6 gives 143 quarters instead of 144."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.good = good = Fp4Mul(self.config)
        m.d.comb += [
            good.i.valid.eq(self.i.valid),
            good.i.payload.eq(self.i.payload),
            self.i.ready.eq(good.i.ready),
            self.o.valid.eq(good.o.valid),
            good.o.ready.eq(self.o.ready),
            self.o.payload.eq(good.o.payload),
        ]
        with m.If(good.o.payload[0] == 144):
            m.d.comb += self.o.payload[0].eq(143)
        return m


@pytest.mark.sim
def test_a_wrong_design_fails_and_names_the_mismatch(simulator, seed):
    block = dataclasses.replace(get_block("fp4_mul"), component=WrongFp4Mul)
    result = simulate("fp4_mul", simulator, seed, block=block, count=50)
    assert not result.passed
    failed = {t.name: t.message for t in result.tests if not t.passed}
    assert "test_exhaustive" in failed, explain(result)
    assert "first at index 119: expected [144], got [143]" in failed["test_exhaustive"]
    assert result.metrics["test_exhaustive"]["mismatches"] == 2


@pytest.mark.sim
def test_second_identical_run_reuses_the_build(simulator, seed):
    first = simulate("fp4_mul", simulator, seed, count=20)
    second = simulate("fp4_mul", simulator, seed, count=20)
    assert second.build_reused
    assert first.build_dir == second.build_dir
    assert first.run_dir != second.run_dir
    assert first.metrics == second.metrics


@pytest.mark.sim
def test_different_parameters_build_in_different_folders(simulator, seed):
    a = simulate("fp4_mul", simulator, seed, count=20)
    b = simulate("fp4_mul", simulator, seed, count=20, lanes=4, latency=2)
    assert a.build_dir != b.build_dir


def test_every_lint_waiver_has_a_reason():
    for name, reason in WAIVED.items():
        assert name.isupper() and len(reason) > 20, name


@pytest.mark.sim
def test_waves_are_recorded_on_request(simulator, seed):
    block = get_block("fp4_mul")
    config, workload = block.config(), block.workload(count=20)
    result = flow.run(block, config, workload, simulator, seed=seed, waves=True)
    assert result.passed, explain(result)
    assert result.waves.endswith(".fst")
    assert Path(result.waves).stat().st_size > 0


def test_icarus_time_zero_toggles_every_yosys_dummy_register():
    text = (
        "module a;\n  reg \\$auto$verilog_backend.cc:2355:dump_module$1  = 0;\n"
        "  always @* begin\n    if (\\$auto$verilog_backend.cc:2355:dump_module$1 ) begin end\n"
        "  end\nendmodule\nmodule b;\n  reg \\$auto$verilog_backend.cc:2355:dump_module$2  = 0;\n"
        "endmodule\n"
    )
    out = flow.icarus_time_zero(text)
    assert out.count("initial #0 ") == 2
    assert "  initial #0 \\$auto$verilog_backend.cc:2355:dump_module$2 = 1'b1;\n" in out
    assert flow.icarus_time_zero("module c;\nendmodule\n") == "module c;\nendmodule\n"


@pytest.mark.sim
def test_a_cached_build_is_found_without_elaborating(seed, monkeypatch, tmp_path):
    # The design key does not depend on the simulator; Icarus builds in a second.
    simulator = "icarus"
    monkeypatch.setenv("SCOVILLE_BUILD_DIR", str(tmp_path))
    calls = []
    real = flow.to_verilog

    def counted(component, name):
        calls.append(name)
        return real(component, name)

    monkeypatch.setattr(flow, "to_verilog", counted)
    first = simulate("fp4_mul", simulator, seed, count=20, lanes=3)
    second = simulate("fp4_mul", simulator, seed, count=20, lanes=3)
    assert not first.build_reused and second.build_reused
    assert second.build_dir == first.build_dir
    assert calls == ["fp4_mul"]
    simulate("fp4_mul", simulator, seed, count=20, lanes=3, latency=3)
    assert calls == ["fp4_mul", "fp4_mul"]


def test_design_key_follows_the_component_and_the_parameters():
    block = get_block("fp4_mul")
    config = block.config()
    key = flow.design_key(block, config)
    assert key == flow.design_key(block, block.config())
    assert key != flow.design_key(block, dataclasses.replace(config, lanes=config.lanes + 1))
    assert key != flow.design_key(dataclasses.replace(block, component=WrongFp4Mul), config)
