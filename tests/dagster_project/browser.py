"""The Dagster UI under test: ``dagster-webserver`` alone on the project's workspace, with an
instance directory the tests can also write runs to, and headless Chromium (Debian's
``chromium``, which ``.ci/run`` installs) driven by Playwright. Both are stopped by process
group, and nothing is left on the port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from dagster_project.dev.instance import instance_home
from tests.dagster_project.dagster_dev import (
    DagsterDev,
    Serve,
    group_members,
    launch,
    stop,
    wait_until_serving,
)
from tests.environment import without_settings
from tests.sockets import accepts
from tests.waiting import wait_until, within

VIEWPORT = {"width": 1600, "height": 1000}
NO_NUX = """
nux:
  enabled: false
"""
"""Added to the test instance's settings: no "Join the Dagster community" dialog over the page."""


def chromium_path() -> str:
    """Debian's ``chromium``: missing, the test fails (it is part of what the suite needs)."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail(
            "no `chromium` on PATH: install Debian's chromium (`sudo apt-get install chromium`; "
            ".ci/run installs it when missing)"
        )
    return executable


def ui_instance(root: Path) -> Path:
    """A Dagster instance directory in ``root`` with the project's ``dagster.yaml``, without
    the community dialog."""
    dagster_home = instance_home(root)
    with (dagster_home / "dagster.yaml").open("a") as config:
        config.write(NO_NUX)
    return dagster_home


@contextmanager
def serve(root: Path, dagster_home: Path) -> Iterator[DagsterDev]:
    """``dagster-webserver`` on the project's workspace and the instance in ``dagster_home``,
    working in ``root``; stopped, and checked to be gone, on the way out."""
    env = without_settings("EPOCHGATE_", "DAGSTER_")
    env |= {"DAGSTER_HOME": str(dagster_home), "EPOCHGATE_HOME": str(root / "home")}
    dev = launch(root, env, Serve.WEBSERVER)
    try:
        wait_until_serving(dev)
        yield dev
    finally:
        stop(dev)
        leftover = group_members(dev.process.pid)
        assert not leftover, f"processes of dagster-webserver still running: {leftover}"
        assert not accepts(dev.port), f"something still listens on port {dev.port}"


def browser_pid(browser: Browser) -> int:
    """The pid of Chromium's browser process, which leads the process group of all of Chromium's
    processes (Playwright starts it in a group of its own)."""
    session = browser.new_browser_cdp_session()
    try:
        processes = session.send("SystemInfo.getProcessInfo")["processInfo"]
    finally:
        session.detach()
    [pid] = [int(p["id"]) for p in processes if p["type"] == "browser"]
    assert pid in group_members(pid), f"Chromium's browser process {pid} leads no process group"
    return pid


def stop_group(pgid: int, *, timeout: float = 10.0) -> None:
    """Wait for the process group to end; SIGKILL to whatever is left of it after ``timeout``,
    and fail the test if some of it outlives that too."""
    if not within(lambda: not group_members(pgid), timeout, every=0.2):
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
            os.killpg(pgid, signal.SIGKILL)
        wait_until(
            lambda: not group_members(pgid),
            timeout,
            "Chromium's processes end after SIGKILL",
            detail=lambda: f"still running: {group_members(pgid)}",
        )


@contextmanager
def chromium(executable: str) -> Iterator[Browser]:
    """Headless Chromium driven by Playwright; closed, and its process group checked to be gone,
    on the way out."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        pid: int | None = None
        try:
            pid = browser_pid(browser)
            yield browser
        finally:
            try:
                browser.close()
            finally:
                if pid is not None:
                    stop_group(pid)


def shown(page: Page, text: str, *, timeout: float) -> bool:
    """Whether an element whose whole text is ``text`` (or, for a long text, that contains it)
    appears on the page within ``timeout``."""
    found = page.get_by_text(text, exact=len(text) < 40).first
    try:
        found.wait_for(state="visible", timeout=timeout * 1000)
    except PlaywrightError:
        return False
    return True


REPOSITORIES = """
{ repositoriesOrError { ... on RepositoryConnection { nodes {
    name location { name } assetGroups { groupName } sensors { name } } } } }
"""


def repository(
    dev: DagsterDev, *, group: str | None = None, sensor: str | None = None
) -> tuple[str, str]:
    """The name and code location of the one repository holding asset ``group`` or
    ``sensor``."""
    nodes = dev.graphql(REPOSITORIES)["repositoriesOrError"]["nodes"]
    holders = [
        (r["name"], r["location"]["name"])
        for r in nodes
        if group in {g["groupName"] for g in r["assetGroups"]}
        or sensor in {s["name"] for s in r["sensors"]}
    ]
    assert len(holders) == 1, f"{group or sensor!r} in {len(holders)} repositories: {nodes}"
    return holders[0]


def repository_path(dev: DagsterDev, *, group: str | None = None, sensor: str | None = None) -> str:
    """The UI's path of the repository holding asset ``group`` or ``sensor``, as the UI builds
    it: the code location (the repository's name too, unless it is the unnamed
    ``__repository__``)."""
    name, location = repository(dev, group=group, sensor=sensor)
    path = urllib.parse.quote(location, safe="")
    return path if name == "__repository__" else f"{name}@{path}"


def group_page(dev: DagsterDev, group: str) -> str:
    """The address of an asset group's lineage page."""
    where = repository_path(dev, group=group)
    return (
        f"http://127.0.0.1:{dev.port}/locations/{where}"
        f"/asset-groups/{urllib.parse.quote(group, safe='')}/lineage"
    )


def sensor_page(dev: DagsterDev, sensor: str) -> str:
    """The address of a sensor's page: its ticks and runs."""
    where = repository_path(dev, sensor=sensor)
    return f"http://127.0.0.1:{dev.port}/locations/{where}/sensors/{sensor}"


def metadata_entry(page: Page, name: str, *, cell: int, timeout: float = 30.0) -> str | None:
    """The value of the metadata entry ``name`` on an asset's page: cell ``cell`` of the first
    row naming it (the overview's tables end with the value, -1; an event's have it second, 1),
    or None when it does not show within ``timeout``."""
    row = page.locator("tr").filter(has=page.get_by_text(name, exact=True)).first
    try:
        row.wait_for(state="visible", timeout=timeout * 1000)
        return row.locator("td").nth(cell).inner_text().strip()
    except PlaywrightError:
        return None
