"""The code's layout, read from the source: no import cycles, short files, pure packages.

Every module of the four packages is parsed, and every import counts, wherever it is: at the
top, inside a function, or under ``if TYPE_CHECKING:`` (a cycle hidden in a lazy import is
still a cycle, only a later one). ``tests/progress/test_purity.py`` checks, by importing it,
that ``progress`` loads no engine at run time.
"""

from __future__ import annotations

import ast
import re
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
    eager: bool = True
    """Run when the module is imported: at module level and not under ``if TYPE_CHECKING:``."""
    typing: bool = False
    """Under ``if TYPE_CHECKING:``: read by the type checker only."""


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


def _type_checking(tree: ast.AST) -> set[int]:
    """The ids of the import statements under ``if TYPE_CHECKING:``."""
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
        for stmt in node.body
        for inner in ast.walk(stmt)
        if isinstance(inner, ast.Import | ast.ImportFrom)
    }


def _eager(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module's body that run when it is imported (through ``if`` and
    ``try`` blocks, but not ``if TYPE_CHECKING:``)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                yield from _eager(node.body)
            yield from _eager(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _eager(block)
            for handler in node.handlers:
                yield from _eager(handler.body)


def _imports(tree: ast.AST, name: str, is_package: bool) -> Iterator[Import]:
    eager = {id(n) for n in _eager(tree.body)} if isinstance(tree, ast.Module) else set()
    typing = _type_checking(tree)
    for node in ast.walk(tree):  # every node: module level, functions, TYPE_CHECKING blocks
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, (), node.lineno, id(node) in eager, id(node) in typing)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join([*parts[:keep], *([base] if base else [])])
            if base != "__future__":
                names = tuple(a.name for a in node.names)
                yield Import(base, names, node.lineno, id(node) in eager, id(node) in typing)


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
    assert sorted((i.module, i.names, i.eager, i.typing) for i in found) == [
        ("progress", ("handles",), False, False),
        ("progress.graph", ("Graph",), False, True),
        ("progress.ledger", ("store",), True, False),
        ("typing", ("TYPE_CHECKING",), True, False),
    ]


# -- (b) short files ----------------------------------------------------------------------------


def test_no_file_is_over_the_limit() -> None:
    long = {
        str(m.path.relative_to(ROOT)): n
        for m in modules().values()
        if (n := len(m.path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"files over {MAX_LINES} lines (split them by concern): {long}"


def preexec_calls(tree: ast.AST) -> list[int]:
    """The lines of calls given a ``preexec_fn`` keyword."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and any(k.arg == "preexec_fn" for k in node.keywords)
    ]


def test_no_child_process_runs_python_before_its_exec() -> None:
    """A ``preexec_fn`` makes ``subprocess`` fork without ``vfork``, and gRPC (a Spark Connect
    session's channels) can abort such a child before its exec: ``pipelines.spark.spawn``."""
    found = {
        str(m.path.relative_to(ROOT)): lines
        for m in modules().values()
        if (lines := preexec_calls(ast.parse(m.path.read_text())))
    }
    assert not found, f"preexec_fn given (use pipelines.spark.spawn.shimmed): {found}"


def test_the_preexec_check_finds_a_call() -> None:
    code = "subprocess.Popen(['true'], preexec_fn=os.setsid)"
    assert preexec_calls(ast.parse(code)) == [1]


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


# -- (e) definitions import nothing that runs ---------------------------------------------------

DEFINITIONS = "pipelines.stages"
EXECUTION = (
    "pipelines.run",
    "pipelines.reads",
    "pipelines.capture",
    "pipelines.spark",
    "pipelines.cli",
    "pipelines.examples",
    "pipelines.testing",
    "progress.ledger",
    "state_store",
)
ENGINE_LIBRARIES = ("pyspark", "dagster", "duckdb", "pyarrow")
DOORS = {"pipelines.spark._internals"}
"""Modules under EXECUTION that definitions may import: they load nothing at module level."""
LAZY_REACHES = {
    ("pipelines.stages.pipeline", "pipelines.capture.sources"): (
        "Pipeline.replay reads the captures' headers for the replayed source's columns, so a "
        "missing or foreign directory is refused where it is named"
    ),
}
"""Imports inside a definition's function that reach execution, each with its reason."""


def _inside(module: str, packages: tuple[str, ...] | str) -> bool:
    packages = (packages,) if isinstance(packages, str) else packages
    return any(module == p or module.startswith(p + ".") for p in packages)


def _targets(imp: Import) -> list[str]:
    return [imp.module] + [f"{imp.module}.{n}" for n in imp.names]


def execution_reaches(found: dict[str, Module]) -> list[str]:
    """What definitions import that runs: eager imports of execution or of an engine library,
    followed through the project modules they load; lazy ones outside ``LAZY_REACHES``."""
    problems: list[str] = []
    for m in found.values():
        if not _inside(m.name, DEFINITIONS):
            continue
        for imp in m.imports:
            if imp.typing:
                continue
            targets = [t for t in _targets(imp) if not _inside(t, tuple(DOORS))]
            reaches = any(_inside(t, EXECUTION) for t in targets)
            if imp.eager and (reaches or imp.module.split(".")[0] in ENGINE_LIBRARIES):
                problems.append(f"{m.name}:{imp.line} imports {imp.module} when imported")
            elif not imp.eager and reaches:
                known = _resolve(imp.module, found) or imp.module
                if (m.name, known) not in LAZY_REACHES:
                    problems.append(f"{m.name}:{imp.line} reaches {imp.module} (lazily)")
    eager_graph = {
        name: {
            t
            for imp in mod.imports
            if imp.eager
            for t in (_resolve(x, found) for x in _targets(imp))
            if t is not None and t != name
        }
        for name, mod in found.items()
    }
    for start in (n for n in found if _inside(n, DEFINITIONS)):
        seen, queue = {start}, [start]
        while queue:
            for nxt in sorted(eager_graph[queue.pop()] - seen):
                seen.add(nxt)
                queue.append(nxt)
                if _inside(nxt, EXECUTION) and nxt not in DOORS:
                    problems.append(f"{start} loads {nxt} when imported")
    return sorted(set(problems))


def test_definitions_import_nothing_that_runs() -> None:
    found = execution_reaches(modules())
    assert not found, "definitions reach execution:\n" + "\n".join(found)


def test_the_definitions_check_finds_a_reach() -> None:
    def module(name: str, *imports: Import) -> Module:
        return Module(name, ROOT / "x.py", imports)

    planted = {
        "pipelines.stages.kinds": module(
            "pipelines.stages.kinds", Import("pipelines.errors", ("E",), 1)
        ),
        "pipelines.errors": module("pipelines.errors", Import("pipelines.run.work", ("W",), 2)),
        "pipelines.run.work": module("pipelines.run.work"),
        "pipelines.stages.clock": module(
            "pipelines.stages.clock", Import("pipelines.reads.lookup", ("L",), 3, eager=False)
        ),
        "pipelines.reads.lookup": module("pipelines.reads.lookup"),
    }
    assert execution_reaches(planted) == [
        "pipelines.stages.clock:3 reaches pipelines.reads.lookup (lazily)",
        "pipelines.stages.kinds loads pipelines.run.work when imported",
    ]


# -- (f) PySpark's internals, in one place ------------------------------------------------------

PUBLIC_PYSPARK = {"pyspark.sql", "pyspark.sql.types", "pyspark.sql.functions"}
INTERNALS = "pipelines.spark._internals"


def _constants(tree: ast.AST) -> Iterator[ast.Constant]:
    """The string constants of a module that are not docstrings."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            yield node


def pyspark_internal_reaches(name: str, tree: ast.AST, imports: tuple[Import, ...]) -> list[str]:
    """A module's reaches into PySpark's internals: an import of a module outside its public
    API, a dotted ``pyspark.`` name in a string (a module-name check, a logger's name), the
    wheel's ``sbin`` scripts."""
    found = [
        f"{name}:{imp.line} imports {imp.module}"
        for imp in imports
        if imp.module.split(".")[0] == "pyspark" and imp.module not in PUBLIC_PYSPARK
    ]
    for node in _constants(tree):
        text = str(node.value)
        if re.fullmatch(r"pyspark(\.\w+)+", text) or text == "sbin" or "sbin/" in text:
            found.append(f"{name}:{node.lineno} names {text!r}")
    return found


def test_pyspark_internals_are_reached_from_one_module() -> None:
    found = [
        reach
        for m in modules().values()
        if m.name != INTERNALS
        for reach in pyspark_internal_reaches(m.name, ast.parse(m.path.read_text()), m.imports)
    ]
    assert not found, f"reaches into PySpark's internals outside {INTERNALS}:\n" + "\n".join(found)


def test_the_internals_check_finds_a_reach() -> None:
    source = (
        "from pyspark.sql.connect.utils import check_dependencies\n"
        "from pyspark.sql import functions as F\n"
        "def f(s):\n"
        '    """Mentions pyspark.sql.connect in its docstring, which is fine."""\n'
        '    return type(s).__module__.startswith("pyspark.sql.connect")\n'
    )
    tree = ast.parse(source)
    imports = tuple(_imports(tree, "pipelines.x", is_package=False))
    assert pyspark_internal_reaches("pipelines.x", tree, imports) == [
        "pipelines.x:1 imports pyspark.sql.connect.utils",
        "pipelines.x:5 names 'pyspark.sql.connect'",
    ]
