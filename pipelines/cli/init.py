"""``epochgate init DIR``: a new project a team can start from, written from the templates shipped
with epochgate (``pipelines/cli/templates``).

The project is a package ``NAME`` with a pipeline (a source with 2 input workers -> a transform
-> a keyed aggregate -> a sink) and its Dagster code location (``NAME/definitions.py``), a test
of the pipeline with ``pipelines.testing``, ``pyproject.toml``, ``workspace.yaml``,
``dagster.yaml`` and a README with the commands. Its code imports public names only. ``DIR``
must be empty (or not exist) unless ``--force``, and ``NAME`` a Python identifier that no
module already importable takes; a refusal writes nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import keyword
import sys
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pipelines.cli.options import Commands, command
from pipelines.errors import UsageError
from pipelines.settings import absolute
from pipelines.stages.arguments import NAME

TEMPLATES = "templates"
"""The templates' directory in this package (package data: it ships in the wheel)."""

FILES: tuple[tuple[str, str], ...] = (
    ("pyproject.toml.tmpl", "pyproject.toml"),
    ("README.md.tmpl", "README.md"),
    ("gitignore.tmpl", ".gitignore"),
    ("workspace.yaml.tmpl", "workspace.yaml"),
    ("dagster.yaml.tmpl", "dagster.yaml"),
    ("package_init.py.tmpl", "{name}/__init__.py"),
    ("pipeline.py.tmpl", "{name}/pipeline.py"),
    ("definitions.py.tmpl", "{name}/definitions.py"),
    ("conftest.py.tmpl", "tests/conftest.py"),
    ("test_pipeline.py.tmpl", "tests/test_pipeline.py"),
)
"""Each template and the file of the project it becomes."""

RESERVED = frozenset({"tests"})
"""Names the project's layout takes already."""


def epochgate_version() -> str:
    """The installed epochgate's version, or ``unknown`` in a checkout never installed."""
    try:
        return version("epochgate")
    except PackageNotFoundError:
        return "unknown"


def requirement() -> str:
    """What the project's ``pyproject.toml`` asks for: this epochgate's minor version or later.

    >>> requirement().startswith("epochgate")
    True
    """
    parts = epochgate_version().split(".")
    if len(parts) >= 2 and all(p.isdigit() for p in parts[:2]):
        return f"epochgate>={parts[0]}.{parts[1]}"
    return "epochgate"


def project_name(directory: Path, given: str | None) -> str:
    """``given``, else the directory's name (lower case, ``-`` as ``_``), if it can name the
    project's package and pipeline: else ``UsageError`` saying why."""
    name = given if given is not None else directory.name.lower().replace("-", "_")
    how = "" if given is not None else " (from the directory's name; pass --name NAME)"
    if not NAME.fullmatch(name) or keyword.iskeyword(name):
        raise UsageError(
            f"NAME {name!r} is not a Python identifier (ASCII letters, digits and _, not "
            f"starting with a digit, not a keyword){how}; nothing was written"
        )
    if name in RESERVED or name in sys.stdlib_module_names or importable(name):
        raise UsageError(
            f"NAME {name!r} is taken: a module of that name is already importable, and the "
            f"project's package would hide it or be hidden by it{how}; nothing was written"
        )
    return name


def importable(name: str) -> bool:
    """Whether a top-level module ``name`` is found on the path (nothing is imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def check_directory(directory: Path, force: bool) -> None:
    """``directory`` may take a project: it does not exist, is an empty directory, or
    ``force`` says to write over what is there."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} is not a directory; nothing was written")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise UsageError(
            f"{directory} is not empty; pass --force to write the project's files there "
            "(files of the same names are replaced, others are left); nothing was written"
        )


def render(template: str, name: str) -> str:
    """A template's text with the project's name and requirement in it."""
    text = resources.files(__package__).joinpath(TEMPLATES, template).read_text()
    return text.replace("{{name}}", name).replace("{{requirement}}", requirement())


def write_project(directory: Path, name: str, *, force: bool = False) -> list[Path]:
    """Write the project ``name`` into ``directory`` (see the module docs); the files
    written."""
    check_directory(directory, force)
    texts = {directory / target.format(name=name): render(t, name) for t, target in FILES}
    written = []
    for path, text in texts.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as err:
            raise UsageError(f"cannot write {path}: {err.strerror or err}") from err
        written.append(path)
    return written


def cmd_init(args: argparse.Namespace) -> int:
    directory = absolute(args.directory)
    name = project_name(directory, args.name)
    written = write_project(directory, name, force=args.force)
    print(f"wrote project {name} in {directory}:")
    for path in written:
        print(f"  {path.relative_to(directory)}")
    print(f"next: cd {args.directory} && pip install -e '.[dev]' && pytest (see README.md)")
    return 0


def add_commands(commands: Commands) -> None:
    init = command(
        commands,
        "init",
        "write a new project: a pipeline, its test, its Dagster code location and settings",
        handler=cmd_init,
        description=(
            "Write a runnable project into DIR: a package NAME with a pipeline (a source with 2 "
            "input workers -> a transform -> a keyed aggregate -> a sink) and its Dagster "
            "definitions, a test that uses pipelines.testing, pyproject.toml, workspace.yaml, "
            "dagster.yaml and a README with the commands."
        ),
    )
    init.add_argument("directory", metavar="DIR", help="an empty or new directory")
    init.add_argument(
        "--name",
        help="the project's package and pipeline name, a Python identifier (default: DIR's "
        "name, with - as _)",
    )
    init.add_argument(
        "--force",
        action="store_true",
        help="write into a directory that is not empty (files of the same names are replaced)",
    )
