"""The Dagster UI's asset graph in a real browser: headless Chromium opens the lineage page of
the ``bank`` asset group, served by ``dagster-webserver`` alone on the project's workspace (no
daemon, no Spark; ``tests.dagster_project.browser``), and must find a node for every stage, the
sources included (they are the group's external assets). A screenshot of the page is saved as
``tests/artifacts/asset_graph.png``, also when nodes are missing, and, with
``EPOCHGATE_DOCS_IMAGES=1`` (``make docs-images``) once every node shows, as
``docs/images/asset-graph.png`` for the tutorial. (The upquery runs and the
partial state in the same UI: ``test_upqueries.py``.)
"""

from __future__ import annotations

import os
import time

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Locator, Page

from pipelines.examples import bank
from tests.dagster_project.browser import VIEWPORT, chromium, group_page, shown
from tests.dagster_project.dagster_dev import REPO, DagsterDev

pytestmark = [pytest.mark.dagster, pytest.mark.browser]

GROUP = "bank"
STAGES = list(bank.pipeline().stages)
"""Every stage has a node in the group's graph: each source as an external asset."""
SCREENSHOT = REPO / "tests" / "artifacts" / "asset_graph.png"
ASSET_SCREENSHOT = REPO / "tests" / "artifacts" / "asset_page.png"
DOCS_SCREENSHOT = REPO / "docs" / "images" / "asset-graph.png"
"""The tutorial's picture of the UI: the graph once every node showed (never a failed page).
Written only when ``EPOCHGATE_DOCS_IMAGES`` is set, so a test run leaves the tree as it was."""
ASSET = "balances"
"""The stage whose asset page must show its description (its function's docstring) and columns."""
FIND_SECONDS = 30.0
"""How long the page may take to load the code location and lay out the graph."""
SETTLE_SECONDS = 10.0
"""How long the nodes may take to show their status (for the screenshot: no failure if longer)."""


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
                if os.environ.get("EPOCHGATE_DOCS_IMAGES"):
                    page.screenshot(path=DOCS_SCREENSHOT)
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
