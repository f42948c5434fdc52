"""YARN's Hadoop defaults are out of a local driver's Hadoop configuration
(``pipelines.spark.hadoop_defaults``), and only they: a setting the user gave stays."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from pipelines.spark.hadoop_defaults import PLUGIN, PLUGINS_KEY

pytestmark = pytest.mark.spark


def _sources(conf: Any) -> Counter[str]:
    """How many settings of the Hadoop configuration ``conf`` each source gave last."""
    counted: Counter[str] = Counter()
    entries = conf.iterator()
    while entries.hasNext():
        sources = conf.getPropertySources(entries.next().getKey())
        counted[sources[-1] if sources else "?"] += 1
    return counted


def test_a_local_session_writes_and_reads_without_yarns_defaults(
    spark: SparkSession, tmp_path: Path
) -> None:
    assert PLUGIN in str(spark.conf.get(PLUGINS_KEY, "")).split(",")
    spark.range(5).write.parquet(str(tmp_path / "out"))  # a write loads JobConf
    read = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(row.id for row in read) == [0, 1, 2, 3, 4]
    session_conf = spark._jsparkSession.sessionState().newHadoopConf()
    for conf in (spark.sparkContext._jsc.hadoopConfiguration(), session_conf):
        sources = _sources(conf)
        assert sources["yarn-default.xml"] == 0, sources
        assert sources["core-default.xml"] > 300, sources
        assert sources["mapred-default.xml"] > 100, sources


def test_a_yarn_setting_the_user_gave_stays(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = jvm.org.apache.hadoop.conf.Configuration()
    jvm.org.apache.hadoop.mapred.JobConf()  # its class adds YARN's defaults to every configuration
    conf.set("yarn.resourcemanager.hostname", "rm.example")
    assert conf.get("yarn.nodemanager.vmem-pmem-ratio") == "2.1"  # one of YARN's defaults
    dropped = jvm.epochgate.spark.HadoopDefaults.drop(conf)
    assert dropped > 400
    assert conf.get("yarn.nodemanager.vmem-pmem-ratio") is None
    assert conf.get("yarn.resourcemanager.hostname") == "rm.example"
    assert conf.get("fs.defaultFS") == "file:///"
    assert jvm.epochgate.spark.HadoopDefaults.drop(conf) == 0
