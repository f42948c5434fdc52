"""Expectation results and quarantined rows: what a stage's checks found in each attempt.

A run (or a source's send) that checks expectations records one result per expectation with
the attempt it checked: in the transaction that commits the attempt, or, when a ``fail``
expectation stopped it, with the run's failure. The rows a ``drop`` expectation removed from a
committed attempt are kept in a directory of their own, the attempt's quarantine, recorded in
the same transaction. A killed run records neither.
"""

from __future__ import annotations

from collections.abc import Sequence

from progress.ledger.records import CheckEntry, CheckRecord, QuarantineRecord
from progress.ledger.sessions import Session
from progress.timestamp import Time, time_from_columns, time_to_columns

_CHECK_COLUMNS = (
    "stage, t0, t1, attempt, run_id, expectation, action, rows_checked, rows_failing, "
    "committed, recorded_at"
)


def record(
    s: Session,
    pipeline: str,
    stage: str,
    time: Time,
    checks: Sequence[CheckEntry],
    *,
    attempt: str,
    run_id: str | None,
    committed: bool,
    quarantine: tuple[str, int, int] | None = None,
) -> None:
    """Record the results of ``checks`` on ``attempt`` of ``stage`` at ``time`` (and where
    its quarantined rows are: path, rows, bytes), in the caller's transaction."""
    s.graph(pipeline).node(stage)
    t0, t1 = time_to_columns(time)
    for c in checks:
        s.con.execute(
            "INSERT INTO checks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now())",
            [
                pipeline,
                stage,
                t0,
                t1,
                attempt,
                run_id,
                c.expectation,
                c.action,
                c.rows_checked,
                c.rows_failing,
                committed,
            ],
        )
    if quarantine is not None:
        path, rows, size = quarantine
        s.con.execute(
            "INSERT INTO quarantine VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [pipeline, stage, t0, t1, attempt, path, rows, size],
        )


def results(
    s: Session, pipeline: str, stage: str | None = None, time: Time | None = None
) -> list[CheckRecord]:
    """Every recorded result of ``pipeline`` (of one stage, at one time, when given), in the
    order they were recorded."""
    sql = f"SELECT {_CHECK_COLUMNS} FROM checks WHERE pipeline = ?"
    params: list[object] = [pipeline]
    if stage is not None:
        sql += " AND stage = ?"
        params.append(stage)
    if time is not None:
        sql += " AND t0 = ? AND t1 = ?"
        params.extend(time_to_columns(time))
    rows = s.rows(sql + " ORDER BY recorded_at, stage, t0, t1, expectation", params)
    return [
        CheckRecord(r[0], time_from_columns(r[1], r[2]), r[3], r[4], r[5], r[6], *r[7:])
        for r in rows
    ]


def quarantined(
    s: Session, pipeline: str, stage: str, attempts: Sequence[str]
) -> list[QuarantineRecord]:
    """The quarantine of each of ``attempts`` of ``stage`` that has one."""
    if not attempts:
        return []
    marks = ", ".join("?" for _ in attempts)
    rows = s.rows(
        "SELECT stage, t0, t1, attempt, path, rows, bytes FROM quarantine "
        f"WHERE pipeline = ? AND stage = ? AND attempt IN ({marks}) ORDER BY attempt",
        [pipeline, stage, *attempts],
    )
    return [QuarantineRecord(r[0], time_from_columns(r[1], r[2]), *r[3:]) for r in rows]


def live_quarantine(s: Session, pipeline: str) -> list[str]:
    """The quarantine directories of current messages (garbage collection keeps them)."""
    rows = s.rows(
        "SELECT q.path FROM quarantine q JOIN messages m ON m.pipeline = q.pipeline "
        "AND m.stage = q.stage AND m.attempt = q.attempt AND m.current "
        "WHERE q.pipeline = ?",
        [pipeline],
    )
    return [r[0] for r in rows]
