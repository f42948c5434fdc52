"""YARN's Hadoop defaults, out of a local driver's Hadoop configuration.

The first Spark write loads Hadoop's ``JobConf``, which adds ``yarn-default.xml`` to the defaults
of every Hadoop configuration: about 530 of a session's 1,100 Hadoop settings. Each write
serializes the driver's whole Hadoop configuration into every one of its tasks, and each task
reads it back: without YARN's settings, a small Parquet write and read costs the JVM about a sixth
less CPU (medians of five alternations of 40 each in one session: 255 against 302 ms with the
suite's JVM options, 301 against 359 ms with the JVM's own).

No YARN code runs where the executors are in the driver's JVM (``local``, ``local[N]``): there,
every driver epochgate starts (a Connect server's too) has the Spark plugin ``HadoopDefaults``
of epochgate's jar (``pipelines/spark/java``). It loads ``JobConf`` as the driver starts, then
removes each setting whose only source is ``yarn-default.xml``; one the user gave
(``spark.hadoop.yarn.*``, a ``yarn-site.xml``) stays. A cluster's executors would load the
plugin's class too, and may not see the jar: a cluster's driver keeps YARN's defaults. Plugins
a ``conf`` names come first, then this one.
"""

from __future__ import annotations

from pipelines.spark.local_fs import is_single_jvm

PLUGIN = "epochgate.spark.HadoopDefaults"
PLUGINS_KEY = "spark.plugins"


def plugin_conf(master: str, conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the plugin added to ``spark.plugins`` for a master whose executors are in
    the driver's JVM (see the module docs).

    >>> plugin_conf("local[2]", {})
    {'spark.plugins': 'epochgate.spark.HadoopDefaults'}
    >>> plugin_conf("local[2]", {PLUGINS_KEY: "com.acme.Metrics"})[PLUGINS_KEY]
    'com.acme.Metrics,epochgate.spark.HadoopDefaults'
    >>> plugin_conf("spark://node:7077", {})
    {}
    """
    if not is_single_jvm(master):
        return conf
    named = [p.strip() for p in conf.get(PLUGINS_KEY, "").split(",") if p.strip()]
    if PLUGIN in named:
        return conf
    return {**conf, PLUGINS_KEY: ",".join([*named, PLUGIN])}
