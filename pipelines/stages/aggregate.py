"""The aggregate stage: keyed running aggregates over every input row up to the epoch.

    per_merchant = bank.aggregate("per_merchant", movements, key=["merchant"],
                                  aggs={"cents": ("sum", "amount_cents"), "n": ("count", None)})

Its value for a key after epoch e is the aggregate of every input row of that key at epochs
<= e. An epoch run aggregates the epoch's rows per key and merges them into the keys' previous
values (the stateful carry, with a merge it derives from ``aggs``): its output is the new values
of the keys the epoch moved. Because each function merges (a sum of sums, a sum of counts, a min
of mins, a max of maxes), an upquery answers a key's whole history in one pass: partial values
per key and epoch, then running values over the epochs.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from pipelines.errors import PipelineDefinitionError
from pipelines.stages.kinds import ColumnsOf, KeyedStage

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType


_PARTIALS: weakref.WeakKeyDictionary[
    SparkSession, dict[tuple[tuple[str, ...], tuple[Aggregation, ...], str], StructType]
] = weakref.WeakKeyDictionary()
"""Per session: the schema of an aggregation's partials, by key, aggregations and input schema."""


class AggregateFunction(StrEnum):
    """An aggregate function: each merges with itself across epochs (a sum of sums, a sum of
    counts, a min of mins, a max of maxes)."""

    SUM = "sum"
    COUNT = "count"
    MIN = "min"
    MAX = "max"

    def over(self, column: str | None) -> Column:
        """Its value over some rows (``count`` of None counts them)."""
        from pyspark.sql import functions as F

        if column is None:
            return F.count(F.lit(1))
        method: Callable[[Column], Column] = getattr(F, self.value)
        return method(F.col(column))

    def merged(self, old: Column, new: Column) -> Column:
        """Its value over the rows of two sets, from its values over each (either may be
        null: no rows, or only nulls)."""
        from pyspark.sql import functions as F

        if self is AggregateFunction.SUM:
            return F.when(old.isNull(), new).when(new.isNull(), old).otherwise(old + new)
        if self is AggregateFunction.COUNT:
            return F.coalesce(old, F.lit(0)) + F.coalesce(new, F.lit(0))
        return (F.least if self is AggregateFunction.MIN else F.greatest)(old, new)

    def running(self, values: Column) -> Column:
        """Its value over every epoch so far, from its values per epoch (over a window): counts
        and sums add up, mins and maxes stay themselves."""
        from pyspark.sql import functions as F

        combine = {AggregateFunction.MIN: F.min, AggregateFunction.MAX: F.max}.get(self, F.sum)
        return combine(values)


@dataclass(frozen=True)
class Aggregation:
    """One output column: ``function`` of ``column`` (``count`` of None counts rows)."""

    name: str
    function: AggregateFunction
    column: str | None

    def partial(self) -> Column:
        """Its value over some rows."""
        return self.function.over(self.column).alias(self.name)


def aggregations(
    pipeline: str, stage: str, aggs: object, key: Sequence[str], known: Sequence[str] | None
) -> tuple[Aggregation, ...]:
    """``aggs`` (``{name: (function, column)}``) checked: identifier names other than the key's,
    known functions, columns of the input when its columns are ``known``."""
    if not isinstance(aggs, Mapping) or not aggs:
        raise PipelineDefinitionError(
            pipeline,
            stage,
            "aggs must be a non-empty dict {name: (function, column)}, e.g. "
            '{"total": ("sum", "amount")}',
            argument="aggs",
        )
    out = []
    for name, spec in aggs.items():
        if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
            raise PipelineDefinitionError(
                pipeline, stage, f"aggregate name {name!r} is not an identifier", argument="aggs"
            )
        if name in key:
            raise PipelineDefinitionError(
                pipeline, stage, f"aggregate {name!r} has a key column's name", argument="aggs"
            )
        if not (isinstance(spec, tuple) and len(spec) == 2):
            raise PipelineDefinitionError(
                pipeline,
                stage,
                f"aggregate {name!r} must be (function, column): {spec!r}",
                argument="aggs",
            )
        function, column = spec
        if function not in set(AggregateFunction):
            raise PipelineDefinitionError(
                pipeline,
                stage,
                f"aggregate {name!r}: unknown function {function!r} "
                f"(one of {', '.join(AggregateFunction)})",
                argument="aggs",
            )
        function = AggregateFunction(function)
        if column is None and function is not AggregateFunction.COUNT:
            raise PipelineDefinitionError(
                pipeline, stage, f"aggregate {name!r}: {function} needs a column", argument="aggs"
            )
        if column is not None and not isinstance(column, str):
            raise PipelineDefinitionError(
                pipeline,
                stage,
                f"aggregate {name!r}: the column must be a name: {column!r}",
                argument="aggs",
            )
        if column is not None and known is not None and column not in known:
            raise PipelineDefinitionError(
                pipeline,
                stage,
                f"aggregate {name!r}: column {column!r} is not in its input, whose columns are "
                f"{', '.join(known)}",
                argument="aggs",
            )
        out.append(Aggregation(name, function, column))
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class AggregateStage(KeyedStage):
    """Keyed running aggregates (see the module docs)."""

    aggs: tuple[Aggregation, ...]

    kind: ClassVar[str] = "aggregate"
    carries: ClassVar[str] = "(running aggregates of every input row so far)"

    def columns(self, of: ColumnsOf) -> tuple[str, ...] | None:
        return (*self.key, *(a.name for a in self.aggs))

    def partials(self, df: DataFrame) -> DataFrame:
        """The aggregates per key over the rows of ``df``."""
        return df.groupBy(*self.key).agg(*(a.partial() for a in self.aggs))

    def plan(self, frames: Sequence[DataFrame | None]) -> DataFrame | None:
        return None if frames[0] is None else self.partials(frames[0])

    def merge(self, schema: StructType) -> Callable[[DataFrame, DataFrame], DataFrame]:
        """The carry's update: the epoch's aggregates merged into the keys' previous ones, each
        cast to its type in the state's ``schema`` (the partials' types: ``partials_schema``).
        Its rows have ``schema``'s types, the key columns being the batch's, which the carry
        checks against the state's."""
        from pyspark.sql import functions as F

        def update(batch: DataFrame, state: DataFrame) -> DataFrame:
            new = self.partials(batch)
            joined = new.alias("n").join(state.alias("o"), on=list(self.key), how="left")
            return joined.select(
                *self.key,
                *(
                    a.function.merged(F.col(f"o.{a.name}"), F.col(f"n.{a.name}"))
                    .cast(schema[a.name].dataType)
                    .alias(a.name)
                    for a in self.aggs
                ),
            )

        return update

    def partials_schema(self, batch: DataFrame) -> StructType:
        """The schema of ``partials(batch)``: asked of the engine once per session and input
        schema (on Spark Connect and Sail each ask is a round trip to the server; ``batch``'s
        own schema, which the carry asks for anyway, is the only one an epoch makes)."""
        known = _PARTIALS.setdefault(batch.sparkSession, {})
        at = (self.key, self.aggs, batch.schema.json())
        if at not in known:
            known[at] = self.partials(batch).schema
        return known[at]

    def running(self, inputs: DataFrame) -> DataFrame:
        """The keys' values after every epoch, from their input rows (``inputs`` has an
        ``_epoch`` column; so has the result), in one pass: aggregates per key and epoch, then
        running ones over the epochs."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        per_epoch = inputs.groupBy(*self.key, "_epoch").agg(*(a.partial() for a in self.aggs))
        types = {f.name: f.dataType for f in per_epoch.schema.fields}
        window = (
            Window.partitionBy(*self.key)
            .orderBy("_epoch")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        return per_epoch.select(
            *self.key,
            *(
                a.function.running(F.col(a.name)).over(window).cast(types[a.name]).alias(a.name)
                for a in self.aggs
            ),
            "_epoch",
        )
