"""Following commits: a burst of commits is synced once, by itself, soon after; ``run_stage``
returns with its capture synced; a command and an exiting process sync before they end."""

from __future__ import annotations

import gc
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.capture import follower as capture_follower
from pipelines.capture import log as capture_log
from pipelines.capture.follower import SYNC_DELAY
from pipelines.cli.main import main
from pipelines.examples.bank import WORKERS, pipeline
from pipelines.run.runtime import Runtime
from pipelines.spark.session import spark_session
from progress.ledger import Ledger
from tests.fixtures import captures
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[3]
P = "progress"
M = "messages"
EPOCH_0 = [(P, ()), (M, 0), (P, ((0, -1), (1, 1)))]


def bank(home: Path, spark: SparkSession | None = None, *, delay: float = SYNC_DELAY) -> Runtime:
    """``bank`` with a follower that syncs ``delay`` seconds after a commit (default: the
    default follower's)."""
    ledger = Ledger(home / "ledger.duckdb")
    capture_follower.follow(ledger, delay)  # before the Runtime, which would add the default
    return Runtime(pipeline(rings=False), ledger, spark or spark_session, home / "data")


def test_a_burst_of_commits_is_synced_once_by_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    syncs: list[float] = []
    real = capture_follower.sync_pipeline

    def counted(*args: object, **kwargs: object) -> int:
        syncs.append(time.monotonic())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(capture_follower, "sync_pipeline", counted)
    data = captures.inputs(tmp_path / "raw")
    # Longer than the default, so that the 12 commits of epoch 0 outnumber the delays they
    # span even on a loaded machine (each commit syncs its WAL to disk).
    delay = 3 * SYNC_DELAY
    rt = bank(tmp_path, delay=delay)
    rt.capture("card_payments", tmp_path / "worker0", worker=0)
    commits = 0
    started = time.monotonic()
    for source, workers in WORKERS.items():
        for w in range(workers):
            handle = rt.input(source, w)
            for f in data.files(source, 0, w):
                handle.send(f)
                commits += 1
            handle.advance_to(1)
            commits += 1
    sent = time.monotonic()
    wait_until(
        lambda: captures.shapes(tmp_path / "worker0") == EPOCH_0,
        delay + 10,
        "worker 0's epoch 0 in its capture",
        every=0.02,
        detail=lambda: str(captures.shapes(tmp_path / "worker0")),
    )
    # Nothing asked for it: the follower's own thread synced, at most once per delay.
    assert 1 <= len(syncs) <= 1 + (sent - started) / delay < commits
    assert all(s >= started + delay * 0.9 for s in syncs[:1])
    # Commits after the first sync (a loaded machine sends slowly) are synced by the next.
    follower = capture_follower.follow(rt.ledger)
    wait_until(
        lambda: follower.pending == frozenset(),
        delay + 10,
        "the follower to sync every commit by itself",
        every=0.02,
        detail=lambda: f"pending {sorted(follower.pending)}",
    )
    assert len(syncs) <= 2 + (sent - started) / delay  # still one per delay at most


@pytest.mark.spark
def test_run_stage_returns_with_its_capture_synced(tmp_path: Path, spark: SparkSession) -> None:
    data = captures.inputs(tmp_path / "raw")
    rt = bank(tmp_path, spark)
    rt.capture("valid_cards", tmp_path / "cards")
    captures.send_epoch(rt, data, 0, hold=False)
    rt.run_stage("valid_cards", 0)
    assert captures.shapes(tmp_path / "cards") == EPOCH_0  # at once, not a delay later
    assert [s.behind for s in rt.captures()] == [0]


def test_a_command_syncs_before_it_exits(tmp_path: Path) -> None:
    rt = bank(tmp_path)
    rt.capture("card_payments", tmp_path / "worker1", worker=1)
    base = ["--ledger", str(tmp_path / "ledger.duckdb"), "--data", str(tmp_path / "data")]
    assert main(["advance", *base, "-p", "bank", "card_payments", "1", "--worker", "1"]) == 0
    assert captures.shapes(tmp_path / "worker1")[-2:] == [(M, 0), (P, ((0, -1), (1, 1)))]


def test_a_process_that_exits_syncs_first(tmp_path: Path) -> None:
    rt = bank(tmp_path)
    rt.capture("card_payments", tmp_path / "worker1", worker=1)
    code = (
        "import sys; from pathlib import Path; "
        "from tests.pipelines.capture.test_capture_follower import bank; "
        "bank(Path(sys.argv[1])).input('card_payments', 1).advance_to(2)"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, check=True, timeout=120)
    assert captures.shapes(tmp_path / "worker1")[-1] == (P, ((0, -1), (2, 1)))


def test_a_log_cut_short_inside_its_last_event_gets_it_again(tmp_path: Path) -> None:
    """A correction at an epoch still open waits for its release: the advance's sync appends
    the ``Progress`` and the ``Revision`` in one write. A kill inside that write leaves the
    progress whole and the revision torn: the append counts together or not at all, so the
    next sync cuts both off and appends both again, the same."""
    data = captures.inputs(tmp_path / "raw")
    rt = captures.runtime(tmp_path, spark_session)
    rt.capture("card_payments", tmp_path / "worker2", worker=2)
    worker = rt.input("card_payments", 2)
    for f in data.files("card_payments", 0, 2):
        worker.send(f)
    worker.correct(0, data.files("card_payments", 0, 0)[0])
    worker.advance_to(1)
    assert captures.shapes(tmp_path / "worker2")[-2:] == [(P, ((0, -1), (1, 1))), ("revision", 0)]
    log = tmp_path / "worker2" / capture_log.LOG
    whole = log.read_bytes()
    cut = whole.rstrip(b"\n").rfind(b"\n") + 1 + 20  # 20 bytes into the last line
    log.write_bytes(whole[:cut])
    assert rt.sync_captures() == 2
    assert log.read_bytes() == whole
    assert rt.sync_captures() == 0


def test_a_follower_does_not_keep_its_ledger_alive(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    # A delay no timer reaches while the test looks: the sync stays pending until settle().
    follower = capture_follower.follow(ledger, delay=600.0)
    follower(frozenset({"bank"}))  # a sync pending: the ledger is held until it is made
    gone = weakref.ref(ledger)
    del ledger
    gc.collect()
    assert gone() is not None
    follower.settle()
    gc.collect()
    assert gone() is None
