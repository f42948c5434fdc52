"""The checks of what a pipeline and its stages are defined with: names, functions, schemas,
column lists and join types. Each refuses a bad argument with a ``PipelineDefinitionError``
naming the pipeline, the stage and the argument, so that nothing wrong waits for a run.

    >>> join_kind("LEFT_OUTER")
    'leftouter'
    >>> missing_columns(["ID", "day"], ["id", "amount"])
    ['day']
"""

from __future__ import annotations

import keyword
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pipelines.errors import PipelineDefinitionError
from pipelines.spark._internals import loaded_struct_type

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


class HasSchema(Protocol):
    """A stage as the checks of its readers see it: its name and declared schema, if any."""

    @property
    def name(self) -> str: ...

    @property
    def schema(self) -> StructType | None: ...


NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What a name may be: it becomes a path, a table name and a Dagster asset key, and Dagster
accepts ASCII letters, digits and ``_`` only."""

JOIN_TYPES: dict[str, str] = {
    "inner": "inner",
    "cross": "cross",
    "outer": "fullouter",
    "full": "fullouter",
    "fullouter": "fullouter",
    "left": "leftouter",
    "leftouter": "leftouter",
    "right": "rightouter",
    "rightouter": "rightouter",
    "semi": "leftsemi",
    "leftsemi": "leftsemi",
    "anti": "leftanti",
    "leftanti": "leftanti",
}
"""Spark's join types, as Spark reads them (lower case, ``_`` dropped), and the join each is."""

SPARK_JOIN_TYPES = (
    "inner, cross, outer, full, fullouter, full_outer, left, leftouter, left_outer, right, "
    "rightouter, right_outer, semi, leftsemi, left_semi, anti, leftanti, left_anti"
)
"""How Spark's documentation lists them."""


def check_name(pipeline: str, name: object, what: str = "stage") -> str:
    """Names become paths, table names and Dagster asset keys: ASCII identifiers only, not a
    Python keyword."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or keyword.iskeyword(name):
        raise PipelineDefinitionError(
            pipeline,
            None,
            f"{what} name {name!r} is not a valid identifier (ASCII letters, digits and _, "
            "not starting with a digit, not a Python keyword)",
            argument="name",
        )
    return name


def check_function(pipeline: str, stage: str, argument: str, value: object) -> None:
    """``value`` must be callable: the stage calls it on each epoch's data."""
    if not callable(value):
        raise PipelineDefinitionError(
            pipeline,
            stage,
            f"{argument} must be a function (a callable), not {value!r}",
            argument=argument,
        )


def check_schema(pipeline: str, stage: str, value: object) -> StructType:
    """``value`` must be a ``pyspark.sql.types.StructType``."""
    struct_type = loaded_struct_type()
    if struct_type is not None and isinstance(value, struct_type):
        schema: StructType = value
        return schema
    if type(value).__module__.split(".")[0] == "pyarrow":
        hint = (
            "a pyarrow schema is not one; convert it with "
            "pyspark.sql.pandas.types.from_arrow_schema(schema)"
        )
    else:
        hint = f"got {type(value).__name__}: {value!r}"
    raise PipelineDefinitionError(
        pipeline,
        stage,
        f"schema must be a pyspark.sql.types.StructType; {hint}",
        argument="schema",
    )


def check_columns(pipeline: str, stage: str, argument: str, value: object) -> tuple[str, ...]:
    """``value`` must be a list of column names (a lone string is refused: it is not a list of
    its letters)."""
    if isinstance(value, str):
        raise PipelineDefinitionError(
            pipeline,
            stage,
            f"{argument} must be a list of column names, not the string {value!r} "
            f"(write {argument}=[{value!r}])",
            argument=argument,
        )
    if not isinstance(value, Sequence | set | frozenset) or not all(
        isinstance(c, str) for c in value
    ):
        raise PipelineDefinitionError(
            pipeline,
            stage,
            f"{argument} must be a list of column names, not {value!r}",
            argument=argument,
        )
    return tuple(value)


def check_key(
    pipeline: str, stage: str, value: object, schema: StructType, *, required: bool
) -> tuple[str, ...]:
    """Key columns: a list of names, each a column of ``schema`` (and at least one when
    ``required``)."""
    key = check_columns(pipeline, stage, "key", value)
    if required and not key:
        raise PipelineDefinitionError(
            pipeline, stage, "a stateful stage needs key columns", argument="key"
        )
    missing = [k for k in key if k not in schema.fieldNames()]
    if missing:
        raise PipelineDefinitionError(
            pipeline,
            stage,
            f"key columns {missing} not in schema (its columns: {', '.join(schema.fieldNames())})",
            argument="key",
        )
    return key


def join_kind(how: str) -> str | None:
    """The join Spark makes of ``how`` (its canonical name), or None if Spark has no such join."""
    return JOIN_TYPES.get(how.lower().replace("_", ""))


def check_materialize(pipeline: str, stage: str, materialize: object) -> None:
    """``materialize`` must be True or False (``pipelines.run.ephemeral``)."""
    if type(materialize) is not bool:
        raise PipelineDefinitionError(
            pipeline,
            stage,
            f"materialize must be True or False, not {materialize!r}",
            argument="materialize",
        )


def check_join_type(pipeline: str, stage: str, how: object) -> str:
    """``how`` must be one of Spark's join types."""
    if not isinstance(how, str) or join_kind(how) is None:
        raise PipelineDefinitionError(
            pipeline,
            stage,
            f"{how!r} is not a Spark join type; use one of {SPARK_JOIN_TYPES}",
            argument="how",
        )
    return how


def missing_columns(wanted: Iterable[str], have: Iterable[str]) -> list[str]:
    """The columns of ``wanted`` that ``have`` lacks, compared as Spark resolves names by
    default: case-insensitively."""
    present = {c.lower() for c in have}
    return [c for c in wanted if c.lower() not in present]


def check_sink_path(pipeline: str, stage: str, path: object) -> str:
    """``path`` as a sink stores it, or ``PipelineDefinitionError`` naming the pipeline, the
    stage and ``path``: empty, not a path, or relative and outside the runtime's home.

    >>> check_sink_path("shop", "export", "out/by_category")
    'out/by_category'
    >>> try:
    ...     check_sink_path("shop", "export", "../elsewhere")
    ... except PipelineDefinitionError as err:
    ...     print(err.reason)
    path '../elsewhere' climbs out of the runtime's home: give an absolute path to go there
    """

    def refuse(why: str) -> PipelineDefinitionError:
        return PipelineDefinitionError(pipeline, stage, f"path {path!r} {why}")

    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise refuse("is not a path: give a directory as a string")
    if not path.strip():
        raise refuse(
            "is empty: give the directory to publish each epoch to "
            "(a relative one is under the runtime's home)"
        )
    if "\0" in path:
        raise refuse("holds a NUL character")
    given = Path(path).expanduser()
    if not given.is_absolute():
        normal = os.path.normpath(given)
        if normal == os.pardir or normal.startswith(os.pardir + os.sep):
            raise refuse("climbs out of the runtime's home: give an absolute path to go there")
        if normal == os.curdir:
            raise refuse("is the runtime's home itself: name a directory under it")
    return path


def check_workers(pipeline: str, stage: str, workers: object, kind: str) -> int:
    """``workers`` must be an int >= 1: the input workers of a source of ``kind`` (as people
    call it: "source", "dimension source", "replayed source")."""
    if type(workers) is not int or workers < 1:
        raise PipelineDefinitionError(
            pipeline, stage, f"a {kind} needs at least one worker", argument="workers"
        )
    return workers


def check_input_keys(
    pipeline: str,
    stage: str,
    upstream: HasSchema,
    keys: tuple[str, ...],
    *,
    schema: StructType | None,
    have: tuple[str, ...] | None,
) -> None:
    """Key columns must be in the input (whose columns are ``have`` where known), by name,
    and of the state's types where both the input's and the state's ``schema`` are declared."""
    missing = [k for k in keys if k not in have] if have is not None else []
    if missing:  # matched exactly, as its run looks state up by them
        raise PipelineDefinitionError(
            pipeline,
            stage,
            f"key columns {missing} not in its input {upstream.name!r}, whose columns are "
            f"{', '.join(have or ())}",
            argument="key",
        )
    declared = upstream.schema
    if schema is None or declared is None:
        return
    for k in keys:
        if k in declared.fieldNames() and declared[k].dataType != schema[k].dataType:
            raise PipelineDefinitionError(
                pipeline,
                stage,
                f"key column {k!r} is {declared[k].dataType.simpleString()} in its input "
                f"{upstream.name!r} and {schema[k].dataType.simpleString()} in its schema",
                argument="key",
            )
