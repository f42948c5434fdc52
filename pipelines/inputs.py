"""Source inputs: one worker's handle on a source, backed by the ledger and the data plane.

``send`` validates data against the source's schema (types by column name, no missing or extra
column, no null key), writes it to a fresh attempt directory and commits the message; any
failure raises ``InputValidationError`` naming the source, epoch, file and column, and nothing
is committed. ``advance_to`` seals every epoch passed (an empty message where this worker sent
nothing), so each stage runs each epoch once.
"""

from __future__ import annotations

import shutil
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pipelines.errors import InputValidationError, first_line
from pipelines.file_inputs import check_file
from pipelines.schema_check import check_columns
from pipelines.stages import SourceStage
from pipelines.storage import DataStore, new_attempt
from progress import ClosedHandleError, Time
from progress.ledger import CommitResult, Ledger, MessageEntry

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from pipelines.dataflow import Pipeline


class Bound(Protocol):
    """A pipeline bound to its ledger, data directory and Spark session (a ``Runtime``).
    ``spark`` may start a session when first read: a send reads it only for data that the
    pyarrow check cannot judge."""

    @property
    def pipeline(self) -> Pipeline: ...
    @property
    def ledger(self) -> Ledger: ...
    @property
    def spark(self) -> SparkSession: ...
    @property
    def store(self) -> DataStore: ...


def check_frame(
    stage: str,
    epoch: Time,
    df: DataFrame,
    schema: StructType,
    *,
    key: tuple[str, ...],
    file: str | None,
) -> DataFrame:
    """Return ``df`` with the schema's columns in order, or raise naming what does not fit."""
    from pyspark.sql import functions as F

    have = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    check_columns(stage, epoch, have, schema, file)
    if key:
        null = reduce(lambda a, b: a | b, [F.col(k).isNull() for k in key])
        found = df.where(null).select(*key).limit(1).collect()
        if found:
            column = next(k for k in key if found[0][k] is None)
            raise InputValidationError(stage, epoch, "null key", file=file, column=column)
    return df.select(*schema.fieldNames())


def source_worker(pipeline: Pipeline, source: str, worker: int) -> SourceStage:
    """The source ``source`` of ``pipeline``; raises unless it is a source with a worker
    ``worker`` (a check of the definition alone: it reads no ledger)."""
    stage = pipeline.stage(source)
    if not isinstance(stage, SourceStage):
        raise InputValidationError(source, "-", f"{source!r} is not a source of the pipeline")
    if not 0 <= worker < stage.workers:
        raise InputValidationError(source, "-", f"there is no worker {worker}")
    return stage


class SourceInput:
    """Worker ``worker`` of source ``source`` of a running pipeline."""

    def __init__(self, runtime: Bound, source: str, worker: int) -> None:
        self.runtime = runtime
        self.source = source
        self.worker = worker
        self._stage = source_worker(runtime.pipeline, source, worker)

    @property
    def epoch(self) -> Time | None:
        """The epoch this worker's next ``send`` goes to (``None`` once closed)."""
        rt = self.runtime
        return rt.ledger.worker_time(rt.pipeline.name, self.source, self.worker)

    def send(self, data: DataFrame | str | Path) -> CommitResult:
        """Validate, write and commit one message at this worker's current epoch."""
        rt = self.runtime
        epoch = self.epoch
        if epoch is None:
            raise ClosedHandleError(self.source, self.worker, "send")
        file = None
        if isinstance(data, str | Path):
            file = str(data)
            if not Path(file).exists():
                raise InputValidationError(self.source, epoch, "no such file", file=file)
            rows = check_file(self.source, epoch, Path(file), self._stage.schema, self._stage.key)
            if rows is not None:
                return self._commit_copy(Path(file), epoch, rows)
            spark = rt.spark  # started here if need be: a Spark that cannot start is no bad file
            try:
                data = spark.read.parquet(str(Path(file).resolve()))  # for a remote driver too
            except Exception as err:
                msg = f"cannot read Parquet: {first_line(err)}"
                raise InputValidationError(self.source, epoch, msg, file=file) from err
        try:
            frame = check_frame(
                self.source, epoch, data, self._stage.schema, key=self._stage.key, file=file
            )
        except InputValidationError:
            raise
        except Exception as err:
            msg = f"cannot read the data: {first_line(err)}"
            raise InputValidationError(self.source, epoch, msg, file=file) from err
        attempt = new_attempt()
        path = rt.store.attempt_dir(rt.pipeline.name, self.source, 0, epoch, attempt)
        try:
            frame.write.parquet(str(path))
        except Exception as err:
            shutil.rmtree(path, ignore_errors=True)
            msg = f"cannot write the data: {first_line(err)}"
            raise InputValidationError(self.source, epoch, msg, file=file) from err
        rows, size = rt.store.stats(path)
        message = MessageEntry(self.source, 0, epoch, attempt, str(path), rows, size)
        return rt.ledger.send(rt.pipeline.name, self.source, self.worker, message)

    def _commit_copy(self, file: Path, epoch: Time, rows: int) -> CommitResult:
        """Commit a checked file by copying its bytes into a fresh attempt directory."""
        rt = self.runtime
        attempt = new_attempt()
        path = rt.store.attempt_dir(rt.pipeline.name, self.source, 0, epoch, attempt)
        try:
            path.mkdir(parents=True)
            shutil.copyfile(file, path / "part-00000.parquet")
        except OSError as err:
            shutil.rmtree(path, ignore_errors=True)
            msg = f"cannot copy the file: {err}"
            raise InputValidationError(self.source, epoch, msg, file=str(file)) from err
        size = (path / "part-00000.parquet").stat().st_size
        message = MessageEntry(self.source, 0, epoch, attempt, str(path), rows, size)
        return rt.ledger.send(rt.pipeline.name, self.source, self.worker, message)

    def advance_to(self, epoch: Time) -> None:
        """Declare every epoch before ``epoch`` complete for this worker (sealing empty ones)."""
        rt = self.runtime
        rt.ledger.advance(rt.pipeline.name, self.source, self.worker, epoch, seal=True)

    def close(self) -> None:
        """Nothing more will come from this worker."""
        rt = self.runtime
        rt.ledger.close(rt.pipeline.name, self.source, self.worker)
