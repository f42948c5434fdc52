"""``dagster_project.dev.server`` without Dagster: a stand-in server (Python's ``http.server``
answering ``/server_info``, with a child of its own) is waited for and stopped with its whole
process group; one that exits while starting is refused, naming its exit code and log. A
workspace file names a module and attribute that are Python names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dagster_project.dev.server import (
    DevServerError,
    group_members,
    spawn,
    stop,
    workspace_file,
)
from dagster_project.dev.server import wait_until_serving as serving
from tests.sockets import accepts, free_port

pytestmark = pytest.mark.dagster


def test_a_server_is_waited_for_and_stopped_with_everything_it_started(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "server_info").write_text("{}")
    port = free_port()
    server = f"{sys.executable} -m http.server {port} --bind 127.0.0.1 --directory {served}"
    argv = ["bash", "-c", f"sleep 300 & {server}"]  # a child that would outlive a plain kill
    dev = spawn(argv, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, port=port, log=tmp_path / "log")
    try:
        serving(dev, timeout=60)
        assert accepts(port)
        assert len(group_members(dev.process.pid)) >= 3  # bash, sleep, the server
    finally:
        stop(dev, timeout=10)
    assert group_members(dev.process.pid) == []
    assert not accepts(port)


def test_a_server_that_exits_while_starting_is_refused_naming_its_log(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('no workspace here'); sys.exit(3)"]
    log = tmp_path / "dagster-dev.log"
    dev = spawn(argv, cwd=tmp_path, env={}, port=free_port(), log=log)
    with pytest.raises(DevServerError) as raised:
        serving(dev, timeout=60)
    assert str(raised.value) == (
        f"dagster dev on port {dev.port}: exited with code 3 while starting; its log is {log}:\n"
        "no workspace here"
    )
    assert raised.value.log == log


def test_a_workspace_file_loads_one_module_attribute(tmp_path: Path) -> None:
    path = workspace_file(tmp_path / "w.yaml", "iot.definitions", working_directory=tmp_path)
    assert path.read_text().splitlines() == [
        "load_from:",
        "  - python_module:",
        "      module_name: iot.definitions",
        "      attribute: defs",
        f'      working_directory: "{tmp_path.resolve()}"',
    ]
    for module, attribute in (("my-project", "defs"), ("iot", "defs: x"), ("", "defs")):
        with pytest.raises(ValueError, match="is not a dotted Python name"):
            workspace_file(tmp_path / "bad.yaml", module, attribute)
    assert not (tmp_path / "bad.yaml").exists()
