"""A sink that publishes each committed epoch to a Delta Lake table, one table commit per epoch.

The table has the stage's columns and an ``epoch`` column it is partitioned by. Publishing an
epoch replaces that epoch's rows in one Delta commit: a reader of the table sees the epoch's
previous rows or its new ones, never half and never both. The committed attempt's Parquet
files become the table's files as they are (hard links in its ``epoch=N`` folder: the epoch is
a partition value, not a column of the files), one add action each, with the epoch's earlier
files removed in the same commit; no row is read or written again. Files with INT96
timestamps (Spark's legacy encoding, which Delta's readers need not read), and the epoch of a
table that gains columns, are written again instead, as an overwrite with the predicate
``epoch = N``. Every commit carries the pipeline, stage, epoch and attempt in its commit info
(``DeltaTable.history()``) and an application transaction per epoch (``epochgate/PIPELINE/
STAGE/epoch=N``) whose version is the ledger batch that committed the attempt: a publish that
finds that version already in the table does nothing, so a run killed after its table commit
and published again by ``Runtime.publish_sinks()`` commits nothing twice. A revision publishes
its new attempt the same way; the table's history keeps the old rows
(``DeltaTable(path, version=N)``).

The table's columns are the stage's: a stage that gains columns (a code change and a backfill)
adds them to the table (Delta's schema merge; older epochs read them as null); one that loses a
column, or changes a column's type, is refused naming the columns: the sink's run fails before
its commit (``check``), and nothing is committed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Schema, Transaction, write_deltalake
from deltalake.exceptions import TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

from pipelines.errors import SinkPublishError, StageFailedError
from pipelines.run.published import Committed, SinkPlace
from pipelines.run.table_columns import (
    UnfitError,
    added,
    columns_of,
    epoch_rows,
)
from pipelines.run.taken_files import as_they_are, footers, link
from pipelines.stages.sink_formats import EPOCH_COLUMN, SinkFormat
from progress import Time, faults
from progress.faults import FaultPoint


@dataclass(frozen=True)
class DeltaSink(SinkPlace):
    """The Delta table at ``root`` that one sink publishes to."""

    def app_id(self, epoch: Time) -> str:
        """The application transaction that records which batch the table shows for ``epoch``."""
        return f"epochgate/{self.pipeline}/{self.stage}/epoch={epoch}"

    def table(self) -> DeltaTable | None:
        """The table, or None before its first commit."""
        try:
            return DeltaTable(str(self.root))
        except TableNotFoundError:
            return None

    @property
    def format(self) -> SinkFormat:
        return SinkFormat.DELTA

    def reader(self) -> str | None:
        """The table's own identity (its metadata id): a table made anew is another place."""
        table = self.table()
        return None if table is None else f"delta:{table.metadata().id}"

    def version(self) -> int | None:
        table = self.table()
        return None if table is None else table.version()

    def shown(self, committed: Sequence[Committed]) -> list[bool]:
        table = self.table()
        if table is None:  # nothing published yet; an epoch without rows needs no table
            return [c.files is None for c in committed]
        return [self._shows(table, c) for c in committed]

    def _shows(self, table: DeltaTable, committed: Committed) -> bool:
        return table.transaction_version(self.app_id(committed.epoch)) == committed.batch_id

    def check(self, committed: Committed) -> None:
        """Before the commit: the rows fit the table (see the module docs), else
        ``StageFailedError`` naming the columns."""
        try:
            self._columns(committed, self.table())
        except UnfitError as err:
            reason = f"cannot publish to the Delta table at {self.root}: {err.reason}"
            raise StageFailedError(self.stage, committed.epoch, reason) from None

    def publish(self, committed: Committed) -> None:
        """Replace the table's rows of ``committed.epoch`` with its files' rows, in one commit
        that records it (see the module docs)."""
        table = self.table()
        if table is not None and self._shows(table, committed):
            return
        epoch = committed.epoch
        try:
            columns = self._columns(committed, table)
        except UnfitError as err:
            raise SinkPublishError(
                self.pipeline, self.stage, epoch, self.root, err.reason
            ) from None
        if columns is None:  # no table and no rows: nothing to replace
            return
        props = CommitProperties(
            custom_metadata={
                "epochgate.pipeline": self.pipeline,
                "epochgate.stage": self.stage,
                "epochgate.epoch": str(epoch),
                "epochgate.attempt": committed.attempt,
            },
            app_transactions=[Transaction(self.app_id(epoch), committed.batch_id)],
        )
        grows = table is not None and added(self._schema(table), columns)
        found = footers(committed)
        try:
            if grows or not as_they_are(found):
                self._rewrite(committed, columns, props, merge=grows)
            else:
                self._take(committed, found, table, columns, props)
        except OSError as err:
            raise SinkPublishError(self.pipeline, self.stage, epoch, self.root, str(err)) from err
        faults.reach(FaultPoint.TABLE_COMMITTED)

    def _take(
        self,
        committed: Committed,
        found: dict[Path, pq.FileMetaData],
        table: DeltaTable | None,
        columns: pa.Schema,
        props: CommitProperties,
    ) -> None:
        """Commit the attempt's files as they are: hard links in the epoch's folder of the
        table (the epoch is a partition value, not a column of the files), one add action
        each, replacing the epoch's files in the same commit. No row is read or written."""
        epoch = committed.epoch
        adds: list[AddAction] = []
        for taken in link(committed, found, self.root, f"{EPOCH_COLUMN}={epoch}"):
            stat = taken.path.stat()
            adds.append(
                AddAction(
                    taken.name,
                    stat.st_size,
                    {EPOCH_COLUMN: str(epoch)},
                    stat.st_mtime_ns // 1_000_000,
                    True,
                    json.dumps({"numRecords": taken.footer.num_rows}),
                )
            )
        faults.reach(FaultPoint.TABLE_WRITTEN)
        schema = Schema.from_arrow(columns)
        if table is None:
            create_table_with_add_actions(
                str(self.root),
                schema,
                adds,
                mode="append",
                partition_by=[EPOCH_COLUMN],
                commit_properties=props,
            )
            return
        table.create_write_transaction(
            list[AddAction | RemoveAction](adds),
            mode="overwrite",
            schema=schema,
            partition_by=[EPOCH_COLUMN],
            partition_filters=[(EPOCH_COLUMN, "=", str(epoch))],
            commit_properties=props,
        )

    def _rewrite(
        self, committed: Committed, columns: pa.Schema, props: CommitProperties, *, merge: bool
    ) -> None:
        """Write the epoch's rows again as a predicate overwrite (a table gaining columns, or
        files whose encoding the table does not take as they are)."""
        epoch = committed.epoch
        rows = epoch_rows(committed, columns)
        write_deltalake(
            str(self.root),
            rows,
            mode="overwrite",
            predicate=f"{EPOCH_COLUMN} = {epoch}",
            partition_by=[EPOCH_COLUMN],
            schema_mode="merge" if merge else None,
            commit_properties=props,
        )

    def _columns(self, committed: Committed, table: DeltaTable | None) -> pa.Schema | None:
        have = self._schema(table) if table is not None else None
        return columns_of(committed, have, "Delta")

    @staticmethod
    def _schema(table: DeltaTable) -> pa.Schema:
        return pa.schema(table.schema().to_arrow())
