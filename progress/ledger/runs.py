"""Run records: that a run of ``(stage, time)`` started, how it ended, and whether it still runs."""

from __future__ import annotations

import os
import uuid

from progress.ledger.sessions import Session
from progress.run_status import RunStatus
from progress.timestamp import Time, time_to_columns


def start_run(s: Session, pipeline: str, stage: str, time: Time, attempt: str | None) -> str:
    """Record that a run of ``(stage, time)`` started, in the caller's transaction; its id."""
    run_id = uuid.uuid4().hex
    t0, t1 = time_to_columns(time)
    s.graph(pipeline).node(stage)
    s.con.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, now(), NULL, NULL, NULL)",
        [run_id, pipeline, stage, t0, t1, attempt, RunStatus.RUNNING.value, os.getpid()],
    )
    return run_id


def finish_run(
    s: Session, run_id: str, status: RunStatus, batch_id: int | None, error: str | None
) -> None:
    """Record how a run ended: ``SUCCEEDED``, ``DONE_ALREADY`` or ``FAILED``."""
    s.con.execute(
        "UPDATE runs SET status = ?, finished_at = now(), batch_id = ?, error = ? WHERE run_id = ?",
        [RunStatus(status).value, batch_id, error, run_id],
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
