"""The stateful carry: one epoch of a keyed stage, from the state the epoch before left.

The state store reads the keys of the epoch's batch straight from its files (no Spark job) and
exports their latest committed rows; the stage's ``update(batch, state)`` gives their new rows,
which are the stage's output and are staged in the store under the run's attempt. They become
the state when the ledger has committed that attempt (``Produced.committed``) and are dropped
when another run committed the epoch first (``Produced.abandoned``). Staged attempts left by a
crash between the two commits are settled first, against what the ledger holds, and a state a
revision rewound and did not bring back to the last epoch (a revision stopped before its
first commits) is restored (``KeyedState.restore``).

The caller holds the stage's writer lock (``KeyedState.writer``) from before the carry until
after its commit: one run of a stateful stage changes its state at a time, in any process.

A partial stage's carry first drops the rows of its holes (keys it does not hold): they are
neither applied nor passed downstream. After its commit, a stage with a key budget evicts the
least recently read keys beyond it, here and in the partial stages below it.

``replay_updates`` is the same fold for a few keys over many epochs at once: how an upquery
re-derives a stateful stage's output for the keys it fills.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pipelines.errors import StageFailedError
from pipelines.run.schema_check import type_mismatch
from pipelines.run.work import Produced, StageWork
from pipelines.spark._internals import arrow_schema_of
from pipelines.spark.empty import empty_frame
from pipelines.spark.engine import engine_of
from pipelines.spark.footers import free_of_nulls, parts
from pipelines.stages.functions import StateUpdate
from pipelines.stages.partial import PartialState
from progress.ledger import Ledger
from state_store import KeyedState, PartialKeys

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

FILE = "__epochgate_file"
"""The column that names the file of a row refused for a null key."""


def committed_in(ledger: Ledger, pipeline: str, stage: str) -> Callable[[int, str], bool]:
    """Whether the ledger has committed an attempt of ``stage`` at an epoch (it is the current
    output there): what the state store settles its staged attempts by."""

    def committed(epoch: int, attempt: str) -> bool:
        return any(m.attempt == attempt for m in ledger.message(pipeline, stage, 0, epoch))

    return committed


def settle(
    state: KeyedState, ledger: Ledger, pipeline: str, stage: str, key: Sequence[str]
) -> None:
    """Commit the staged attempts the ledger committed, drop the others (after a crash). The
    caller holds the stage's writer lock: no run of it is writing an attempt meanwhile."""
    state.reconcile(pipeline, stage, key, committed_in(ledger, pipeline, stage))


def carry(
    work: StageWork,
    *,
    key: Sequence[str],
    schema: StructType,
    update: StateUpdate,
    partial: PartialState | None,
    shaped: bool = False,
) -> Produced:
    """Run one epoch of a keyed stage (see the module docs). ``shaped``: ``update``'s rows have
    ``schema``'s types by construction (the aggregate's merge), so the engine is not asked for
    them (on Spark Connect and Sail a round trip to the server)."""
    p, name, epoch = work.pipeline, work.stage, work.epoch
    assert isinstance(epoch, int)
    # What a crash left staged is settled; unless this run is a revision, a state that a
    # revision stopped before it caught up left behind is restored.
    settled = committed_in(work.ledger, p, name)
    work.state.before_run(p, name, key, settled, restore=not work.revision)
    batch = work.frames[0]
    check_key_columns(name, epoch, batch, key, schema, files=work.inputs[0][1])
    keys: list[str] = [f"{path}/*.parquet" for path in work.inputs[0][1]]
    if partial is not None:
        present = str(work.scratch_dir() / "present.parquet")
        if keys and PartialKeys(work.state).export_present(p, name, key, present):
            keys_read = work.spark.read.schema(key_schema(schema, key)).parquet(present)
            batch = batch.join(keys_read, on=list(key), how="leftsemi")
            keys = [present]
        else:
            batch, keys = batch.limit(0), []
    state_file = work.scratch_dir() / "state.parquet"
    if keys and work.state.export_latest(p, name, key, keys, str(state_file)):
        state = work.spark.read.schema(schema).parquet(str(state_file))
    else:
        state = empty_frame(work.spark, schema)
    out = update(batch, state)
    if not shaped:
        check_state_columns(name, epoch, out, schema)
    produced = work.write(out.select(*schema.fieldNames()))
    (written,) = produced.files
    work.state.stage(p, name, epoch, work.attempt, f"{written.path}/*.parquet")
    budget = partial.max_keys if partial is not None else None

    def committed(_batch: int) -> None:
        work.state.commit(p, name, key, work.attempt)
        if budget is not None:
            PartialKeys(work.state).evict(p, (name, *work.below), key, max_keys=budget)

    return dataclasses.replace(
        produced,
        committed=committed,
        abandoned=lambda: work.state.abandon(p, name, work.attempt),
    )


def replay_updates(
    spark: SparkSession,
    inputs: DataFrame,
    *,
    key: Sequence[str],
    schema: StructType,
    update: StateUpdate,
) -> DataFrame:
    """The output rows, with ``_epoch``, of a keyed fold over ``inputs`` (its input rows for a
    few keys, with ``_epoch``): ``update`` applied epoch by epoch from no state, as the stage's
    runs applied it. The rows are few (those of the keys asked for), so they go to the driver
    as Arrow and back, and each epoch with rows is one small Spark job."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import types as T

    table = inputs.toArrow()
    epochs = table.column("_epoch")
    rows = table.drop_columns(["_epoch"])
    batch_schema = T.StructType([f for f in inputs.schema.fields if f.name != "_epoch"])
    names = schema.fieldNames()
    state_schema = arrow_schema_of(schema)
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    history: list[pa.Table] = []
    for epoch in sorted(set(epochs.to_pylist())):
        batch = rows.filter(pc.equal(epochs, epoch))
        moved = set(zip(*(batch.column(k).to_pylist() for k in key), strict=True))
        carried = pa.Table.from_pylist([state[k] for k in moved if k in state], state_schema)
        out = (
            update(
                spark.createDataFrame(batch, schema=batch_schema),
                spark.createDataFrame(carried, schema=schema),
            )
            .select(*names)
            .toArrow()
        )
        for row in out.to_pylist():
            state[tuple(row[k] for k in key)] = row
        out = out.cast(state_schema)
        history.append(out.append_column("_epoch", pa.array([epoch] * out.num_rows, pa.int64())))
    out_schema = T.StructType([*schema.fields, T.StructField("_epoch", T.LongType())])
    if not history:
        return empty_frame(spark, out_schema)
    return spark.createDataFrame(pa.concat_tables(history), schema=out_schema)


def key_schema(schema: StructType, key: Sequence[str]) -> StructType:
    """The key columns of the state's ``schema``: those of a keys file the state store wrote."""
    from pyspark.sql.types import StructType

    return StructType([schema[column] for column in key])


def check_key_columns(
    stage: str,
    epoch: int,
    batch: DataFrame,
    key: Sequence[str],
    schema: StructType,
    *,
    files: Sequence[str] = (),
) -> None:
    """Refuse an input without the key columns, with them of other types than the state's, or
    with a null key (a key is looked up, stored and evicted by equality: null equals nothing).
    Nulls are looked for only where the input's schema allows them, and only when the footers
    of its ``files`` do not already say there are none (``pipelines.spark.footers``): then it costs
    one short Spark job."""
    have = {f.name: f.dataType for f in batch.schema.fields}
    for column in key:
        if column not in have:
            raise StageFailedError(
                stage,
                epoch,
                f"its input has no key column {column!r} to look state up by",
                column=column,
            )
        want = schema[column].dataType
        if have[column] != want:
            raise StageFailedError(
                stage,
                epoch,
                f"key column {column!r} of its input is {have[column].simpleString()}, the "
                f"state's is {want.simpleString()}",
                column=column,
            )
    nullable = [f.name for f in batch.schema.fields if f.name in key and f.nullable]
    if nullable and not (files and free_of_nulls(files, nullable)):
        _refuse_null_keys(stage, epoch, batch, nullable, files)


def _refuse_null_keys(
    stage: str, epoch: int, batch: DataFrame, columns: Sequence[str], files: Sequence[str]
) -> None:
    """Refuse the first row of ``batch`` with a null in one of ``columns``, naming its file:
    the one the engine names, else the first of ``files`` with a null there."""
    from functools import reduce

    from pyspark.sql import functions as F

    named = engine_of(batch.sparkSession).names_input_files
    null = reduce(lambda a, b: a | b, (F.col(c).isNull() for c in columns))
    flags = [F.col(c).isNull().alias(c) for c in columns]
    found = (
        batch.where(null)
        .select(*flags, *([F.input_file_name().alias(FILE)] if named else []))
        .limit(1)
        .collect()
    )
    if found:
        column = next(c for c in columns if found[0][c])
        file = (found[0][FILE] or None) if named else _file_with_null(files, column)
        raise StageFailedError(
            stage,
            epoch,
            f"key column {column!r} of its input is null in a row of {file or 'it'}: a key "
            "must not be null",
            column=column,
            file=file,
        )


def _file_with_null(files: Sequence[str], column: str) -> str | None:
    """The first Parquet file of ``files`` (message directories) with a null in ``column``."""
    import pyarrow.parquet as pq

    for path in files:
        for part in parts(path):
            if pq.read_table(part, columns=[column]).column(column).null_count:
                return str(part)
    return None


def check_state_columns(stage: str, epoch: int, out: DataFrame, schema: StructType) -> None:
    """Refuse new state rows whose columns differ from the declared state schema."""
    mismatch = type_mismatch(schema, out.schema)
    if mismatch is not None:
        column, found, expected = mismatch
        raise StageFailedError(
            stage,
            epoch,
            f"state column {column!r} is {found}, the schema says {expected}",
            column=column,
        )
