"""Reads of a stage's output by epoch: ``read`` and ``subscribe`` of a runtime.

An epoch is read as a stage reading the output then sees it (all current messages at the epoch;
a dimension source's table as of it; a stage that is not materialized computed as its readers
compute it), once it is final (``pipelines.reads.final``) unless asked for what is committed
now. The rows an expectation dropped from an epoch are read with ``quarantine=True``
(``pipelines.run.expectations``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING

from pipelines.errors import PipelineError
from pipelines.reads import arrow_rows, final
from pipelines.reads.subscription import Completed, follow
from pipelines.run.ephemeral import derivation
from pipelines.run.epochs import stage_epoch
from pipelines.run.executor import Executor
from pipelines.run.kinds import messages_read
from pipelines.spark.empty import empty_frame
from pipelines.spark.footers import spark_schema
from progress import Time
from progress.ledger import Ledger

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from pipelines.stages.pipeline import Pipeline


class OutputReads:
    """``read`` and ``subscribe`` for one pipeline bound to its ledger (see the module docs)."""

    def __init__(
        self,
        pipeline: Pipeline,
        ledger: Ledger,
        executor: Executor,
        above: Mapping[str, frozenset[str]],
    ) -> None:
        self.pipeline = pipeline
        self.ledger = ledger
        self.executor = executor
        self.finality = final.Finality(pipeline.stages, above, ledger, pipeline.name)

    @property
    def spark(self) -> SparkSession:
        return self.executor.spark

    def read(
        self,
        stage: str,
        epoch: Time,
        *,
        complete: bool = True,
        wait: float | bool = False,
        quarantine: bool = False,
    ) -> DataFrame:
        self._admit(stage, epoch, complete=complete, wait=wait)
        if quarantine:
            return self.quarantined(stage, epoch)
        return self.committed(stage, epoch)

    def arrow(
        self,
        stage: str,
        epoch: Time,
        *,
        complete: bool = True,
        wait: float | bool = False,
        quarantine: bool = False,
    ) -> pa.Table:
        """``read``'s rows as an Arrow table, read by pyarrow where its files allow
        (``pipelines.reads.arrow_rows``), else through Spark."""
        self._admit(stage, epoch, complete=complete, wait=wait)
        if quarantine:
            paths = self._quarantine_paths(stage, epoch)
        elif derivation(self.pipeline.stages, stage).build is not None:
            return arrow_rows.from_frame(self.committed(stage, epoch))
        else:
            paths = self._message_paths(stage, epoch)
        known = self._columns(stage, paths)
        read = None if known is None else arrow_rows.table(paths, known)
        if read is not None:
            return read
        return arrow_rows.from_frame(self._frame(stage, epoch, paths))

    def _admit(self, stage: str, epoch: Time, *, complete: bool, wait: float | bool) -> None:
        """Refuse an unknown stage or a bad epoch before any path is named; wait for the epoch
        to be final when ``complete``."""
        self.pipeline.stage(stage)
        stage_epoch(stage, epoch)
        if complete:
            self.finality.wait(stage, epoch, final.wait_seconds(wait))

    def subscribe(
        self, stage: str, *, from_epoch: int = 0, poll: float = 1.0, timeout: float | None = None
    ) -> Iterator[Completed]:
        self._admit(stage, from_epoch, complete=False, wait=False)
        read = partial(self.committed, stage)
        return follow(self.finality, stage, read, from_epoch=from_epoch, poll=poll, timeout=timeout)

    def committed(self, stage: str, epoch: Time) -> DataFrame:
        """What is committed of ``stage``'s output at ``epoch`` now, final or not."""
        found = derivation(self.pipeline.stages, stage)
        if found.build is not None:  # not materialized: computed as its readers compute it
            if not messages_read(self.pipeline, self.ledger, stage, epoch):
                raise PipelineError(f"stage {stage!r} has no message at epoch {epoch}")
            frames = [self.committed(b, epoch) for b in found.bases]
            return found.apply(frames, [None] * len(frames), epoch)  # columns: not known
        return self._frame(stage, epoch, self._message_paths(stage, epoch))

    def quarantined(self, stage: str, epoch: Time) -> DataFrame:
        """The rows the ``drop`` expectations of ``stage`` removed from its current output at
        ``epoch`` (an empty frame with its columns when none were)."""
        return self._frame(stage, epoch, self._quarantine_paths(stage, epoch))

    def _message_paths(self, stage: str, epoch: Time) -> list[str]:
        """The data of the messages a reader of materialized ``stage`` reads at ``epoch``."""
        messages = messages_read(self.pipeline, self.ledger, stage, epoch)
        return [m.path for m in messages if m.path]

    def _quarantine_paths(self, stage: str, epoch: Time) -> list[str]:
        messages = self.ledger.message(self.pipeline.name, stage, 0, epoch)
        attempts = [m.attempt for m in messages]
        return [q.path for q in self.ledger.quarantine(self.pipeline.name, stage, attempts)]

    def _columns(self, stage: str, paths: list[str]) -> StructType | None:
        """The columns a read of ``paths`` of ``stage`` has: declared, else those in the files'
        footers, else (no file) the stage's latest or planned ones; None when none is known."""
        if not paths:
            return self.executor.schema_of(stage)  # its declared columns first
        return self.pipeline.stage(stage).schema or spark_schema(paths)

    def _frame(self, stage: str, epoch: Time, paths: list[str]) -> DataFrame:
        schema = self._columns(stage, paths)
        if paths:
            reader = self.spark.read if schema is None else self.spark.read.schema(schema)
            return reader.parquet(*paths)
        if schema is None:
            raise PipelineError(
                f"stage {stage!r} has no data at epoch {epoch}, and no message with data to "
                "take its columns from"
            )
        return empty_frame(self.spark, schema)
