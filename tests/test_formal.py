"""``scoville formal`` (:mod:`scoville.synth.formal`): the stream rules, counters and status
proved on every port of a block, its RTL's own invariants with them; a design that breaks one
fails with the assertion it breaks and a waveform (skipped where the ``formal`` extra is not
installed)."""

import dataclasses
import io
import json
import shutil
import types
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from scoville.blocks import get_block, parse_params
from scoville.cli import main
from scoville.synth import formal
from scoville.synth.formal import TOOLS, prove

from .script import load
from .test_flow import StutteringFp4Mul

pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                                reason="no formal tools (pip install -e '.[formal]')")

ROOT = Path(__file__).resolve().parent.parent
#: A fetch engine small enough for a proof in a second: 4 words of 8 bits, bursts of 2.
SMALL_FETCH = {"data_bits": 8, "addr_bits": 6, "len_bits": 3, "burst": 2, "buffer": 4}


def _prove(block, params, tmp_path, depth=6):
    config, _ = parse_params(block, params)
    return prove(block, config, depth=depth, workdir=tmp_path / "proof")


def test_a_lane_unit_is_proved_and_its_inputs_are_assumed_not_asserted(tmp_path):
    proof = _prove(get_block("fp4_mul"), {"lanes": 2, "latency": 2}, tmp_path)
    assert proof.status == "proved", proof
    assert proof.own == 0
    assert proof.checks == ["o: valid dropped while a beat waited",
                            "o: payload changed while a beat waited",
                            "o: a beat offered the cycle after a reset"]


def test_a_proof_runs_on_a_machine_where_the_solver_never_ran(tmp_path, monkeypatch):
    """On a fresh machine YoWASP compiles Boolector on its first run and says so, which
    smtbmc took for the solver's answer (no verdict; found by scripts/first_run.py): with a
    cache that holds every YoWASP tool but the solver, the proof still comes."""
    import platformdirs
    cache = tmp_path / "yowasp-cache"
    home = Path(platformdirs.user_cache_dir("YoWASP", appauthor=False))
    if home.exists():
        shutil.copytree(home, cache, ignore=lambda _, names: [n for n in names
                                                               if "boolector" in n])
    monkeypatch.setenv("YOWASP_CACHE_DIR", str(cache))
    formal._compiled.cache_clear()
    proof = _prove(get_block("fp4_mul"), {"lanes": 2, "latency": 2}, tmp_path)
    assert proof.status == "proved", proof
    assert any("boolector" in p.name for p in cache.iterdir())


def test_a_design_that_drops_valid_fails_naming_the_rule_with_a_waveform(tmp_path):
    block = dataclasses.replace(get_block("fp4_mul"), component=StutteringFp4Mul)
    proof = _prove(block, {}, tmp_path)
    assert proof.status == "failed"
    assert proof.failure == "o: valid dropped while a beat waited"
    assert Path(proof.trace).suffix == ".vcd" and "violated_0" in Path(proof.trace).read_text()


def test_fetch_is_proved_with_its_own_invariants_and_a_late_free_breaks_one(tmp_path):
    """The fetch engine's RTL states, for formal only, that the memory answers what was asked
    and that its reservation is the words asked plus those buffered: proved. The mutation
    that frees room a cycle late (a timing bug to the testbench) breaks the second."""
    fetch = get_block("fetch")
    assert _prove(fetch, SMALL_FETCH, tmp_path).status == "proved"
    mutants = load("mutants")
    mu = mutants.by_name()["fetch-room-freed-a-cycle-late"]
    source = mutants.mutate(mu, (ROOT / mu.file).read_text())
    module = types.ModuleType("scoville.rtl.fetch_late")
    module.__package__ = "scoville.rtl"
    exec(compile(source, mu.file, "exec"), module.__dict__)
    late = dataclasses.replace(fetch, component=module.Fetch)
    proof = _prove(late, SMALL_FETCH, tmp_path)
    assert proof.status == "failed"
    assert proof.failure.startswith("scoville/rtl/fetch.py:"), proof.failure
    assert "reserved is not the words asked plus those buffered" in proof.failure


def test_an_operand_buffer_that_takes_beats_when_full_breaks_its_invariant(tmp_path,
                                                                          monkeypatch):
    """The GEMM operand buffers' invariants (``scoville/rtl/lib/formal.py``'s ``invariant``):
    proved with the array; a buffer that is always ready overfills, and the counterexample
    names the invariant's line in the buffer's RTL and its text."""
    import scoville.rtl.gemm as gemm_rtl

    gemm = get_block("gemm")
    proof = _prove(gemm, {"buffer_depth": 2}, tmp_path)
    assert proof.status == "proved" and proof.own >= 6, proof
    path = "scoville/rtl/gemm_opbuffer.py"
    source = (ROOT / path).read_text()
    assert source.count("self.i.ready.eq(level != depth)") == 1
    module = types.ModuleType("scoville.rtl.gemm_opbuffer_overfills")
    module.__package__ = "scoville.rtl"
    exec(compile(source.replace("self.i.ready.eq(level != depth)", "self.i.ready.eq(1)"),
                 path, "exec"), module.__dict__)
    monkeypatch.setattr(gemm_rtl, "OperandBuffer", module.OperandBuffer)
    proof = _prove(gemm, {"buffer_depth": 2}, tmp_path)
    assert proof.status == "failed"
    assert proof.failure.startswith(f"{path}:"), proof.failure
    assert "operand buffer: level past its depth" in proof.failure


def _cli(*argv) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["formal", *argv])
    return code, out.getvalue()


def test_the_command_reports_a_proof_as_json():
    code, out = _cli("int_mac", "--param", "lanes=2", "--depth", "4", "--json")
    report = json.loads(out)
    assert code == 0 and report["status"] == "proved" and report["depth"] == 4
    assert report["params"] == {"lanes": "2"} and report["block"] == "int_mac"


def test_missing_tools_and_bad_depths_are_one_line(monkeypatch, capsys):
    assert main(["formal", "fp4_mul", "--depth", "0"]) == 2
    assert "--depth 0: allowed 1..200" in capsys.readouterr().err
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["formal", "fp4_mul"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("yowasp-sby not found; install it: pip install -e '.[formal]'")
    assert "\n" not in err

