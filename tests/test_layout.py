"""The module layout of src/: no import cycles, readers never import enumerators.

Every import counts, also those under ``TYPE_CHECKING`` and inside functions:
a cycle hidden there is still a cycle a reader of the code must untangle.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src"
PACKAGES = ("sources", "enumerators", "readers")


def module_names() -> dict[str, Path]:
    """Every module of the three packages, by dotted name (a package by its own name)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((SRC / package).rglob("*.py")):
            parts = list(path.relative_to(SRC).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imported(path: Path, name: str, modules: Mapping[str, Path]) -> Iterator[tuple[str, int]]:
    """The project modules ``path`` (module ``name``) imports, with the line of each import."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:
                    yield submodule, node.lineno
                elif base in modules:
                    yield base, node.lineno


def import_graph() -> dict[str, dict[str, int]]:
    """Module → {imported module: line}."""
    modules = module_names()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        for target, line in imported(path, name, modules):
            if target != name:
                edges.setdefault(target, line)
    return graph


def cycles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_modules_of_src_import_each_other_without_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 40, "the walk found too few modules; is SRC right?"
    assert cycles(graph) == []


def test_no_reader_module_imports_an_enumerator_module() -> None:
    offending = [
        f"{module} imports {target} (line {line})"
        for module, edges in import_graph().items()
        if module.split(".")[0] == "readers"
        for target, line in edges.items()
        if target.split(".")[0] == "enumerators"
    ]
    assert offending == []


def test_split_modules_import_only_the_author_api() -> None:
    allowed = {"sources", "sources.split", "sources.serialization", "sources.errors"}
    graph = import_graph()
    offending = [
        f"{module} imports {target}"
        for module, edges in graph.items()
        if module.startswith("sources.") and module.endswith(".splits")
        for target in edges
        if target not in allowed
    ]
    assert offending == []


def connectors() -> list[str]:
    """The connectors: the folders of ``sources`` other than the framework's own."""
    framework = {"spark", "testing"}
    return sorted(
        path.parent.name
        for path in (SRC / "sources").glob("*/__init__.py")
        if path.parent.name not in framework
    )


def test_each_connector_is_a_folder_in_each_layer_it_has_code_in() -> None:
    assert {"files", "kafka", "hybrid", "postgres"} <= set(connectors())
    offending = [
        str(path.relative_to(SRC))
        for package in PACKAGES
        for path in (SRC / package).glob("*.py")
        for connector in connectors()
        if path.stem == connector or path.stem.startswith(f"{connector}_")
    ]
    assert offending == []


def _runtime_imports(tree: ast.Module) -> Iterator[str]:
    """The modules a module imports when it runs (not under ``if TYPE_CHECKING``)."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or ""


def _checked_names(tree: ast.Module) -> dict[str, str]:
    """Name → module of the imports under ``if TYPE_CHECKING``."""
    return {
        alias.asname or alias.name: node.module or ""
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_a_connector_package_imports_its_modules_only_when_a_name_is_asked_for() -> None:
    # An executor unpickling a reader imports the reader's module first; a package that
    # imported its Source as it loaded would import that reader module back, half made.
    allowed = {"__future__", "typing", "sources.exports"}
    offending = {
        connector: sorted(set(_runtime_imports(tree)) - allowed)
        for connector in connectors()
        if (tree := ast.parse((SRC / "sources" / connector / "__init__.py").read_text()))
        and set(_runtime_imports(tree)) - allowed
    }
    assert offending == {}


def test_a_connector_package_gives_each_public_name_of_its_modules() -> None:
    for connector in connectors():
        package = importlib.import_module(f"sources.{connector}")
        tree = ast.parse((SRC / "sources" / connector / "__init__.py").read_text())
        names = _checked_names(tree)
        assert names, f"sources.{connector} names no public name"
        for name, module in names.items():
            assert getattr(package, name) is getattr(importlib.import_module(module), name)
        with pytest.raises(AttributeError, match=f"sources.{connector}' has no attribute"):
            _ = package.NoSuchName


def test_no_module_imports_inside_a_function() -> None:
    offending = []
    for name, path in module_names().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        offending.append(f"{name}:{inner.lineno}")
    assert offending == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_importing_sources_loads_no_pyspark_nor_the_other_packages() -> None:
    """``sources`` is the bottom layer, importable where pyspark is not."""
    probe = (
        "import sys, sources; "
        "print(sorted({m.split('.')[0] for m in sys.modules} "
        "& {'pyspark', 'py4j', 'enumerators', 'readers'}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
