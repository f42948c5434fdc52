"""The stateful carry: one epoch of a keyed stage, from the state the epoch before left.

The state store reads the keys of the epoch's batch straight from its files (no Spark job) and
exports their latest committed rows; the stage's ``update(batch, state)`` gives their new rows,
which are the stage's output and are staged in the store under the run's attempt. They become
the state when the ledger has committed that attempt (``Produced.committed``) and are dropped
when another run committed the epoch first (``Produced.abandoned``). Staged attempts left by a
crash between the two commits are settled first, against what the ledger holds.

The caller holds the stage's writer lock (``KeyedState.writer``) from before the carry until
after its commit: one run of a stateful stage changes its state at a time, in any process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pipelines.errors import StageFailedError
from pipelines.work import Produced, StageWork

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

StateUpdate = Callable[["DataFrame", "DataFrame"], "DataFrame"]


def settle(work: StageWork, key: Sequence[str]) -> None:
    """Commit the staged attempts the ledger committed, drop the others (after a crash)."""
    p, stage, ledger = work.pipeline, work.stage, work.ledger

    def committed(epoch: int, attempt: str) -> bool:
        return any(m.attempt == attempt for m in ledger.message(p, stage, 0, epoch))

    work.state.reconcile(p, stage, key, committed)


def carry(
    work: StageWork, *, key: Sequence[str], schema: StructType, update: StateUpdate
) -> Produced:
    """Run one epoch of a stateful stage (see the module docs)."""
    p, stage, epoch = work.pipeline, work.stage, work.epoch
    assert isinstance(epoch, int)
    settle(work, key)
    batch = work.frames[0]
    missing = [k for k in key if k not in batch.columns]
    if missing:
        raise StageFailedError(
            stage,
            epoch,
            f"its input has no key column(s) {missing} to look state up by",
            column=missing[0],
        )
    state_file = work.scratch_dir() / "state.parquet"
    keys = [f"{path}/*.parquet" for path in work.inputs[0][1]]
    if keys and work.state.export_latest(p, stage, key, keys, str(state_file)):
        state = work.spark.read.schema(schema).parquet(str(state_file))
    else:
        state = work.spark.createDataFrame([], schema)
    out = update(batch, state)
    check_state_columns(stage, epoch, out, schema)
    produced = work.write(out.select(*schema.fieldNames()))
    (written,) = produced.files
    work.state.stage(p, stage, epoch, work.attempt, f"{written.path}/*.parquet")
    return dataclasses.replace(
        produced,
        committed=lambda: work.state.commit(p, stage, key, work.attempt),
        abandoned=lambda: work.state.abandon(p, stage, work.attempt),
    )


def check_state_columns(stage: str, epoch: int, out: DataFrame, schema: StructType) -> None:
    """Refuse new state rows whose columns differ from the declared state schema."""
    have = {f.name: f.dataType for f in out.schema.fields}
    for field in schema.fields:
        if have.get(field.name) != field.dataType:
            found = have[field.name].simpleString() if field.name in have else "missing"
            raise StageFailedError(
                stage,
                epoch,
                f"state column {field.name!r} is {found}, the schema says "
                f"{field.dataType.simpleString()}",
                column=field.name,
            )
