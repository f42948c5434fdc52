"""Upqueries: filling the holes of a partial stage from its committed input.

A fill of keys K at a partial stage S reads the rows of K in S's input messages at every epoch
up to S's last processed one (one read, batched across keys), which the stage's kind turns, in
Spark, into its output history for K (``KeyedStage.rederive``: one pass for an aggregate, one
small job per epoch for a stateful fold). That history becomes K's state, epoch by epoch, and K
becomes present, in one state-store transaction: the response is a snapshot of every input
message up to that epoch and none later (invariant 5c).

Below another partial stage U, S's input for K was never written (U dropped K's rows while K was
a hole there), so the fill recurses: U re-derives its output history for K from its own input
first, fills its holes among K (a key present below is present above, invariant 5d), and S
re-derives from that. The caller holds the family's right to change state (``Runtime.exclusive``)
so no epoch run, fill or eviction of the family interleaves; and a stage of the chain that is
behind the one above it first runs the epochs it is behind, so the chain is filled as of one
epoch.

The scan reads little of each file: the messages it reads are sorted by the key in small row
groups (``pipelines.run.layout``), and the files, which the ledger names, are listed without a Spark
job. For a few keys the driver reads the row groups that can hold them with pyarrow
(``pipelines.reads.key_scan``): a Spark scan paid its fixed cost for every file, so an upquery of
one key grew with the epochs of history (1,000,000 keys, 200,000 rows per epoch: 0.57 s at 25
epochs, 1.0-1.1 s at 50). Past the driver's budget (many keys, files not sorted by the key, column
types the driver does not read), one Spark scan reads every file, with the key filter pushed into
the Parquet reader as values (``scan_settings``), each row's epoch read from its file's path."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import reduce
from operator import and_, or_
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.errors import StageNotReadyError, StateReadError
from pipelines.reads import key_scan
from pipelines.run.kinds import run_of
from pipelines.spark.empty import empty_frame
from pipelines.spark.engine import engine_of
from pipelines.spark.footers import Footers
from pipelines.stages.families import chain
from pipelines.stages.kinds import KeyedStage
from progress import Target, faults
from progress.faults import FaultPoint
from state_store import Key, PartialKeys

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from pipelines.results import RunResult
    from pipelines.run.executor import Executor
    from pipelines.run.storage import DataStore
    from pipelines.stages.pipeline import Pipeline
    from progress import Time
    from progress.ledger import Ledger
    from state_store import KeyedState

EPOCH = "_epoch"
"""The column that tags each row of a history with its epoch."""
PATH_EPOCH = r"/epoch=(\d+)/attempt="
"""The epoch of a message's file, in its path (``pipelines.run.storage``)."""


def _path_epoch(path: str) -> int | None:
    found = re.search(PATH_EPOCH, path.rstrip("/") + "/attempt=")
    return int(found.group(1)) if found else None


IN_FILTER_KEYS = 1_000
"""Up to this many keys, an upquery's key filter reaches the Parquet reader as values (Spark
pushes more, and by default more than 10, as one min-max range, which skips less)."""


def scan_settings_for(keys: int) -> dict[str, str]:
    """Spark settings of an upquery's scan of ``keys`` keys: the key filter pushed into the
    Parquet reader as values, so each file's row-group statistics skip all but the row groups
    that can hold the keys (``pipelines.run.layout`` sorts the messages for that); and the files,
    which the ledger names, listed on the driver (past 32 paths Spark lists them with a job of
    its own)."""
    return {
        "spark.sql.parquet.pushdown.inFilterThreshold": str(min(max(keys, 10), IN_FILTER_KEYS)),
        "spark.sql.sources.parallelPartitionDiscovery.threshold": str(1 << 30),
    }


@contextmanager
def scan_settings(spark: SparkSession, keys: int) -> Iterator[None]:
    """``scan_settings_for(keys)`` while an upquery runs, set back as they were after it."""
    wanted = scan_settings_for(keys)
    before = {name: spark.conf.get(name, None) for name in wanted}
    for name, value in wanted.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name, old in before.items():
            if old is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, old)


def key_filter(key: Sequence[str], keys: Sequence[Key]) -> Column:
    """Rows of any of ``keys`` (one ``isin`` for a one-column key: pushed into the scan)."""
    from pyspark.sql import functions as F

    if len(key) == 1:
        wanted: Column = F.col(key[0]).isin([k[0] for k in keys])
        return wanted
    each: list[Column] = [
        reduce(and_, (F.col(c) == v for c, v in zip(key, k, strict=True))) for k in keys
    ]
    return reduce(or_, each)


class Host(Protocol):
    """What fills and reads of keyed state use of the runtime they serve."""

    pipeline: Pipeline
    ledger: Ledger
    state: KeyedState
    store: DataStore
    executor: Executor

    @property
    def spark(self) -> SparkSession: ...

    def run_stage(self, stage_name: str, epoch: Time) -> RunResult: ...

    def exclusive(self, stage_name: str) -> AbstractContextManager[None]: ...

    def blockers(self, stage_name: str, epoch: Time) -> list[str]: ...


class Upquery:
    """Fills holes of the partial stages of one runtime (see the module docs)."""

    def __init__(self, runtime: Host) -> None:
        self.rt = runtime
        self.partial = PartialKeys(runtime.state)
        self.footers = Footers()
        self.driver_rows = key_scan.DRIVER_ROWS
        """At most this many rows in the row groups that can hold the keys, the driver reads
        them (``pipelines.reads.key_scan``); else Spark scans."""
        self.scans: list[key_scan.ScanPlan] = []
        """What the last fill's scans of input messages read (one per stage that scanned)."""

    @property
    def _p(self) -> str:
        return self.rt.pipeline.name

    def last_epoch(self, stage: str) -> int | None:
        """The last epoch ``stage`` has processed: its last run's; for a partial stage that has
        run none (one added to a pipeline with history), the epoch before the first its input
        may still bring, since every key is a hole until read. None before any."""
        done = [e for e in self.rt.ledger.done_epochs(self._p, stage) if isinstance(e, int)]
        if done:
            return max(done)
        if self.rt.pipeline.stage(stage).partial is None:
            return None
        frontier = self.rt.ledger.tracker(self._p).frontier(Target(stage, 0))
        firsts = [t for t in frontier.elements if isinstance(t, int)]
        if firsts:
            return min(firsts) - 1 if min(firsts) > 0 else None
        upstream = self.rt.pipeline.stage(stage).inputs[0]
        times = [m.time for m in self.rt.ledger.messages(self._p, upstream, 0)]
        ints = [t for t in times if isinstance(t, int)]
        return max(ints) if ints else None

    def fill(self, stage: str, keys: Sequence[Key]) -> int | None:
        """Fill ``keys`` at ``stage`` and the partial stages above it; returns the epoch the
        fill is as of (None: the stage has processed none, and the keys are filled empty)."""
        stages = self.rt.pipeline.stages
        members = chain(stages, stage)  # nearest first, up to the family's root
        self._catch_up(members)
        self.scans = []
        scratch = self.rt.store.root / self._p / stage / f".upquery-{uuid.uuid4().hex[:12]}"
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            with scan_settings(self.rt.spark, len(keys)):
                return self._fill(stage, keys, members, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _fill(
        self, stage: str, keys: Sequence[Key], members: list[str], scratch: Path
    ) -> int | None:
        stages = self.rt.pipeline.stages
        history: DataFrame | None = None
        as_of: int | None = None
        for name in reversed(members):  # from the root down
            spec = stages[name]
            assert isinstance(spec, KeyedStage)
            as_of = self.last_epoch(name)
            inputs = self._input_rows(spec, keys, as_of) if history is None else history
            if as_of is not None:
                inputs = inputs.where(inputs[EPOCH] <= as_of)
            out = run_of(spec).rederive(spec, self.rt.spark, inputs)
            path = scratch / name
            path.mkdir()
            table = out.toArrow()  # the keys' rows are few: no Spark write, no file listing
            pq.write_table(table, path / "history.parquet")
            pq.write_table(_keys_table(spec, keys, table.schema), path / "keys.parquet")
            if name != members[0]:  # the stage below re-derives from these rows
                history = self.rt.spark.createDataFrame(table)
            faults.reach(FaultPoint.UPQUERY_FILL)
            self.partial.fill(
                self._p,
                name,
                spec.key,
                keys_file=str(path / "keys.parquet"),
                history_file=str(path / "history.parquet"),
                as_of=-1 if as_of is None else as_of,
            )
        return as_of

    def catch_up(self, stage: str) -> None:
        """Run the epochs ``stage`` and the partial stages above it are behind the ones above
        them (the caller holds the family's right to change state)."""
        self._catch_up(chain(self.rt.pipeline.stages, stage))

    def _catch_up(self, members: list[str]) -> None:
        """Run the epochs a stage of the chain is behind the one above it (from the root
        down), so every stage of it has processed the same epochs."""
        for upper, lower in reversed(list(zip(members[1:], members[:-1], strict=True))):
            upper_last = self.last_epoch(upper)
            lower_last = self.last_epoch(lower)
            if upper_last is None:
                continue
            start = 0 if lower_last is None else lower_last + 1
            for epoch in range(start, upper_last + 1):
                try:
                    self.rt.run_stage(lower, epoch)
                except StageNotReadyError:
                    break

    def _input_rows(self, stage: KeyedStage, keys: Sequence[Key], as_of: int | None) -> DataFrame:
        """The rows of ``keys`` in ``stage``'s input messages at every epoch up to ``as_of``,
        tagged with their epoch: one scan of every message's files, filtered by key before
        anything else, each row's epoch read from its file's path (the data plane puts every
        message under ``epoch=N``; a union of one scan per epoch costs a job per epoch)."""
        from pyspark.sql import functions as F

        upstream = stage.inputs[0]
        by_path: dict[str, int] = {}
        if as_of is not None:
            for m in self.rt.ledger.messages(self._p, upstream, 0):
                if m.path and isinstance(m.time, int) and m.time <= as_of:
                    by_path[m.path] = m.time
        files = {
            str(f): t for path, t in by_path.items() for f in sorted(Path(path).glob("*.parquet"))
        }
        schema = self.rt.executor.schema_of(upstream)
        if schema is None:
            raise StateReadError(
                stage.name,
                f"its input {upstream!r} has no message with data yet to take its columns from",
            )
        if not files:
            empty = empty_frame(self.rt.spark, schema)
            return empty.withColumn(EPOCH, F.lit(0).cast("bigint"))
        scan = key_scan.plan(
            files, schema, stage.key, keys, self.footers, driver_rows=self.driver_rows
        )
        self.scans.append(scan)
        if scan.driver:
            rows = key_scan.read(scan, schema, stage.key, keys, self.footers, epoch_column=EPOCH)
            return self.rt.spark.createDataFrame(rows, _with_epoch(schema))
        wanted = key_filter(stage.key, keys)
        scanned = self.rt.spark.read.schema(schema).parquet(*files).where(wanted)
        # One scan when each row's file tells its epoch; else (or on an engine whose rows do
        # not name their files, see pipelines.spark.engine) one scan per epoch.
        one_scan = engine_of(self.rt.spark).names_input_files
        if one_scan and all(_path_epoch(path) == t for path, t in by_path.items()):
            epoch = F.regexp_extract(F.col("_metadata.file_path"), PATH_EPOCH, 1)
            return scanned.withColumn(EPOCH, epoch.cast("bigint"))
        scans = [  # a message whose directory does not say its epoch: one scan per epoch
            self.rt.spark.read.schema(schema)
            .parquet(path)
            .where(wanted)
            .withColumn(EPOCH, F.lit(t).cast("bigint"))
            for path, t in sorted(by_path.items(), key=lambda item: item[1])
        ]
        return reduce(lambda a, b: a.unionByName(b), scans)


def _with_epoch(schema: StructType) -> StructType:
    from pyspark.sql import types as T

    return T.StructType([*schema.fields, T.StructField(EPOCH, T.LongType())])


def _keys_table(stage: KeyedStage, keys: Sequence[Key], schema: pa.Schema) -> pa.Table:
    """The keys asked, with the key columns' types (so a key with no rows, an empty answer,
    fills too)."""
    return pa.table(
        {
            column: pa.array([k[i] for k in keys], type=schema.field(column).type)
            for i, column in enumerate(stage.key)
        }
    )
