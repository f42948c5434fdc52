"""Spark sessions: local by default, any master URL, or a Spark Connect endpoint (``sc://``).

``EPOCHGATE_SPARK`` chooses: ``local[2]`` (default), ``spark://host:7077``, ``yarn``, or
``sc://host:15002`` for a running Spark Connect server.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_ENV = "EPOCHGATE_SPARK"
DEFAULT_MASTER = "local[2]"

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


def spark_session(master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """A session for ``master`` (see the module docs); reuses the active one when it matches."""
    from pyspark.sql import SparkSession

    url = master_url(master)
    if url.startswith("local"):
        # Python UDF workers run on this interpreter (and see this environment's packages).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("epochgate")
    if url.startswith("sc://"):
        builder = builder.remote(url)
    else:
        builder = builder.master(url)
        for key, value in {**LOCAL_CONF, **(conf or {})}.items():
            builder = builder.config(key, value)
    return builder.getOrCreate()
