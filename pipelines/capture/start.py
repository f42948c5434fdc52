"""Starting a capture of a stage's output stream (``Runtime.capture``): the checks that refuse
what cannot be recorded, the new log's header, and its first sync; and stopping one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.capture import log as capture_log
from pipelines.capture import sync as capture
from pipelines.capture.sync import CaptureStatus
from pipelines.run.inputs import source_worker
from progress.errors import CaptureError
from progress.ledger import Ledger

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from pipelines.stages.pipeline import Pipeline


def start_capture(
    pipeline: Pipeline,
    ledger: Ledger,
    schema_of: Callable[[str], StructType | None],
    stage: str,
    into: str | Path,
    *,
    from_epoch: int | None,
    worker: int | None,
) -> CaptureStatus:
    """Record ``stage``'s output into ``into`` (``schema_of`` gives a stage's columns, when
    known): see ``Runtime.capture``."""
    p = pipeline.name
    if worker is not None:
        source_worker(pipeline, stage, worker)
    else:
        pipeline.stage(stage)
    if from_epoch is not None and (type(from_epoch) is not int or from_epoch < 0):
        raise CaptureError(p, str(into), f"from_epoch {from_epoch!r} is not an epoch")
    if not pipeline.stage(stage).materialize:
        raise CaptureError(
            p,
            str(into),
            "it is a transform that is not materialized (materialize=False): its messages "
            "hold no data to record; nothing was recorded",
            stage=stage,
        )
    schema = schema_of(stage)
    if schema is None:
        raise CaptureError(
            p,
            str(into),
            "its columns are not known yet (no declared schema, no data); nothing was recorded",
            stage=stage,
        )
    directory = Path(into).resolve()
    header = capture_log.new_header(p, stage, worker=worker, schema=schema.json())
    with capture.new_log(directory, header):
        record = ledger.start_capture(
            p,
            stage,
            directory=str(directory),
            stream=header.stream,
            worker=worker,
            from_epoch=from_epoch,
        )
        capture.sync_locked(ledger, record, directory)
    return capture.status(ledger, record)


def stop_capture(ledger: Ledger, pipeline: str, into: str | Path) -> CaptureStatus:
    """Bring the capture into ``into`` up to the ledger one last time, then stop it: its
    directory stays as it is, a complete stream up to that point."""
    directory = Path(into).resolve()
    with capture_log.locked(directory):
        found = [c for c in ledger.captures(pipeline) if c.directory == str(directory)]
        if found and found[0].active:
            capture.sync_locked(ledger, found[0], directory)
        record = ledger.stop_capture(pipeline, str(directory))
    return capture.status(ledger, record)
