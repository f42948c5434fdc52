"""Capture: a stage's stream recorded as the ledger commits it, checked against the ledger,
against DuckDB SQL over the raw inputs, and across a SIGKILL of the captured pipeline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from pyspark.sql import SparkSession

from pipelines.capture import log as capture_log
from pipelines.capture import sync as capture
from pipelines.capture.sync import LogState, Planned
from pipelines.cli.main import main
from pipelines.examples.bank_data import DemoData, Oracle
from pipelines.run.runtime import Runtime, run_key
from pipelines.testing import close_sources
from progress import Tracker
from progress.capture import Messages, Revision
from progress.errors import CaptureError
from progress.faults import FAULT_ENV, FaultPoint
from progress.ledger import CaptureRecord, Ledger, StreamHead
from tests.fixtures import captures, slow
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow(45)]

REPO = Path(__file__).resolve().parents[3]
CARD_SQL = (
    "SELECT 'c' || payment_id, account_id, -amount_cents, merchant_category FROM cards "
    "WHERE epoch = $e AND amount_cents > 0 AND merchant_category IS NOT NULL"
)
P = "progress"
M = "messages"


@dataclass
class Captured:
    home: Path
    rt: Runtime
    data: DemoData
    held: list[tuple[str, object]]
    """The stage capture's events while card worker 2 held the late epoch."""


@dataclass
class Twin:
    """How often a sync read a stream, and how often its head said it had not moved."""

    read: int = 0
    skipped: int = 0


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    """Every sync of this module plans each capture in full as well: where the stream's head
    says it has not moved, the full plan must be empty."""
    found = Twin()
    original = capture.plan_if_moved

    def both(
        ledger: Ledger, rec: CaptureRecord, state: LogState, tracker: Tracker, head: StreamHead
    ) -> list[Planned]:
        full = capture.plan(ledger, rec, state, tracker)
        if capture.unchanged(state, head):
            assert full == [], f"{rec.directory}: the head {head} hides {full}"
            found.skipped += 1
        else:
            found.read += 1
        assert original(ledger, rec, state, tracker, head) == full
        return full

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(capture, "plan_if_moved", both)
        yield found


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession, twin: Twin) -> Captured:
    """``valid_cards`` and card worker 2 captured from the start; three epochs, the middle
    one held open by worker 2, which then sends its second file late."""
    home = tmp_path_factory.mktemp("bank")
    data = captures.inputs(home / "raw")
    rt = captures.runtime(home, spark)
    rt.capture("valid_cards", home / "cards")
    rt.capture("card_payments", home / "worker2", worker=2)
    captures.send_epoch(rt, data, 0)
    rt.run_stage("valid_cards", 0)
    captures.send_epoch(rt, data, 1)
    captures.send_epoch(rt, data, 2)
    assert ("valid_cards", 1) not in rt.ready()  # held by card worker 2
    held = captures.shapes(home / "cards")
    captures.release_late(rt, data, 2)
    for epoch in (1, 2):
        rt.run_stage("valid_cards", epoch)
    return Captured(home, rt, data, held)


def oracle(c: Captured, epoch: int) -> list[tuple[object, ...]]:
    return card_oracle(c.data, epoch)


def test_a_stage_capture_holds_exactly_the_committed_epochs(captured: Captured) -> None:
    c = captured
    assert c.held == [(P, ()), (M, 0), (P, ((0, -1), (1, 1)))]  # nothing of the held epoch
    assert captures.shapes(c.home / "cards") == [
        (P, ()),
        (M, 0),
        (P, ((0, -1), (1, 1))),
        (M, 1),
        (P, ((1, -1), (2, 1))),
        (M, 2),
        (P, ((2, -1), (3, 1))),
    ]
    log = capture_log.read(c.home / "cards", check_data=True)
    assert log.header.stage == "valid_cards"
    assert log.header.schema == c.rt.read("valid_cards", 0).schema.json()
    for epoch in range(3):
        assert captures.rows_at(c.home / "cards", epoch) == oracle(c, epoch)
        (message,) = c.rt.ledger.message("bank", "valid_cards", 0, epoch)
        at = [i for i, e in enumerate(log.events) if isinstance(e, Messages) and e.time == epoch]
        assert [log.batches[i] for i in at] == [message.batch_id]
    # DuckDB alone reads the log and its data
    found = captures.events(c.home / "cards")
    assert [(i, k, t) for i, k, t, _, _ in found][:2] == [(0, P, None), (1, M, 0)]
    files = duckdb.sql(
        f"SELECT unnest(files).path FROM read_json('{c.home / 'cards' / capture_log.LOG}') "
        "WHERE kind = 'messages' AND time = 2"
    ).fetchall()
    total = duckdb.sql(
        f"SELECT count(*) FROM read_parquet({[str(c.home / 'cards' / f) for (f,) in files]})"
    ).fetchall()
    assert total == [(len(oracle(c, 2)),)]


def test_a_source_worker_capture_holds_its_messages_and_capability(captured: Captured) -> None:
    c = captured
    assert captures.shapes(c.home / "worker2") == [
        (P, ()),
        (M, 0),
        (P, ((0, -1), (1, 1))),
        (M, 1),  # its first file at the held epoch, at once
        (M, 1),  # the late one
        (P, ((1, -1), (2, 1))),
        (M, 2),  # two files at epoch 2, each its own message
        (M, 2),
        (P, ((2, -1), (3, 1))),
    ]
    capture_log.read(c.home / "worker2", check_data=True)
    raw = Oracle(c.data.root).con
    for epoch in range(3):
        want = raw.execute(
            "SELECT * EXCLUDE (epoch, worker) FROM cards WHERE epoch = $e AND worker = 2",
            {"e": epoch},
        ).fetchall()
        assert captures.rows_at(c.home / "worker2", epoch) == sorted(want, key=repr)


def test_from_epoch_records_the_history_then_follows(captured: Captured) -> None:
    c = captured
    status = c.rt.capture("valid_cards", c.home / "history", from_epoch=1)
    assert captures.shapes(c.home / "history") == [
        (M, 1),
        (P, ((0, -1), (2, 1))),
        (M, 2),
        (P, ((2, -1), (3, 1))),
    ]
    assert (status.events, status.released, status.behind) == (4, 2, 0)
    assert status.rows == len(oracle(c, 1)) + len(oracle(c, 2))
    for epoch in (1, 2):
        assert captures.rows_at(c.home / "history", epoch) == oracle(c, epoch)
    with pytest.raises(CaptureError, match="already records stage 'valid_cards'"):
        c.rt.ledger.start_capture(
            "bank", "valid_cards", directory=str((c.home / "history").resolve()), stream="x"
        )
    with pytest.raises(Exception, match="exists already"):
        c.rt.capture("valid_cards", c.home / "history")


def test_a_revision_and_a_correction_are_revisions(captured: Captured) -> None:
    c = captured
    c.rt.revise("valid_cards", [0])
    assert captures.shapes(c.home / "cards")[-1] == ("revision", 0)
    assert captures.rows_at(c.home / "cards", 0) == oracle(c, 0)
    other = c.data.files("card_payments", 2, 0)[0]  # worker 2's epoch 0, re-delivered
    c.rt.input("card_payments", 2).correct(0, other)
    log = capture_log.read(c.home / "worker2", check_data=True)
    assert isinstance(log.events[-1], Revision)
    want = duckdb.sql(
        f"SELECT * FROM read_parquet('{other}', hive_partitioning = false)"
    ).fetchall()
    assert captures.rows_at(c.home / "worker2", 0) == sorted(want, key=repr)
    c.rt.run()  # re-runs what read the replaced data: valid_cards 0 again
    assert captures.shapes(c.home / "cards")[-1] == ("revision", 0)
    capture_log.read(c.home / "cards", check_data=True)


def test_a_sync_reads_only_the_streams_that_moved(captured: Captured, twin: Twin) -> None:
    """Sends to other sources, a held epoch and a late worker: many syncs find a stream
    that has not moved, and reading it in full would have added nothing (``twin``)."""
    assert twin.skipped > 0
    assert twin.read > 0


def test_status_and_stop(captured: Captured) -> None:
    c = captured
    by_dir = {Path(s.directory).name: s for s in c.rt.captures()}
    assert by_dir["cards"].stage == "valid_cards"
    assert by_dir["worker2"].worker == 2
    assert all(s.behind == 0 and not s.stopped and s.error is None for s in by_dir.values())
    stopped = c.rt.stop_capture(c.home / "worker2")
    assert stopped.stopped
    before = (c.home / "worker2" / capture_log.LOG).read_bytes()
    c.rt.input("card_payments", 2).close()
    assert (c.home / "worker2" / capture_log.LOG).read_bytes() == before
    assert c.rt.sync_captures() == 0


def test_a_capture_survives_sigkill_right_after_the_commit(
    tmp_path: Path, spark: SparkSession
) -> None:
    data = captures.inputs(tmp_path / "raw")
    rt = captures.runtime(tmp_path, spark)
    rt.capture("valid_cards", tmp_path / "cards")
    captures.send_epoch(rt, data, 0, hold=False)
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.fixtures.captures",
            str(tmp_path),
            "0",
            "--kill-after-commit",
        ],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL
    assert rt.ledger.committed("bank", run_key("valid_cards", 0)) is not None
    assert captures.shapes(tmp_path / "cards") == [(P, ())]  # committed, not appended
    assert [s.behind for s in rt.captures()] == [2]
    with (tmp_path / "cards" / capture_log.LOG).open("ab") as fh:
        fh.write(b'{"index": 1, "kind": "mess')  # and a writer killed mid-line
    assert rt.sync_captures() == 2
    assert captures.shapes(tmp_path / "cards") == [(P, ()), (M, 0), (P, ((0, -1), (1, 1)))]
    assert rt.sync_captures() == 0
    capture_log.read(tmp_path / "cards", check_data=True)


def test_a_history_cut_short_by_a_kill_inside_its_append_is_written_again_whole(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Started from epoch 0 once every epoch is done, a capture's first sync appends its whole
    history at once: each epoch's messages and a progress past it. Killed inside that append
    (the write torn in two, a first progress among the lines before the tear), it leaves those
    lines behind: they are no part of the log, and the next sync writes the history whole."""
    data = captures.inputs(tmp_path / "raw")
    rt = captures.runtime(tmp_path, spark)
    for epoch in range(captures.EPOCHS):
        captures.send_epoch(rt, data, epoch, hold=False)
        rt.run_stage("valid_cards", epoch)
    cards = tmp_path / "cards"
    child = subprocess.run(
        [sys.executable, "-m", "tests.fixtures.captures", str(tmp_path), "--capture", str(cards)],
        env={**os.environ, FAULT_ENV: f"{FaultPoint.CAPTURE_APPEND.value}:2"},  # 1: the header
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    left = (cards / capture_log.LOG).read_bytes().splitlines()[1:]
    kinds = [json.loads(line)["kind"] for line in left[:-1]]  # the last one torn
    assert kinds[:2] == [M, P], left  # the first epoch and its progress were written
    whole = [(M, 0), (P, ((0, -1), (1, 1))), (M, 1), (P, ((1, -1), (2, 1))), (M, 2)]
    assert rt.sync_captures() == 6
    assert captures.shapes(cards) == [*whole, (P, ((2, -1), (3, 1)))]
    for epoch in range(captures.EPOCHS):
        assert captures.rows_at(cards, epoch) == card_oracle(data, epoch)
    assert rt.sync_captures() == 0
    capture_log.read(cards, check_data=True)


def card_oracle(data: DemoData, epoch: int) -> list[tuple[object, ...]]:
    rows = Oracle(data.root).con.execute(CARD_SQL, {"e": epoch}).fetchall()
    return sorted(rows, key=repr)


def test_a_capture_started_right_after_a_run_records_the_epochs_after_it(
    tmp_path: Path, spark: SparkSession
) -> None:
    """The run that committed epoch 0 is the ledger's newest batch when the capture starts,
    from the stream's frontier (1): its history holds no epoch 0, and its next syncs pass that
    message over, recording epochs 1 and 2 as they commit."""
    data = captures.inputs(tmp_path / "raw")
    rt = captures.runtime(tmp_path, spark)
    captures.send_epoch(rt, data, 0, hold=False)
    rt.run_stage("valid_cards", 0)
    started = rt.capture("valid_cards", tmp_path / "cards")
    assert (started.from_epoch, started.events) == (1, 1)
    for epoch in (1, 2):
        captures.send_epoch(rt, data, epoch, hold=False)
        rt.run_stage("valid_cards", epoch)
    assert captures.shapes(tmp_path / "cards") == [
        (P, ((0, -1), (1, 1))),
        (M, 1),
        (P, ((1, -1), (2, 1))),
        (M, 2),
        (P, ((2, -1), (3, 1))),
    ]
    assert [s.behind for s in rt.captures()] == [0]
    for epoch in (1, 2):
        assert captures.rows_at(tmp_path / "cards", epoch) == card_oracle(data, epoch)


def test_a_capture_of_a_finished_stream_stays_whole_through_a_revision(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Started once every epoch is done (no frontier: it records no epoch), right after the run
    of the last one: that run's message, in the history's snapshot, stays out of the log when
    a revision commits after it (appending it would break the protocol: the log released it)."""
    data = captures.inputs(tmp_path / "raw")
    rt = captures.runtime(tmp_path, spark)
    for epoch in range(captures.EPOCHS):
        captures.send_epoch(rt, data, epoch, hold=False)
    close_sources(rt)
    for epoch in range(captures.EPOCHS):  # the last one the ledger's newest batch
        rt.run_stage("valid_cards", epoch)
    started = rt.capture("valid_cards", tmp_path / "cards")
    assert (started.from_epoch, started.done) == (None, True)
    rt.backfill("valid_cards", [captures.EPOCHS - 1])
    (now,) = rt.captures()
    assert (now.behind, now.error, now.events) == (0, None, 1)
    assert captures.shapes(tmp_path / "cards") == [(P, ((0, -1),))]


def test_a_capture_whose_first_sync_comes_late_starts_where_it_was_started(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started at the stream's frontier (1); its first sync lost (a process killed right after
    the start), written once epoch 1 has committed: the history holds epoch 1."""
    data = captures.inputs(tmp_path / "raw")
    rt = captures.runtime(tmp_path, spark)
    captures.send_epoch(rt, data, 0, hold=False)
    rt.run_stage("valid_cards", 0)
    with monkeypatch.context() as lost:  # every sync lost until epoch 1 has committed
        lost.setattr(capture, "appended", lambda *args, **kwargs: 0)
        assert rt.capture("valid_cards", tmp_path / "cards").from_epoch == 1
        captures.send_epoch(rt, data, 1, hold=False)
        rt.run_stage("valid_cards", 1)
    assert captures.shapes(tmp_path / "cards") == []
    assert rt.sync_captures() == 2
    assert captures.shapes(tmp_path / "cards") == [(M, 1), (P, ((0, -1), (2, 1)))]
    assert captures.rows_at(tmp_path / "cards", 1) == card_oracle(data, 1)


def test_a_run_killed_in_its_spark_job_leaves_no_event(tmp_path: Path, spark: SparkSession) -> None:
    rt = slow.runtime(tmp_path, spark)
    rt.capture("slow", tmp_path / "cap")
    rt.input("nums").send(spark.createDataFrame([(i,) for i in range(120)], slow.NUMS))
    rt.input("nums").close()
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.slow", str(tmp_path)],
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: child.poll() is not None or slow.writing(tmp_path), 120, "the write")
        assert child.poll() is None, "the run finished before it could be killed"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert rt.sync_captures() == 0
    assert captures.shapes(tmp_path / "cap") == [(P, ())]
    rt.run_stage("slow", 0)
    assert captures.shapes(tmp_path / "cap") == [(P, ()), (M, 0), (P, ((0, -1),))]
    assert captures.rows_at(tmp_path / "cap", 0) == sorted([(2 * i,) for i in range(120)], key=repr)
    assert rt.sync_captures() == 0


def test_capture_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--ledger", str(tmp_path / "l.duckdb"), "--data", str(tmp_path / "d"), "-p", "bank"]
    into = str(tmp_path / "w1")
    assert main(["capture", "start", "card_payments", "--into", into, "--worker", "1", *base]) == 0
    assert "capturing card_payments worker 1" in capsys.readouterr().out
    assert main(["advance", "card_payments", "2", "--worker", "1", *base]) == 0
    assert main(["capture", "status", "--json", *base]) == 0
    out = capsys.readouterr().out
    (found,) = json.loads(out[out.index("[") :])
    assert (found["events"], found["released"], found["behind"]) == (4, 1, 0)
    assert main(["capture", "stop", "card_payments", "--into", into, *base]) == 0
    assert main(["capture", "status", *base]) == 0
    assert "stopped" in capsys.readouterr().out.splitlines()[-1]
    assert main(["capture", "status", "card_payments", "--into", into, "--json", *base]) == 0
    out = capsys.readouterr().out
    assert len(json.loads(out[out.index("[") :])) == 1
    assert main(["capture", "status", "card_payments", "--into", str(tmp_path), *base]) == 0
    assert "has no capture" in capsys.readouterr().out
    assert captures.shapes(Path(into)) == [
        (P, ()),
        (M, 0),  # the advance sealed both epochs in one batch: their messages, one progress
        (M, 1),
        (P, ((0, -1), (2, 1))),
    ]
    assert main(["capture", "stop", "card_payments", "--into", str(tmp_path / "x"), *base]) == 1
    assert Ledger(tmp_path / "l.duckdb").verify().ok
