"""Replayed sources: a source fed by captured streams instead of by ``send``.

A replayed source reads one or many capture directories (``pipelines.capture_log``). Stream
``i`` (the ``i``-th directory) goes to worker ``i % workers``, as timely's replay spreads its
streams; a worker with no stream closes at once, and a worker's capability is the least
frontier of its streams, so the source's frontier passes an epoch only after every stream has
released it. Its columns are those the captures' headers record; they must all agree.
``Runtime.replay()`` feeds the events (``pipelines.replay``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pipelines.capture_log import Header, read_header
from pipelines.errors import PipelineDefinitionError
from pipelines.stages import SourceStage
from progress.capture import StreamError

if TYPE_CHECKING:
    import os

    from pyspark.sql.types import StructType


@dataclass(frozen=True, kw_only=True)
class ReplayStage(SourceStage):
    """A source whose workers replay captured streams: ``directories[i]`` holds stream
    ``streams[i]`` (its id, from the capture's header) and goes to worker ``i % workers``."""

    directories: tuple[str, ...]
    streams: tuple[str, ...]

    kind: ClassVar[str] = "replayed source"

    def worker_of(self, index: int) -> int:
        """The worker that replays stream ``index``."""
        return index % self.workers

    def streams_of(self, worker: int) -> tuple[int, ...]:
        """The streams (by index) that worker ``worker`` replays; none: it closes at once."""
        return tuple(i for i in range(len(self.directories)) if self.worker_of(i) == worker)

    def describe(self) -> str:
        return (
            f"Replayed source: {len(self.directories)} captured stream(s) on "
            f"{self.workers} worker(s); data arrives through `epochgate replay`, not through "
            "Dagster"
        )


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
    if type(workers) is not int or workers < 1:
        raise PipelineDefinitionError(
            pipeline, name, "a replayed source needs at least one worker", argument="workers"
        )
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
