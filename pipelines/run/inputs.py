"""Source inputs: one worker's handle on a source, backed by the ledger and the data plane.

``send`` validates data against the source's schema (types by column name, no missing or extra
column, no null key) for the epoch the worker is at, read once (a file from a private copy
taken first: ``pipelines.run.snapshot``; one rewritten during the copy raises
``InputChangedError``), writes it to a fresh attempt directory and commits the message at that
epoch; any failure raises ``InputValidationError`` naming the pipeline, source, worker,
epoch, file and column, and nothing is committed. When
another process moved the worker in between, the ledger refuses the message
(``WorkerMovedError``) and the attempt directory is removed. ``advance_to`` seals every epoch
passed (an empty message where this worker sent nothing), so each stage runs each epoch once.
``correct`` replaces what the worker sent at an epoch it has reached, validated like ``send``:
a revision, whose stale outputs ``Runtime.run()`` re-runs.

The rules of moving are the input handle's (``progress.handles.InputHandle``), for every
caller: advancing to the epoch the worker is at does nothing, below it raises
``TimeRegressionError``; closing twice does nothing; sending or advancing after close raises
``ClosedHandleError``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from pipelines.errors import InputValidationError, NothingToCorrectError, first_line
from pipelines.run import expectations
from pipelines.run.expectations import ExpectationFailed
from pipelines.run.file_inputs import check_file
from pipelines.run.layout import sort_key, write_sorted
from pipelines.run.schema_check import check_columns
from pipelines.run.snapshot import snapshot
from pipelines.run.storage import DataStore, new_attempt
from pipelines.spark.footers import Footers, free_of_nulls
from pipelines.stages.expectations import Expectation
from pipelines.stages.kinds import DimensionStage, Feed, SourceStage
from progress import Graph, InputHandle, Time
from progress.ledger import CheckEntry, CommitResult, Ledger, MessageEntry
from progress.sentences import worker_problem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from pipelines.stages.pipeline import Pipeline


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
    @property
    def graph(self) -> Graph: ...


def check_frame(
    stage: str, epoch: Time, df: DataFrame, schema: StructType, *, file: str | None
) -> DataFrame:
    """Return ``df`` with the schema's columns in order, or raise naming what does not fit (its
    keys are checked once it is written: ``refuse_null_keys``)."""
    have = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    check_columns(stage, epoch, have, schema, file)
    return df.select(*schema.fieldNames())


def refuse_null_keys(
    stage: str,
    epoch: Time,
    df: DataFrame,
    key: tuple[str, ...],
    *,
    file: str | None,
    written: Sequence[Path] = (),
    footers: Footers | None = None,
) -> None:
    """Raise ``InputValidationError`` naming the key column when a row of ``df`` has a null
    key. The footers of ``written`` (every file ``df``'s rows were written to) answer without
    a Spark job when they say no key column holds a null (``pipelines.spark.footers``); else,
    or with nothing written, one ``limit(1)`` job over ``df`` looks."""
    if not key or (written and free_of_nulls(written, key, footers)):
        return
    from pyspark.sql import functions as F

    null = reduce(lambda a, b: a | b, [F.col(k).isNull() for k in key])
    found = df.where(null).select(*key).limit(1).collect()
    if found:
        column = next(k for k in key if found[0][k] is None)
        raise InputValidationError(stage, epoch, "null key", file=file, column=column)


def source_worker(pipeline: Pipeline, source: str, worker: int) -> SourceStage:
    """The source ``source`` of ``pipeline``; raises unless it is a source with a worker
    ``worker`` (a check of the definition alone: it reads no ledger)."""
    stage = pipeline.stage(source)
    if not isinstance(stage, SourceStage):
        raise InputValidationError(
            source, None, f"{source!r} is not a source of the pipeline", pipeline=pipeline.name
        )
    if stage.fed_by is Feed.REPLAY:
        raise InputValidationError(
            source,
            None,
            f"{source!r} is a replayed source: its captures feed it (Runtime.replay, "
            "epochgate replay), not its input handles",
            pipeline=pipeline.name,
        )
    problem = worker_problem(worker, stage.workers)
    if problem is not None:
        raise InputValidationError(source, None, problem, pipeline=pipeline.name)
    return stage


@dataclass
class Staged:
    """A message written and checked, to commit: its entry, its expectations' results, and
    its quarantine (path, rows, bytes) when a ``drop`` expectation removed rows."""

    message: MessageEntry
    checked: list[CheckEntry] = field(default_factory=list)
    quarantine: tuple[str, int, int] | None = None

    def remove(self) -> None:
        """Remove what was written (the commit did not take it)."""
        for path in (self.message.path, self.quarantine[0] if self.quarantine else None):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)


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

    def send(self, data: DataFrame | str | Path, *, advance_to: Time | None = None) -> CommitResult:
        """Validate, write and commit one message at this worker's current epoch; with
        ``advance_to``, then ``advance_to(advance_to)`` in the same commit (one durable write
        for a worker's last message of an epoch instead of two). Returns the send's commit."""
        rt = self.runtime
        p = rt.pipeline.name
        handle = self._handle()
        handle.send()  # a closed worker refuses it now, before any work
        if advance_to is not None:
            handle.check_advance(advance_to)  # and a move back
        staged = self._write(handle.time, data)
        message = staged.message

        # ``message`` was made for this call: its key was never committed.
        return self._commit(
            staged,
            lambda: rt.ledger.send(
                p, self.source, self.worker, message, fresh=True, advance_to=advance_to
            ),
        )

    def correct(self, epoch: Time, data: DataFrame | str | Path) -> CommitResult:
        """Replace this worker's messages at ``epoch``, an epoch it has reached (or any once
        closed), with ``data``, validated and written like ``send``: a revision. No frontier
        moves, the other workers' messages at ``epoch`` stay, and every output that read a
        replaced message becomes stale: ``Runtime.run()`` re-runs each once (a stateful stage
        from ``epoch`` on). An epoch the worker has not reached raises ``EpochNotReachedError``
        (``send`` data for the epoch it is at), and one it has passed where it has no message
        (it closed before it sent there) ``NothingToCorrectError``."""
        rt = self.runtime
        handle = self._handle()
        handle.correct(epoch)  # before any work; the ledger checks these again
        p = rt.pipeline.name
        if handle.has_passed(epoch) and not rt.ledger.worker_sent(
            p, self.source, self.worker, epoch, sealed=True
        ):
            current = None if handle.closed else handle.time
            raise NothingToCorrectError(self.source, self.worker, current, epoch, pipeline=p)
        if isinstance(self._stage, DimensionStage) and not rt.ledger.worker_sent(
            rt.pipeline.name, self.source, self.worker, epoch
        ):  # its readers there read an earlier table: they would not be found stale
            raise InputValidationError(
                self.source,
                epoch,
                "a dimension source's worker can correct only an epoch it sent a table at; "
                "correct that earlier epoch instead (not yet supported: adding a table at an "
                "epoch it sent none)",
                worker=self.worker,
                pipeline=rt.pipeline.name,
            )
        staged = self._write(epoch, data)
        message = staged.message
        return self._commit(
            staged,
            lambda: rt.ledger.correct(rt.pipeline.name, self.source, self.worker, message),
        )

    def advance_to(self, epoch: Time) -> CommitResult:
        """Declare every epoch before ``epoch`` complete for this worker (sealing empty ones).
        To the epoch it is at, nothing happens (``repeated`` when it advanced there before);
        below it raises ``TimeRegressionError``."""
        rt = self.runtime
        return rt.ledger.advance(rt.pipeline.name, self.source, self.worker, epoch, seal=True)

    def close(self) -> CommitResult:
        """Nothing more will come from this worker. Closing it again does nothing."""
        rt = self.runtime
        return rt.ledger.close(rt.pipeline.name, self.source, self.worker)

    def _handle(self) -> InputHandle:
        """This worker's input handle at the epoch it is at now, to check an action early."""
        rt = self.runtime
        return InputHandle.resume(
            rt.graph, self.source, self.worker, self.epoch, pipeline=rt.pipeline.name
        )

    def _commit(self, staged: Staged, commit: Callable[[], CommitResult]) -> CommitResult:
        """Commit the staged message, with its expectations' results and quarantine in the
        same transaction; when the ledger refuses it, remove what was written."""
        rt, message = self.runtime, staged.message
        checked = bool(staged.checked or staged.quarantine)
        try:
            with rt.ledger.atomic() if checked else nullcontext():
                result = commit()
                if checked and not result.repeated:
                    rt.ledger.record_checks(
                        rt.pipeline.name,
                        self.source,
                        message.time,
                        message.attempt,
                        staged.checked,
                        quarantine=staged.quarantine,
                    )
                return result
        except BaseException:
            staged.remove()
            raise

    def _write(self, epoch: Time, data: DataFrame | str | Path) -> Staged:
        """Validate ``data`` for ``epoch`` and write it to a fresh attempt directory."""
        try:
            return self._validated(epoch, data)
        except InputValidationError as err:
            raise err.of_worker(self.runtime.pipeline.name, self.worker) from err.__cause__

    def _validated(self, epoch: Time, data: DataFrame | str | Path) -> Staged:
        rt = self.runtime
        attempt = new_attempt()
        path = rt.store.attempt_dir(rt.pipeline.name, self.source, 0, epoch, attempt)
        if not isinstance(data, str | Path):
            return self._written(epoch, data, None, path, attempt)
        file = str(data)
        if not Path(file).exists():
            raise InputValidationError(self.source, epoch, "no such file", file=file)
        # Checked and committed from a private copy, so a file rewritten meanwhile is either
        # refused (InputChangedError) or committed exactly as checked, never torn.
        staged = path.with_name(f"{path.name}-in")  # an attempt's name: garbage if left
        try:
            copy = snapshot(self.source, epoch, Path(file), staged)
            stage = self._stage
            table = check_file(self.source, epoch, copy, stage.schema, stage.key, name=file)
            if table is not None and not self._expectations:
                return Staged(self._copy(copy, epoch, table, path, attempt, file=file))
            spark = rt.spark  # started here if need be: a Spark that cannot start is no bad file
            try:
                frame = spark.read.parquet(str(copy))  # absolute: for a remote driver too
            except Exception as err:
                msg = f"cannot read Parquet: {first_line(err)}"
                raise InputValidationError(self.source, epoch, msg, file=file) from err
            return self._written(epoch, frame, file, path, attempt)
        finally:
            shutil.rmtree(staged, ignore_errors=True)

    def _written(
        self, epoch: Time, data: DataFrame, file: str | None, path: Path, attempt: str
    ) -> Staged:
        """``data`` checked against the source's schema and written by Spark to ``path``. Its
        keys are checked once it is written (a null key removes what was written), or when an
        expectation failed (a null key is named first)."""
        rt = self.runtime
        key = self._stage.key
        try:
            frame = check_frame(self.source, epoch, data, self._stage.schema, file=file)
        except InputValidationError:
            raise
        except Exception as err:
            msg = f"cannot read the data: {first_line(err)}"
            raise InputValidationError(self.source, epoch, msg, file=file) from err
        try:
            written = expectations.write(frame, self._expectations, self._sort_key, path)
        except ExpectationFailed as err:
            refuse_null_keys(self.source, epoch, frame, key, file=file)
            raise InputValidationError(self.source, epoch, err.cause, file=file) from err
        except Exception as err:
            shutil.rmtree(path, ignore_errors=True)
            msg = f"cannot write the data: {first_line(err)}"
            raise InputValidationError(self.source, epoch, msg, file=file) from err
        files = [path] if written.quarantine is None else [path, written.quarantine]
        footers = Footers()  # the key check's footers count the rows too
        try:
            refuse_null_keys(
                self.source, epoch, frame, key, file=file, written=files, footers=footers
            )
        except BaseException:
            for made in files:
                shutil.rmtree(made, ignore_errors=True)
            raise
        rows, size = rt.store.stats(path, footers)
        staged = Staged(MessageEntry(self.source, 0, epoch, attempt, str(path), rows, size))
        staged.checked = written.checked
        if written.quarantine is not None:
            quarantined = rt.store.stats(written.quarantine, footers)
            staged.quarantine = (str(written.quarantine), *quarantined)
        return staged

    @property
    def _expectations(self) -> tuple[Expectation, ...]:
        return self.runtime.pipeline.expectations(self.source)

    @property
    def _sort_key(self) -> tuple[str, ...] | None:
        return sort_key(self.runtime.pipeline.stages, self.source)

    def _copy(
        self, copy: Path, epoch: Time, table: pa.Table, path: Path, attempt: str, *, file: str
    ) -> MessageEntry:
        """A checked private copy of a file, moved into the attempt directory ``path`` as it
        is (or its rows written sorted, for a partial stage that reads them:
        ``pipelines.run.layout``)."""
        rows = table.num_rows
        key = self._sort_key
        try:
            path.mkdir(parents=True)
            if key:
                write_sorted(table, key, path / "part-00000.parquet")
            else:
                os.replace(copy, path / "part-00000.parquet")
        except (OSError, pa.ArrowException) as err:
            shutil.rmtree(path, ignore_errors=True)
            msg = f"cannot copy the file: {err}"
            raise InputValidationError(self.source, epoch, msg, file=file) from err
        size = (path / "part-00000.parquet").stat().st_size
        return MessageEntry(self.source, 0, epoch, attempt, str(path), rows, size)
