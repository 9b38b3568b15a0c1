"""The layer rules of docs/architecture.md, checked on the code's own imports, so the next break fails CI.

Every ``import`` of a ``calypso`` module anywhere in a file counts, at the top or inside a function (a
function-level import is still a dependency, only a later one).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 600  # any module
MAX_SURFACE_LINES = 300  # a route or a translator: a wire format turned into service calls and back
# The lower packages: parts the services use; they never reach up to a service, a surface or a store.
LOWER = ("citations", "ingest", "retrieval", "embeddings", "generation", "text", "dialects")
SURFACES = ("calypso.api", "calypso.grpc_api", "calypso.cli")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _known(name: str) -> str | None:
    """The module of ``name`` (a module, or a name inside one)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str, path: Path) -> Iterator[str]:
    """The ``calypso`` modules ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for target in targets:
            if target.startswith("calypso") and (module := _known(target)) not in (None, name):
                yield module


GRAPH = {name: set(_imports(name, path)) for name, path in MODULES.items()}


def _in(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _circles() -> list[list[str]]:
    """The import circles (strongly connected groups of two or more modules), by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in GRAPH[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while (top := stack.pop()) != module:
                group.append(top)
            if group:
                circles.append(sorted([module, *group]))

    for module in GRAPH:
        if module not in index:
            visit(module)
    return circles


def test_the_reader_sees_every_module() -> None:
    """The checks below can only fail if they read the code: they see the services, the stores and the routes."""
    assert {"calypso.services", "calypso.store.base", "calypso.api.routes.chat"} <= set(MODULES)
    assert "calypso.store.base" in GRAPH["calypso.services"]


def test_no_import_circle() -> None:
    assert _circles() == []


def test_stores_import_only_models_and_errors() -> None:
    wrong = {
        (m, d)
        for m, deps in GRAPH.items()
        if _in(m, "calypso.store")
        for d in deps
        if not _in(d, "calypso.store", "calypso.models", "calypso.errors")
    }
    assert wrong == set()


def test_only_services_reach_the_stores() -> None:
    """Services decide and the composition root (``calypso.services``) opens the storage; routes, commands and
    the lower packages reach a store only through a service."""
    wrong = {
        (m, d)
        for m, deps in GRAPH.items()
        if not _in(m, "calypso.store", "calypso.services")
        for d in deps
        if _in(d, "calypso.store")
    }
    assert wrong == set()


@pytest.mark.parametrize("package", LOWER)
def test_lower_packages_reach_no_service_surface_or_store(package: str) -> None:
    wrong = {
        (m, d)
        for m, deps in GRAPH.items()
        if _in(m, f"calypso.{package}")
        for d in deps
        if _in(d, "calypso.services", "calypso.store", *SURFACES)
    }
    assert wrong == set()


def test_module_sizes() -> None:
    """No module over 600 lines; routes and translators under 300 (httpx's _client.py is 2,019: we stay small)."""
    lines = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    too_long = {n: c for n, c in lines.items() if c > MAX_LINES}
    surfaces = {
        n: c
        for n, c in lines.items()
        if _in(n, "calypso.api.routes", "calypso.api.translate") and c > MAX_SURFACE_LINES
    }
    assert too_long == {} and surfaces == {}
