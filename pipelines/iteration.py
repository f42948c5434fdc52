"""Iterative stages: rounds of Spark jobs inside one epoch, until a round changes nothing.

An iterative stage is a nested scope. Outside, it is one stage that runs once per epoch. Inside,
times are ``Product(epoch, round)`` and the loop's summary is ``ProductSummary(0, 1)``: the
ledger tracks the scope as a graph of its own (``scope_name(pipeline, stage)``), one node
``step`` whose output feeds its own input. For epoch ``t``:

* entering commits round 0's state, ``init(batch)``, as a message at ``(t, 0)``;
* round ``r`` reads the state at ``(t, r)`` and computes ``step(state, batch)``. If that changes
  the state, one batch consumes ``(t, r)`` and announces ``(t, r + 1)`` with the new state;
* at the fixed point the state is the stage's output. Consuming the last round commits in the
  same transaction as the stage's own batch, so the epoch is done exactly when its rounds are.

The scope's counts at ``(t, *)`` exist only while the stage's input at ``t`` is unconsumed, so
nothing downstream can see epoch ``t`` before its fixed point. A killed run leaves its last
committed round; the next run of the epoch resumes there. ``step`` must be deterministic: two
runs of one epoch (a retry racing a slow run) adopt whichever round was committed first.
A revision recomputes every round without checkpoints: it commits nothing until its output.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.errors import StageFailedError
from pipelines.footers import spark_schema
from pipelines.storage import DataStore, new_attempt
from progress import Delay, Graph, GraphBuilder, Product, ProductSummary, Source, Target, Update
from progress.ledger import Ledger, MessageEntry, Origin, scope_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

STEP = "step"
"""The scope's one node: a round."""

Transform = Callable[["DataFrame"], "DataFrame"]
RoundStep = Callable[["DataFrame", "DataFrame"], "DataFrame"]

RoundCallback = Callable[[str, int, int, int | None], None]
"""Told ``(stage, epoch, round, rows changed)`` after each round (``None``: some, not counted)."""


def describe_round(stage: str, epoch: int, r: int, changed: int | None) -> str:
    """``rings epoch 2, round 3: changed`` (``0 rows changed``: the fixed point)."""
    what = "changed" if changed is None else f"{changed} rows changed"
    return f"{stage} epoch {epoch}, round {r}: {what}"


def scope_graph() -> Graph:
    """The progress graph inside an iterative stage: a round whose output is the next round's
    input, one round later."""
    builder = GraphBuilder(Product(0, 0))
    builder.add_node(
        STEP,
        inputs=1,
        outputs=1,
        summaries={(0, 0): [ProductSummary(Delay(0), Delay(1))]},
        workers=0,
    )
    builder.add_edge(Source(STEP, 0), Target(STEP, 0))
    return builder.compile()


@dataclass(frozen=True)
class FixedPoint:
    """Where an epoch's rounds ended: the output's directory, and the last committed round."""

    scope: str
    epoch: int
    path: Path
    rounds: int
    last: int | None
    """The committed round the fixed point was found from (``None`` for a revision)."""

    def leave(self, ledger: Ledger) -> None:
        """Consume the last round. Call it in the transaction that commits the stage's batch."""
        if self.last is None:
            return
        t = Product(self.epoch, self.last)
        ledger.commit(
            self.scope,
            [(Target(STEP, 0), t, -1)],
            key=f"leave:{self.epoch}",
            origin=Origin.stage(STEP, t),
        )


class Rounds:
    """The rounds of one epoch of one iterative stage."""

    def __init__(
        self,
        ledger: Ledger,
        store: DataStore,
        spark: SparkSession,
        *,
        pipeline: str,
        stage: str,
        init: Transform,
        step: RoundStep,
        max_rounds: int,
        epoch: int,
        checkpoint: bool,
        on_round: RoundCallback | None = None,
    ) -> None:
        self.ledger = ledger
        self.store = store
        self.spark = spark
        self.pipeline = pipeline
        self.scope = scope_name(pipeline, stage)
        self.stage = stage
        self.init = init
        self.step = step
        self.max_rounds = max_rounds
        self.epoch = epoch
        self.checkpoint = checkpoint
        self.on_round = on_round

    # -- the ledger's view -------------------------------------------------------------------

    def committed_round(self) -> tuple[int, Path] | None:
        """The last committed round of this epoch whose successor is not committed: its
        number and the path of its state. ``None`` before entering and after the fixed point."""
        for location, t, count in self.ledger.tracker(self.scope).pointstamps():
            if not (isinstance(location, Target) and isinstance(t, Product) and count > 0):
                continue
            if t.outer != self.epoch or not isinstance(t.inner, int):
                continue
            messages = self.ledger.message(self.scope, STEP, 0, t)
            if messages and messages[-1].path:
                return t.inner, Path(messages[-1].path)
        return None

    def _commit_round(self, r: int, path: Path) -> tuple[int, Path]:
        """Commit the state of round ``r`` (entering when ``r == 0``). Returns the round to go
        on from: ours, or the one another run of this epoch committed first."""
        rows, size = self.store.stats(path)
        t = Product(self.epoch, r)
        batch: list[Update] = [(Target(STEP, 0), t, 1)]
        if r > 0:
            batch.append((Target(STEP, 0), Product(self.epoch, r - 1), -1))
        attempt = path.name.removeprefix("attempt=")
        result = self.ledger.commit(
            self.scope,
            batch,
            key=f"round:{self.epoch}:{r}",
            messages=[MessageEntry(STEP, 0, t, attempt, str(path), rows, size)],
            origin=Origin.stage(STEP, t),
        )
        if not result.repeated:
            return r, path
        adopted = self.committed_round()
        if adopted is None:  # another run reached the fixed point: go on alone, uncommitted
            self.checkpoint = False
            return r, path
        shutil.rmtree(path, ignore_errors=True)
        return adopted

    # -- the rounds --------------------------------------------------------------------------

    def run(self, batch: DataFrame, output: Path) -> FixedPoint:
        """Run rounds from the last committed one (or from ``init``) to the fixed point; the
        final state is moved to ``output``."""
        stage, limit = self.stage, self.max_rounds
        start = self.committed_round() if self.checkpoint else None
        if start is None:
            r, state_path = 0, self._write(self.init(batch), 0)
            if self.checkpoint:
                r, state_path = self._commit_round(0, state_path)
        else:
            r, state_path = start
        first = r
        state_schema: StructType | None = None
        checksums: dict[Path, int] = {}
        while True:
            if r >= limit:
                kept = f"; round {r}'s state is committed" if self.checkpoint else ""
                raise StageFailedError(
                    stage,
                    self.epoch,
                    f"no fixed point after {limit} rounds (max_rounds={limit}){kept}",
                )
            if state_schema is None:  # read once; later rounds skip the footer reads
                state_schema = (
                    spark_schema([state_path]) or self.spark.read.parquet(str(state_path)).schema
                )
            state = self.spark.read.schema(state_schema).parquet(str(state_path))
            following = self.step(state, batch)
            _same_columns(stage, self.epoch, state, following)
            next_path = self._write(following.select(*state.columns), r + 1)
            try:
                changed = self._changed(state, state_path, next_path, checksums)
            except BaseException:
                shutil.rmtree(next_path, ignore_errors=True)
                raise
            if self.on_round is not None:
                self.on_round(stage, self.epoch, r, changed)
            if changed == 0:
                output.parent.mkdir(parents=True, exist_ok=True)
                os.rename(next_path, output)
                if not self.checkpoint:
                    shutil.rmtree(state_path, ignore_errors=True)  # ours, never committed
                last = r if self.checkpoint else None
                return FixedPoint(self.scope, self.epoch, output, r + 1 - first, last)
            if self.checkpoint:
                r, state_path = self._commit_round(r + 1, next_path)
            else:
                shutil.rmtree(state_path, ignore_errors=True)  # ours, never committed
                r, state_path = r + 1, next_path

    def _changed(
        self, state: DataFrame, state_path: Path, next_path: Path, checksums: dict[Path, int]
    ) -> int | None:
        """How many rows of the next state are not in the state (``None``: some, not counted).

        Different row counts (from the footers) or different checksums (the sum of each row's
        64-bit hash: one aggregation, no shuffle) mean a change. Only equal checksums, at the
        fixed point, pay for the exact comparison."""
        if self.store.stats(next_path)[0] != self.store.stats(state_path)[0]:
            return None
        for path in (state_path, next_path):
            if path not in checksums:
                checksums[path] = self._checksum(path, state.schema)
        if checksums[next_path] != checksums[state_path]:
            return None
        written = self.spark.read.schema(state.schema).parquet(str(next_path))
        exact: int = written.exceptAll(state).count()
        return exact

    def _checksum(self, path: Path, schema: StructType) -> int:
        from pyspark.sql import functions as F

        df = self.spark.read.schema(schema).parquet(str(path))
        hashed = F.xxhash64(*df.columns).cast("decimal(38,0)")
        total = df.agg(F.sum(hashed).alias("total")).collect()[0]["total"]
        return int(total or 0)

    def _write(self, df: DataFrame, r: int) -> Path:
        path = self.store.attempt_dir(
            self.pipeline, self.stage, 0, Product(self.epoch, r), new_attempt()
        )
        try:
            df.write.parquet(str(path))
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        return path


def _same_columns(stage: str, epoch: int, state: DataFrame, following: DataFrame) -> None:
    have = {f.name: f.dataType for f in following.schema.fields}
    for field in state.schema.fields:
        if have.get(field.name) != field.dataType:
            found = have[field.name].simpleString() if field.name in have else "missing"
            raise StageFailedError(
                stage,
                epoch,
                f"step returned column {field.name!r} as {found}; the state from init has "
                f"{field.dataType.simpleString()}",
                column=field.name,
            )


def pending_paths(ledger: Ledger, pipeline: str, stage: str) -> list[str]:
    """The states a new run of ``stage`` may resume from (kept by garbage collection)."""
    scope = scope_name(pipeline, stage)
    paths: list[str] = []
    with ledger.session():
        for location, t, count in ledger.tracker(scope).pointstamps():
            if isinstance(location, Target) and count > 0:
                paths += [m.path for m in ledger.message(scope, STEP, 0, t) if m.path]
    return paths
