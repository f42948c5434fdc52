"""The options of the JVMs epochgate starts: where the class-data archive lives, its making (in
the background, once, under a lock, moved into place whole), a session that maps it, a broken
archive that never stops a session, and the user's options."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.spark import jvm
from pipelines.spark._internals import pyspark_home
from pipelines.spark.unsigned_jars import signed, unsigned_jars
from tests.conftest import FAST_START, SUITE_MAKES_ARCHIVE
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[3]
MAPPED = f"{jvm.WARNINGS_TO_STDERR} -XX:SharedArchiveFile="

PROBE = """
from pipelines.spark.session import spark_session
spark = spark_session("local[1]")
print(spark.range(5).selectExpr("sum(id) AS s").collect()[0][0])
print(spark.sparkContext.getConf().get("spark.driver.defaultJavaOptions", ""))
"""


def probe(env: dict[str, str]) -> list[str]:
    """A local session in a child with ``env``: its query's result and its driver's options.
    Its JVM has the suite's options too (half the CPU of a JVM without them)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env={**os.environ, jvm.OPTIONS_ENV: FAST_START, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()  # nothing from the JVM: its warnings go to stderr


@pytest.mark.unit
def test_the_archive_lives_where_the_setting_says_or_nowhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(jvm.ARCHIVE_ENV, "off")
    assert jvm.archive_dir() is None
    assert jvm.java_options() == ""
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(tmp_path / "here"))
    assert jvm.archive_dir() == tmp_path / "here"
    monkeypatch.delenv(jvm.ARCHIVE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert jvm.archive_dir() == tmp_path / "cache" / "epochgate" / "jvm"
    name = jvm.archive_path(tmp_path).name
    assert (name[:6], name[-4:]) == ("spark-", ".jsa")
    assert jvm.archive_path(tmp_path) == jvm.archive_path(tmp_path)  # one name per install


@pytest.mark.unit
def test_a_reinstalled_pyspark_gets_an_archive_of_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "pyspark"
    (home / "jars").mkdir(parents=True)
    jar = home / "jars" / "spark-core.jar"
    jar.write_bytes(b"classes")
    monkeypatch.setattr(jvm, "pyspark_home", lambda: home)
    first = jvm.archive_path(tmp_path)
    assert jvm.archive_path(tmp_path) == first
    os.utime(jar, ns=(1, 1))  # the same jar, installed again: the JVM would refuse the archive
    assert jvm.archive_path(tmp_path) != first


@pytest.mark.unit
def test_a_makers_leftover_is_removed_by_the_next_maker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = jvm.archive_path(tmp_path)
    left = path.with_suffix(".4242.partial")  # its maker was killed while its JVM wrote
    left.write_bytes(b"half an archive")
    made: list[Path] = []
    monkeypatch.setattr(jvm, "_dump", made.append)
    jvm._make(path, wait=None)
    assert not left.exists()
    assert made == [path.with_suffix(f".{os.getpid()}.partial")]


def _made(path: Path, used_days_ago: float = 0.0) -> Path:
    """An archive at ``path`` (with its lock and log), last used ``used_days_ago`` days ago."""
    path.write_bytes(b"an archive")
    for made in (path.with_suffix(".lock"), path.with_suffix(".log")):
        made.write_text("")
    then = time.time() - used_days_ago * 86_400
    os.utime(path.with_suffix(".lock"), (then, then))
    return path


@pytest.mark.unit
def test_a_new_archive_keeps_those_used_last_and_removes_the_rest_and_dead_makers_leftovers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    old = [_made(tmp_path / f"spark-old{days}.jsa", days) for days in (1, 5, 2, 9, 30)]
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    leftover = tmp_path / f"spark-gone.{dead}.partial"  # its maker was killed
    making = tmp_path / f"spark-busy.{os.getpid()}.partial"  # a maker at work
    for partial in (leftover, making):
        partial.write_bytes(b"half an archive")
    path = jvm.archive_path(tmp_path)

    def dump(partial: Path) -> None:
        partial.write_bytes(b"a new archive")

    monkeypatch.setattr(jvm, "_dump", dump)
    jvm._make(path, wait=None)
    assert path.read_bytes() == b"a new archive"
    kept = {p.name for p in tmp_path.iterdir()}
    assert sorted(n for n in kept if n.endswith(".jsa")) == sorted(
        [path.name, "spark-old1.jsa", "spark-old2.jsa", "spark-old5.jsa"]
    )  # the new one and the KEEP - 1 used last
    for gone in old[3:]:
        assert not {gone.name, f"{gone.stem}.lock", f"{gone.stem}.log"} & kept
    assert {"spark-old1.lock", "spark-old1.log"} <= kept
    assert making.name in kept
    assert leftover.name not in kept


@pytest.mark.unit
def test_a_session_that_maps_an_archive_marks_it_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(tmp_path))
    path = _made(jvm.archive_path(tmp_path), used_days_ago=365)
    assert jvm.java_options() == f"{MAPPED}{path}"
    assert time.time() - path.with_suffix(".lock").stat().st_mtime < 60


@pytest.mark.unit
def test_the_users_options_come_after_the_archive_and_their_own_setting_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(tmp_path))
    made = _made(jvm.archive_path(tmp_path))
    monkeypatch.setenv(jvm.OPTIONS_ENV, "-Xss4m")
    conf = jvm.driver_conf({"spark.sql.shuffle.partitions": "2"}, "local[2]")
    assert conf[jvm.OPTIONS_KEY] == f"{MAPPED}{made} -Xss4m"
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert jvm.driver_conf({jvm.OPTIONS_KEY: "-Xmx1g"}, "local[2]")[jvm.OPTIONS_KEY] == "-Xmx1g"
    monkeypatch.setenv(jvm.ARCHIVE_ENV, "off")
    monkeypatch.delenv(jvm.OPTIONS_ENV)
    assert jvm.OPTIONS_KEY not in jvm.driver_conf({}, "local[2]")


@pytest.mark.unit
def test_a_maker_that_finds_the_lock_held_leaves_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = jvm.archive_path(tmp_path)
    started: list[list[str]] = []
    monkeypatch.setattr(jvm, "_dump", lambda partial: pytest.fail(f"a second maker: {partial}"))
    monkeypatch.setattr(jvm.subprocess, "Popen", lambda args, **_: started.append(args))
    with path.with_suffix(".lock").open("a") as held:  # another maker at work
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        clock = time.monotonic()
        jvm._make(path, wait=None)
        jvm._start_maker(path)  # nor does a session start one
        assert time.monotonic() - clock < 1
    assert started == []
    assert not path.exists()


@pytest.mark.spark
@pytest.mark.slow(25)
def test_the_archive_is_made_once_in_the_background_and_a_session_maps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a machine with no archive the suite's own start made one (``tests/conftest.py``):
    that making is the one checked; else this test makes one in a directory of its own."""
    directory = Path(os.environ.get(SUITE_MAKES_ARCHIVE, tmp_path))
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(directory))
    path = jvm.archive_path(directory)
    if directory == tmp_path:
        assert jvm.java_options() == ""  # none yet: its maker starts in the background
    wait_until(lambda: path.with_suffix(".lock").exists(), 30, "the maker to start")
    jvm._make(path, wait=None)  # a second maker finds the lock held, or the archive, and leaves
    wait_until(path.is_file, 240, "the archive", detail=lambda: _log(path))
    made = sorted(p.name for p in directory.iterdir() if p.name.startswith(f"{path.stem}."))
    copies = jvm.unsigned_dir(path)
    assert made == [copies.name, path.name, f"{path.stem}.lock", f"{path.stem}.log"]  # no partial
    jars = (pyspark_home() / "jars").glob("*.jar")
    assert {Path(j).name for j in unsigned_jars(copies)} == {j.name for j in jars if signed(j)}
    assert jvm.java_options() == f"{MAPPED}{path}"

    # Its classes are mapped, those of the signed jars' copies too (Janino: the query's code).
    loaded = tmp_path / "classes.log"
    options = f"{FAST_START} -Xlog:class+load=info:file={loaded}"
    total, given = probe({jvm.ARCHIVE_ENV: str(directory), jvm.OPTIONS_ENV: options})
    assert (total, given) == ("10", f"{MAPPED}{path} {options}")
    janino = [line for line in loaded.read_text().splitlines() if " org.codehaus." in line]
    assert janino, "no Janino class loaded"
    from_jars = [line for line in janino if "shared objects file" not in line]
    assert len(from_jars) < len(janino) / 4, from_jars[:5]


@pytest.mark.spark
def test_a_broken_archive_never_stops_a_session(tmp_path: Path) -> None:
    path = jvm.archive_path(tmp_path)
    path.write_bytes(b"not an archive" * 1000)
    assert probe({jvm.ARCHIVE_ENV: str(tmp_path)}) == ["10", f"{MAPPED}{path} {FAST_START}"]


def _log(path: Path) -> str:
    log = path.with_suffix(".log")
    return log.read_text()[-2000:] if log.is_file() else "no maker log"
