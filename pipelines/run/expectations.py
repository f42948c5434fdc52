"""Checking a stage's expectations (``pipelines.stages.expectations``) on what one run or one
send produced, before it is committed.

* ``write``: a stage with ``drop`` expectations writes its output in one Spark job split in
  two: the rows that pass every ``drop`` expectation become the attempt, the others its
  quarantine (a directory beside it). One job, so a function that is not deterministic cannot
  put a row in both or in neither.
* ``check``: one Spark job over the written files (the attempt and its quarantine: every row
  the run produced) counts, per expectation, the rows checked and those failing it. A ``fail``
  expectation with a failing row stops the run: ``ExpectationFailed`` names it, and the caller
  records the results with the failure and commits nothing.

The results are recorded in the ledger in the transaction that commits the attempt
(``progress.ledger.checks``): a killed run leaves none.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from pipelines.errors import first_line
from pipelines.run.layout import writer
from pipelines.spark.empty import fill_empty
from pipelines.spark.footers import spark_schema
from pipelines.stages.expectations import Expectation, OnFail
from progress import Time, sentences
from progress.ledger import CheckEntry, CheckRecord

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

FLAG = "_epochgate_fails_"
"""The columns a checked write partitions by, one per expectation (``FLAG0``, ``FLAG1``...):
true for a row that fails it."""


@dataclass(frozen=True)
class ExpectationResult:
    """What one expectation found in one attempt of a stage's epoch: the rows it checked,
    those failing it, and its action on them. ``committed`` is False for the results of a run
    that a ``fail`` expectation stopped (nothing of it was committed)."""

    stage: str
    epoch: Time
    attempt: str
    expectation: str
    rows_checked: int
    rows_failing: int
    action: OnFail
    committed: bool
    recorded_at: datetime

    @classmethod
    def of(cls, record: CheckRecord) -> ExpectationResult:
        return cls(
            record.stage,
            record.time,
            record.attempt,
            record.expectation,
            record.rows_checked,
            record.rows_failing,
            OnFail(record.action),
            record.committed,
            record.recorded_at,
        )

    @property
    def passed(self) -> bool:
        return self.rows_failing == 0

    def describe(self) -> str:
        """``valid epoch 3: positive_cents 2 failing of 40 rows (drop)``."""
        verdict = "passed" if self.passed else f"{self.rows_failing:,} failing"
        stopped = "" if self.committed else ", run stopped"
        return (
            f"{self.stage} epoch {self.epoch}: {self.expectation} {verdict} of "
            f"{self.rows_checked:,} rows ({self.action.value}{stopped})"
        )


class ExpectationFailed(Exception):  # noqa: N818 - a control-flow signal, turned into errors
    """A ``fail`` expectation found failing rows (``stopped_by``: its result), or an
    expectation could not be checked; ``cause`` says which in the sentence shown to people,
    ``results`` are what was counted."""

    def __init__(
        self,
        cause: str,
        results: Sequence[CheckEntry] = (),
        *,
        stopped_by: CheckEntry | None = None,
    ) -> None:
        self.cause = cause
        self.results = tuple(results)
        self.stopped_by = stopped_by
        super().__init__(cause)


def drops(expectations: Sequence[Expectation]) -> list[Expectation]:
    """The ``drop`` expectations among ``expectations``."""
    return [e for e in expectations if e.on_fail is OnFail.DROP]


def quarantine_dir(attempt_dir: Path) -> Path:
    """Where an attempt's quarantined rows go: beside it, named as an attempt of its own (so a
    run killed before its commit leaves garbage that collection takes)."""
    return attempt_dir.with_name(f"{attempt_dir.name}.quarantine")


def failing(e: Expectation) -> Column:
    """True for a row that fails ``e``: its condition is not true (false or NULL), or another
    row has the same values in its ``unique`` columns."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if e.condition is not None:
        return ~F.coalesce(F.expr(e.condition), F.lit(False))
    group = Window.partitionBy(*[F.col(c) for c in e.unique])
    return F.count(F.lit(1)).over(group) > 1


@dataclass(frozen=True)
class Written:
    """What a checked write made: the quarantine directory (when a ``drop`` expectation
    removed rows) and the count of each expectation."""

    quarantine: Path | None
    checked: list[CheckEntry]


def write(
    df: DataFrame,
    expectations: Sequence[Expectation],
    key: Sequence[str] | None,
    path: Path,
) -> Written:
    """Write ``df`` to ``path``, checked: one Spark job writes it partitioned by one flag per
    expectation (true for a failing row), so each combination of flags is a directory whose
    footers count its rows, and no job counts them again. The rows no ``drop`` expectation
    fails become the attempt at ``path``, the others its quarantine. A ``fail`` expectation
    with failing rows removes both and raises ``ExpectationFailed`` with the counts."""
    if not expectations:
        writer(df, key).parquet(str(path))
        fill_empty(path, df)
        return Written(None, [])
    flags = [f"{FLAG}{i}" for i in range(len(expectations))]
    split = path.with_name(f"{path.name}.split")
    quarantine = quarantine_dir(path) if drops(expectations) else None
    dropping = [i for i, e in enumerate(expectations) if e.on_fail is OnFail.DROP]
    rows = 0
    failing_rows = [0] * len(expectations)
    try:
        with _diagnosed(df, expectations):
            marked = df.select(
                "*", *[failing(e).alias(f) for e, f in zip(expectations, flags, strict=True)]
            )
            writer(marked, (*flags, *(key or ())), partition=flags).parquet(str(split))
        for n, leaf in enumerate(sorted(split.glob("/".join(["*"] * len(flags))))):
            values = [part.endswith("=true") for part in leaf.relative_to(split).parts]
            count = sum(pq.ParquetFile(f).metadata.num_rows for f in leaf.glob("*.parquet"))
            rows += count
            for i, failed in enumerate(values):
                failing_rows[i] += count if failed else 0
            target = quarantine if any(values[i] for i in dropping) else path
            assert target is not None
            target.mkdir(parents=True, exist_ok=True)
            for f in leaf.glob("*.parquet"):
                os.replace(f, target / f"{n:04d}-{f.name}")
        fill_empty(path, df)
        if quarantine is not None:
            fill_empty(quarantine, df)
        results = [
            CheckEntry(e.name, e.on_fail.value, rows, failing_rows[i])
            for i, e in enumerate(expectations)
        ]
        _stop(expectations, results)
    except BaseException:
        for written in (path, quarantine):
            if written is not None:
                shutil.rmtree(written, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(split, ignore_errors=True)
    return Written(quarantine, results)


def check(
    spark: SparkSession, expectations: Sequence[Expectation], paths: Sequence[str]
) -> list[CheckEntry]:
    """Count, per expectation, the rows of ``paths`` (every row a run produced) and those that
    fail it; raise ``ExpectationFailed`` when a ``fail`` expectation has failing rows."""
    from pyspark.sql import functions as F

    files = [p for p in paths if p]
    schema = spark_schema(files) if files else None
    if schema is None or not expectations:
        return []
    frame = spark.read.schema(schema).parquet(*files)
    with _diagnosed(frame, expectations):
        marks = frame.select(*[failing(e).alias(f"f{i}") for i, e in enumerate(expectations)])
        counted = marks.agg(
            F.count(F.lit(1)).alias("rows"),
            *[F.sum(F.col(f"f{i}").cast("long")).alias(f"f{i}") for i in range(len(expectations))],
        )
        row = counted.collect()[0]
    results = [
        CheckEntry(e.name, e.on_fail.value, int(row["rows"]), int(row[f"f{i}"] or 0))
        for i, e in enumerate(expectations)
    ]
    _stop(expectations, results)
    return results


def _stop(expectations: Sequence[Expectation], results: Sequence[CheckEntry]) -> None:
    """Raise ``ExpectationFailed`` for the first ``fail`` expectation with failing rows."""
    for e, r in zip(expectations, results, strict=True):
        if e.on_fail is OnFail.FAIL and r.rows_failing:
            cause = sentences.expectation_failed(e.name, r.rows_failing, r.rows_checked)
            raise ExpectationFailed(cause, results, stopped_by=r)


@contextmanager
def _diagnosed(df: DataFrame, expectations: Sequence[Expectation]) -> Iterator[None]:
    """Spark work over ``df`` with ``expectations``' columns: when it fails, and an
    expectation does not apply to ``df`` (asked of Spark only then, so a run that works costs
    no analysis), ``ExpectationFailed`` names that expectation instead."""
    try:
        yield
    except ExpectationFailed:
        raise
    except Exception as err:
        try:
            _checked(df, expectations)
        except ExpectationFailed as found:
            raise found from err
        raise


def _checked(df: DataFrame, expectations: Sequence[Expectation]) -> Sequence[Expectation]:
    """``expectations``, once each is found to apply to ``df``'s columns (Spark's analysis,
    no job): one naming a column ``df`` does not have, or whose condition is not a boolean,
    raises ``ExpectationFailed`` naming it."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    for e in expectations:
        if e.condition is None:
            missing = [c for c in e.unique if c not in df.columns]
            if missing:
                raise ExpectationFailed(
                    f"expectation {e.name} ({e.describe()}) cannot be checked: the output has "
                    f"no column {', '.join(missing)} (its columns: {', '.join(df.columns)})"
                )
            continue
        try:
            kind = df.select(F.expr(e.condition)).schema.fields[0].dataType
        except Exception as err:
            raise ExpectationFailed(
                f"expectation {e.name} ({e.condition}) cannot be checked: {first_line(err)}"
            ) from err
        if not isinstance(kind, T.BooleanType | T.NullType):
            raise ExpectationFailed(
                f"expectation {e.name} ({e.condition}) is not a boolean: it gives "
                f"{kind.simpleString()}"
            )
    return expectations
