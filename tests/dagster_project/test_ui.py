"""The Dagster UI's asset graph in a real browser: headless Chromium (Debian's ``chromium``,
which ``.ci/run`` installs) opens the lineage page of the ``bank`` asset group, served by
``dagster-webserver`` alone on the project's workspace (no daemon, no Spark), and must find a node
for every stage, the sources included (they are the group's external assets). A screenshot of the
page is saved as ``tests/artifacts/asset_graph.png``, also when nodes are missing. The webserver
and the browser are stopped by process group, and nothing is left on the port.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from dagster_project.demo import instance_home
from pipelines.examples import bank
from tests.dagster_project.dagster_dev import (
    REPO,
    DagsterDev,
    group_members,
    launch,
    stop,
    wait_until_serving,
)
from tests.sockets import accepts

pytestmark = [pytest.mark.dagster, pytest.mark.browser]

GROUP = "bank"
STAGES = list(bank.pipeline().stages)
"""Every stage has a node in the group's graph: each source as an external asset."""
SCREENSHOT = REPO / "tests" / "artifacts" / "asset_graph.png"
ASSET_SCREENSHOT = REPO / "tests" / "artifacts" / "asset_page.png"
ASSET = "balances"
"""The stage whose asset page must show its description (its function's docstring) and columns."""
VIEWPORT = {"width": 1600, "height": 1000}
FIND_SECONDS = 30.0
"""How long the page may take to load the code location and lay out the graph."""
SETTLE_SECONDS = 10.0
"""How long the nodes may take to show their status (for the screenshot: no failure if longer)."""
NO_NUX = """
nux:
  enabled: false
"""
"""Added to the test instance's settings: no "Join the Dagster community" dialog over the graph."""


@pytest.fixture
def chromium_executable() -> str:
    """Debian's ``chromium``: missing, the test fails (it is part of what the suite needs)."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail(
            "no `chromium` on PATH: install Debian's chromium (`sudo apt-get install chromium`; "
            ".ci/run installs it when missing)"
        )
    return executable


@pytest.fixture
def webserver(tmp_path: Path) -> Iterator[DagsterDev]:
    """``dagster-webserver`` on the project's workspace, with its instance in ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPOCHGATE_", "DAGSTER_"))}
    dagster_home = instance_home(tmp_path)  # with the project's dagster.yaml
    with (dagster_home / "dagster.yaml").open("a") as config:
        config.write(NO_NUX)
    env |= {"DAGSTER_HOME": str(dagster_home), "EPOCHGATE_HOME": str(tmp_path / "home")}
    dev = launch(tmp_path, env, command="webserver")
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
    """Wait for the process group to end; SIGKILL to whatever is left of it after ``timeout``."""
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if group_members(pgid):
        os.killpg(pgid, signal.SIGKILL)
        time.sleep(1.0)
    leftover = group_members(pgid)
    assert not leftover, f"processes of Chromium still running: {leftover}"


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


def group_page(dev: DagsterDev, group: str) -> str:
    """The address of an asset group's lineage page, as the UI builds it: the code location (the
    repository's name too, unless it is the unnamed ``__repository__``) and the group's name."""
    data = dev.graphql(
        "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } "
        "assetGroups { groupName } } } } }"
    )
    holders = [
        (r["name"], r["location"]["name"])
        for r in data["repositoriesOrError"]["nodes"]
        if group in {g["groupName"] for g in r["assetGroups"]}
    ]
    assert len(holders) == 1, f"asset group {group!r} in {len(holders)} repositories: {data}"
    [(name, location)] = holders
    repo_path = urllib.parse.quote(location, safe="")
    if name != "__repository__":
        repo_path = f"{name}@{repo_path}"
    return (
        f"http://127.0.0.1:{dev.port}/locations/{repo_path}"
        f"/asset-groups/{urllib.parse.quote(group, safe='')}/lineage"
    )


def graph_node(page: Page, asset: str) -> Locator:
    """The graph's node of an asset: an SVG ``foreignObject`` holding an element whose whole text
    is the asset's name (a node's title, or its label when the graph is zoomed out), so not the
    asset's entry in a side list."""
    return page.locator("svg foreignObject").filter(has=page.get_by_text(asset, exact=True))


def in_view(page: Page, node: Locator) -> bool:
    """Whether ``node`` is rendered inside the page's viewport."""
    try:
        if node.count() == 0:
            return False
        box = node.first.bounding_box(timeout=1_000)
    except PlaywrightError:  # re-rendered between the two questions
        return False
    width, height = VIEWPORT["width"], VIEWPORT["height"]
    return (
        box is not None
        and box["width"] > 0
        and box["height"] > 0
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= width
        and box["y"] + box["height"] <= height
    )


def missing_nodes(page: Page, assets: list[str], *, timeout: float) -> list[str]:
    """The assets without a node in view once every one has one, or when ``timeout`` is up."""
    deadline = time.monotonic() + timeout
    while True:
        missing = [asset for asset in assets if not in_view(page, graph_node(page, asset))]
        if not missing or time.monotonic() > deadline:
            return missing
        page.wait_for_timeout(250)


def settle(page: Page, *, timeout: float) -> None:
    """Wait until no node still shows "Loading" in place of its status, or ``timeout`` is up:
    the screenshot is of the finished page when it can be (a slow status is not this test's
    failure)."""
    loading = page.locator("svg foreignObject").get_by_text("Loading")
    deadline = time.monotonic() + timeout
    while loading.count() and time.monotonic() < deadline:
        page.wait_for_timeout(250)


def shown(page: Page, text: str, *, timeout: float) -> bool:
    """Whether an element whose whole text is ``text`` (or, for a long text, that contains it)
    appears on the page within ``timeout``."""
    found = page.get_by_text(text, exact=len(text) < 40).first
    try:
        found.wait_for(state="visible", timeout=timeout * 1000)
    except PlaywrightError:
        return False
    return True


def test_the_asset_graph_shows_every_stage(chromium_executable: str, webserver: DagsterDev) -> None:
    url = group_page(webserver, GROUP)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)  # no earlier run's picture passes for this one's
    ASSET_SCREENSHOT.unlink(missing_ok=True)
    stage = bank.pipeline().stage(ASSET)
    doc = (stage.code.__doc__ or "").strip().splitlines()[0] if stage.code else ""
    columns = stage.schema.fieldNames() if stage.schema is not None else []
    assert doc, f"{ASSET} needs a docstring for this test"
    assert columns, f"{ASSET} needs declared columns for this test"
    absent: list[str] = []
    errors: list[str] = []
    with chromium(chromium_executable) as browser:
        page = browser.new_page(viewport={"width": VIEWPORT["width"], "height": VIEWPORT["height"]})
        page.on("pageerror", lambda error: errors.append(str(error)))
        missing = list(STAGES)
        try:
            page.goto(url, wait_until="domcontentloaded")
            missing = missing_nodes(page, STAGES, timeout=FIND_SECONDS)
            if not missing:
                settle(page, timeout=SETTLE_SECONDS)
        finally:
            page.screenshot(path=SCREENSHOT)  # also of a page that never showed the graph
        asset_url = f"http://127.0.0.1:{webserver.port}/assets/{GROUP}/{ASSET}"
        try:
            page.goto(asset_url, wait_until="domcontentloaded")
            absent = [t for t in (doc, *columns) if not shown(page, t, timeout=FIND_SECONDS)]
        finally:
            page.screenshot(path=ASSET_SCREENSHOT, full_page=True)
    webserver.check_alive()
    assert not missing, (
        f"no node in view for {missing} of {STAGES} after {FIND_SECONDS:.0f}s at {url} "
        f"(screenshot: {SCREENSHOT}); page errors: {errors}\n{webserver.log_tail()}"
    )
    assert not absent, (
        f"the asset page of {ASSET} at {asset_url} does not show {absent} "
        f"(screenshot: {ASSET_SCREENSHOT}); page errors: {errors}"
    )
