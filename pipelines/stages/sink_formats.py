"""What a sink publishes to: a folder of Parquet files per epoch (the default), or a table of an
open table format that other engines read with its history: Delta Lake (``deltalake``) or Apache
Iceberg (``pyiceberg``). A format's library comes with an extra of its own, never with the core;
a sink of a format whose library is missing is refused when it is defined, naming the extra.

    >>> sink_format("delta") is SinkFormat.DELTA
    True
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from enum import StrEnum

from pipelines.errors import PipelineDefinitionError
from pipelines.stages.arguments import NAME, check_sink_path

EPOCH_COLUMN = "epoch"
"""The column a table sink adds to each row: the epoch it belongs to (Delta partitions by it)."""


class SinkFormat(StrEnum):
    """Where a sink publishes each committed epoch (see ``pipelines.run.sinks``)."""

    PARQUET = "parquet"
    DELTA = "delta"
    ICEBERG = "iceberg"

    @property
    def library(self) -> str | None:
        """The module the format is written with (None: Spark's own Parquet)."""
        return _LIBRARIES.get(self)

    @property
    def extra(self) -> str:
        """The extra that installs its library."""
        return self.value


_LIBRARIES = {SinkFormat.DELTA: "deltalake", SinkFormat.ICEBERG: "pyiceberg"}


def sink_format(value: object, *, pipeline: str = "", stage: str = "") -> SinkFormat:
    """``value`` as a ``SinkFormat``, or ``PipelineDefinitionError`` naming the formats."""
    if isinstance(value, SinkFormat):
        return value
    try:
        return SinkFormat(str(value).lower())
    except ValueError:
        known = ", ".join(repr(f.value) for f in SinkFormat)
        raise PipelineDefinitionError(
            pipeline, stage, f"format must be one of {known}, not {value!r}", argument="format"
        ) from None


def check_sink_format(pipeline: str, stage: str, value: object) -> SinkFormat:
    """A sink's format, once its library is installed (else an error naming the extra)."""
    chosen = sink_format(value, pipeline=pipeline, stage=stage)
    library = chosen.library
    if library is not None and importlib.util.find_spec(library) is None:
        raise PipelineDefinitionError(
            pipeline,
            stage,
            f"a {chosen.value} sink needs the {library} library: "
            f"pip install 'epochgate[{chosen.extra}]'",
            argument="format",
        )
    return chosen


def check_sink_target(
    pipeline: str,
    stage: str,
    chosen: SinkFormat,
    *,
    path: object,
    table: object,
    catalog: object,
) -> tuple[str, str | None, tuple[tuple[str, str], ...]]:
    """Where a sink of format ``chosen`` publishes: its checked path (Parquet, Delta) or its
    table and catalog properties (Iceberg), as the sink stores them."""

    def refuse(argument: str, why: str) -> PipelineDefinitionError:
        return PipelineDefinitionError(pipeline, stage, why, argument=argument)

    if chosen is not SinkFormat.ICEBERG:
        if table is not None or catalog is not None:
            raise refuse("table", f"a {chosen.value} sink publishes to a path, not a table")
        return check_sink_path(pipeline, stage, path), None, ()
    if path is not None:
        raise refuse("path", "an iceberg sink publishes to table= of catalog=, not a path")
    parts = table.split(".") if isinstance(table, str) else []
    if len(parts) < 2 or not all(NAME.fullmatch(p) for p in parts):
        raise refuse("table", f"table must be 'namespace.name', not {table!r}")
    if not isinstance(catalog, Mapping) or not catalog.get("type"):
        raise refuse(
            "catalog",
            "give the pyiceberg catalog's properties, its type among them, for example "
            "{'type': 'sql', 'uri': 'sqlite:///lake/catalog.db', 'warehouse': 'lake/wh'}",
        )
    props = tuple(sorted((str(k), str(v)) for k, v in catalog.items()))
    return "", str(table), props
