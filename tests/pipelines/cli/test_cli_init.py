"""``epochgate init``: the project it writes passes its own tests and Dagster's validation, runs
from the shell in its directory without PYTHONPATH, and imports public names only; a directory
not empty or a name that cannot be a package is refused, writing nothing."""

from __future__ import annotations

import ast
import fnmatch
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import pipelines
from pipelines.cli.init import FILES, TEMPLATES, render
from pipelines.cli.main import main
from tests.environment import without_settings

pytestmark = pytest.mark.slow(22)

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
NAME = "initshop"
"""The project's name in the test that runs it (a module name no other test imports)."""


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user has: none of the suite's epochgate, pytest or Python settings
    (but the machine's JVM settings)."""
    env = without_settings("EPOCHGATE_", "PYTEST_", "DAGSTER_")
    env.pop("PYTHONPATH", None)
    return {**env, **extra}


def run(argv: list[str], cwd: Path, timeout: float = 300, **env: str) -> str:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=clean_env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{output[-3000:]}"
    return output


def tree(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.mark.spark
@pytest.mark.dagster
def test_the_project_tests_validates_and_runs_from_its_directory(
    tmp_path: Path,
    spark: SparkSession,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = tmp_path / NAME
    assert main(["init", str(project)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote project {NAME} in {project}:")
    written = sorted(target.format(name=NAME) for _, target in FILES)
    assert written == sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())

    # Its own test, with the project's directory as the working directory and no PYTHONPATH.
    assert "1 passed" in run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project
    )

    # Dagster loads the code location from the instance the README sets up, and sees its stages.
    instance = project / ".dagster"
    instance.mkdir()
    shutil.copy(project / "dagster.yaml", instance / "dagster.yaml")
    validated = run(
        [str(BIN / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        project,
        DAGSTER_HOME=str(instance),
    )
    assert f"Validation successful for code location {NAME}" in validated
    assets = run(
        [str(BIN / "dagster"), "asset", "list", "-f", f"{NAME}/definitions.py", "-d", "."],
        project,
        DAGSTER_HOME=str(instance),
    )
    for stage in ("valid_orders", "customer_totals", "publish_totals"):
        assert f"{NAME}/{stage}" in assets.split()
    settings = run(
        [sys.executable, "-c", INSTANCE_PROBE], project, DAGSTER_HOME=str(instance)
    ).split()
    assert settings[-3:] == ["WarmRunLauncher", f"['{NAME}.definitions']", "QueuedRunCoordinator"]

    # The console script imports `-p module:attribute` from the working directory, and the
    # ledger remembers it for the next command.
    home = str(project / ".epochgate")
    reference = f"{NAME}.pipeline:pipeline"
    epochgate = str(BIN / "epochgate")
    moved = run(
        [epochgate, "advance", "-p", reference, "orders", "1"], project, EPOCHGATE_HOME=home
    )
    assert moved == "orders worker 0 is at epoch 1\n"
    closed = run([epochgate, "close", "orders", "--worker", "1"], project, EPOCHGATE_HOME=home)
    assert closed == "orders worker 1 is closed\n"

    # `epochgate check` on it, in this process (its Spark session is the suite's).
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(project))])
    where = ["--ledger", str(tmp_path / "none" / "ledger.duckdb"), "--data", str(tmp_path / "d")]
    assert main(["check", "-p", reference, *where]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"pipeline {NAME}: 4 stages, 3 edges"
    assert lines[1].startswith("  orders  [source, key: order_id, delay: 0, workers: 2]")
    assert lines[3] == (
        "      `-- customer_totals  [aggregate, key: customer, delay: 0]  "
        "columns: customer, total, orders"
    )


INSTANCE_PROBE = """
import dagster as dg

with dg.DagsterInstance.get() as instance:
    launcher = instance.run_launcher
    print(type(launcher).__name__, list(launcher.preload), type(instance.run_coordinator).__name__)
"""


@pytest.mark.unit
def test_the_generated_code_imports_only_public_names(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path / "demo_app")]) == 0
    public = {
        "pipelines": set(pipelines.__all__),
        "pipelines.testing": {"assert_output", "close_sources", "send_epochs", "throwaway_runtime"},
        "dagster_project": {"build_definitions"},
    }
    seen: set[str] = set()
    for path in (tmp_path / "demo_app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                top = node.module.split(".")[0]
                if top in ("pipelines", "dagster_project", "progress", "state_store"):
                    names = {a.name for a in node.names}
                    assert node.module in public, f"{path}: imports {node.module}"
                    assert names <= public[node.module], f"{path}: imports {names}"
                    seen.add(node.module)
            elif isinstance(node, ast.Import):
                assert not [a for a in node.names if a.name.startswith("pipelines")], path
    assert seen == set(public)


@pytest.mark.unit
def test_a_name_or_a_directory_that_cannot_take_a_project_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused(*argv: str) -> str:
        assert main(["init", *argv]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        (line,) = err.splitlines()
        return line

    for name in ("my-app", "1st", "class", "caf\u00e9"):
        line = refused(str(tmp_path / "new"), "--name", name)
        assert line == (
            f"epochgate: NAME {name!r} is not a Python identifier (ASCII letters, digits and _, "
            "not starting with a digit, not a keyword); nothing was written"
        )
    assert refused(str(tmp_path / "json")).startswith(
        "epochgate: NAME 'json' is taken: a module of that name is already importable"
    )
    assert refused(str(tmp_path / "x"), "--name", "tests").startswith(
        "epochgate: NAME 'tests' is taken"
    )
    assert refused(str(tmp_path / "2fast")).endswith(
        "(from the directory's name; pass --name NAME); nothing was written"
    )
    assert tree(tmp_path) == []

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert refused(str(busy), "--name", "shop") == (
        f"epochgate: {busy} is not empty; pass --force to write the project's files there "
        "(files of the same names are replaced, others are left); nothing was written"
    )
    assert tree(busy) == ["notes.txt"]
    (tmp_path / "file").write_text("")
    assert refused(str(tmp_path / "file"), "--name", "shop") == (
        f"epochgate: {tmp_path / 'file'} is not a directory; nothing was written"
    )

    assert main(["init", str(busy), "--name", "shop", "--force"]) == 0
    assert "notes.txt" in tree(busy)
    assert (busy / "shop" / "pipeline.py").read_text().count('Pipeline("shop")') == 1


@pytest.mark.unit
def test_the_templates_ship_as_package_data() -> None:
    """Every template is in the package data the wheel takes, and becomes a file."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["pipelines.cli"]
    folder = ROOT / "pipelines" / "cli" / TEMPLATES
    shipped = sorted(p.name for p in folder.iterdir() if p.is_file())
    for name in shipped:
        assert any(fnmatch.fnmatch(f"{TEMPLATES}/{name}", p) for p in patterns), name
    assert shipped == sorted(template for template, _ in FILES)
    for template, _ in FILES:
        text = render(template, "shop")
        assert "{{" not in text, template
