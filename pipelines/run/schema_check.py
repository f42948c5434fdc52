"""Whether a set of columns fits a source's schema: names and Spark type names, nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipelines.errors import InputValidationError
from progress import Time

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def type_mismatch(expected: StructType, got: StructType) -> tuple[str, str, str] | None:
    """The first column of ``expected`` that ``got`` lacks or types otherwise, as
    ``(column, what got has, what expected has)`` in Spark type names (``missing`` when absent);
    None when every column of ``expected`` is in ``got`` with its type."""
    have = {f.name: f.dataType for f in got.fields}
    for field in expected.fields:
        if have.get(field.name) != field.dataType:
            found = have[field.name].simpleString() if field.name in have else "missing"
            return field.name, found, field.dataType.simpleString()
    return None


def check_columns(
    stage: str, epoch: Time, have: Mapping[str, str], schema: StructType, file: str | None
) -> None:
    """Raise ``InputValidationError`` naming the first missing, mistyped or unexpected column.
    ``have`` maps each column present to its Spark type name (``bigint``, ``string``...)."""
    for field in schema.fields:
        if field.name not in have:
            raise InputValidationError(stage, epoch, "missing column", file=file, column=field.name)
        expected = field.dataType.simpleString()
        if have[field.name] != expected:
            raise InputValidationError(
                stage,
                epoch,
                f"has type {have[field.name]}, expected {expected}",
                file=file,
                column=field.name,
            )
    extra = [name for name in have if name not in schema.fieldNames()]
    if extra:
        raise InputValidationError(stage, epoch, "unexpected column", file=file, column=extra[0])
