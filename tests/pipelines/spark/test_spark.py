"""Spark sessions: a local master's driver listens on 127.0.0.1 only; a Connect session beside
a local one is refused by name."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.errors import SparkUnavailableError
from pipelines.spark.session import spark_session
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


def test_a_connect_session_beside_a_local_one_is_refused_by_name(spark: SparkSession) -> None:
    """A process holds a local (or cluster) session or Connect ones, not both: asking for the
    other kind names why, and the local session goes on."""
    with socket.socket() as listener:  # something answers at the URL
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"sc://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(SparkUnavailableError) as refused:
            spark_session(url)
    assert str(refused.value) == (
        f"cannot use Spark at {url}: this process already holds a Spark session of its own "
        "(local or on a cluster), and a process holds that kind or Spark Connect ones, not "
        "both: use one engine per process"
    )
    assert spark.range(3).count() == 3
