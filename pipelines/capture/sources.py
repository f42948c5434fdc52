"""The spec of a replayed source, made from its capture directories: their headers say its
columns and its streams, and a directory that holds no capture is refused as it is named."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.capture.log import Header, read_header
from pipelines.errors import PipelineDefinitionError
from pipelines.stages.arguments import check_workers
from pipelines.stages.replayed import ReplayStage
from progress.capture import StreamError

if TYPE_CHECKING:
    import os

    from pyspark.sql.types import StructType


def replay_stage(
    pipeline: str,
    name: str,
    directories: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    workers: int,
) -> ReplayStage:
    """The spec of a replayed source, its columns read from the captures' headers; raises
    ``PipelineDefinitionError`` naming the directory (a missing one, one that holds no capture,
    a capture without columns) or the directories whose columns differ."""
    if isinstance(directories, str | Path) or not isinstance(directories, Sequence):
        directories = [directories]
    if not directories:
        raise PipelineDefinitionError(
            pipeline,
            name,
            "a replayed source needs at least one capture directory",
            argument="directories",
        )
    workers = check_workers(pipeline, name, workers, ReplayStage.kind)
    paths = [str(Path(d).resolve()) for d in directories]
    repeated = sorted({p for p in paths if paths.count(p) > 1})
    if repeated:
        raise PipelineDefinitionError(
            pipeline,
            name,
            f"capture directories named twice: {', '.join(repeated)}",
            argument="directories",
        )
    headers = [_header(pipeline, name, p) for p in paths]
    schemas = [_schema(pipeline, name, p, h) for p, h in zip(paths, headers, strict=True)]
    first = _columns(schemas[0])
    for path, schema in zip(paths[1:], schemas[1:], strict=True):
        if _columns(schema) != first:
            raise PipelineDefinitionError(
                pipeline,
                name,
                f"the captures' columns differ: {paths[0]} has {_shown(schemas[0])}; {path} "
                f"has {_shown(schema)}",
                argument="directories",
            )
    ids = [h.stream for h in headers]
    twice = sorted({paths[i] for i, s in enumerate(ids) if ids.count(s) > 1})
    if twice:
        raise PipelineDefinitionError(
            pipeline,
            name,
            f"directories holding the same captured stream (copies of one capture): "
            f"{', '.join(twice)}",
            argument="directories",
        )
    return ReplayStage(
        name=name,
        schema=schemas[0],
        workers=workers,
        directories=tuple(paths),
        streams=tuple(ids),
    )


def _header(pipeline: str, name: str, path: str) -> Header:
    if not Path(path).is_dir():
        raise PipelineDefinitionError(
            pipeline, name, f"no capture directory {path}", argument="directories"
        )
    try:
        return read_header(path)
    except StreamError as err:
        raise PipelineDefinitionError(
            pipeline,
            name,
            f"{path} holds no capture this code reads: {err}",
            argument="directories",
        ) from err


def _schema(pipeline: str, name: str, path: str, header: Header) -> StructType:
    from pyspark.sql.types import StructType

    try:
        schema = StructType.fromJson(json.loads(header.schema))
    except Exception as err:
        raise PipelineDefinitionError(
            pipeline,
            name,
            f"the capture in {path} records no columns a source can take "
            f"(schema {header.schema[:80]!r})",
            argument="directories",
        ) from err
    if not schema.fields:
        raise PipelineDefinitionError(
            pipeline, name, f"the capture in {path} records no columns", argument="directories"
        )
    return schema


def _columns(schema: StructType) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def _shown(schema: StructType) -> str:
    return ", ".join(f"{n} {t}" for n, t in _columns(schema))
