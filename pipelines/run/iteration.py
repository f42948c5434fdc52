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

import dataclasses
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.errors import StageFailedError
from pipelines.run.schema_check import type_mismatch
from pipelines.run.storage import DataStore, new_attempt
from pipelines.spark.checksum import checksum, observed
from pipelines.spark.empty import fill_empty
from pipelines.spark.footers import spark_schema
from pipelines.stages.functions import RoundStep, Transform
from progress import Product, Target, Update
from progress.ledger import Ledger, MessageEntry, Origin
from progress.scope import STEP, scope_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

RoundCallback = Callable[[str, int, int, int | None], None]
"""Told ``(stage, epoch, round, rows changed)`` after each round (``None``: some, not counted)."""


def describe_round(stage: str, epoch: int, r: int, changed: int | None) -> str:
    """``rings epoch 2, round 3: changed`` (``0 rows changed``: the fixed point)."""
    what = "changed" if changed is None else f"{changed} rows changed"
    return f"{stage} epoch {epoch}, round {r}: {what}"


@dataclass(frozen=True)
class RoundState:
    """A round's state as written: its directory, its rows and bytes (from the footers), and
    its checksum (``pipelines.spark.checksum``) when known: observed as it was written, or computed.
    """

    path: Path
    rows: int
    bytes: int
    checksum: int | None = None


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

    def _commit_round(self, r: int, state: RoundState) -> tuple[int, RoundState]:
        """Commit the state of round ``r`` (entering when ``r == 0``). Returns the round to go
        on from: ours, or the one another run of this epoch committed first."""
        t = Product(self.epoch, r)
        batch: list[Update] = [(Target(STEP, 0), t, 1)]
        if r > 0:
            batch.append((Target(STEP, 0), Product(self.epoch, r - 1), -1))
        attempt = state.path.name.removeprefix("attempt=")
        entry = MessageEntry(STEP, 0, t, attempt, str(state.path), state.rows, state.bytes)
        result = self.ledger.commit(
            self.scope,
            batch,
            key=f"round:{self.epoch}:{r}",
            messages=[entry],
            origin=Origin.stage(STEP, t),
        )
        if not result.repeated:
            return r, state
        adopted = self.committed_round()
        if adopted is None:  # another run reached the fixed point: go on alone, uncommitted
            self.checkpoint = False
            return r, state
        shutil.rmtree(state.path, ignore_errors=True)
        return adopted[0], self._found(adopted[1])

    def _found(self, path: Path) -> RoundState:
        """A committed round's state, as its footers tell (its checksum is computed if needed)."""
        return RoundState(path, *self.store.stats(path))

    # -- the rounds --------------------------------------------------------------------------

    def run(self, batch: DataFrame, output: Path) -> FixedPoint:
        """Run rounds from the last committed one (or from ``init``) to the fixed point; the
        final state is moved to ``output``.

        Every round reads the epoch's input again, so Spark caches it for the rounds (in
        memory, spilling to disk; building it shows as a job or two of round 0's write) and
        drops it after them. The bank's rings stage alone, at 1,000,000 rows per epoch (seven
        rounds), took 2.6 s per epoch with its input cached against 3.1 s reading its files
        (medians of ten epochs each, in turn, on two busy cores)."""
        cached = batch.cache()
        try:
            return self._rounds(cached, output)
        finally:
            cached.unpersist()

    def _rounds(self, batch: DataFrame, output: Path) -> FixedPoint:
        """The rounds of ``run``. A round costs the Spark jobs of writing its state, and nothing
        else while the state changes: the change shows in the row count (the footers) or in the
        checksum that the write observed. Only the last round, whose count and checksum equal
        its input's, pays for comparing the rows (``_changed``)."""
        stage, limit = self.stage, self.max_rounds
        start = self.committed_round() if self.checkpoint else None
        current: RoundState
        if start is None:
            r, current = 0, self._write(self.init(batch), 0)
            if self.checkpoint:
                r, current = self._commit_round(0, current)
        else:
            r, current = start[0], self._found(start[1])
        first = r
        state_schema: StructType | None = None
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
                    spark_schema([current.path])
                    or self.spark.read.parquet(str(current.path)).schema
                )
            state = self.spark.read.schema(state_schema).parquet(str(current.path))
            following = self.step(state, batch)
            _same_columns(stage, self.epoch, state, following)
            written = self._write(following.select(*state.columns), r + 1)
            try:
                changed, written = self._changed(state, current, written)
            except BaseException:
                shutil.rmtree(written.path, ignore_errors=True)
                raise
            if self.on_round is not None:
                self.on_round(stage, self.epoch, r, changed)
            if changed == 0:
                output.parent.mkdir(parents=True, exist_ok=True)
                os.rename(written.path, output)
                if not self.checkpoint:
                    shutil.rmtree(current.path, ignore_errors=True)  # ours, never committed
                last = r if self.checkpoint else None
                return FixedPoint(self.scope, self.epoch, output, r + 1 - first, last)
            if self.checkpoint:
                r, current = self._commit_round(r + 1, written)
            else:
                shutil.rmtree(current.path, ignore_errors=True)  # ours, never committed
                r, current = r + 1, written

    def _changed(
        self, state: DataFrame, before: RoundState, after: RoundState
    ) -> tuple[int | None, RoundState]:
        """Whether ``after``, the round computed from ``before`` (read as ``state``), changed
        anything: ``0`` for no row, ``None`` for some (not counted); and ``after`` with its
        checksum, if it had to be computed.

        Different row counts or different checksums mean a change. Equal ones, at the fixed
        point, are confirmed by comparing the rows: one shuffle of both states, and a look for
        any row of ``after`` that ``before`` lacks (with equal counts, none means equal)."""
        if after.rows != before.rows:
            return None, after
        before, after = self._counted(before, state), self._counted(after, state)
        if after.checksum != before.checksum:
            return None, after
        written = self.spark.read.schema(state.schema).parquet(str(after.path))
        return (0 if written.exceptAll(state).isEmpty() else None), after

    def _counted(self, round_state: RoundState, state: DataFrame) -> RoundState:
        """``round_state`` with its checksum: a resumed round's, or one whose write did not
        hand it over, is computed from its files (one aggregation)."""
        if round_state.checksum is not None:
            return round_state
        df = self.spark.read.schema(state.schema).parquet(str(round_state.path))
        return dataclasses.replace(round_state, checksum=checksum(df))

    def _write(self, df: DataFrame, r: int) -> RoundState:
        """Write round ``r``'s state to a fresh attempt, its checksum observed on the way."""
        path = self.store.attempt_dir(
            self.pipeline, self.stage, 0, Product(self.epoch, r), new_attempt()
        )
        watched, observed_checksum = observed(df)
        try:
            watched.write.parquet(str(path))
            fill_empty(path, df)
            return RoundState(path, *self.store.stats(path), observed_checksum())
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise


def _same_columns(stage: str, epoch: int, state: DataFrame, following: DataFrame) -> None:
    mismatch = type_mismatch(state.schema, following.schema)
    if mismatch is not None:
        column, found, expected = mismatch
        raise StageFailedError(
            stage,
            epoch,
            f"step returned column {column!r} as {found}; the state from init has {expected}",
            column=column,
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
