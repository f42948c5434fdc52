"""What engine runs a session, decided once per session, and the Spark features it offers.

Stage code is the same on every engine; where an engine lacks a feature, epochgate takes a path
that works on all of them, chosen from the session's engine here rather than by catching an
error on every run. A classic session is Spark. A Spark Connect session is Sail when it was
opened by ``--spark sail`` (``mark_sail``); for any other Connect URL the server is asked once,
with ``SELECT version()``: Spark answers ``MAJOR.MINOR.PATCH REVISION`` (two words), Sail its own
release number alone (one word, e.g. ``0.7.2``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.spark._internals import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Engine:
    """An engine, and whether it offers the Spark features epochgate has another path for."""

    name: str
    observes_metrics: bool
    """Whether a write hands over the metrics of an ``Observation`` (else they are computed)."""
    names_input_files: bool
    """Whether a row of a file scan tells its file (``input_file_name()``, ``_metadata``)."""


SPARK = Engine("spark", observes_metrics=True, names_input_files=True)
SPARK_CONNECT = Engine("spark-connect", observes_metrics=True, names_input_files=True)
SAIL = Engine("sail", observes_metrics=False, names_input_files=False)
"""Sail 0.7 refuses ``Observation`` ("collect metrics"), ``input_file_name()`` and the
``_metadata`` column."""

_KNOWN: weakref.WeakKeyDictionary[SparkSession, Engine] = weakref.WeakKeyDictionary()


def mark_sail(spark: SparkSession) -> None:
    """Record that ``spark`` is a session on a Sail server (one epochgate started or found)."""
    _KNOWN[spark] = SAIL


def engine_of(spark: SparkSession) -> Engine:
    """The engine of ``spark``: known, or found out on first use (see the module docs)."""
    found = _KNOWN.get(spark)
    if found is None:
        found = _ask(spark) if is_connect(spark) else SPARK
        _KNOWN[spark] = found
    return found


def _ask(spark: SparkSession) -> Engine:
    version = str(spark.sql("SELECT version()").collect()[0][0])
    return SAIL if is_sail_version(version) else SPARK_CONNECT


def is_sail_version(version: str) -> bool:
    """Whether ``SELECT version()`` answered as Sail does.

    >>> is_sail_version("0.7.2"), is_sail_version("4.3.0 1a2b3c4d")
    (True, False)
    """
    return len(version.split()) == 1
