"""The docs' promises, read from the pages themselves: every Python block of README.md and of
docs/ runs, page by page, in order, as a user would paste them (one namespace and a fresh
working directory per page) on real Spark and a real ledger file; examples import only public
names; the README stays short; every environment variable the code reads is documented and
every one documented is read; the command line reference covers every command."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
README_LINES = 200

PROJECT = ("progress", "state_store", "pipelines", "dagster_project")
PUBLIC = {
    "pipelines": ROOT / "pipelines" / "__init__.py",
    "pipelines.errors": ROOT / "pipelines" / "errors.py",
    "pipelines.stages": ROOT / "pipelines" / "stages" / "__init__.py",
    "pipelines.testing": ROOT / "pipelines" / "testing.py",
}
DAGSTER_PUBLIC = {"build_definitions"}
"""What a user's code location imports from ``dagster_project``."""

ENV = re.compile(r"\bEPOCHGATE_[A-Z_]+[A-Z]\b")
SETTINGS = DOCS / "reference" / "settings.md"


def python_blocks(text: str) -> list[tuple[int, str]]:
    """Each ```python block of ``text`` with the line its code starts on."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def exported(path: Path) -> set[str]:
    """The names of a module's ``__all__``, read from its source (nothing imported)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{path} has no __all__")


def private_imports(code: str) -> list[str]:
    """The imports of ``code`` that reach past epochgate's public names."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            modules = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in modules:
            if module.split(".")[0] not in PROJECT:
                continue
            if module == "dagster_project":
                allowed = name in DAGSTER_PUBLIC
            else:
                allowed = module in PUBLIC and (name is None or name in exported(PUBLIC[module]))
            if not allowed:
                found.append(f"line {node.lineno}: {module}" + (f".{name}" if name else ""))
    return found


def hooks() -> ModuleType:
    """The mkdocs hook module that generates the docs' reference parts."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks" / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.unit
def test_every_python_block_is_found() -> None:
    text = "a\n```python\nx = 1\n```\nb\n```sh\nls\n```\n```python\ny = 2\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n"), (10, "y = 2\n")]


@pytest.mark.unit
def test_the_readme_is_short() -> None:
    lines = README.read_text().count("\n")
    assert lines <= README_LINES, f"README.md has {lines} lines; at most {README_LINES}"


@pytest.mark.unit
def test_the_readme_links_resolve() -> None:
    """The README is read outside the site (mkdocs checks the pages' links): each relative link
    names a file of the repository."""
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    relative = [link for link in links if "://" not in link]
    assert relative, "the README links into the docs"
    missing = [link for link in relative if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


@pytest.mark.unit
@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_examples_import_public_names_only(page: Path) -> None:
    reaches = [
        f"{page_id(page)}, block at line {line}, {reach}"
        for line, code in python_blocks(page.read_text())
        for reach in private_imports(code)
    ]
    assert not reaches, "examples import past the public names:\n" + "\n".join(reaches)


@pytest.mark.unit
def test_the_public_names_check_finds_a_reach() -> None:
    code = (
        "from pipelines import Pipeline\nfrom pipelines.errors import RunFailedError\n"
        "from progress.ledger import Ledger\nfrom pipelines import INSTANCE_CONFIG\n"
        "import pipelines.run.runtime\nfrom dagster_project import build_definitions\n"
        "from dagster_project.demo import INSTANCE_CONFIG\nimport duckdb\n"
    )
    assert private_imports(code) == [
        "line 3: progress.ledger.Ledger",
        "line 4: pipelines.INSTANCE_CONFIG",
        "line 5: pipelines.run.runtime",
        "line 7: dagster_project.demo.INSTANCE_CONFIG",
    ]


@pytest.mark.unit
def test_every_environment_variable_is_documented() -> None:
    """Every ``EPOCHGATE_*`` variable the packages read is on the settings page, and every one
    a page names is read by the packages."""
    code = {
        name
        for package in PROJECT
        for path in (ROOT / package).rglob("*.py")
        for name in ENV.findall(path.read_text())
    }
    documented = set(ENV.findall(SETTINGS.read_text()))
    named = {name for page in PAGES for name in ENV.findall(page.read_text())}
    assert code - documented == set(), "read by the code, not on the settings page"
    assert named - code == set(), "named in the docs, read by no code"


@pytest.mark.unit
def test_the_command_line_reference_covers_every_command() -> None:
    from pipelines.cli.main import build_parser

    generate = hooks()
    parser = build_parser()
    text = generate.cli_markdown(parser)
    names = generate.command_names(parser)
    assert {"epochgate run", "epochgate send", "epochgate capture start"} <= set(names)
    missing = [name for name in names if f"`{name}`" not in text]
    assert not missing, f"commands missing from the reference: {missing}"
    assert "`--lock-timeout` `SECONDS`" in text


@pytest.mark.unit
def test_the_error_reference_lists_every_error() -> None:
    from pipelines import errors

    text = hooks().errors_markdown()
    assert text.startswith("- `EpochgateError`")
    missing = [name for name in errors.__all__ if f"`{name}`" not in text]
    assert not missing, f"errors missing from the hierarchy: {missing}"


def _marks(page: Path) -> list[pytest.MarkDecorator]:
    marks = [pytest.mark.spark]
    if any("dagster" in code for _, code in python_blocks(page.read_text())):
        marks.append(pytest.mark.dagster)
    return marks


RUNNABLE = [
    pytest.param(page, id=page_id(page), marks=_marks(page))
    for page in PAGES
    if python_blocks(page.read_text())
]


@pytest.mark.parametrize("page", RUNNABLE)
def test_examples_run(
    page: Path, spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``spark`` is the suite's session: the examples' ``spark_session()`` finds it running."""
    monkeypatch.chdir(tmp_path)
    for name in ("EPOCHGATE_HOME", "EPOCHGATE_LEDGER", "EPOCHGATE_DATA", "EPOCHGATE_SPARK"):
        monkeypatch.delenv(name, raising=False)
    namespace: dict[str, object] = {"__name__": "docs_example"}
    for line, code in python_blocks(page.read_text()):
        exec(compile(code, f"{page_id(page)}, block at line {line}", "exec"), namespace)
