"""The local file system a local driver writes with: Hadoop's, with its files' and directories'
permissions set in the JVM.

Hadoop sets the permissions of every file and directory it creates on the local file system
(each Parquet part, its checksum file, each ``_temporary`` directory of a write) through its
native library, which the PySpark wheel does not carry; without it, Hadoop starts a ``chmod``
process for each, about a dozen for a write of two partitions: setting them in the JVM takes
about a third off the CPU such a small write costs. epochgate's jar
(``jars/epochgate-spark.jar``, built from ``java/`` by ``make jar``) holds
``epochgate.spark.LocalFileSystem``: Hadoop's local file system, with each permission set by
``chmod(2)`` from the JVM (or Hadoop's way when its native library is loaded, or for a mode with
a sticky bit).

Every driver epochgate starts has the jar on its class path (the class-data archive's JVMs all
begin their class path alike, ``pipelines.spark.jvm``); a local master's (``local``, ``local[N]``:
the executors are in the driver's JVM), also a Connect server's that epochgate starts with one,
writes with its file system. A cluster's executors are JVMs of their own, which may not see the
jar at this machine's path: they keep Hadoop's. A ``conf`` that sets ``spark.hadoop.fs.file.impl``
keeps its own choice.
"""

from __future__ import annotations

import os
from pathlib import Path

JAR = Path(__file__).with_name("jars") / "epochgate-spark.jar"
FILE_SYSTEM = "epochgate.spark.LocalFileSystem"
FS_KEY = "spark.hadoop.fs.file.impl"
CLASSPATH_KEY = "spark.driver.extraClassPath"


def local_fs_conf(master: str, conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the jar first on the driver's class path and, for a local master, the file
    system chosen (see the module docs) unless ``conf`` chooses one.

    >>> conf = local_fs_conf("local[2]", {})
    >>> conf[FS_KEY], conf[CLASSPATH_KEY] == str(JAR)
    ('epochgate.spark.LocalFileSystem', True)
    >>> FS_KEY in local_fs_conf("spark://node:7077", {})
    False
    >>> local_fs_conf("local[2]", {FS_KEY: "x", CLASSPATH_KEY: "/opt/a.jar"}) == {
    ...     FS_KEY: "x", CLASSPATH_KEY: f"{JAR}:/opt/a.jar"}
    True
    """
    given = conf.get(CLASSPATH_KEY, "")
    classpath = (
        given
        if str(JAR) in given.split(os.pathsep)
        else os.pathsep.join(part for part in (str(JAR), given) if part)
    )
    chosen = {CLASSPATH_KEY: classpath}
    if is_single_jvm(master) and FS_KEY not in conf:
        chosen[FS_KEY] = FILE_SYSTEM
    return {**conf, **chosen}


def is_single_jvm(master: str) -> bool:
    """Whether ``master`` runs its executors in the driver's JVM (``local``, ``local[N]``,
    ``local[N,F]``, ``local[*]``), not ``local-cluster[...]`` or a cluster's.

    >>> [is_single_jvm(m) for m in ("local", "local[2]", "local-cluster[2,1,1024]", "yarn")]
    [True, True, False, False]
    """
    return master == "local" or master.startswith("local[")
