"""Testing your own pipelines: a throwaway runtime, epochs sent from Python rows, and a stage's
output compared with the rows you expect.

    from pipelines.testing import assert_output, close_sources, send_epochs, throwaway_runtime

    with throwaway_runtime(my_pipeline(), spark) as rt:
        send_epochs(rt, "orders", {0: [(1, "ann", 5.0)], 1: [(2, "bob", 7.5)]})
        close_sources(rt)
        rt.run()
        assert_output(rt, "by_customer", 0, [("ann", 5.0)])

The runtime is the real one: a DuckDB ledger, Parquet attempts and a state store in a
temporary directory, removed when the block ends, and the Spark session you give it (or a local
one). Rows are tuples in the source schema's column order, or dicts by column name.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.errors import PipelineError
from pipelines.reads.arrow_rows import collected_rows
from pipelines.run.runtime import Runtime
from pipelines.spark.local_rows import rows_frame
from pipelines.stages.kinds import Feed, SourceStage
from pipelines.stages.pipeline import Pipeline
from progress.ledger import CommitResult, Ledger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Row = Sequence[Any] | Mapping[str, Any]

__all__ = [
    "assert_output",
    "close_sources",
    "frame",
    "rows_of",
    "send_epochs",
    "send_rows",
    "throwaway_runtime",
]


@contextmanager
def throwaway_runtime(
    pipeline: Pipeline, spark: SparkSession | None = None, *, home: Path | None = None
) -> Iterator[Runtime]:
    """A ``Runtime`` of ``pipeline`` on a fresh ledger, data directory and state store under
    ``home`` (default: a temporary directory, removed afterwards; a given ``home`` is kept)."""
    from pipelines.spark.session import spark_session

    root = home if home is not None else Path(tempfile.mkdtemp(prefix="epochgate-test-"))
    ledger = Ledger(root / "ledger.duckdb")
    # Without a session, a local one starts when something first needs Spark.
    runtime = Runtime(
        pipeline, ledger, spark if spark is not None else spark_session, root / "data"
    )
    try:
        yield runtime
    finally:
        ledger.release()  # both files are kept attached a moment after a use: let them go
        runtime.state.release()
        if home is None:
            shutil.rmtree(root, ignore_errors=True)


def _source(runtime: Runtime, source: str) -> SourceStage:
    stage = runtime.pipeline.stage(source)
    if not isinstance(stage, SourceStage):
        raise PipelineError(f"{source!r} is a {stage.kind} stage, not a source")
    return stage


def frame(runtime: Runtime, source: str, rows: Sequence[Row]) -> DataFrame:
    """``rows`` as a DataFrame with ``source``'s schema, each checked as PySpark's
    ``createDataFrame`` checks it; made from Arrow where the schema allows, so no Spark job over
    it starts Python worker processes (``pipelines.spark.local_rows``)."""
    schema = _source(runtime, source).schema
    names = schema.fieldNames()
    tuples = [tuple(r[n] for n in names) if isinstance(r, Mapping) else tuple(r) for r in rows]
    return rows_frame(runtime.spark, tuples, schema)


def send_rows(
    runtime: Runtime, source: str, rows: Sequence[Row], *, worker: int = 0
) -> CommitResult:
    """Send ``rows`` as one message of ``source``'s ``worker`` at the epoch it is at."""
    return runtime.input(source, worker).send(frame(runtime, source, rows))


def send_epochs(
    runtime: Runtime,
    source: str,
    epochs: Mapping[int, Sequence[Row]],
    *,
    worker: int = 0,
    close: bool = False,
) -> None:
    """Send each epoch's rows from ``source``'s ``worker``, in epoch order, advancing it to
    each epoch first (epochs skipped are sealed empty). Afterwards the worker is at the epoch
    after the last, or closed with ``close``."""
    handle = runtime.input(source, worker)
    order = sorted(epochs)
    after = [*order[1:], None if close or not order else order[-1] + 1]
    for epoch, then in zip(order, after, strict=False):
        if handle.epoch != epoch:
            handle.advance_to(epoch)
        # Each epoch's rows and the move to the next epoch, in one commit.
        handle.send(frame(runtime, source, epochs[epoch]), advance_to=then)
    if close:
        handle.close()


def close_sources(runtime: Runtime) -> None:
    """Close every worker of every source that is still open: nothing more will come (a
    replayed source's workers close when their captures say so)."""
    for stage in runtime.pipeline.stages.values():
        if stage.fed_by is Feed.SEND:
            assert isinstance(stage, SourceStage)
            for worker in range(stage.workers):
                handle = runtime.input(stage.name, worker)
                if handle.epoch is not None:
                    handle.close()


def rows_of(
    runtime: Runtime, stage: str, epoch: int, *, columns: Sequence[str] | None = None
) -> list[tuple[Any, ...]]:
    """The committed output rows of ``stage`` at ``epoch`` (its ``columns``, default all), read
    without a Spark job where its files allow (``Runtime.read_arrow``)."""
    table = runtime.read_arrow(stage, epoch)
    return collected_rows(table, columns if columns is not None else table.column_names)


def assert_output(
    runtime: Runtime,
    stage: str,
    epoch: int,
    expected: Sequence[Row],
    *,
    columns: Sequence[str] | None = None,
    digits: int = 6,
) -> None:
    """Assert that ``stage``'s committed output at ``epoch`` holds exactly the ``expected``
    rows, in any order, each as many times (floats compared to ``digits`` decimals). The
    ``AssertionError`` lists the rows missing and the rows not expected."""
    table = runtime.read_arrow(stage, epoch)
    names = list(columns) if columns is not None else table.column_names
    want = Counter(
        _rounded(tuple(r[n] for n in names) if isinstance(r, Mapping) else tuple(r), digits)
        for r in expected
    )
    have = Counter(_rounded(r, digits) for r in collected_rows(table, names))
    if want == have:
        return
    missing = sorted((want - have).elements(), key=repr)
    extra = sorted((have - want).elements(), key=repr)
    lines = [f"stage {stage!r} epoch {epoch} ({', '.join(names)}):"]
    if missing:
        lines.append(f"  {len(missing)} expected row(s) missing: {missing[:10]}")
    if extra:
        lines.append(f"  {len(extra)} row(s) not expected: {extra[:10]}")
    raise AssertionError("\n".join(lines))


def _rounded(row: tuple[Any, ...], digits: int) -> tuple[Any, ...]:
    return tuple(round(v, digits) if isinstance(v, float) else v for v in row)
