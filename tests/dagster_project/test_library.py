"""``dagster_project`` as a library: importing it builds nothing and reads no setting, it
imports neither its development tools nor the examples, and it works installed, away from this
repository (a code location of a user's own, served by ``dagster-webserver``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dagster_project.dev.server import (
    Serve,
    group_members,
    start,
    stop,
    wait_until_serving,
    workspace_file,
)
from tests.sockets import accepts, free_port
from tests.test_layout import modules

pytestmark = pytest.mark.dagster

REPO = Path(__file__).resolve().parents[2]
LIBRARY = "dagster_project"
APART = ("dagster_project.dev", "dagster_project.examples", "pipelines.examples")
"""What the library must not import: its development tools and the examples."""

PROBE = """
import importlib, json, os, pkgutil, sys, sysconfig
import importlib.util

# Where epochgate's packages are, found without importing them.
OURS = tuple(
    os.path.dirname(importlib.util.find_spec(p).origin) + os.sep
    for p in ("progress", "state_store", "pipelines", "dagster_project")
)
STDLIB = sysconfig.get_paths()["stdlib"]
read = []
environ = type(os.environ)
lookup = environ.__getitem__


def traced(self, key):
    # A key looked up by epochgate's own code (the nearest caller outside the standard
    # library); libraries that copy the whole environment at import are not epochgate's doing.
    if isinstance(key, str) and key.startswith("EPOCHGATE_"):
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith((STDLIB, "<")):
            frame = frame.f_back
        if frame is not None and frame.f_code.co_filename.startswith(OURS):
            read.append(key)
    return lookup(self, key)


environ.__getitem__ = traced

import dagster as dg

built = []
new = dg.Definitions.__new__


def counted(cls, *args, **kwargs):
    built.append(cls.__name__)
    return new(cls, *args, **kwargs)


dg.Definitions.__new__ = staticmethod(counted)


def defined(value):
    # Anything Dagster defines: Definitions, assets and specs, jobs, sensors, partitions.
    kind = type(value)
    return kind.__module__.startswith("dagster.") and kind.__name__.endswith(
        ("Definition", "Definitions", "Spec")
    )


def made():
    return sorted(
        f"{name}.{attribute}"
        for name, module in list(sys.modules.items())
        if name.split(".")[0] == "dagster_project"
        for attribute, value in vars(module).items()
        if defined(value)
    )


import dagster_project

names = ["dagster_project"]
for found in pkgutil.walk_packages(dagster_project.__path__, "dagster_project."):
    if not found.name.startswith("dagster_project.examples."):
        importlib.import_module(found.name)
        names.append(found.name)
library = {"modules": names, "read": sorted(set(read)), "built": built[:], "made": made()}
# The example's code location is built when imported: the probe must see that.
importlib.import_module("dagster_project.examples.bank")
example = {"read": sorted(set(read)), "built": built[:], "made": made()}
print(json.dumps({"library": library, "example": example}))
"""


def _probe(cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``PROBE`` run in a new interpreter, in ``cwd``, with exactly ``env``."""
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_importing_the_library_builds_nothing_and_reads_no_setting(tmp_path: Path) -> None:
    # Every setting set, one of them to a value that fails when read.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "EPOCHGATE_SENSOR_INTERVAL": "soon",
        "EPOCHGATE_SPARK": "sc://127.0.0.1:1",
        "EPOCHGATE_HOME": str(tmp_path / "home"),
        "EPOCHGATE_LEDGER": str(tmp_path / "ledger.duckdb"),
        "EPOCHGATE_DATA": str(tmp_path / "data"),
        "EPOCHGATE_FAULT": "nowhere",
    }
    done = _probe(tmp_path, env)
    # The example reads the bad interval when it builds its Definitions, after the library.
    assert "EPOCHGATE_SENSOR_INTERVAL must be a whole number" in done.stderr, done.stderr
    env["EPOCHGATE_SENSOR_INTERVAL"] = "7"
    done = _probe(tmp_path, env)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    library, example = found["library"], found["example"]
    assert {"dagster_project.definitions", "dagster_project.dev.demo"} <= set(library["modules"])
    assert library["read"] == []
    assert library["built"] == []
    assert library["made"] == []
    # The probe sees a module that builds and reads: the example's code location.
    assert example["built"] == ["Definitions"]
    assert example["made"] == ["dagster_project.examples.bank.defs"]
    assert {"EPOCHGATE_SENSOR_INTERVAL", "EPOCHGATE_SPARK", "EPOCHGATE_LEDGER"} <= set(
        example["read"]
    )


def test_the_library_imports_neither_its_dev_tools_nor_the_examples() -> None:
    found = [
        f"{m.path.relative_to(REPO)}:{imp.line} imports {imp.module}"
        for m in modules().values()
        if m.package == LIBRARY and not m.name.startswith(APART)
        for imp in m.imports
        for target in (imp.module, *(f"{imp.module}.{n}" for n in imp.names))
        if target == APART[0] or target.startswith(APART)
    ]
    assert not found, "\n".join(found)


USER_CODE = """
'''A user's code location: its own pipeline, with epochgate imported from where it is installed.'''
import os
from pathlib import Path

import dagster_project, pipelines, progress, state_store
from dagster_project import build_definitions
from tests_user_pipeline import meters

site = Path(os.environ["INSTALLED"])
where = {m.__name__: m.__file__ for m in (dagster_project, pipelines, progress, state_store)}
elsewhere = {name: path for name, path in where.items() if not Path(path).is_relative_to(site)}
if elsewhere:
    raise RuntimeError(f"epochgate imported from outside {site}: {elsewhere}")
defs = build_definitions([meters()])
"""
SENSOR = """
query Sensor($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) { ... on Sensor { minIntervalSeconds } }
}
"""
LOCATIONS = """
{ workspaceOrError { ... on Workspace { locationEntries { name
    locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""


def install(site: Path) -> None:
    """epochgate's packages copied into ``site`` as its wheel has them (the modules and the
    package data ``pyproject.toml`` names), none of the repository around them."""
    for package in ("progress", "state_store", "pipelines", "dagster_project"):
        for path in (REPO / package).rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix == ".py" or path.name in ("py.typed", "dagster.yaml"):
                target = site / path.relative_to(REPO)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)


def test_the_library_serves_a_users_code_location_installed_away_from_the_repository(
    tmp_path: Path,
) -> None:
    site, project = tmp_path / "site-packages", tmp_path / "project"
    install(site)
    project.mkdir()
    (project / "location.py").write_text(textwrap.dedent(USER_CODE))
    shutil.copyfile(Path(__file__).with_name("meters.py"), project / "tests_user_pipeline.py")
    workspace = workspace_file(project / "workspace.yaml", "location", working_directory=project)
    (tmp_path / "dagster").mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(site),
        "INSTALLED": str(site),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "EPOCHGATE_HOME": str(tmp_path / "state"),
        "EPOCHGATE_SENSOR_INTERVAL": "7",
    }
    dev = start(project, env, free_port(), workspace=workspace, serve=Serve.WEBSERVER)
    try:
        wait_until_serving(dev)
        [entry] = dev.graphql(LOCATIONS)["workspaceOrError"]["locationEntries"]
        loaded = entry["locationOrLoadError"]
        assert loaded["__typename"] == "RepositoryLocation", f"{loaded}\n{dev.log_tail()}"
        nodes = dev.graphql("{ assetNodes { assetKey { path } } }")["assetNodes"]
        selector = {
            "repositoryLocationName": entry["name"],
            "repositoryName": "__repository__",
            "sensorName": "meters_frontier",
        }
        sensor = dev.graphql(SENSOR, {"selector": selector})["sensorOrError"]
    finally:
        stop(dev)
    assert not group_members(dev.process.pid)
    assert not accepts(dev.port)
    assert sorted(n["assetKey"]["path"][1] for n in nodes) == sorted(
        ["readings", "valid", "yesterday", "both_days", "totals"]
    )
    assert sensor == {"minIntervalSeconds": 6}  # $EPOCHGATE_SENSOR_INTERVAL, less 1 s of slack
