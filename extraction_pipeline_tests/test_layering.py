"""Layering rules (ARCHITECTURE.md): `core` never imports dagster, directly or indirectly, nor the
web framework or the adapters built on it (`defs`, `web`, `cli`); `defs` never imports
`definitions.py`; no two modules import each other, however indirectly."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "extraction_pipeline" / "core"


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_core_module_mentions_dagster_in_an_import() -> None:
    offenders = {
        str(path.relative_to(CORE)): sorted(m for m in _imported_modules(path) if m.split(".")[0].startswith("dagster"))
        for path in CORE.rglob("*.py")
    }
    offenders = {path: mods for path, mods in offenders.items() if mods}
    assert offenders == {}
    assert len(list(CORE.rglob("*.py"))) > 10  # the scan really saw the package


ADAPTERS = ("starlette", "uvicorn", "extraction_pipeline.web", "extraction_pipeline.defs", "extraction_pipeline.cli")


def test_no_core_module_imports_the_web_or_an_adapter() -> None:
    offenders = {
        str(path.relative_to(CORE)): sorted(m for m in _imported_modules(path) if m.startswith(ADAPTERS))
        for path in CORE.rglob("*.py")
    }
    assert {path: mods for path, mods in offenders.items() if mods} == {}


def test_importing_all_of_core_loads_no_dagster() -> None:
    modules = sorted(
        "extraction_pipeline.core." + ".".join(p.relative_to(CORE).with_suffix("").parts)
        for p in CORE.rglob("*.py")
        if p.name != "__init__.py"
    )
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "leaked = sorted(m for m in sys.modules if m.split('.')[0].startswith(('dagster', 'starlette', 'uvicorn')))\n"
        "print(','.join(leaked))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


DEFS = CORE.parent / "defs"


def test_no_defs_module_imports_the_definitions() -> None:
    """`definitions.py` assembles `defs`; a `defs` module importing it back would be a cycle."""
    offenders = {
        path.name: sorted(m for m in _imported_modules(path) if m == "extraction_pipeline.definitions")
        for path in DEFS.rglob("*.py")
    }
    assert {name: mods for name, mods in offenders.items() if mods} == {}
    assert len(list(DEFS.rglob("*.py"))) > 5


PACKAGE = CORE.parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Which of our modules each of our modules imports, at module level or inside a function (a
    deferred import that closes a cycle is still a cycle: two modules that cannot stand apart)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}

    def ours(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(filter(None, (ours(alias.name) for alias in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                for alias in node.names:  # `from a.b import c` may import the module a.b.c
                    found = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else ours(base)
                    if found:
                        targets.add(found)
        targets.discard(name)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package() -> None:
    graph = _import_graph()
    # The scan really saw the package and its imports, deferred ones included.
    assert len(graph) > 100 and sum(map(len, graph.values())) > 200
    llm = "extraction_pipeline.core.llm"
    assert f"{llm}.providers.anthropic_batches" in graph[f"{llm}.providers.anthropic"]
    assert "extraction_pipeline.core.export.synthesis_sheets" in graph["extraction_pipeline.core.export.workbook"]
    assert _cycles(graph) == []


def test_no_module_imports_another_modules_private_name() -> None:
    """A name with a leading underscore is its module's own business: another module (code or
    test) that needs it gets a public name with a docstring, or the helper moves."""
    found = []
    for root in (PACKAGE, PACKAGE.parent / "extraction_pipeline_tests"):
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("extraction_pipeline"):
                    private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                    if private:
                        found.append(f"{path.relative_to(PACKAGE.parent)}: {node.module} {private}")
    assert found == []
