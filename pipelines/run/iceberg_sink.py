"""A sink that publishes each committed epoch to an Apache Iceberg table, one table commit per
epoch, through a pyiceberg catalog.

The table (``namespace.name`` in the sink's catalog, created on the first publish with its
namespace) has the stage's columns and an ``epoch`` column with an identity partition on it.
Publishing an epoch is one pyiceberg transaction that deletes the epoch's files and appends
the new ones, committed to the catalog at once, so a reader of the table's current snapshot sees
the epoch's previous rows or its new ones, never half and never both. The committed attempt's
Parquet files become the table's files as they are (hard links in the table's
``data/epoch=N`` folder, appended with ``epoch = N`` as their partition value: Iceberg readers
take an identity partition's column from the partition value when a file lacks it, and read
files without field ids by the table's name mapping); no row is read or written again. Files
with INT96 or nanosecond timestamps, and a table outside the local file system, are written
again instead (an overwrite filtered on ``epoch = N``, in microseconds).

The transaction's snapshots carry the pipeline, stage, epoch, attempt and the ledger batch that
committed the attempt in their summaries: a publish that finds the batch already in the
table's latest snapshot of the epoch does nothing, so a run killed after its table commit
and published again by ``Runtime.publish_sinks()`` commits nothing twice. A revision publishes
its new attempt the same way; the table's snapshots keep the old rows
(``table.scan(snapshot_id=...)``).

The table's columns are the stage's: a stage that gains columns adds them (a schema update by
name, in the same transaction); one that loses a column, or changes a column's type, fails the
sink's run before its commit, naming the columns.

A catalog's relative paths (a SQLite ``uri`` such as ``sqlite:///lake/catalog.db``, a
``warehouse`` such as ``lake/wh``) are under the runtime's home, as a sink's path is. Its name is
``name`` among its properties, else ``default`` (a SQL catalog keeps its tables under its name:
a reader loads it by the same one).
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import parser
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Record

from pipelines.errors import SinkPublishError, StageFailedError
from pipelines.run.published import Committed
from pipelines.run.table_columns import (
    UnfitError,
    added,
    columns_of,
    epoch_rows,
)
from pipelines.run.taken_files import Taken, as_they_are, footers, link
from pipelines.stages.sink_formats import EPOCH_COLUMN, SinkFormat
from progress import Time, faults
from progress.faults import FaultPoint

BATCH = "epochgate.batch"
"""The snapshot summary's key for the ledger batch that committed the published attempt."""
EPOCH = "epochgate.epoch"
PUBLISH = "epochgate.publish"
"""A token of one publish, the same in the snapshots of its transaction (its delete and its
append): an audit counts the publishes of an attempt by it."""
DEFAULT_CATALOG = "default"
"""The catalog's name unless its properties give one (``name``): a SQL catalog keeps its tables
under its name, so a reader loads the catalog by the same name."""


def resolved(catalog: Mapping[str, str], home: Path) -> dict[str, str]:
    """``catalog``'s properties with its relative paths under ``home``.

    >>> resolved({"type": "sql", "uri": "sqlite:///lake/c.db", "warehouse": "lake/wh"}, Path("/h"))
    {'type': 'sql', 'uri': 'sqlite:////h/lake/c.db', 'warehouse': 'file:///h/lake/wh'}
    """
    out = dict(catalog)
    uri = out.get("uri", "")
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        out["uri"] = f"sqlite:///{home / uri.removeprefix('sqlite:///')}"
    warehouse = out.get("warehouse", "")
    if warehouse and "://" not in warehouse:
        given = Path(warehouse).expanduser()
        out["warehouse"] = (given if given.is_absolute() else home / given).as_uri()
    return out


@dataclass(frozen=True)
class IcebergSink:
    """The Iceberg table ``table`` (``namespace.name``) of ``catalog`` that one sink publishes
    to; ``root`` is the runtime's home, its catalog's relative paths are under it."""

    pipeline: str
    stage: str
    root: Path
    table: str
    catalog: Mapping[str, str] = field(default_factory=dict)

    @property
    def format(self) -> SinkFormat:
        return SinkFormat.ICEBERG

    @property
    def location(self) -> str:
        return f"{self.table} ({self.catalog.get('type', 'catalog')} catalog)"

    def reader(self) -> str | None:
        """The table's own identity (its UUID), from the catalog: no secret of the catalog's
        is kept, and a table made anew is another place."""
        table = self.loaded()
        return None if table is None else f"iceberg:{table.metadata.table_uuid}"

    def _catalog(self) -> Catalog:
        """The catalog (a SQLite catalog's folder made first: SQLite makes only the file)."""
        props = resolved(self.catalog, self.root)
        uri = props.get("uri", "")
        if uri.startswith("sqlite:////"):
            Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return load_catalog(props.pop("name", DEFAULT_CATALOG), **props)

    def loaded(self) -> Table | None:
        """The table, or None before its first publish."""
        try:
            return self._catalog().load_table(self.table)
        except NoSuchTableError:
            return None

    def version(self) -> int | None:
        table = self.loaded()
        snapshot = table.current_snapshot() if table is not None else None
        return None if snapshot is None else snapshot.sequence_number

    def shown(self, committed: Sequence[Committed]) -> list[bool]:
        table = self.loaded()
        if table is None:  # nothing published yet; an epoch without rows needs no table
            return [c.files is None for c in committed]
        batches = _shown_batches(table)
        return [batches.get(str(c.epoch)) == str(c.batch_id) for c in committed]

    def check(self, committed: Committed) -> None:
        """Before the commit: the rows fit the table, else ``StageFailedError`` naming the
        columns."""
        table = self.loaded()
        try:
            columns_of(committed, _schema(table) if table is not None else None, "Iceberg")
        except UnfitError as err:
            reason = f"cannot publish to the Iceberg table {self.table}: {err.reason}"
            raise StageFailedError(self.stage, committed.epoch, reason) from None

    def publish(self, committed: Committed) -> None:
        """Replace the table's rows of ``committed.epoch`` with its files' rows, in one
        transaction that records it (see the module docs)."""
        table = self.loaded()
        shown = _shown_batches(table) if table is not None else {}
        if shown.get(str(committed.epoch)) == str(committed.batch_id):
            return
        epoch = committed.epoch
        have = _schema(table) if table is not None else None
        try:
            columns = columns_of(committed, have, "Iceberg")
        except UnfitError as err:
            raise SinkPublishError(
                self.pipeline, self.stage, epoch, Path(self.table), err.reason
            ) from None
        if columns is None:  # no table and no rows: nothing to replace
            return
        schema = _optional(_microseconds(columns))
        try:
            if table is None:
                table = self._create(schema)
            with table.transaction() as tx:
                if have is not None and added(have, columns):
                    with tx.update_schema() as update:
                        update.union_by_name(schema)
                folder = _local(tx.table_metadata.location)
                summary = self._summary(committed)
                found = footers(committed)
                if folder is not None and as_they_are(found, nanoseconds=False):
                    _take(table, tx, committed, found=found, folder=folder, summary=summary)
                else:
                    rows = epoch_rows(committed, columns)
                    with _deleting():
                        tx.overwrite(
                            rows.cast(_microseconds(rows.schema)),
                            overwrite_filter=_epoch_filter(epoch),
                            snapshot_properties=summary,
                        )
        except OSError as err:
            raise SinkPublishError(
                self.pipeline, self.stage, epoch, Path(self.table), str(err)
            ) from err
        faults.reach(FaultPoint.TABLE_COMMITTED)

    def _create(self, schema: pa.Schema) -> Table:
        """The table, with its namespace and an identity partition on ``epoch``."""
        catalog = self._catalog()
        namespace = self.table.rsplit(".", 1)[0]
        catalog.create_namespace_if_not_exists(namespace)
        table = catalog.create_table_if_not_exists(self.table, schema=schema)
        if not table.spec().fields:
            with table.update_spec() as spec:
                spec.add_identity(EPOCH_COLUMN)
        return catalog.load_table(self.table)

    def _summary(self, committed: Committed) -> dict[str, str]:
        return {
            "epochgate.pipeline": self.pipeline,
            "epochgate.stage": self.stage,
            EPOCH: str(committed.epoch),
            "epochgate.attempt": committed.attempt,
            BATCH: str(committed.batch_id),
            PUBLISH: uuid.uuid4().hex,
        }


def _shown_batches(table: Table) -> dict[str, str]:
    """Per epoch, the ledger batch of the table's latest snapshot that published it."""
    out: dict[str, str] = {}
    for snapshot in sorted(table.snapshots(), key=lambda s: s.sequence_number or 0):
        props = snapshot.summary.additional_properties if snapshot.summary else {}
        if EPOCH in props and BATCH in props:
            out[props[EPOCH]] = props[BATCH]
    return out


def _optional(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every column optional: a table's column may hold nulls in a later
    epoch even where this one's has none (Spark marks a literal's column not null)."""
    return pa.schema([f.with_nullable(True) for f in schema])


def _schema(table: Table) -> pa.Schema:
    return table.schema().as_arrow()


def _microseconds(schema: pa.Schema) -> pa.Schema:
    """Timestamps in microseconds (Iceberg's unit; Spark's values are microseconds)."""
    return pa.schema(
        pa.field(f.name, pa.timestamp("us", f.type.tz), f.nullable)
        if pa.types.is_timestamp(f.type) and f.type.unit == "ns"
        else f
        for f in schema
    )


def _epoch_filter(epoch: Time) -> str:
    return f"{EPOCH_COLUMN} = {epoch}"


@contextmanager
def _deleting() -> Iterator[None]:
    """Quiet pyiceberg's warning when an epoch's first publish has nothing to delete."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Delete operation did not match any records")
        yield


def _local(location: str) -> Path | None:
    """The folder of a table on the local file system, else None."""
    parsed = urlparse(location)
    return Path(parsed.path) if parsed.scheme in ("", "file") else None


def _take(
    table: Table,
    tx: Transaction,
    committed: Committed,
    *,
    found: dict[Path, pq.FileMetaData],
    folder: Path,
    summary: dict[str, str],
) -> None:
    """Replace the epoch's files with the attempt's, as they are, in one snapshot: hard links
    in the table's ``data/epoch=N`` folder, appended with the epoch as their partition value.
    No row is read or written."""
    epoch, metadata = committed.epoch, tx.table_metadata
    if metadata.name_mapping() is None:  # how readers find the columns of files without ids
        mapping = metadata.schema().name_mapping.model_dump_json()
        tx.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
        metadata = tx.table_metadata
    location = metadata.location.rstrip("/")
    files = [
        _data_file(metadata, taken, f"{location}/{taken.name}", epoch)
        for taken in link(committed, found, folder, f"data/{EPOCH_COLUMN}={epoch}")
    ]
    faults.reach(FaultPoint.TABLE_WRITTEN)
    replaced = parser.parse(_epoch_filter(epoch))
    old = [task.file for task in table.scan(row_filter=replaced).plan_files()]
    with tx.update_snapshot(snapshot_properties=summary).overwrite() as overwrite:
        overwrite.delete_by_predicate(replaced)
        for data_file in old:
            overwrite.delete_data_file(data_file)
        for data_file in files:
            overwrite.append_data_file(data_file)


def _data_file(metadata: TableMetadata, taken: Taken, uri: str, epoch: Time) -> DataFile:
    """The linked file ``taken`` as the table's data file ``uri`` in the partition ``epoch``,
    with its columns' statistics from its footer."""
    schema = metadata.schema()
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=taken.footer,
        stats_columns=compute_statistics_plan(schema, metadata.properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=uri,
        file_format=FileFormat.PARQUET,
        partition=Record(epoch),
        file_size_in_bytes=taken.path.stat().st_size,
        sort_order_id=None,
        spec_id=metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )
