"""The code's layout, read from the source: no import cycles, short files, pure packages.

Every module of the four packages is parsed, and every import counts, wherever it is: at the
top, inside a function, or under ``if TYPE_CHECKING:`` (a cycle hidden in a lazy import is
still a cycle, only a later one). ``tests/progress/test_purity.py`` checks, by importing it,
that ``progress`` loads no engine at run time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("progress", "state_store", "pipelines", "dagster_project")
PURE = ("progress", "state_store")
ENGINES = ("pyspark", "dagster")
MAX_LINES = 600


@dataclass(frozen=True)
class Import:
    """One import statement's target, as written (absolute), and where it is."""

    module: str
    names: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    imports: tuple[Import, ...]

    @property
    def package(self) -> str:
        return self.name.split(".")[0]


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, name: str, is_package: bool) -> Iterator[Import]:
    for node in ast.walk(tree):  # every node: module level, functions, TYPE_CHECKING blocks
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join([*parts[:keep], *([base] if base else [])])
            if base != "__future__":
                yield Import(base, tuple(a.name for a in node.names), node.lineno)


@cache
def modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = _name(path)
            tree = ast.parse(path.read_text(), filename=str(path))
            imports = tuple(_imports(tree, name, path.name == "__init__.py"))
            found[name] = Module(name, path, imports)
    return found


def _resolve(target: str, known: dict[str, Module]) -> str | None:
    """The project module an import names: the longest known prefix of ``target``."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the project modules it imports (``from p import m`` names module ``p.m``)."""
    known = modules()
    graph: dict[str, frozenset[str]] = {}
    for name, module in known.items():
        edges: set[str] = set()
        for imp in module.imports:
            for n in imp.names or ("",):
                sub = f"{imp.module}.{n}"
                found = sub if sub in known else _resolve(imp.module, known)
                if found is not None and found != name:
                    edges.add(found)
        graph[name] = frozenset(edges)
    return graph


def components(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module: each module of one imports
    every other, through the others."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm; the graph is small, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """One cycle through each component, as the modules along it (first and last equal)."""
    return [cycle_through(graph, c) for c in components(graph)]


def cycle_through(graph: dict[str, frozenset[str]], component: list[str]) -> list[str]:
    """The shortest cycle from the component's first module back to itself."""
    inside, start = set(component), component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & inside):
            if w == start:
                return [*paths[v], start]
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    raise AssertionError(f"no cycle in component {component}")  # Tarjan said there was one


def _cycles_touching(package: str) -> list[str]:
    """Each cycle through a module of ``package``, and the whole component it lies in."""
    graph = import_graph()
    return [
        f"{' -> '.join(cycle_through(graph, c))}  (the component: {', '.join(c)})"
        for c in components(graph)
        if any(m.split(".")[0] == package for m in c)
    ]


# -- (a) no import cycles ---------------------------------------------------------------------


@pytest.mark.parametrize("package", ["progress", "state_store", "dagster_project"])
def test_no_import_cycle(package: str) -> None:
    found = _cycles_touching(package)
    assert not found, "import cycles:\n" + "\n".join(found)


def test_no_import_cycle_in_pipelines() -> None:
    found = _cycles_touching("pipelines")
    assert not found, "import cycles:\n" + "\n".join(found)


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {
        "a": frozenset({"b"}),
        "b": frozenset({"c"}),
        "c": frozenset({"a", "d"}),
        "d": frozenset(),
    }
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({**graph, "c": frozenset({"d"})}) == []


def test_lazy_and_type_checking_imports_count() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from progress.graph import Graph\n"
        "def f():\n    from . import handles\n"
        "from .ledger import store\n"
    )
    found = _imports(ast.parse(source), "progress.tracker", is_package=False)
    assert sorted((i.module, i.names) for i in found) == [
        ("progress", ("handles",)),
        ("progress.graph", ("Graph",)),
        ("progress.ledger", ("store",)),
        ("typing", ("TYPE_CHECKING",)),
    ]


# -- (b) short files ----------------------------------------------------------------------------


def test_no_file_is_over_the_limit() -> None:
    long = {
        str(m.path.relative_to(ROOT)): n
        for m in modules().values()
        if (n := len(m.path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"files over {MAX_LINES} lines (split them by concern): {long}"


# -- (c) pure packages --------------------------------------------------------------------------


@pytest.mark.parametrize("package", PURE)
def test_pure_packages_import_no_engine(package: str) -> None:
    found = [
        f"{m.path.relative_to(ROOT)}:{imp.line} imports {imp.module}"
        for m in modules().values()
        if m.package == package
        for imp in m.imports
        if imp.module.split(".")[0] in ENGINES
    ]
    assert not found, "\n".join(found)


# -- (d) Dagster's private modules, in one place ------------------------------------------------


def private_dagster_importers() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for m in modules().values():
        for imp in m.imports:
            targets = [imp.module] + [f"{imp.module}.{n}" for n in imp.names]
            if any(t.startswith("dagster._") for t in targets):
                found.setdefault(m.name, []).append(imp.module)
    return found


def test_private_dagster_modules_are_imported_in_one_module_at_most() -> None:
    found = private_dagster_importers()
    assert len(found) <= 1, f"Dagster's private modules imported in several modules: {found}"
