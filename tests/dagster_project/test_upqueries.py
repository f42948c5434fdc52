"""The upquery sensor on a real Dagster instance: a read of an epoch that ``balances`` (partial)
has not processed is recorded as pending; the sensor skips naming what holds it; once the late
worker releases the epoch and the stage runs, it requests an upquery run, tagged
``epochgate/upquery``; that run fills the keys, and the next lookup is a hit equal to DuckDB SQL
over the raw inputs. The partial stage's materializations show its state.

The instance is the one the browser tests' ``dagster-webserver`` serves: headless Chromium then
finds the upquery run in the UI's runs page, filtered by its tag, and the partial state on the
asset page of ``balances`` (screenshots in ``tests/artifacts/``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from dagster_project.dev.driver import DriveError
from dagster_project.names import UPQUERY_TAG, stage_key
from dagster_project.partitions import epoch_key
from pipelines.errors import ReadPendingError
from pipelines.examples.bank_data import Oracle
from tests.dagster_project.browser import VIEWPORT, chromium, metadata_entry, shown
from tests.dagster_project.dagster_dev import REPO, DagsterDev
from tests.dagster_project.driver import skip_text
from tests.dagster_project.scenario import Bank

pytestmark = [pytest.mark.dagster, pytest.mark.spark, pytest.mark.browser, pytest.mark.slow(43)]

SENSOR = "bank_upqueries"
RUNS_SCREENSHOT = REPO / "tests" / "artifacts" / "upquery_runs.png"
STATE_SCREENSHOT = REPO / "tests" / "artifacts" / "partial_asset.png"
CHECKS_SCREENSHOT = REPO / "tests" / "artifacts" / "expectation_checks.png"
FIND_SECONDS = 30.0
"""How long a page of the UI may take to show what is looked for."""


@pytest.fixture
def instance(ui_home: Path) -> Iterator[dg.DagsterInstance]:
    """The instance the UI of the browser tests serves (its runs show there)."""
    with dg.DagsterInstance.from_config(str(ui_home)) as instance:
        yield instance


def test_a_pending_read_is_filled_by_an_upquery_run_once_its_epoch_is_processed(
    bank_home: Bank, webserver: DagsterDev, chromium_executable: str
) -> None:
    home, drive = bank_home, bank_home.drive
    oracle = Oracle(home.data.root)
    first, *accounts = oracle.some_accounts(4)
    assert skip_text(drive.tick(SENSOR)) == (
        "No pending upquery in pipeline bank: nothing was sent to it yet."
    )

    home.send_epoch(0)
    drive.drive()
    assert skip_text(drive.tick(SENSOR)) == "No pending upquery in pipeline bank."
    home.rt.lookup("balances", [first])  # one key present from epoch 0 on
    home.send_epoch(1, hold=True)
    drive.drive()  # balances waits for epoch 1: worker 2 of card_payments holds it

    with pytest.raises(ReadPendingError, match="recorded as a pending upquery of balances"):
        home.rt.pending_reads.lookup_or_request("balances", accounts, as_of=1)
    held = skip_text(drive.tick(SENSOR))
    assert held.startswith(
        "No upquery can run in pipeline bank: 3 pending read(s) of balances as of epoch 1 "
        "wait: source card_payments, worker 2, still holds epoch 1; "
    )
    assert held.endswith("; stage movements has not run epoch 1 yet (1 message(s) waiting).")

    home.release(1)
    home.close_inputs()
    drive.drive()
    info = home.rt.state_info("balances")
    (request,) = drive.tick(SENSOR).run_requests or ()
    assert request.tags[UPQUERY_TAG] == "balances"
    assert [r.run_key for r in drive.tick(SENSOR).run_requests or ()] == [request.run_key]

    run = drive.execute(request)
    assert run.success
    metadata = next(e.step_output_data.metadata for e in run.all_events if e.is_successful_output)
    assert metadata["filled"].value == 3
    assert metadata["upqueried"].value == 3
    assert metadata["keys"].value == accounts
    assert metadata["present_keys"].value == 4
    assert skip_text(drive.tick(SENSOR)) == "No pending upquery in pipeline bank."
    (launched,) = drive.instance.get_runs(filters=dg.RunsFilter(tags={UPQUERY_TAG: "balances"}))
    assert (launched.job_name, launched.status) == ("bank_upquery", dg.DagsterRunStatus.SUCCESS)

    answer = home.rt.lookup("balances", [first, *accounts], as_of=1)
    assert answer.hits == [first, *accounts]
    assert answer.upqueried == []
    got = sorted((r["account_id"], r["balance_cents"], r["movements"]) for r in answer.rows)
    assert got == oracle.balances_as_of([first, *accounts], 1)

    # The materialization of balances at epoch 1 showed its state after that run: one key
    # present (read at epoch 0), filled by one upquery.
    records = drive.instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=stage_key("bank", "balances"), asset_partitions=[epoch_key(1)]
        ),
        limit=1,
    ).records
    shown = records[0].asset_materialization
    assert shown is not None
    state = {k: shown.metadata[k].value for k in ("present_keys", "state_rows", "upqueries")}
    assert state == {"present_keys": 1, "state_rows": info.rows, "upqueries": 1}
    assert (shown.metadata["hits"].value, shown.metadata["misses"].value) == (0, 1)
    assert shown.metadata["evictions"].value == 0
    assert info.present_keys == 1
    # Its output at epoch 1 holds the present account only (when it moved then).
    rows = home.rt.read("balances", 1).collect()
    assert {r["account_id"] for r in rows} <= {first}

    # The UI shows the upquery run, by its tag, and the partial state on the asset page.
    expected = {"present_keys": 1, "state_rows": info.rows, "hits": 0, "misses": 1}
    expected |= {"upqueries": 1, "evictions": 0}
    ui_shows_upquery_and_state(webserver, chromium_executable, launched.run_id, expected)


def ui_shows_upquery_and_state(
    webserver: DagsterDev, executable: str, run_id: str, state: dict[str, int]
) -> None:
    """The runs page, filtered by the tag ``epochgate/upquery=balances``, lists the run of
    ``bank_upquery`` with that tag; the asset page of ``balances`` shows each of ``state`` with
    its value in the metadata of its latest materialization."""
    RUNS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{webserver.port}"
    runs_url = f"{base}/runs?q%5B0%5D=tag%3A{UPQUERY_TAG.replace('/', '%2F')}%3Dbalances"
    asset_url = f"{base}/assets/bank/balances"
    with chromium(executable) as browser:
        page = browser.new_page(viewport={"width": VIEWPORT["width"], "height": VIEWPORT["height"]})
        try:
            page.goto(runs_url, wait_until="domcontentloaded")
            listed = [
                text
                for text in (run_id[:8], "bank_upquery", f"{UPQUERY_TAG}: balances")
                if shown(page, text, timeout=FIND_SECONDS)
            ]
        finally:
            page.screenshot(path=RUNS_SCREENSHOT, full_page=True)
        try:
            page.goto(asset_url, wait_until="domcontentloaded")
            values = {
                name: metadata_entry(page, name, cell=-1, timeout=FIND_SECONDS) for name in state
            }
        finally:
            page.screenshot(path=STATE_SCREENSHOT, full_page=True)
    webserver.check_alive()
    assert listed == [run_id[:8], "bank_upquery", f"{UPQUERY_TAG}: balances"], (
        f"the runs page {runs_url} shows only {listed} (screenshot: {RUNS_SCREENSHOT})"
    )
    assert values == {name: str(value) for name, value in state.items()}, (
        f"the asset page {asset_url} shows {values} (screenshot: {STATE_SCREENSHOT})"
    )


def test_the_ui_shows_each_epoch_of_an_expectation_check(
    bank_home: Bank, webserver: DagsterDev, chromium_executable: str
) -> None:
    """Epoch 0's accounts file misses regions: the run of ``enriched`` fails its expectation
    ``region_known``, and passes after the correction. The check's execution history in the UI
    shows the failure at partition 0 with the counts, then its pass there."""
    home, drive = bank_home, bank_home.drive
    home.send_epoch(0, bad_accounts=True)
    with pytest.raises(DriveError, match="failed expectation region_known: "):
        drive.drive()
    home.rt.input("accounts", 0).correct(0, home.data.files("accounts", 0, 0)[0])
    drive.drive()
    assert home.rt.blockers("enriched", 0) == []
    (stopped,) = [r for r in home.rt.expectations("enriched", 0) if not r.committed]
    said = stopped.describe()  # what the failed evaluation's description says
    assert said.startswith("enriched epoch 0: region_known ")
    assert said.endswith(" rows (fail, run stopped)")

    url = (
        f"http://127.0.0.1:{webserver.port}/assets/bank/enriched"
        "?view=checks&checkDetail=region_known"
    )
    CHECKS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    with chromium(chromium_executable) as browser:
        page = browser.new_page(viewport={"width": VIEWPORT["width"], "height": VIEWPORT["height"]})
        try:
            page.goto(url, wait_until="domcontentloaded")
            page.get_by_role("tab", name="Execution history").click(timeout=FIND_SECONDS * 1000)
            seen = [
                text
                for text in ("Failed", "Passed", epoch_key(0), said)
                if shown(page, text, timeout=FIND_SECONDS)
            ]
        finally:
            page.screenshot(path=CHECKS_SCREENSHOT, full_page=True)
    webserver.check_alive()
    assert seen == ["Failed", "Passed", epoch_key(0), said], (
        f"the check's history at {url} shows only {seen} (screenshot: {CHECKS_SCREENSHOT})"
    )
