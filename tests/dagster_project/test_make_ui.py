"""``make ui``: the Dagster UI and daemon on the demo's instance, bound to 127.0.0.1, with the
URL printed first; stopped by process group, leaving nothing on the port."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.dagster_project.dagster_dev import REPO, group_members, spawn, stop, wait_until_serving
from tests.environment import without_settings
from tests.sockets import accepts, free_port

pytestmark = pytest.mark.dagster


def test_make_ui_serves_the_demo_instance(tmp_path: Path) -> None:
    make = shutil.which("make")
    assert make is not None, "`make` is not installed"
    venv = Path(sys.prefix)
    port, home = free_port(), tmp_path / "state"
    env = without_settings("EPOCHGATE_", "DAGSTER_")
    argv = [
        make,
        "--no-print-directory",
        *("-o", str(venv / ".installed-dev")),  # the suite runs in an installed venv already
        "ui",
        f"VENV={venv}",
        f"UI_PORT={port}",
        f"EPOCHGATE_HOME={home}",
    ]
    dev = spawn(argv, cwd=REPO, env=env, port=port, log=tmp_path / "make-ui.log")
    try:
        wait_until_serving(dev)
        lines = dev.log.read_text().splitlines()
        assert lines[0] == (
            f"Dagster UI: http://127.0.0.1:{port}  (instance {home / 'dagster'}; Ctrl-C stops it)"
        )
        assert lines[1] == f"no demo ledger in {home / 'demo'} yet: run make demo"
        assert (home / "dagster" / "dagster.yaml").read_text() == (
            REPO / "dagster_project" / "dagster.yaml"
        ).read_text()
        nodes = dev.graphql("{ assetNodes { assetKey { path } } }")["assetNodes"]
        assert ["bank", "balances"] in [n["assetKey"]["path"] for n in nodes]
    finally:
        stop(dev)
    assert not group_members(dev.process.pid)
    assert not accepts(port), f"something still listens on port {port}"
