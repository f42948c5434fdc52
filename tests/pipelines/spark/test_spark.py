"""Spark sessions: a local master's driver listens on 127.0.0.1 only."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.sockets import listening, loopback

pytestmark = pytest.mark.spark


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net/tcp")
def test_a_local_session_listens_on_loopback_only(spark: SparkSession) -> None:
    # The suite's session comes from spark_session("local[2]", ...) with no bind setting.
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert spark.range(100).repartition(2).count() == 100  # block manager and shuffle in use
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    sockets = listening(pid)
    assert sockets, f"the driver (pid {pid}) listens on nothing: wrong process?"
    outside = [f"{address}:{port}" for address, port in sockets if not loopback(address)]
    assert outside == [], f"the driver listens beyond 127.0.0.1: {outside}"
