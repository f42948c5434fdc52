"""The public surface: a small ``pipelines`` namespace, and every error in ``pipelines.errors``."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import pipelines
import pipelines.errors
import pipelines.stages
from progress.errors import EpochgateError

pytestmark = pytest.mark.unit

LIBRARY = ("progress", "state_store", "pipelines")


AIRFLOW = "pipelines.airflow"
"""Imports Airflow, which makes its home when imported: never imported in the test process (its
tests run it in child processes). It defines no error and no stage kind (checked from its
source)."""


def _every_module() -> None:
    for name in LIBRARY:
        _import_below(name)


def _import_below(name: str) -> None:
    """``name`` and every module below it but the examples and Airflow's (``walk_packages``
    would import every package to walk it)."""
    package = importlib.import_module(name)
    for found in pkgutil.iter_modules(package.__path__, prefix=f"{name}."):
        if found.name.endswith(".examples") or found.name == AIRFLOW:
            continue
        if found.ispkg:
            _import_below(found.name)
        else:
            importlib.import_module(found.name)


def test_the_airflow_provider_defines_no_error_and_no_stage_kind() -> None:
    root = Path(pipelines.__file__).parent / "airflow"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
                assert not any(b.endswith(("Error", "Stage")) for b in bases), (path, node.name)


def _subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_the_public_namespace_is_what_a_pipeline_is_written_and_run_with() -> None:
    names = pipelines.__all__
    assert 15 <= len(names) <= 20, names
    assert len(set(names)) == len(names)
    for name in names:
        assert getattr(pipelines, name) is not None, name
    assert {"Pipeline", "Stream", "Runtime", "Ledger", "spark_session", "RunResult"} <= set(names)


def test_every_error_of_the_library_is_in_pipelines_errors() -> None:
    _every_module()
    errors = {
        cls
        for cls in _subclasses(EpochgateError) | {EpochgateError}
        if cls.__module__.split(".")[0] in LIBRARY
    }
    missing = sorted(c.__name__ for c in errors if c.__name__ not in pipelines.errors.__all__)
    assert not missing, f"errors not named in pipelines.errors: {missing}"
    for cls in errors:
        assert getattr(pipelines.errors, cls.__name__) is cls, cls


def test_the_stage_kinds_are_in_pipelines_stages() -> None:
    from pipelines.stages.kinds import Stage

    _every_module()
    kinds = {c for c in _subclasses(Stage) if c.__module__.startswith("pipelines.")} | {Stage}
    missing = sorted(c.__name__ for c in kinds if c.__name__ not in pipelines.stages.__all__)
    assert not missing, f"stage kinds not named in pipelines.stages: {missing}"
