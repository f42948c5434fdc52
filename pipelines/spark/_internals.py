"""Every reach into PySpark's internals, in one place: module-name checks, private helpers,
logger names and the wheel's scripts. PySpark may move any of them in a release; when it does,
this is the one module to change (``tests/test_layout.py`` keeps them here).

Nothing here imports PySpark at module level: a definition that checks a schema loads no Spark.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession
    from pyspark.sql.types import DataType, StructType

CONNECT_SERVER_SCRIPT = Path("sbin", "start-connect-server.sh")
"""The wheel's script that starts a Spark Connect server (relative to ``pyspark_home()``)."""

CONNECT_CLIENT_LOGGER = "pyspark.sql.connect.logging"
"""The Spark Connect client's logger, which reports handles released after a server stopped."""

QUERY_CONTEXT_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")
"""PySpark's Python loggers that print every analysis error as a JSON block (with the JVM's
stack trace) when the error is raised, whether or not anyone catches it."""


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client session (it has no JVM of its own)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def loaded_struct_type() -> type[StructType] | None:
    """PySpark's ``StructType`` if its module is loaded, else None: a value can only be one once
    it is, so a check needs no import of pyspark for a definition that has none."""
    types = sys.modules.get("pyspark.sql.types")
    found: type[StructType] | None = None if types is None else types.StructType
    return found


def pyspark_home() -> Path:
    """The installed pyspark package, which carries Spark's jars and ``sbin`` scripts."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def silence_query_context_loggers() -> None:
    """Nothing from PySpark's query context loggers: the error they print is raised anyway."""
    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:
        # Created through PySparkLogger: PySpark logs to them with its own keyword arguments.
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


def quiet_connect_client() -> None:
    """Only errors from the Spark Connect client's own logger."""
    logging.getLogger(CONNECT_CLIENT_LOGGER).setLevel(logging.ERROR)


def check_connect_client() -> None:
    """Raise ``ImportError`` naming what the Spark Connect client lacks (grpcio, pandas, ...)."""
    from pyspark.sql.connect.utils import check_dependencies

    check_dependencies()


def observation_for(df: DataFrame) -> Observation:
    """A new ``Observation`` of the kind ``df``'s session takes (a Connect frame takes the
    Connect client's, which is typed apart)."""
    from typing import cast

    if is_connect(df.sparkSession):
        from pyspark.sql.connect.observation import Observation as ConnectObservation

        return cast("Observation", ConnectObservation())
    from pyspark.sql import Observation as ClassicObservation

    return ClassicObservation()


def spark_type_of_arrow(arrow_type: Any) -> DataType:
    """The Spark type of a pyarrow type (as a Parquet footer records it)."""
    from pyspark.sql.pandas.types import from_arrow_type

    found: DataType = from_arrow_type(arrow_type)
    return found
