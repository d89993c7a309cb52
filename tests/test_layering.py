"""The layers, read from the import graph of the source (nothing is run).

- ``rtl/`` imports nothing of Scoville's but ``rtl/``.
- ``sim/`` imports neither the block table and command line (``scoville/``) nor the
  testbenches; the flow is handed a block, it does not look one up.
- The golden and timed models take from ``rtl/`` only what describes an interface: the formats
  module, config classes, constants (opcodes, statuses, counters) and payload layouts.
- Nothing below the command line imports it.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Each folder's package (pyproject.toml's package-dir).
PACKAGES = {"rtl": "scoville.rtl", "sim": "scoville.sim", "testbenches": "scoville.testbenches",
            "scoville": "scoville"}


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = [PACKAGES[rel.parts[0]], *rel.parts[1:-1]]
    if rel.stem != "__init__":
        parts.append(rel.stem)
    return ".".join(parts)


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """Every ``(module, names)`` that ``path`` imports, anywhere in it (inside functions too),
    relative imports resolved."""
    package = _module(path).rsplit(".", 0 if path.stem == "__init__" else 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [alias.name for alias in node.names]
            if base in ("scoville", *PACKAGES.values()):
                # ``from scoville import rtl``: a package's modules, each imported.
                out += [(f"{base}.{name}", []) for name in names]
            else:
                out.append((base, names))
    return out


def _sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _ours(module: str) -> bool:
    return module == "scoville" or module.startswith("scoville.")


def test_the_graph_is_read():
    found = dict(imports(ROOT / "sim" / "golden" / "kvcache.py"))
    assert "scoville.rtl.kvcache" in found and "OPS" in found["scoville.rtl.kvcache"]
    assert "scoville.sim.golden.mx" in found  # a relative import, resolved
    assert "scoville.rtl.formats" in dict(imports(ROOT / "sim" / "golden" / "fp32_add.py"))


@pytest.mark.parametrize("path", _sources("rtl"), ids=lambda p: p.name)
def test_rtl_imports_only_rtl(path):
    bad = [m for m, _ in imports(path) if _ours(m) and not m.startswith("scoville.rtl")]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize("path", _sources("sim"), ids=lambda p: str(p.relative_to(ROOT)))
def test_sim_imports_neither_the_block_table_nor_the_testbenches(path):
    bad = [m for m, _ in imports(path)
           if m in ("scoville", "scoville.blocks", "scoville.cli")
           or m.startswith("scoville.testbenches")]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


_INTERFACE = re.compile(r"^([A-Z][A-Z0-9_]*|[A-Za-z0-9]*Config|[a-z_]*_layout)$")


@pytest.mark.parametrize("path", _sources("sim/golden") + _sources("sim/cycles"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_models_take_only_interfaces_from_the_rtl(path):
    bad = []
    for module, names in imports(path):
        if not module.startswith("scoville.rtl") or module == "scoville.rtl.formats":
            continue
        bad += [f"{module}.{n}" for n in names if not _INTERFACE.match(n)]
        if not names:  # a whole module of the RTL
            bad.append(module)
    assert not bad, f"{path.relative_to(ROOT)} takes {bad} from the RTL"


@pytest.mark.parametrize("path", [p for f in ("rtl", "sim", "testbenches") for p in _sources(f)]
                         + [ROOT / "scoville" / "blocks.py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_below_the_command_line_imports_it(path):
    assert "scoville.cli" not in [m for m, _ in imports(path)]
