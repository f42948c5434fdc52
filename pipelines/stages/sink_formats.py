"""What a sink publishes to: a folder of Parquet files per epoch (the default), or a table of an
open table format that other engines read with its history: Delta Lake (``deltalake``) or Apache
Iceberg (``pyiceberg``). A format's library comes with an extra of its own, never with the core;
a sink of a format whose library is missing is refused when it is defined, naming the extra.

    >>> sink_format("delta") is SinkFormat.DELTA
    True
"""

from __future__ import annotations

import importlib.util
from enum import StrEnum

from pipelines.errors import PipelineDefinitionError

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
    """A sink's format, once its library is installed (else an error naming the extra); an
    Iceberg sink is not written yet."""
    chosen = sink_format(value, pipeline=pipeline, stage=stage)
    if chosen is SinkFormat.ICEBERG:
        raise PipelineDefinitionError(
            pipeline,
            stage,
            "Iceberg sinks are not supported yet: publish to format='delta' or 'parquet'",
            argument="format",
        )
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
