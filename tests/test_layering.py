"""The layers, read from the import graph of the source (nothing is run).

- ``scoville/rtl/`` imports nothing of Scoville's but ``scoville/rtl/``.
- ``scoville/sim/`` imports neither the block table and command line (``scoville/``) nor the
  testbenches; the flow is handed a block, it does not look one up.
- The golden and timed models take from ``scoville/rtl/`` only what describes an interface:
  the formats module, config classes, constants (opcodes, statuses, counters) and payload layouts.
- Nothing below the command line imports it.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "scoville"


def _module(path: Path) -> str:
    """The import name of ``path``: its path under the repository (the tree is its imports)."""
    rel = path.relative_to(ROOT)
    parts = list(rel.parts[:-1])
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
            if base == "scoville" or (PACKAGE / Path(*base.split(".")[1:])).is_dir():
                # ``from scoville import rtl``: a package's modules, each imported.
                out += [(f"{base}.{name}", []) for name in names]
            else:
                out.append((base, names))
    return out


def _sources(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def _ours(module: str) -> bool:
    return module == "scoville" or module.startswith("scoville.")


def test_the_graph_is_read():
    found = dict(imports(PACKAGE / "sim" / "golden" / "kvcache.py"))
    assert "scoville.rtl.kvcache" in found and "Op" in found["scoville.rtl.kvcache"]
    assert "scoville.sim.golden.mx" in found  # a relative import, resolved
    assert "scoville.rtl.lib.formats" in dict(imports(PACKAGE / "sim" / "golden" / "fp32_add.py"))
    assert "scoville.rtl.lib.fp32" in dict(imports(PACKAGE / "rtl" / "lib" / "blockdot.py"))
    assert "scoville.rtl.lib.params" in dict(imports(PACKAGE / "rtl" / "gemm.py"))


def test_every_file_follows_the_tree():
    """Every module's import name is its path: no package-dir mapping in pyproject.toml."""
    assert "package-dir" not in (ROOT / "pyproject.toml").read_text()
    assert _module(PACKAGE / "rtl" / "lib" / "fp32.py") == "scoville.rtl.lib.fp32"


@pytest.mark.parametrize("path", _sources("rtl"), ids=lambda p: p.name)
def test_rtl_imports_only_rtl(path):
    bad = [m for m, _ in imports(path) if _ours(m) and not m.startswith("scoville.rtl")]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize("path", _sources("rtl/lib"), ids=lambda p: p.name)
def test_rtl_lib_imports_no_block(path):
    bad = [m for m, _ in imports(path) if _ours(m) and not m.startswith("scoville.rtl.lib")]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def _blocks() -> list[str]:
    tree = ast.parse((PACKAGE / "blocks.py").read_text())
    return [kw.value.value for node in ast.walk(tree) if isinstance(node, ast.Call)
            for kw in node.keywords if kw.arg == "name" and isinstance(kw.value, ast.Constant)]


@pytest.mark.parametrize("path", sorted((PACKAGE / "rtl").glob("*.py")), ids=lambda p: p.name)
def test_rtl_files_are_blocks_or_their_units(path):
    blocks = _blocks()
    assert {"gemm", "attention", "moe"} <= set(blocks)
    stem = path.stem
    assert stem == "__init__" or stem in blocks or any(
        stem.startswith(f"{block}_") for block in blocks
    ), f"{path.relative_to(ROOT)}: neither a block nor a unit of one (<block>_<unit>.py); " \
       "what several blocks share goes in rtl/lib/"


@pytest.mark.parametrize("path", _sources("sim") + _sources("synth") + _sources("explore"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_sim_imports_neither_the_block_table_nor_the_testbenches(path):
    bad = [m for m, _ in imports(path)
           if m in ("scoville", "scoville.blocks", "scoville.cli")
           or m.startswith("scoville.testbenches")]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


_INTERFACE = re.compile(r"^([A-Z][A-Z0-9_]*|[A-Za-z0-9]*(Config|Op|Status)|[a-z_]*_layout)$")


@pytest.mark.parametrize("path", _sources("sim/golden") + _sources("sim/cycles"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_models_take_only_interfaces_from_the_rtl(path):
    bad = []
    for module, names in imports(path):
        if not module.startswith("scoville.rtl") or module == "scoville.rtl.lib.formats":
            continue
        bad += [f"{module}.{n}" for n in names if not _INTERFACE.match(n)]
        if not names:  # a whole module of the RTL
            bad.append(module)
    assert not bad, f"{path.relative_to(ROOT)} takes {bad} from the RTL"


@pytest.mark.parametrize("path", [p for f in ("rtl", "sim", "synth", "explore", "testbenches")
                                  for p in _sources(f)] + [PACKAGE / "blocks.py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_below_the_command_line_imports_it(path):
    assert "scoville.cli" not in [m for m, _ in imports(path)]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_import_of_ours_is_a_file_of_the_tree(path):
    """A module of ours that a file imports (relative imports resolved, imports inside
    functions too) is a file or package of the tree: a stale path after a move fails here,
    not when a rarely run function first imports it."""
    def found(module: str) -> bool:
        where = ROOT.joinpath(*module.split("."))
        return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()
    bad = [m for m, _ in imports(path) if _ours(m) and not found(m)]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}, which are not in the tree"
