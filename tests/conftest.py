"""Session-wide fixtures: one local SparkSession for every Spark test; the slow test files first;
every process a test starts killed with the session (``tests.reaper``)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests import reaper

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


FAST_START = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
"""The suite's JVMs compile with the quick compiler only: its epochs are tiny, and the optimizing
compiler's threads would take the two cores from the tests for code that runs a few times. With
the quick compiler alone the JVM reserves a fifth of its usual room for compiled code (48 MB): a
JVM that lives through many queries (a worker's session, a Connect server) fills it, then sweeps
and compiles again all its life (about an eighth of such a JVM's CPU); the usual 240 MB ends
that. Their heaps are small: the serial collector, with no threads of its own, spends about a
tenth less CPU on them than the default one."""

JVM_TEMP = "-Djava.io.tmpdir="
"""Where the suite's JVMs keep their temporary files (Spark's local and artifact directories, the
native libraries they unpack): a directory of the session's, removed when it ends. A JVM a test
kills leaves its own there, not in the machine's /tmp."""


SUITE_MAKES_ARCHIVE = "EPOCHGATE_TEST_ARCHIVE_MADE_IN"
"""Set when the suite started making the JVMs' class-data archive (the machine had none): the
directory it is made in. ``tests/pipelines/spark/test_jvm.py`` checks that making rather than
making a second archive of its own (about 30 CPU-s)."""

_jvm_temp = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """In an xdist worker (which inherits the controller's mark and environment): map the mark for
    what the worker forks. In the controller, before any worker or test starts a process: mark the
    session's processes and start their watchdog; start making the JVMs' class-data archive when the
    machine has none (every JVM the suite starts once it is there maps it), and give those JVMs (its
    maker's first) the suite's options and temporary directory."""
    if hasattr(config, "workerinput"):
        reaper.adopt()  # its forks are the session's even under the worker's process titles
    else:
        reaper.start()
        from pipelines.spark import jvm

        options = os.environ.get(jvm.OPTIONS_ENV, FAST_START)  # the archive's maker's JVM too
        if JVM_TEMP not in options:
            temp = tempfile.mkdtemp(prefix="epochgate-suite-jvm-")
            config.stash[_jvm_temp] = Path(temp)
            options = f"{options} {JVM_TEMP}{temp}"
        os.environ[jvm.OPTIONS_ENV] = options
        if config.option.markexpr != "unit":  # ``make unit`` starts no JVM
            # When missing, the archive is made in the background: the first JVMs go without.
            directory = jvm.archive_dir()
            if jvm.java_options() == "" and directory is not None:
                os.environ[SUITE_MAKES_ARCHIVE] = str(directory)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """With xdist, before the controller waits for its workers to exit (they have torn their
    tests down, or are interrupted): kill what their tests left now, sparing the workers (this
    process's children). A child a test forked keeps its worker's pipe to the controller open,
    and the controller would wait for it, 10 s a worker, before ending the session."""
    if session.config.pluginmanager.has_plugin("dsession"):
        reaper.finish(spare=reaper.children(os.getpid()))


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller's last act (its workers are gone by then): kill what its tests left, but
    its own Spark JVM (a run without workers), which ends with it once Python has let go of its
    Java objects: killed before, each of those objects' finalizers logs a traceback at exit. Then
    remove the JVMs' temporary directory."""
    from pipelines.spark._internals import gateway_pid

    own = gateway_pid()
    reaper.finish(spare=() if own is None else (own,))
    temp = config.stash.get(_jvm_temp, None)
    if temp is not None:
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from pipelines.spark.session import spark_session

    session = spark_session(
        "local[2]", {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _unit_tests_leave_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked ``unit`` that leaves a process of its own running fails, naming it (and
    the process is killed): ``make unit`` starts no service, and one left in the background (a
    JVM archive's maker: 30 CPU-s and a 180 MB file) would cost the whole suite, failing
    nothing. A process the test waited for is gone by then."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    before = set(reaper.children(os.getpid()))
    yield
    new = [pid for pid in reaper.children(os.getpid()) if pid not in before]
    left = [pid for pid in new if reaper.running(pid)]
    said = [reaper.command(pid) for pid in left]
    for pid in left:  # with its process group when it leads one (a maker does)
        with suppress(ProcessLookupError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    assert not left, f"a unit test leaves no process running; this one left {said}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files marked ``slow(seconds)`` first, the longest first, then the others in their
    order: with the suite spread over two processes a file at a time (``make test``, which keeps
    this order: ``--no-loadscope-reorder``), the long files start early and the two processes end
    together instead of one waiting on a long file collected last."""
    items.sort(key=lambda item: -_seconds(item))


def _seconds(item: pytest.Item) -> float:
    """How long the item's file takes, as its ``slow`` marker says (0: not slow)."""
    marker = item.get_closest_marker("slow")
    if marker is None:
        return 0.0
    return float(marker.args[0]) if marker.args else 1.0
