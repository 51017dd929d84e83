"""The package reads top-down: no module imports one of a higher layer (docs/architecture.md,
"Layers"). Every import is read from the source (lazy ones inside functions too), never run."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO
from faultloop.fingerprint import imported_names, module_file, module_name

ROOT = REPO / "src" / "faultloop"
# Lowest first; a module may import from its own layer and the layers before it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the facts every layer shares: the fault table, signal names, the injection marker, fingerprints
    ("tables", ("faultloop", "faultloop.faults", "faultloop.signals", "faultloop.marker", "faultloop.fingerprint")),
    ("core", ("faultloop.core",)),  # the artifact layout, atomic writes, the cell, the errors
    ("contracts", ("faultloop.contracts",)),  # every record that crosses a process edge
    ("planning", ("faultloop.plan",)),  # configuration and the pool
    ("run", ("faultloop.run", "faultloop.adopt")),  # a cell's job.json: run here, or adopted from NVRx
    ("analyze", ("faultloop.analyze",)),
    ("score", ("faultloop.score",)),
    ("report", ("faultloop.report",)),
    ("cli", ("faultloop.cli",)),
    ("workflow", ("faultloop.workflow",)),  # Snakemake's side: what the rules call
)


def layer(name: str) -> int:
    """The layer of a module: the one whose longest prefix names it."""
    best = max(
        ((len(prefix), rank) for rank, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
         if name == prefix or name.startswith(prefix + ".")),
        default=None,
    )  # fmt: skip
    if best is None:
        raise AssertionError(f"{name} belongs to no layer: add it to LAYERS and docs/architecture.md")
    return best[1]


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports."""
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        name = module_name(root, path)
        graph[name] = {
            module_name(root, found)
            for imported in imported_names(path, name)
            if (found := module_file(root, imported)) is not None
        }
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{importer} ({LAYERS[layer(importer)][0]}) imports {imported} ({LAYERS[layer(imported)][0]})"
        for importer, imports in graph.items()
        for imported in imports
        if layer(imported) > layer(importer)
    )


def test_no_module_imports_from_a_higher_layer():
    graph = import_graph(ROOT)
    assert len(graph) > 80 and "faultloop.core.layout" in graph["faultloop.contracts.manifest"]
    assert upward_imports(graph) == []


def test_every_module_has_a_layer():
    for name in import_graph(ROOT):
        layer(name)


def test_an_upward_import_is_named():
    planted = {
        "faultloop.core.layout": {"faultloop.plan.config"},
        "faultloop.score.cells": {"faultloop.analyze.combined", "faultloop.report.model"},
    }
    assert upward_imports(planted) == [
        "faultloop.core.layout (core) imports faultloop.plan.config (planning)",
        "faultloop.score.cells (score) imports faultloop.report.model (report)",
    ]
