"""epochgate's local file system (``pipelines.spark.local_fs``): a local driver writes with it,
the files and directories it makes get the modes Hadoop's own gives them, and no ``chmod``
process is started for them; the jar the package carries is what its source builds."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import zipfile
from functools import reduce
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from pipelines.spark.local_fs import FILE_SYSTEM, JAR

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]


def _file_system(spark: SparkSession, name: str) -> Any:
    """A file system of class ``name`` on ``file:///``, with the session's Hadoop settings."""
    jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    assert jvm is not None
    fs = reduce(getattr, name.split("."), jvm)()
    fs.initialize(jvm.java.net.URI("file:///"), conf)
    return fs


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``argv`` in the repository with ``env``, which must succeed."""
    done = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def _modes(root: Path) -> dict[str, int]:
    return {
        str(path.relative_to(root)): stat.S_IMODE(path.stat().st_mode)
        for path in sorted(root.rglob("*"))
    }


def test_a_local_session_writes_with_it_and_its_modes_are_hadoops(
    spark: SparkSession, tmp_path: Path
) -> None:
    jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    assert jvm is not None
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    assert fs.getClass().getName() == FILE_SYSTEM

    # The same files and directories made by Hadoop's own local file system and by epochgate's.
    made = {}
    for name in ("org.apache.hadoop.fs.LocalFileSystem", FILE_SYSTEM):
        root = tmp_path / name
        fs = _file_system(spark, name)
        fs.mkdirs(jvm.org.apache.hadoop.fs.Path(str(root / "a" / "b")))
        fs.create(jvm.org.apache.hadoop.fs.Path(str(root / "a" / "b" / "part"))).close()
        for mode, path in ((0o640, root / "a" / "b" / "part"), (0o700, root / "a")):
            fs.setPermission(
                jvm.org.apache.hadoop.fs.Path(str(path)),
                jvm.org.apache.hadoop.fs.permission.FsPermission(mode),
            )
        made[name] = _modes(root)
    hadoops, ours = made.values()
    assert ours == hadoops
    assert (ours["a"], ours["a/b"], ours["a/b/part"]) == (0o700, 0o755, 0o640)
    assert ours["a/b/.part.crc"] == 0o640  # the checksum file's too

    spark.range(10).write.parquet(str(tmp_path / "written"))
    modes = _modes(tmp_path / "written")
    assert len(modes) > 2
    assert set(modes.values()) == {0o644}  # Hadoop's file default, its umask applied


CHILD = """
import sys
from pipelines.spark.session import spark_session

spark = spark_session("local[1]")
spark.range(100).repartition(2).write.parquet(sys.argv[1] + "/written")
print(spark.read.parquet(sys.argv[1] + "/written").count())
with open(sys.argv[2]) as calls:
    print(len(calls.readlines()))  # chmod processes started for the write: none
jvm = spark.sparkContext._jvm
hadoops = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
hadoops.initialize(jvm.java.net.URI("file:///"), spark.sparkContext._jsc.hadoopConfiguration())
fs = jvm.org.apache.hadoop.fs
hadoops.setPermission(fs.Path(sys.argv[1]), fs.permission.FsPermission(448))
with open(sys.argv[2]) as calls:
    print(len(calls.readlines()))  # Hadoop's own starts one
"""


def test_its_writes_start_no_chmod_process(tmp_path: Path) -> None:
    """In a child whose ``chmod`` (first on its PATH) notes each call before it runs."""
    shims, calls = tmp_path / "bin", tmp_path / "calls"
    shims.mkdir()
    calls.touch()
    real = shutil.which("chmod")
    assert real is not None
    chmod = shims / "chmod"
    chmod.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real} "$@"\n')
    chmod.chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    done = _run([sys.executable, "-c", CHILD, str(tmp_path), str(calls)], env)
    assert done.stdout.split() == ["100", "0", "1"], calls.read_text()
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o700  # the shim ran the real chmod


def test_the_jar_is_what_its_source_builds(tmp_path: Path) -> None:
    built = tmp_path / "built.jar"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    _run(["make", "-s", "jar", f"JAR={built}"], env)
    with zipfile.ZipFile(JAR) as carried, zipfile.ZipFile(built) as fresh:
        entries = {info.filename: carried.read(info) for info in carried.infolist()}
        assert entries == {info.filename: fresh.read(info) for info in fresh.infolist()}, (
            "pipelines/spark/jars/epochgate-spark.jar is not what pipelines/spark/java builds: "
            "run make jar"
        )
    assert any(name.endswith("LocalFileSystem$Raw.class") for name in entries)
