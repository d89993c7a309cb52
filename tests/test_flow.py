"""The flow itself: a wrong design fails, builds are cached, lint waivers are explained."""

import dataclasses
import re
from pathlib import Path

import pytest
from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal, Signal
from amaranth.lib import wiring

from scoville.blocks import get_block
from scoville.rtl.fp4_mul import Fp4Mul
from scoville.sim import flow
from scoville.sim.lint import WAIVED
from scoville.testbenches.failures import Kind, kind_of

from .simcheck import explain, simulate


def _pass_through(m: Module, outer: Fp4Mul, inner: Fp4Mul) -> None:
    """Connect ``outer``'s streams straight to ``inner``'s (later assignments may override)."""
    wiring.connect(m, wiring.flipped(outer.i), inner.i)
    m.d.comb += [outer.o.valid.eq(inner.o.valid), inner.o.ready.eq(outer.o.ready),
                 outer.o.payload.eq(inner.o.payload)]


class WrongFp4Mul(Fp4Mul):
    """Fp4Mul with one wrong product: 6 x 6 gives 143 quarters instead of 144."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.good = good = Fp4Mul(self.config)
        _pass_through(m, self, good)
        with m.If(good.o.payload[0] == 144):
            m.d.comb += self.o.payload[0].eq(143)
        return m


class StutteringFp4Mul(Fp4Mul):
    """Fp4Mul whose output breaks the stream rules while ``o.ready`` is low: ``valid`` drops
    (``kind="drop"``) or the payload changes (``kind="change"``) one cycle into each stall."""

    kind = "drop"

    def elaborate(self, platform):
        m = Module()
        m.submodules.good = good = Fp4Mul(self.config)
        waited = Signal()
        m.d.sync += waited.eq(good.o.valid & ~self.o.ready)
        _pass_through(m, self, good)
        with m.If(waited & ~self.o.ready):
            if self.kind == "drop":
                m.d.comb += self.o.valid.eq(0)
            else:
                m.d.comb += self.o.payload.eq(good.o.payload.as_value() ^ 1)
        return m


class ChangingFp4Mul(StutteringFp4Mul):
    kind = "change"


@pytest.mark.sim
@pytest.mark.parametrize(("component", "kind"), [(StutteringFp4Mul, "valid dropped"),
                                                 (ChangingFp4Mul, "payload changed")])
def test_protocol_checkers_name_the_stream_and_cycle(simulator, seed, component, kind):
    """The harness's checkers fire on a design that breaks the stream rules on ``o``, and the
    test fails naming the stream, the cycle and what happened."""
    block = dataclasses.replace(get_block("fp4_mul"), component=component)
    # Heavy back-pressure over 100 beats: a stall of two cycles or more comes in every seed
    # (at 30% over 50 beats about one seed in a hundred had none, and the design passed).
    result = simulate("fp4_mul", simulator, seed, block=block, count=100, backpressure=0.7)
    assert not result.passed
    failed = {t.name: t.message for t in result.tests if not t.passed}
    assert "test_workload" in failed, explain(result)
    assert re.search(rf"protocol violation on stream o in cycle \d+: {kind}",
                     failed["test_workload"]), failed["test_workload"]
    assert kind_of(failed["test_workload"]) is Kind.PROTOCOL, failed["test_workload"]
    # Without back-pressure the stream never waits, and the same design passes.
    assert "test_exhaustive" not in failed, explain(result)


class UnknownFp4Mul(Fp4Mul):
    """Fp4Mul whose ``o.valid`` goes through a hand-written cell that drives X once the
    ``n``-th output waits (Amaranth's own Verilog never drives X; a hand-written block can)."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.good = good = Fp4Mul(self.config)
        _pass_through(m, self, good)
        valid = Signal()
        m.submodules.cell = Instance("x_after_stall", i_clk=ClockSignal(), i_rst=ResetSignal(),
                                     i_valid=good.o.valid, i_ready=self.o.ready, o_out=valid)
        m.d.comb += self.o.valid.eq(valid)
        return m


X_CELL = """
module x_after_stall(input clk, input rst, input valid, input ready, output out);
  reg seen = 1'b0;
  always @(posedge clk) if (rst) seen <= 1'b0; else if (valid & ~ready) seen <= 1'b1;
  assign out = seen ? 1'bx : valid;
endmodule
"""


@pytest.mark.sim
def test_an_x_on_a_stream_fails_naming_the_stream_and_cycle(seed, monkeypatch, tmp_path):
    """Icarus (four-state; Verilator has no X): ``valid`` turning X is a failure that names
    the stream and the cycle."""
    monkeypatch.setenv("SCOVILLE_BUILD_DIR", str(tmp_path))
    real = flow.simulated_verilog
    monkeypatch.setattr(flow, "simulated_verilog",
                        lambda *args, **kw: real(*args, **kw) + X_CELL)
    block = dataclasses.replace(get_block("fp4_mul"), component=UnknownFp4Mul)
    result = simulate("fp4_mul", "icarus", seed, block=block, count=50)
    failed = {t.name: t.message for t in result.tests if not t.passed}
    assert "test_workload" in failed, explain(result)
    assert re.search(r"an X or Z on stream o in cycle \d+", failed["test_workload"]), (
        failed["test_workload"])


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

    def replayable(metrics):  # all but wall-clock times
        return {test: {k: v for k, v in m.items() if not k.endswith("_s")}
                for test, m in metrics.items()}

    assert replayable(first.metrics) == replayable(second.metrics)
    assert first.metrics["test_workload"]["run_wall_s"] > 0


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
    assert calls == ["fp4_mul_dut"]
    simulate("fp4_mul", simulator, seed, count=20, lanes=3, latency=3)
    assert calls == ["fp4_mul_dut", "fp4_mul_dut"]


def test_design_key_follows_the_component_and_the_parameters():
    block = get_block("fp4_mul")
    config = block.config()
    key = flow.design_key(block, config)
    assert key == flow.design_key(block, block.config())
    assert key != flow.design_key(block, dataclasses.replace(config, lanes=config.lanes + 1))
    assert key != flow.design_key(dataclasses.replace(block, component=WrongFp4Mul), config)


@pytest.mark.sim
def test_a_testbench_that_falls_behind_is_stopped_by_starved(simulator, seed):
    """The harness's ``starved`` flag fires when the rings are not refilled in time
    (``scoville.testbenches.harness_checks``: a FreeRun that loads them once): the run stops
    with "ran dry" a ring in, instead of running on with stale schedules and payloads."""
    block = dataclasses.replace(get_block("fp4_mul"),
                                testbench="scoville.testbenches.harness_checks")
    result = simulate("fp4_mul", simulator, seed, block=block)
    assert result.passed, explain(result)
    assert [t.name for t in result.tests] == ["test_starved"], explain(result)
