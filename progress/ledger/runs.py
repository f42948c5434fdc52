"""Run records: that a run of ``(stage, time)`` started, how it ended, and whether it still runs."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from progress.ledger.sessions import Session
from progress.run_status import RunStatus
from progress.timestamp import Time, time_to_columns


@dataclass(frozen=True)
class RunStart:
    """What a run's record says of its start."""

    pipeline: str
    stage: str
    time: Time
    attempt: str | None


def new_run_id() -> str:
    return uuid.uuid4().hex


def start_run(s: Session, pipeline: str, stage: str, time: Time, attempt: str | None) -> str:
    """Record that a run of ``(stage, time)`` started, in the caller's transaction; its id."""
    run_id = new_run_id()
    _insert(s, run_id, RunStart(pipeline, stage, time, attempt), RunStatus.RUNNING)
    return run_id


def finish_run(
    s: Session,
    run_id: str,
    status: RunStatus,
    batch_id: int | None,
    error: str | None,
    *,
    start: RunStart | None = None,
) -> None:
    """Record how a run ended: ``SUCCEEDED``, ``DONE_ALREADY`` or ``FAILED``. With ``start``,
    its start was not recorded (it started and ends in the caller's transaction: no one could
    have seen it running): one row says both."""
    if start is not None:
        _insert(s, run_id, start, RunStatus(status), batch_id=batch_id, error=error)
        return
    s.con.execute(
        "UPDATE runs SET status = ?, finished_at = now(), batch_id = ?, error = ? WHERE run_id = ?",
        [RunStatus(status).value, batch_id, error, run_id],
    )


def _insert(
    s: Session,
    run_id: str,
    start: RunStart,
    status: RunStatus,
    *,
    batch_id: int | None = None,
    error: str | None = None,
) -> None:
    t0, t1 = time_to_columns(start.time)
    s.graph(start.pipeline).node(start.stage)
    finished = "NULL" if status is RunStatus.RUNNING else "now()"
    s.con.execute(
        f"INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, now(), {finished}, ?, ?)",
        [
            run_id,
            start.pipeline,
            start.stage,
            t0,
            t1,
            start.attempt,
            status.value,
            os.getpid(),
            batch_id,
            error,
        ],
    )


def alive(pid: int | None) -> bool:
    """Whether the process that recorded a run still exists (a killed run never finishes)."""
    if not pid:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
