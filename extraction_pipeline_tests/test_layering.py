"""Layering rules (ARCHITECTURE.md): `core` never imports dagster, directly or indirectly, nor the
web framework or the adapters built on it (`defs`, `web`, `cli`); `defs` never imports
`definitions.py`."""

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
