"""The bench scripts loaded as modules, for their fast forms in tests, and the checks of
the results sections they write."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(name: str) -> ModuleType:
    """``bench/<name>.py`` as module ``name`` (registered in ``sys.modules``: its dataclasses
    look their module up; the scripts import their helpers beside them)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


OTHER = "# Benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n"
"""A results file that already holds another script's section."""


def results_beside_another(path: Path) -> Path:
    """``path``, a results file holding another section, for a script to add its own to."""
    path.write_text(OTHER)
    return path


def section_of(path: Path, name: str) -> str:
    """The section ``name`` of the results file at ``path``, once checked that the other
    section is still there and the section starts as every section does."""
    text = path.read_text()
    assert "<!-- other:start -->\nkept\n<!-- other:end -->" in text, text
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    assert text.count(start) == 1, text
    assert text.count(end) == 1, text
    section = text.split(start, 1)[1].split(end, 1)[0]
    assert section.lstrip().startswith(f"## {name}: "), section
    for about in ("- machine: ", "- date: ", "- command: "):
        assert about in section, section
    return section


def goal_lines(lines: list[str]) -> list[str]:
    """The lines of ``lines`` that state a goal; each must say whether it is met."""
    found = [x for x in lines if "goal <= " in x or "goal >= " in x]
    for line in found:
        assert line.endswith((": met)", ": NOT met)")), line
    return found


def written_section(path: Path, name: str, write: Callable[[Path], None], lines: list[str]) -> str:
    """The section ``name`` that ``write`` adds to a results file holding another one (at
    ``path``), once checked that it holds each of ``lines`` as an item."""
    results = results_beside_another(path)
    write(results)
    found = section_of(results, name)
    for line in lines:
        assert f"- {line}\n" in found, found
    return found
