"""The build's own promises: system packages installed or named in one line, packaging metadata
that installs without deprecation warnings."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

from tests import reaper

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "system-packages"


def _bin(tmp_path: Path, *tools: str) -> Path:
    """A PATH directory holding only ``tools`` (no apt-get, no sudo, none of the packages)."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found is not None, tool
        (directory / tool).symlink_to(found)
    return directory


def test_system_packages_that_cannot_be_installed_are_named_in_one_line(tmp_path: Path) -> None:
    path = _bin(tmp_path, "bash", "id", "mktemp", "tail", "rm")
    done = subprocess.run(
        [str(path / "bash"), str(SCRIPT), "java", "chromium"],
        env={"PATH": str(path), "HOME": str(tmp_path), **reaper.marks()},
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "sudo apt-get install -y openjdk-17-jre-headless chromium" in last


def test_system_packages_present_do_nothing() -> None:
    done = subprocess.run(
        [str(SCRIPT), "ps"], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert done.stdout == ""


def test_license_is_an_spdx_string() -> None:
    """A license table makes setuptools warn on every install; a string needs setuptools>=77."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    (setuptools,) = [r for r in project["build-system"]["requires"] if r.startswith("setuptools")]
    assert ">=77" in setuptools
