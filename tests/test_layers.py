"""The layer rules of docs/architecture.md, checked on the imports of ``src/tierlog``.

Every import statement counts wherever it stands (module level, inside a function, under
``TYPE_CHECKING``): an import made late is still a dependency. A plugin loaded by name
through ``tierlog.tiered.api`` (a string handed to ``importlib``) is not an import, which is
how the broker and the Spark jobs reach the storage plugins without depending on them.

A new arrow between packages changes the map: the diagram of docs/architecture.md must show
exactly the arrows that exist, and its package table the rules of ``MAY_IMPORT`` below.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: The tierlog packages each package may import besides itself: the "may import" column of
#: docs/architecture.md. ``server`` and ``cli`` sit on top and are bounded by ``MUST_NOT``.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "fsutil": frozenset(),
    "simple_rate": frozenset(),
    "config": frozenset(),
    "protocol": frozenset(),
    "tiered.api": frozenset(),
    "log": frozenset({"protocol", "fsutil"}),
    "tiered.metadata": frozenset({"tiered.api", "fsutil"}),
    "tiered.manager": frozenset({"tiered.api", "log", "protocol", "config", "simple_rate"}),
    "storage": frozenset({"tiered.api"}),
    "client": frozenset({"protocol"}),
    "cluster": frozenset({"config", "protocol"}),
    "replication": frozenset({"cluster", "log", "protocol", "config", "simple_rate"}),
    "remote_segments": frozenset({"client", "protocol", "tiered.api", "tiered.metadata"}),
    "spark": frozenset({"client", "log", "protocol", "tiered.api", "tiered.metadata"}),
}

#: Packages that must never be imported by these, whatever else they import.
MUST_NOT: dict[str, frozenset[str]] = {
    "server": frozenset({"storage", "spark", "cli", "remote_segments"}),
    "spark": frozenset({"storage", "server", "cli"}),
    "replication": frozenset({"server", "tiered.api", "tiered.manager", "storage"}),
}

#: Third-party libraries confined to one package: ZooKeeper is reached only through
#: ``tierlog.cluster`` (the server never talks to it itself), the object-store client only
#: by the object-store plugin, pyspark only by the Spark integration.
CONFINED: dict[str, str] = {
    "kazoo": "cluster",
    "obstore": "storage.objectstore",
    "pyspark": "spark",
}


def package_of(module: str) -> str | None:
    """The layer a ``tierlog`` module belongs to (``tiered`` splits into its three
    packages); None outside tierlog."""
    parts = module.split(".")
    if parts[0] != "tierlog":
        return None
    if len(parts) == 1:
        return "tierlog"
    if parts[1] == "tiered" and len(parts) > 2:
        return f"tiered.{parts[2]}"
    return parts[1]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _sources() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / "tierlog").rglob("*.py"))}


def _imported(module: str, path: Path) -> Iterator[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import in ``path``; ``from X
    import Y`` yields ``X.Y``, which names the same package as ``X`` or the submodule Y."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(node) for node in tree.body}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in top_level
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - node.level + 1]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                name = base if alias.name == "*" else f"{base}.{alias.name}"
                yield name, node.lineno, id(node) in top_level


@cache
def import_graph() -> dict[str, dict[str, set[str]]]:
    """package -> imported tierlog package -> {"module:line", ...} that import it."""
    graph: dict[str, dict[str, set[str]]] = {}
    for module, path in _sources().items():
        source = package_of(module)
        assert source is not None
        edges = graph.setdefault(source, {})
        for target, line, _ in _imported(module, path):
            dest = package_of(target)
            if dest is not None and dest != source:
                edges.setdefault(dest, set()).add(f"{module}:{line}")
    return graph


def _where(edges: dict[str, set[str]], packages: set[str]) -> list[str]:
    return [f"{p} ({', '.join(sorted(edges[p]))})" for p in sorted(packages)]


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_package_imports_only_what_the_map_allows(package: str) -> None:
    edges = import_graph().get(package, {})
    extra = set(edges) - MAY_IMPORT[package]
    assert not extra, f"{package} imports {_where(edges, extra)}"


@pytest.mark.parametrize("package", sorted(MUST_NOT))
def test_package_never_imports_the_forbidden(package: str) -> None:
    edges = import_graph().get(package, {})
    bad = set(edges) & MUST_NOT[package]
    assert not bad, f"{package} imports {_where(edges, bad)}"


def test_every_package_has_a_rule() -> None:
    """A new package must be placed on the map before it can import anything."""
    ruled = set(MAY_IMPORT) | set(MUST_NOT) | {"cli", "__main__", "tierlog", "tiered"}
    assert set(import_graph()) <= ruled


def test_package_graph_has_no_cycle() -> None:
    graph = {p: set(edges) for p, edges in import_graph().items()}
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(node) :], node]))
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])


def test_protocol_is_sans_io() -> None:
    """``tierlog.protocol`` touches neither sockets nor asyncio (docs: "sans-IO")."""
    found = [
        f"{module}:{line} imports {name}"
        for module, path in _sources().items()
        if package_of(module) == "protocol"
        for name, line, _ in _imported(module, path)
        if name.split(".")[0] in {"asyncio", "socket", "selectors"}
    ]
    assert not found


@pytest.mark.parametrize("library", sorted(CONFINED))
def test_third_party_library_stays_in_its_package(library: str) -> None:
    home = CONFINED[library]
    found = [
        f"{module}:{line}"
        for module, path in _sources().items()
        if not module.removeprefix("tierlog.").startswith(home)
        for name, line, _ in _imported(module, path)
        if name.split(".")[0] == library
    ]
    assert not found, f"{library} imported outside tierlog.{home}: {found}"


def test_pyspark_is_imported_at_module_level_only_by_the_source() -> None:
    """Planning, decoding and reading stay importable without a JVM; the jobs import
    pyspark when they run."""
    found = sorted(
        module
        for module, path in _sources().items()
        for name, _, top in _imported(module, path)
        if top and name.split(".")[0] == "pyspark"
    )
    assert set(found) == {"tierlog.spark.source"}


def test_broker_and_spark_load_no_plugin_on_import() -> None:
    """Importing the broker, the CLI or the Spark planning and jobs code loads no storage
    plugin: plugins are resolved by name when configured."""
    modules = [
        "tierlog.cli",
        "tierlog.server.broker",
        "tierlog.spark.driver",
        "tierlog.spark.bucket",
        "tierlog.spark.jobs.inventory",
    ]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('tierlog.storage'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == []


def documented_arrows() -> dict[str, set[str]]:
    """The arrows of the first diagram under "## Layers" in docs/architecture.md: lines
    ``name ──► a · b · c`` (several names left of the arrow share its right side), a line
    starting with ``·`` continuing the one before; parenthesised notes are ignored."""
    block = ARCHITECTURE.read_text().split("## Layers", 1)[1].split("```", 2)[1]
    arrows: dict[str, set[str]] = {}
    current: list[str] = []
    for line in block.splitlines():
        body = re.sub(r"\([^)]*\)", "", re.sub(r"^row \d+", "", line)).strip()
        if "►" in body:
            left, right = body.split("►", 1)
            current = [n.strip() for n in left.rstrip("─ ").split("·")]
            for name in current:
                arrows.setdefault(name, set())
        elif body.startswith("·"):
            right = body
        else:
            continue
        targets = {t.strip() for t in right.split("·")} - {"", "nothing in tierlog"}
        for name in current:
            arrows[name] |= targets
    return arrows


def test_architecture_diagram_shows_the_real_arrows() -> None:
    real = {
        package: set(edges)
        for package, edges in import_graph().items()
        if package not in {"__main__", "tierlog", "tiered"}
    }
    assert documented_arrows() == real
