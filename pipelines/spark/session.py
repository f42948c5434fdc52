"""Spark sessions: local by default, any master URL, or a Spark Connect endpoint (``sc://``).

``EPOCHGATE_SPARK`` chooses: ``local[2]`` (default), ``spark://host:7077``, ``yarn``, or
``sc://host:15002`` for a running Spark Connect server (``epochgate spark start`` runs one on
this machine). A Connect client needs the ``connect`` extra: ``pip install 'epochgate[connect]'``.
``sail`` (or ``sail-local-cluster``) runs on a local Sail server (``pipelines.spark.sail``), which
needs the ``sail`` extra.

A local master's driver listens on 127.0.0.1 only (its RPC and block manager ports), unless
the caller's ``conf`` sets ``spark.driver.bindAddress`` or ``spark.driver.host``, or
``$SPARK_LOCAL_IP`` names another address.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pipelines.errors import SparkUnavailableError
from pipelines.spark import jvm
from pipelines.spark._internals import (
    abandon,
    check_connect_client,
    is_connect,
    other_connect_session,
    refused_client,
    silence_query_context_loggers,
)
from pipelines.spark.connect_token import LOOPBACK_HOSTS, client_url, redacted, refusal_reason
from pipelines.spark.engine import mark_sail

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_ENV = "EPOCHGATE_SPARK"
DEFAULT_MASTER = "local[2]"
CONNECT_SCHEME = "sc://"
CONNECT_DEFAULT_PORT = 15002
SAIL_ENGINES = ("sail", "sail-local-cluster")
"""Sail, on a local server (``pipelines.spark.sail``); the second in its local-cluster mode."""

LOOPBACK = "127.0.0.1"
LOCAL_IP_ENV = "SPARK_LOCAL_IP"
BIND_KEYS = ("spark.driver.bindAddress", "spark.driver.host")
"""Where a driver listens (its RPC and block manager ports) and the address it gives out."""

# Small local defaults: few shuffle partitions suit per-epoch batches on a laptop or CI box.
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "static",
    "spark.driver.memory": "2g",
}


def master_url(flag: str | None = None) -> str:
    return flag or os.environ.get(SPARK_ENV) or DEFAULT_MASTER


def quiet(spark: SparkSession, level: str = "ERROR") -> None:
    """Show only ``level`` and worse from the driver's log, and nothing from PySpark's query
    context loggers: the error they print is raised anyway, and epochgate names it in one line.

    A Connect session has no driver in this process (the server writes its own log), so only
    the query context loggers change for it."""
    silence_query_context_loggers()
    if not is_connect(spark):
        spark.sparkContext.setLogLevel(level)


SparkFactory = Callable[[], "SparkSession"]
"""What starts a Spark session when first asked for one (e.g. ``spark_session``)."""


class LazySpark:
    """A Spark session, or what starts one the first time it is needed: a command that only
    talks to the ledger, or sends a file that passes the pyarrow check, starts no JVM."""

    def __init__(self, spark: SparkSession | SparkFactory) -> None:
        self._session: SparkSession | None
        self._factory: SparkFactory | None
        if callable(spark):  # a session object is not callable; its factory is
            self._session, self._factory = None, spark
        else:
            self._session, self._factory = spark, None

    @classmethod
    def of(cls, spark: SparkSession | SparkFactory | LazySpark) -> LazySpark:
        """``spark`` itself when it is one already (shared: started once for every holder)."""
        return spark if isinstance(spark, LazySpark) else cls(spark)

    @property
    def started(self) -> bool:
        """Whether the session exists (was given, or was started by a use)."""
        return self._session is not None

    def session(self) -> SparkSession:
        """The session, started now if this is its first use."""
        if self._session is None:
            assert self._factory is not None
            self._session = self._factory()
        return self._session


def spark_session(master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """A session for ``master`` (see the module docs); reuses the active one when it matches.

    For ``sc://`` the server's own settings apply; of ``conf`` only the ``spark.sql.*`` ones
    (session settings) are sent. The URL of a Sail server ``epochgate sail start`` runs here
    opens the session ``sail`` would. A Connect URL with no server answering fails at once, naming
    the URL, instead of retrying for minutes.
    """
    from pyspark.sql import SparkSession

    url = master_url(master)
    if url in SAIL_ENGINES:
        from pipelines.spark.sail import server_url  # a Sail server's, started if need be

        return _sail_session(server_url(url), conf)
    if url.startswith(CONNECT_SCHEME):
        if _started_sail(url):
            return _sail_session(url, conf)
        return _connect_session(url, conf or {})
    if url.startswith("local"):
        # Python UDF workers run on this interpreter (and see this environment's packages).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("epochgate").master(url)
    given = jvm.driver_conf(conf or {}, url)  # the driver's JVM starts here
    bind = local_bind(url, given, os.environ.get(LOCAL_IP_ENV))
    for key, value in {**LOCAL_CONF, **bind, **given}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def quiet_session(master: str | None = None) -> SparkSession:
    """``spark_session(master)``, quieted: what a command starts when it first needs Spark."""
    session = spark_session(master)
    quiet(session)
    return session


def local_bind(master: str, conf: dict[str, str], local_ip: str | None) -> dict[str, str]:
    """For a local master, the driver's sockets on 127.0.0.1 only (Spark would otherwise
    listen on the machine's external address), unless ``conf`` sets either bind setting or
    ``local_ip`` (``$SPARK_LOCAL_IP``) chooses the address.

    >>> local_bind("local[2]", {}, None)
    {'spark.driver.bindAddress': '127.0.0.1', 'spark.driver.host': '127.0.0.1'}
    >>> local_bind("local[2]", {"spark.driver.host": "10.0.0.5"}, None)
    {}
    >>> local_bind("local[2]", {}, "10.0.0.5"), local_bind("spark://node:7077", {}, None)
    ({}, {})
    """
    if not master.startswith("local") or local_ip:
        return {}
    if any(key in conf for key in BIND_KEYS):
        return {}
    return dict.fromkeys(BIND_KEYS, LOOPBACK)


def _sail_session(url: str, conf: dict[str, str] | None) -> SparkSession:
    """A session on a Sail server of this machine's: a Sail server takes no settings when it
    starts (a Connect server epochgate starts does), so its sessions are given the local ones."""
    spark = _connect_session(url, {**LOCAL_CONF, **(conf or {})})
    mark_sail(spark)
    return spark


def _started_sail(url: str) -> bool:
    """Whether ``url`` is that of a Sail server ``epochgate sail start`` runs on this machine
    (a session on it is opened as ``sail`` opens one)."""
    host, port = connect_address(url)
    if host not in LOOPBACK_HOSTS:
        return False
    from pipelines.spark.sail import status

    return status(port).running


def _connect_session(url: str, conf: dict[str, str]) -> SparkSession:
    from pyspark.sql import SparkSession

    shown = redacted(url)  # messages name the URL without its token
    try:
        check_connect_client()
    except ImportError as err:
        reason = f"{err}; install the client with: pip install 'epochgate[connect]'"
        raise SparkUnavailableError(shown, reason) from None
    host, port = connect_address(url)
    try:
        socket.create_connection((host, port), timeout=5.0).close()
    except OSError as err:
        hint = ""
        if host in LOOPBACK_HOSTS:
            flag = "" if port == CONNECT_DEFAULT_PORT else f" --port {port}"
            hint = f"; start one with: epochgate spark start{flag}"
        raise SparkUnavailableError(
            shown, f"no Spark Connect server answers ({err.strerror or err}){hint}"
        ) from None
    # The token of a server epochgate started on this machine, unless the caller gave one.
    target = client_url(url, port)
    builder = SparkSession.builder.appName("epochgate").remote(target)
    for key, value in conf.items():
        if key.startswith("spark.sql."):
            builder = builder.config(key, value)
    try:
        other = other_connect_session(target)
        if other is not None:  # PySpark's getOrCreate would hand it back as it is
            abandon(other)
        return builder.getOrCreate()  # sends the app name: a refused token shows here
    except Exception as err:
        condition = getattr(err, "getCondition", lambda: None)()
        if condition == "INVALID_CONNECT_URL":
            raise SparkUnavailableError(  # PySpark's words would quote the token
                shown, "a parameter of the URL is not key=value (a value may hold no = or ;)"
            ) from None
        if condition == "SESSION_ALREADY_EXIST":
            raise SparkUnavailableError(
                shown,
                "this process already holds a Spark session of its own (local or on a cluster), "
                "and a process holds that kind or Spark Connect ones, not both: use one engine "
                "per process",
            ) from None
        refusal = refused_client(err)
        if refusal is None:
            raise
        raise SparkUnavailableError(shown, refusal_reason(refusal, port)) from None


def connect_address(url: str) -> tuple[str, int]:
    """Host and port of ``sc://host[:port][/;params]`` (port 15002 when none is given)."""
    parts = urlsplit(url.split(";", 1)[0])
    try:
        port = parts.port or CONNECT_DEFAULT_PORT
    except ValueError:
        raise SparkUnavailableError(
            redacted(url), "the port is not a number from 1 to 65535"
        ) from None
    if not parts.hostname:
        raise SparkUnavailableError(redacted(url), "no host: write sc://HOST:PORT")
    return parts.hostname, port
