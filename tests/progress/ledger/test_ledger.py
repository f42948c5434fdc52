"""The ledger in one process: registration, commits, queries, history, verify, schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from progress import Delay, GraphBuilder, Product, ProductSummary, Source, Target
from progress.errors import (
    ForeignLocationError,
    GraphChangeError,
    InvalidTimeError,
    LedgerLockTimeoutError,
    LedgerSchemaError,
    TimeRegressionError,
    UnregisteredPipelineError,
)
from progress.ledger import SCHEMA_VERSION, Ledger, MessageEntry, Origin, RunKind, scope_name
from progress.ledger.engine import AttachedFile
from progress.ledger.schema import MIGRATIONS
from progress.ledger.sessions import LEDGER_THREADS
from progress.spec import to_spec
from tests.progress.ledger.scenario import bank_graph, run_epoch

pytestmark = pytest.mark.ledger

REPO = Path(__file__).resolve().parents[3]


def test_register_is_idempotent_and_refuses_changes(ledger: Ledger) -> None:
    assert ledger.register("bank", bank_graph()) == "unchanged"
    assert ledger.pipelines() == ["bank"]
    b = GraphBuilder()
    b.add_node("card_payments", inputs=0, outputs=1, workers=4)
    b.add_node("validate", inputs=1, outputs=1, workers=0)
    b.add_edge(Source("card_payments"), Target("validate"))
    changed = b.compile()
    with pytest.raises(GraphChangeError) as err:
        ledger.register("bank", changed)
    assert "stage 'card_payments' changed: workers 3 -> 4" in err.value.differences
    assert "stage 'totals' was removed" in err.value.differences
    with pytest.raises(UnregisteredPipelineError) as unknown:
        ledger.graph("payroll")
    assert unknown.value.known == ("bank",)


def test_added_stage_starts_at_the_current_frontier(ledger: Ledger) -> None:
    run_epoch(ledger, 0)
    assert ledger.register("bank", bank_graph(extra_stage=True)) == "extended"
    tracker = ledger.tracker("bank")
    assert tracker.frontier(Target("audit")).elements == (1,)
    run_epoch(ledger, 1)
    assert ledger.tracker("bank").count(Target("audit"), 1) == 1


def test_added_stage_from_start_sees_every_past_message(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.duckdb")
    ledger.register("bank", bank_graph())
    for epoch in range(3):
        run_epoch(ledger, epoch)
    ledger.register("bank", bank_graph(extra_stage=True), from_start=True)
    tracker = ledger.tracker("bank")
    assert [tracker.count(Target("audit"), e) for e in range(3)] == [1, 1, 1]
    assert tracker.ready("audit", 0)
    assert ledger.verify().ok


def test_commit_is_atomic_idempotent_and_refuses_foreign_locations(ledger: Ledger) -> None:
    first = ledger.commit("bank", [(Target("validate"), 4, 1)], key="k1")
    again = ledger.commit("bank", [(Target("validate"), 4, 1)], key="k1")
    assert (again.batch_id, again.repeated, first.repeated) == (first.batch_id, True, False)
    assert ledger.tracker("bank").count(Target("validate"), 4) == 1
    before = ledger.verify().batches
    with pytest.raises(ForeignLocationError) as err:
        ledger.commit("bank", [(Target("validate"), 5, 1), (Target("ghost"), 5, 1)], key="k2")
    assert err.value.location == Target("ghost")
    assert err.value.key == "k2"
    with pytest.raises(InvalidTimeError):
        ledger.commit("bank", [(Target("validate"), -3, 1)], key="k3")
    assert ledger.verify().batches == before
    assert ledger.tracker("bank").count(Target("validate"), 5) == 0


def test_blockers_name_the_worker_that_holds_an_epoch(ledger: Ledger) -> None:
    for w in (0, 1):
        ledger.advance("bank", "card_payments", w, 8)
    ledger.advance("bank", "card_payments", 2, 7)
    holds = ledger.blockers("bank", "validate", 7)
    assert [h.text for h in holds] == ["source card_payments, worker 2, still holds epoch 7"]
    assert holds[0].workers == (2,)
    with pytest.raises(TimeRegressionError):
        ledger.advance("bank", "card_payments", 2, 3)
    assert ledger.worker_time("bank", "card_payments", 2) == 7
    ledger.close("bank", "card_payments", 2)
    assert ledger.worker_time("bank", "card_payments", 2) is None
    assert ledger.ready("bank", "validate", 7)


def test_status_and_history(ledger: Ledger) -> None:
    run_epoch(ledger, 0)
    for w in range(3):
        ledger.send("bank", "card_payments", w, MessageEntry("card_payments", 0, 1, f"m1.{w}"))
    ledger.advance("bank", "card_payments", 0, 2)
    run_id = ledger.start_run("bank", "validate", 1, attempt="x")
    status = {s.stage: s for s in ledger.status("bank")}
    assert status["validate"].done == (0,)
    assert status["validate"].running == (1,)
    assert status["totals"].done == (0,)
    assert status["totals"].frontier == (1,)
    ledger.finish_run(run_id, "failed", error="boom")
    status = {s.stage: s for s in ledger.status("bank")}
    assert status["validate"].waiting == (1,)
    assert [h.text for h in status["validate"].holds] == [
        "source card_payments, worker 1, still holds epoch 1",
        "source card_payments, worker 2, still holds epoch 1",
        "stage validate epoch 1 failed: boom",  # its last run, until one succeeds
    ]
    (failed,) = status["validate"].failed
    assert (failed.time, failed.text, failed.input_changed) == (
        1,
        "stage validate epoch 1 failed: boom",
        False,
    )
    history = ledger.history("bank", "validate", 1)
    assert [(r.status, r.error) for r in history.runs] == [("failed", "boom")]
    done = ledger.history("bank", "validate", 0)
    assert [b.key for b in done.batches] == ["run:validate:0"]
    assert [m.attempt for m in done.messages] == ["a:validate:0"]
    sent = ledger.history("bank", "card_payments", 1)
    assert len(sent.messages) == 3
    ledger.correct("bank", "card_payments", 0, MessageEntry("card_payments", 0, 1, "m1.0b"))
    (failed,) = {s.stage: s for s in ledger.status("bank")}["validate"].failed
    assert failed.input_changed  # a correction at its epoch, after the failed run


def test_a_replacing_message_supersedes_the_old_attempt(ledger: Ledger) -> None:
    ledger.commit("bank", [], key="a1", messages=[MessageEntry("validate", 0, 3, "a1", rows=1)])
    ledger.commit(
        "bank", [], key="a2", messages=[MessageEntry("validate", 0, 3, "a2", rows=2, replaces=True)]
    )
    assert [m.attempt for m in ledger.message("bank", "validate", 0, 3)] == ["a2"]
    assert [(m.attempt, m.current) for m in ledger.history("bank", "validate", 3).messages] == [
        ("a1", False),
        ("a2", True),
    ]


def test_closed_epochs_leave_no_counts(ledger: Ledger) -> None:
    with ledger.session():
        for epoch in range(30):
            run_epoch(ledger, epoch)
    ledger.compact()
    rows = duckdb_rows(ledger, "SELECT kind, node, t0, count FROM counts ORDER BY ALL")
    assert rows == [(0, "card_payments", 30, 3)]  # only the open capabilities


def duckdb_rows(ledger: Ledger, sql: str) -> list[tuple[object, ...]]:
    ledger.release()  # this process keeps it attached between sessions otherwise
    con = duckdb.connect(str(ledger.path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_verify_reports_a_tampered_count(ledger: Ledger) -> None:
    run_epoch(ledger, 0)
    assert ledger.verify().ok
    ledger.release()
    con = duckdb.connect(str(ledger.path))
    con.execute("INSERT INTO counts VALUES ('bank', 1, 'totals', 0, 5, -1, 2)")
    con.execute("DELETE FROM updates WHERE batch_id = (SELECT max(batch_id) FROM updates)")
    con.close()
    report = ledger.verify()
    assert not report.ok
    tampered = [d for d in report.differences if d.time == 5]
    assert [(d.location, d.from_log, d.in_counts) for d in tampered] == [(Target("totals"), 0, 2)]
    assert len(report.partial_batches) == 1
    assert report.lines()[-1] == "FAILED"


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.duckdb"
    Ledger(path, linger=0).pipelines()
    con = duckdb.connect(str(path))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    with pytest.raises(LedgerSchemaError) as err:
        Ledger(path).pipelines()
    assert (err.value.found, err.value.supported) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)


def test_migration_from_the_first_version_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(path))
    con.execute(MIGRATIONS[0])
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    spec = json.dumps(to_spec(bank_graph()))
    con.execute("INSERT INTO graphs VALUES ('bank', 'h1', ?, now())", [spec])
    con.execute("INSERT INTO capabilities VALUES ('bank', 'card_payments', 0, 0, -1)")
    con.execute(
        "INSERT INTO batches VALUES (1, 'bank', 'k', 'system', NULL, NULL, NULL, NULL, 1, now())"
    )
    con.execute("INSERT INTO updates VALUES (1, 'bank', 0, 'card_payments', 0, 0, -1, 1)")
    con.execute("INSERT INTO counts VALUES ('bank', 0, 'card_payments', 0, 0, -1, 1)")
    con.close()
    ledger = Ledger(path)
    assert ledger.verify().ok
    assert ledger.frontier("bank", Target("validate")).elements == (0,)
    run_id = ledger.start_run("bank", "validate", 0)  # the table version 2 added
    ledger.finish_run(run_id, "skipped")
    assert duckdb_rows(ledger, "SELECT key, value FROM meta ORDER BY key") == [
        ("counts_through", "1"),  # version 3: counts held every batch so far
        ("schema_version", str(SCHEMA_VERSION)),
    ]


def test_migration_from_version_4_records_the_run_kind_of_stage_batches(tmp_path: Path) -> None:
    path = tmp_path / "v4.duckdb"
    con = duckdb.connect(str(path))
    for script in MIGRATIONS[:4]:
        con.execute(script)
    con.execute("INSERT INTO meta VALUES ('schema_version', '4')")
    spec = json.dumps(to_spec(bank_graph()))
    con.execute("INSERT INTO graphs VALUES ('bank', 'h1', ?, now())", [spec])
    rows = [
        (1, "run:validate:0", "stage", "validate", 0),
        (2, "revise:validate:0:a2", "stage", "validate", 0),
        (3, "revise:validate:1:a3", "stage", "validate", 1),
        (4, "run:validate:2", "stage", "validate", 2),
        (5, "round:0:1", "stage", "step", 0),  # a round of an iterative scope: no run
        (6, "run:totals:0", "system", None, None),  # not a stage batch, whatever its key
    ]
    for _, key, origin, node, t0 in rows:  # batch ids 1 .. 6, from the sequence
        con.execute(
            "INSERT INTO batches "
            "VALUES (nextval('batch_ids'), 'bank', ?, ?, ?, NULL, ?, ?, 0, now())",
            [key, origin, node, t0, None if t0 is None else -1],
        )
    con.execute("UPDATE meta SET value = '6' WHERE key = 'counts_through'")
    con.close()
    ledger = Ledger(path)
    assert ledger.done_epochs("bank", "validate") == [0, 2]
    assert duckdb_rows(ledger, "SELECT batch_id, run_kind FROM batches ORDER BY 1") == [
        (1, "run"),
        (2, "revision"),
        (3, "revision"),
        (4, "run"),
        (5, None),
        (6, None),
    ]
    assert duckdb_rows(ledger, "SELECT index_name FROM duckdb_indexes() ORDER BY 1") == [
        ("batches_by_key",),
        ("batches_by_origin",),
    ]
    ledger.commit("bank", [], key="run:validate:3", origin=Origin.stage("validate", 3, RunKind.RUN))
    assert ledger.done_epochs("bank", "validate") == [0, 2, 3]
    assert ledger.verify().ok


def test_done_epochs_are_the_runs_not_the_revisions(ledger: Ledger) -> None:
    run_epoch(ledger, 0)
    for key, epoch, kind in [
        ("revise:validate:0:b", 0, RunKind.REVISION),
        ("revise:validate:1:c", 1, RunKind.REVISION),  # a revision alone makes no run
        ("step:validate:2", 2, None),  # a stage's batch that is no run of the pipeline
    ]:
        ledger.commit("bank", [], key=key, origin=Origin.stage("validate", epoch, kind))
    assert ledger.done_epochs("bank", "validate") == [0]
    assert duckdb_rows(
        ledger, "SELECT key, run_kind FROM batches WHERE node = 'validate' ORDER BY batch_id"
    ) == [
        ("run:validate:0", "run"),
        ("revise:validate:0:b", "revision"),
        ("revise:validate:1:c", "revision"),
        ("step:validate:2", None),
    ]


def test_a_lock_held_too_long_names_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "held.duckdb"
    Ledger(path).pipelines()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from progress.ledger import Ledger\n"
            # The point: it holds the lock (longer than the test needs) until it is killed.
            "with Ledger(sys.argv[1]).session():\n    print('held', flush=True); time.sleep(30)",
            str(path),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(LedgerLockTimeoutError) as err:
            Ledger(path, lock_timeout=0.5).pipelines()
        assert 0.5 <= time.monotonic() - started < 5
        assert err.value.holder_pid == holder.pid
        assert f"process {holder.pid}" in str(err.value)
    finally:
        holder.kill()
        holder.wait()
    assert Ledger(path, lock_timeout=5).pipelines() == []
    assert os.path.exists(str(path) + ".lock")


def test_sealing_announces_an_empty_message_for_each_silent_epoch(ledger: Ledger) -> None:
    ledger.send("bank", "card_payments", 0, MessageEntry("card_payments", 0, 0, "data0"))
    ledger.advance("bank", "card_payments", 0, 2)
    ledger.send("bank", "card_payments", 0, MessageEntry("card_payments", 0, 2, "data2"))
    ledger.advance("bank", "card_payments", 0, 5, seal=True)
    tracker = ledger.tracker("bank")
    # Epoch 0 and 2 had data; 3 and 4 were sealed empty; 1 was skipped without sealing.
    assert [tracker.count(Target("validate"), e) for e in range(6)] == [1, 0, 1, 1, 1, 0]
    (empty,) = ledger.message("bank", "card_payments", 0, 3)
    assert (empty.attempt, empty.path, empty.rows) == ("empty:card_payments:0:3", None, 0)
    assert ledger.worker_time("bank", "card_payments", 0) == 5
    with pytest.raises(TimeRegressionError):
        ledger.advance("bank", "card_payments", 0, 4, seal=True)
    assert ledger.verify().ok


def test_atomic_commits_of_a_pipeline_and_its_scope_land_together(ledger: Ledger) -> None:
    scope = scope_name("bank", "totals")
    b = GraphBuilder(Product(0, 0))
    b.add_node(
        "step",
        inputs=1,
        outputs=1,
        workers=0,
        summaries={(0, 0): [ProductSummary(Delay(0), Delay(1))]},
    )
    b.add_edge(Source("step"), Target("step"))
    ledger.register(scope, b.compile())
    assert ledger.pipelines() == ["bank"]
    ledger.commit(scope, [(Target("step"), Product(0, 0), 1)], key="round:0:0")

    def both() -> None:
        with ledger.atomic():
            ledger.commit(scope, [(Target("step"), Product(0, 0), -1)], key="leave:0")
            ledger.commit("bank", [(Target("nowhere"), 0, 1)], key="run:nowhere:0")

    with pytest.raises(ForeignLocationError):
        both()
    assert ledger.committed(scope, "leave:0") is None  # rolled back with the refused commit
    assert ledger.tracker(scope).count(Target("step"), Product(0, 0)) == 1
    assert {s.stage: s.rounds for s in ledger.status("bank")}["totals"] == (Product(0, 0),)

    with ledger.atomic():
        ledger.commit(scope, [(Target("step"), Product(0, 0), -1)], key="leave:0")
        ledger.commit("bank", [], key="run:totals:0")
    assert ledger.committed(scope, "leave:0") is not None
    assert ledger.committed("bank", "run:totals:0") is not None
    assert {s.stage: s.rounds for s in ledger.status("bank")}["totals"] == ()
    assert ledger.verify().ok


def test_the_ledgers_queries_run_on_one_thread_and_other_files_on_duckdbs_default(
    ledger: Ledger, tmp_path: Path
) -> None:
    with ledger._sessions.session() as s:
        assert s.rows("SELECT current_setting('threads')") == [(LEDGER_THREADS,)]
    assert LEDGER_THREADS == 1
    default = duckdb.connect().execute("SELECT current_setting('threads')").fetchone()
    with AttachedFile(tmp_path / "other.duckdb", 60).open() as con:
        assert con.execute("SELECT current_setting('threads')").fetchone() == default
