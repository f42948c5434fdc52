"""The options of the JVMs epochgate starts on this machine (a driver for a local or cluster
master, a local Spark Connect server): a class-data archive, and ``EPOCHGATE_SPARK_JAVA_OPTIONS``.

The archive is made once for a Java and a PySpark install; each later JVM maps the classes
Spark loads from it instead of loading and verifying them again, which takes about 40% off the
time a local session needs to start and run its first jobs (about 14 s to 9 s on 2 cores).
``EPOCHGATE_SPARK_JAVA_OPTIONS`` adds options of the user's (for small epochs on a small
machine, ``-XX:TieredStopAtLevel=1`` takes off about 3 s more: no optimizing compiler; with
``-XX:ReservedCodeCacheSize=240m``, or a long-lived JVM fills the smaller code cache that option
gives it and spends an eighth of its CPU sweeping it and compiling again).

``EPOCHGATE_SPARK_ARCHIVE`` names the directory the archive lives in (default
``$XDG_CACHE_HOME/epochgate/jvm``, else ``~/.cache/epochgate/jvm``), or ``off`` for none. When
no archive exists, the first session starts without one and starts its making in the background
(a child Python that runs a small local session whose JVM writes the archive
as it exits, about 20 s of one core, under a lock so one maker runs at a time); it is moved into
place only once whole, so a JVM never maps half of one. ``ensure`` makes it and waits.

The directory keeps the ``KEEP`` archives used last (each session that maps one marks it used:
the time of its lock file), so installs that come and go (a new environment, an upgrade) do not
fill the disk at about 180 MB each: once a maker has made a new archive, the others beyond that
number go, with their lock and log files, and so does every partial archive whose maker is gone.

A JVM archives no class of a signed jar: the maker first writes unsigned copies of PySpark's
signed jars beside the archive (``spark-FINGERPRINT.jars``, ``pipelines.spark.unsigned_jars``),
and every driver epochgate starts while they are there has them on its class path right after
epochgate's jar, as the archive's own JVM had.

The archive is named by what it was made with: the Java install, and the PySpark version,
home and jars (each jar's size and time, which the JVM checks before it maps an archive, so a
reinstalled PySpark at the same path gets an archive of its own), and what it holds
(``FORMAT``). A JVM given an archive that does not match its own classes ignores it and starts
as without one; the JVMs epochgate starts print their warnings (that one too) on stderr, never
on stdout, which is the command's output.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from contextlib import suppress
from importlib.metadata import version
from pathlib import Path

from pipelines.spark._internals import pyspark_home
from pipelines.spark.hadoop_defaults import plugin_conf
from pipelines.spark.local_fs import CLASSPATH_KEY, JAR, local_fs_conf
from pipelines.spark.servers import ended
from pipelines.spark.unsigned_jars import after, unsigned_jars, write_unsigned

ARCHIVE_ENV = "EPOCHGATE_SPARK_ARCHIVE"
OPTIONS_ENV = "EPOCHGATE_SPARK_JAVA_OPTIONS"
OFF = "off"
WARNINGS_TO_STDERR = "-Xlog:disable -Xlog:all=warning:stderr"
"""The JVM's own warnings on stderr (by default the JVM prints them on stdout)."""
OPTIONS_KEY = "spark.driver.defaultJavaOptions"
"""Spark's setting for the driver's JVM options that an administrator gives (the user's
``spark.driver.extraJavaOptions`` come after them, and win)."""
MAKER_TIMEOUT = 300.0
KEEP = 4
"""Archives kept in the directory (see the module docs): the one made last and those used last."""
FORMAT = "2"
"""What an archive holds, in its name: made again when this changes (2: the classes of the
unsigned copies of the signed jars, and of rows from Arrow)."""


def archive_dir() -> Path | None:
    """Where the archive lives (see the module docs); None when turned off."""
    chosen = os.environ.get(ARCHIVE_ENV, "")
    if chosen.lower() == OFF:
        return None
    if chosen:
        return Path(chosen).expanduser().resolve()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "epochgate" / "jvm"


def archive_path(directory: Path) -> Path:
    """The archive for this machine's Java and PySpark in ``directory``."""
    return directory / f"spark-{_fingerprint()}.jsa"


def unsigned_dir(path: Path) -> Path:
    """Where the unsigned copies of PySpark's signed jars (``pipelines.spark.unsigned_jars``)
    that the archive ``path`` holds the classes of live: beside it."""
    return path.with_suffix(".jars")


def java_options(*, make: bool = True) -> str:
    """The JVM option that maps the archive, or ``""`` when there is none yet (then, with
    ``make``, its making starts in the background) or archives are off."""
    directory = archive_dir()
    return "" if directory is None else _mapping(archive_path(directory), make=make)


def _mapping(path: Path, *, make: bool) -> str:
    """``java_options`` for the archive ``path``."""
    if path.is_file():
        _used(path)
        return f"{WARNINGS_TO_STDERR} -XX:SharedArchiveFile={path}"
    if make:
        _start_maker(path)
    return ""


def driver_conf(conf: dict[str, str], master: str) -> dict[str, str]:
    """``conf`` plus the defaults of a driver for ``master``: its JVM options (the archive's, then
    ``$EPOCHGATE_SPARK_JAVA_OPTIONS``) unless ``conf`` sets them itself, epochgate's jar and
    local file system (``pipelines.spark.local_fs``) and its plugin that drops YARN's Hadoop
    defaults (``pipelines.spark.hadoop_defaults``)."""
    given = plugin_conf(master, local_fs_conf(master, conf))
    directory = archive_dir()
    path = None if directory is None else archive_path(directory)  # named once: ~7 ms
    if path is not None:  # the classes the archive maps from them: the same class path
        jars = unsigned_jars(unsigned_dir(path))
        given = {**given, CLASSPATH_KEY: after(given[CLASSPATH_KEY], str(JAR), jars)}
    if OPTIONS_KEY in given:
        return given
    chosen = _with_users("" if path is None else _mapping(path, make=True))
    return {**given, OPTIONS_KEY: chosen} if chosen else given


def options() -> str:
    """The JVM options of the JVMs epochgate starts: the archive's, then
    ``$EPOCHGATE_SPARK_JAVA_OPTIONS`` (also what a cluster's own JVMs can be given)."""
    return _with_users(java_options())


def _with_users(archive: str) -> str:
    return " ".join(o for o in (archive, os.environ.get(OPTIONS_ENV, "")) if o)


def ensure(timeout: float = MAKER_TIMEOUT) -> Path | None:
    """The archive, made now when missing (waiting up to ``timeout`` seconds for a maker that
    already runs); None when archives are off or the JVM could not make one."""
    directory = archive_dir()
    if directory is None:
        return None
    path = archive_path(directory)
    if not path.is_file():
        _make(path, wait=timeout)
    return path if path.is_file() else None


def _fingerprint() -> str:
    """What the archive's classes come from: the Java install PySpark starts (its binary and
    its module image), PySpark's version, home and jars, and epochgate's jar (no JVM is started
    to ask)."""
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else shutil.which("java")
    found = Path(java).resolve() if java else None
    home = pyspark_home()
    files = [found, found.parents[1] / "lib" / "modules"] if found else []
    jars = home / "jars"
    files += sorted(jars.iterdir()) if jars.is_dir() else []
    files.append(JAR)
    parts = [FORMAT, str(found), version("pyspark"), str(home), *map(_stamp, files)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _stamp(path: Path) -> str:
    """A file's name, size and modification time ("" for each when it is missing)."""
    try:
        stat = path.stat()
    except OSError:
        return f"{path.name} - -"
    return f"{path.name} {stat.st_size} {stat.st_mtime_ns}"


def _start_maker(path: Path) -> None:
    """The maker in its own session (a caller's process group never holds it), in the
    background; none when another maker holds the lock (each session that starts while one
    makes it would otherwise start a maker that leaves at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_suffix(".lock").open("a") as lock:
        if not _lock(lock.fileno(), None):
            return
    log = path.with_suffix(".log")
    with log.open("ab") as out:
        subprocess.Popen(
            [sys.executable, "-c", _MAKER, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )


def _make(path: Path, *, wait: float | None) -> None:
    """Make the archive at ``path`` unless another maker holds the lock (``wait``: how long to
    wait for it; None: not at all)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_suffix(".lock").open("a") as lock:
        if not _lock(lock.fileno(), wait):
            return
        if path.is_file():  # made while this one waited
            return
        for left in path.parent.glob(f"{path.stem}.*.partial"):
            _remove(left)  # a maker killed while it wrote (the lock is free)
        if not unsigned_dir(path).is_dir():  # on the class path of the archive's own JVM
            write_unsigned(pyspark_home() / "jars", unsigned_dir(path))
        partial = path.with_suffix(f".{os.getpid()}.partial")
        try:
            _dump(partial)
            if partial.is_file() and partial.stat().st_size > 0:
                partial.rename(path)
                _prune(path)
        finally:
            partial.unlink(missing_ok=True)


def _used(path: Path) -> None:
    """Mark the archive ``path`` used now: the time of its lock file (what ``_prune`` keeps by)."""
    with suppress(OSError):
        os.utime(path.with_suffix(".lock"))


def _last_used(path: Path) -> float:
    for marker in (path.with_suffix(".lock"), path):
        with suppress(OSError):
            return marker.stat().st_mtime
    return 0.0


def _prune(made: Path) -> None:
    """After ``made`` was made: remove the archives of its directory beyond the ``KEEP`` used
    last (``made`` among those kept), each with its lock, log and unsigned jars, and what makers
    that are gone left half made (``spark-FINGERPRINT[.jars].PID.partial``)."""
    others = [a for a in made.parent.glob("spark-*.jsa") if a != made]
    for old in sorted(others, key=_last_used, reverse=True)[KEEP - 1 :]:
        for name in (old, old.with_suffix(".lock"), old.with_suffix(".log"), unsigned_dir(old)):
            _remove(name)
    for partial in made.parent.glob("spark-*.*.partial"):
        pid = partial.suffixes[-2][1:]
        if not pid.isdigit() or ended(int(pid)):
            _remove(partial)


def _remove(path: Path) -> None:
    """Remove a file or a directory, if there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _lock(fd: int, wait: float | None) -> bool:
    deadline = time.monotonic() + (wait or 0.0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if wait is None or time.monotonic() >= deadline:
                return False
            time.sleep(0.5)


def _dump(partial: Path) -> None:
    """A local session that runs a few jobs of the kinds epochgate runs (rows from Arrow,
    Parquet written and read, a shuffle, joins) in a child whose JVM writes ``partial`` as it
    exits; returns once that JVM has exited (it is in the child's process group). That JVM gets
    ``$EPOCHGATE_SPARK_JAVA_OPTIONS`` too: the archive holds classes, not compiled code or the
    heap, so a JVM with other compiler or collector options maps it all the same (the quick
    compiler and the serial collector take about a quarter off the making's CPU)."""
    with partial.parent.joinpath(partial.name.split(".")[0] + ".log").open("ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-c", _WORKLOAD, str(partial), os.environ.get(OPTIONS_ENV, "")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        child.wait(timeout=MAKER_TIMEOUT)
        deadline = time.monotonic() + 60
        while _group_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        if _group_alive(child.pid):
            os.killpg(child.pid, 9)
            partial.unlink(missing_ok=True)  # a JVM killed while it wrote it


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


_WORKLOAD = """
import sys, tempfile
from pipelines.spark.session import spark_session
spark = spark_session("local[2]", {
    "spark.driver.defaultJavaOptions": " ".join(
        [sys.argv[2], "-Xlog:cds=off", "-XX:ArchiveClassesAtExit=" + sys.argv[1]]
    ),
    "spark.sql.shuffle.partitions": "2",
})
with tempfile.TemporaryDirectory() as scratch:
    from pipelines.spark.empty import empty_frame
    from pipelines.spark.local_rows import rows_frame
    rows = spark.range(1000).selectExpr("id", "id % 7 AS k", "CAST(id AS STRING) AS s")
    few = rows_frame(spark, [(1, 1, "a"), (2, 3, "b")], rows.schema)
    few = few.unionByName(empty_frame(spark, rows.schema))
    rows.join(few, "id", "left_anti").sortWithinPartitions("k").collect()
    rows.write.parquet(scratch + "/a")
    read = spark.read.parquet(scratch + "/a")
    totals = read.groupBy("k").agg({"id": "sum", "s": "count"})
    read.join(totals, "k").write.mode("overwrite").parquet(scratch + "/b")
    spark.read.parquet(scratch + "/b").orderBy("id").limit(5).collect()
    read.createOrReplaceTempView("t")
    spark.sql("SELECT k, count(*) FROM t GROUP BY k").collect()
spark.stop()
"""

_MAKER = """
import sys
from pathlib import Path
from pipelines.spark import jvm
jvm._make(Path(sys.argv[1]), wait=None)
"""
