"""Every reach into PySpark's internals, in one place: module-name checks, private helpers,
logger names and the wheel's scripts. PySpark may move any of them in a release; when it does,
this is the one module to change (``tests/test_layout.py`` keeps them here). Sail's
(``pysail``) entry point and what it expects of PySpark are here too, for the same reason.

Nothing here imports PySpark at module level: a definition that checks a schema loads no Spark.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, Observation, SparkSession
    from pyspark.sql.types import DataType, StructType

CONNECT_SERVER_SCRIPT = Path("sbin", "start-connect-server.sh")
"""The wheel's script that starts a Spark Connect server (relative to ``pyspark_home()``)."""

SPARK_CLASS_SCRIPT = Path("bin", "spark-class")
"""The wheel's script that runs a Spark class in the foreground (a standalone master or worker)."""

CONNECT_CLIENT_LOGGER = "pyspark.sql.connect.logging"
"""The Spark Connect client's logger, which reports handles released after a server stopped."""

QUERY_CONTEXT_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")
"""PySpark's Python loggers that print every analysis error as a JSON block (with the JVM's
stack trace) when the error is raised, whether or not anyone catches it."""


def other_connect_session(target: str) -> SparkSession | None:
    """This process's Spark Connect session when it is on another server than the URL
    ``target``, or holds another token (one given in the environment counts), else ``None``."""
    from pyspark.sql.connect.client.core import DefaultChannelBuilder
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    current = ConnectSession.getActiveSession() or ConnectSession._get_default_session()
    have = getattr(getattr(current, "client", None), "_builder", None)
    if current is None or have is None:
        return None
    want = DefaultChannelBuilder(target)
    if (have.endpoint, have.token) == (want.endpoint, want.token):
        return None
    return current  # type: ignore[return-value]  # a Connect session is used as a SparkSession


def abandon(session: SparkSession) -> None:
    """Stop ``session`` without asking a Spark Connect server to release it first (a server
    that is gone would be asked again for minutes)."""
    if hasattr(session, "release_session_on_close"):
        session.release_session_on_close = False
    with suppress(Exception):  # what is abandoned may be broken: it is dropped either way
        session.stop()


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client session (it has no JVM of its own)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def loaded_struct_type() -> type[StructType] | None:
    """PySpark's ``StructType`` if its module is loaded, else None: a value can only be one once
    it is, so a check needs no import of pyspark for a definition that has none."""
    types = sys.modules.get("pyspark.sql.types")
    found: type[StructType] | None = None if types is None else types.StructType
    return found


def gateway_pid() -> int | None:
    """The pid of this process's Spark gateway JVM (the driver of its classic sessions), None
    when it has started none. It ends by itself once this process has exited (its stdin closes)."""
    context = sys.modules.get("pyspark.core.context")
    gateway = None if context is None else context.SparkContext._gateway
    process = getattr(gateway, "proc", None)
    return None if process is None else int(process.pid)


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


def refused_client(err: BaseException) -> str | None:
    """What a Spark Connect server said when it refused the client's credentials (a gRPC
    ``UNAUTHENTICATED`` status: no token, or a wrong one), else ``None``."""
    status = getattr(err, "getGrpcStatusCode", None)
    if status is None or getattr(status(), "name", None) != "UNAUTHENTICATED":
        return None
    # The client's message is the gRPC error's repr; the server's words are its details.
    said = re.search(r'details = "([^"]*)"', str(err))
    return said.group(1) if said else "unauthenticated"


MISSING_FILE = re.compile(
    r"(?:FileNotFoundException|FILE_NOT_EXIST|PATH_NOT_FOUND)\W.*?(/[^\s,;'\"`]+)",
    re.S,
)
"""Spark's words for a file a task could not find (Java's ``FileNotFoundException``, or an
error class of Spark 4), and the path they name."""


def missing_file(err: BaseException) -> str | None:
    """The local path a Spark job failed to find, when that is why it failed, else ``None``.

    >>> missing_file(Exception("SparkFileNotFoundException: [FAILED_READ_FILE.FILE_NOT_EXIST] "
    ...     "File file:/data/bank/part-0.parquet does not exist"))
    '/data/bank/part-0.parquet'
    >>> missing_file(Exception("java.io.FileNotFoundException: /d/x.parquet (No such file)"))
    '/d/x.parquet'
    >>> missing_file(Exception("FILE_NOT_EXIST] Error reading file:///d/y.parquet."))
    '/d/y.parquet'
    >>> missing_file(Exception("[DIVIDE_BY_ZERO] Division by zero")) is None
    True
    """
    found = MISSING_FILE.search(str(err))
    return "/" + found.group(1).lstrip("/").rstrip(".") if found else None


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


def arrow_schema_of(schema: StructType) -> pa.Schema:
    """The Arrow schema of a Spark schema (timestamps with their instant kept in UTC), as
    PySpark converts it for Arrow transfers."""
    from pyspark.sql.pandas.types import to_arrow_schema

    found: pa.Schema = to_arrow_schema(schema, timezone="UTC")
    return found


def row_verifier(schema: StructType) -> Callable[[Any], None]:
    """PySpark's own check of one row against ``schema``: what ``createDataFrame`` runs on each
    row of a local list (its errors, word for word)."""
    from pyspark.sql.types import _make_type_verifier

    verify: Callable[[Any], None] = _make_type_verifier(schema)
    return verify


SAIL_NEWEST_PYSPARK = (4, 2)
"""The newest PySpark minor version Sail 0.7 knows. Its server reads the version of the PySpark
installed beside it and refuses every session when it is newer ("unsupported PySpark version")."""

SAIL_SERVER_MARK = "epochgate-sail-server"
"""An argument of every Sail server process epochgate starts: what tells it apart by its pid."""

SAIL_LAUNCHER = f"""\
import sys
import pyspark
import pyspark.version

newest = {SAIL_NEWEST_PYSPARK!r}
if tuple(int(p) for p in pyspark.__version__.split(".")[:2]) > newest:
    pyspark.__version__ = pyspark.version.__version__ = "%d.%d.0" % newest
from pysail import _native

ip, port = sys.argv[2], sys.argv[3]
_native.main(["sail", "spark", "server", "--ip", ip, "--port", port])
"""
"""The Sail server's program: ``sail spark server``, with a PySpark newer than Sail knows
presented to it as the newest it knows (the API that Sail uses from PySpark to run Python
UDFs moved in 4.3, so plain Python UDFs and ``mapInPandas`` fail there; all else works)."""


def check_sail() -> None:
    """Raise ``ImportError`` when Sail (the ``pysail`` package) is not installed."""
    import importlib.util

    try:  # without importing it: its engine is a large native library the client never uses
        found = importlib.util.find_spec("pysail")
    except ValueError:  # set to None in sys.modules: blocked
        found = None
    if found is None:
        raise ImportError("No module named 'pysail'")


def sail_server_command(ip: str, port: int) -> list[str]:
    """The command that runs a Sail Spark Connect server on ``ip:port`` in the foreground, on
    this interpreter (whose ``pysail`` and ``pyspark`` it uses)."""
    return [sys.executable, "-c", SAIL_LAUNCHER, SAIL_SERVER_MARK, ip, str(port)]
