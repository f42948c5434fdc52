"""Sail as an engine: the conformance cases (``engine_cases.py``) on one Sail server, ``epochgate
sail start|stop|status``, the server a process starts for itself (stopped by its pid when the
process ends, even by SIGKILL), ``sail-local-cluster``, and the error without ``pysail``.

Everything that holds a Sail session runs in a child process: the suite's classic session
(tests/conftest.py) stays the only Spark in the pytest process, and a Connect session cannot
share a process with it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.errors import SailServerError, SparkUnavailableError
from pipelines.spark import sail
from pipelines.spark._internals import SAIL_SERVER_MARK
from pipelines.spark.sail import MODES, SAIL_URLS
from pipelines.spark.servers import HOST, ended
from pipelines.spark.session import SAIL_ENGINES, spark_session
from tests import children
from tests.environment import without_settings
from tests.pipelines.spark.conformance import run_cases
from tests.sockets import accepts, free_port
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.sail, pytest.mark.slow(95)]

REPO = Path(__file__).resolve().parents[3]
EPOCHGATE = Path(sys.executable).parent / "epochgate"


def environment(home: Path, **extra: str) -> dict[str, str]:
    """This environment without epochgate's settings, with ``home`` as the state directory."""
    env = without_settings()
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**env, "EPOCHGATE_HOME": str(home), "PYTHONPATH": path, **extra}


def epochgate(
    *args: str, home: Path, timeout: float = 60.0, **extra: str
) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [str(EPOCHGATE), *args],
        env=environment(home, **extra),
        cwd=home.parent,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


PROBE = """
import sys
from pipelines.spark.engine import engine_of
from pipelines.spark.session import spark_session
spark = spark_session(sys.argv[1])
keys = ("session.timeZone", "shuffle.partitions")
print(engine_of(spark).name, *(spark.conf.get(f"spark.sql.{k}") for k in keys))
"""
"""The engine of a session opened on a URL, and two of its settings."""


def python(home: Path, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """This interpreter in a child with ``home`` as the state directory."""
    return subprocess.run(
        [sys.executable, *args],
        env=environment(home),
        cwd=home.parent,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def alive(pid: int) -> bool:
    """Whether a thread of ``pid`` still runs (the servers' own rule: ``servers.ended``)."""
    return not ended(pid)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A state directory; any Sail server still named under it at the end is killed."""
    path = tmp_path / "home"
    yield path
    for pid_file in path.glob("sail/*/pid"):
        pid = int(pid_file.read_text().strip())
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_conformance_cases_pass_on_sail(tmp_path: Path) -> None:
    """Every case of ``engine_cases.py`` passes on one Sail server, in a pytest of its own."""
    run_cases(environment(tmp_path / "home", EPOCHGATE_SPARK="sail"), tmp_path / "cases")
    assert not list((tmp_path / "home").glob("sail/owned/*.log"))  # stopped, log removed


def test_start_status_stop_and_sail_uses_the_started_server(home: Path) -> None:
    port = free_port()
    # Two starts at once (one with a Connect token exported, which a Sail server needs not):
    # one server, each start waiting for the other's, both with its URL.
    home.mkdir(parents=True)
    starts = [
        subprocess.Popen(
            [str(EPOCHGATE), "sail", "start", "--port", str(port)],
            env=environment(home, **extra),
            cwd=home.parent,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for extra in ({"SPARK_CONNECT_AUTHENTICATE_TOKEN": "exported-for-a-connect-server"}, {})
    ]
    said = [start.communicate(timeout=120) for start in starts]
    assert [start.returncode for start in starts] == [0, 0], said
    assert all(out.strip().splitlines()[-1] == f"sc://127.0.0.1:{port}" for out, _ in said)
    pid = int((home / "sail" / str(port) / "pid").read_text())
    already = f"Sail server already running on port {port} (pid {pid}, local)"
    assert sorted(out.splitlines()[0] == already for out, _ in said) == [False, True], said
    assert [p for p in owners(port) if p != pid] == []  # its one server, and no other
    log = home / "sail" / str(port) / "server.log"
    status = epochgate("sail", "status", home=home).stdout.strip()
    assert status == f"running      sc://127.0.0.1:{port}  pid {pid}  mode local  log {log}"
    again = epochgate("sail", "start", "--port", str(port), home=home)
    assert again.stdout.splitlines()[0] == (
        f"Sail server already running on port {port} (pid {pid}, local)"
    )

    demo = epochgate(
        *("demo", "--epochs", "2", "--rows", "200", "--accounts", "10", "--spark", "sail"),
        home=home,
    )
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "8 stages x 2 epochs verified" in demo.stdout
    assert not (home / "sail" / "owned").exists()  # it started no server of its own
    assert alive(pid)
    # Its URL opens the session ``sail`` opens: known as Sail, with the local settings.
    probe = python(home, "-c", PROBE, f"sc://127.0.0.1:{port}")
    assert probe.stdout.split() == ["sail", "UTC", "4"], probe.stdout + probe.stderr[-2000:]

    # A process with a session on it (a warm run worker's) when it is stopped.
    worker = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", SWITCH, str(port)],
        env=environment(home),
        cwd=home.parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    assert worker.stdin is not None
    first = worker.stdout.readline().split()

    stopped = epochgate("sail", "stop", "--port", str(port), home=home)
    assert stopped.stdout.strip() == f"stopped the Sail server on port {port} (pid {pid}, SIGTERM)"
    # Its next session is on a server of its own, not the old one on the stopped server.
    try:
        worker.stdin.write("\n")
        out, err = worker.communicate(timeout=120)
    finally:
        worker.kill()  # when it hangs (its own server stops as it dies: PR_SET_PDEATHSIG)
    assert [first, out.split()] == [[str(port), "2"], ["other", "3"]], err
    assert not alive(pid)
    assert not accepts(port)
    assert not (home / "sail" / str(port) / "pid").exists()
    status = epochgate("sail", "status", "--port", str(port), home=home).stdout.strip()
    assert status == f"not running  sc://127.0.0.1:{port}"
    again = epochgate("sail", "stop", "--port", str(port), home=home)
    assert again.stdout.strip() == f"no Sail server running on port {port}"


def test_start_refuses_a_port_another_process_holds(home: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = epochgate("sail", "start", "--port", str(port), home=home)
    assert started.returncode == 1
    assert started.stderr.strip() == (
        f"epochgate: Sail server on port {port}: the port is in use by another process; "
        "pass --port to choose another"
    )
    assert not list(home.glob("sail/*/pid"))


SWITCH = """
import sys
from pipelines.spark.session import spark_session

def where(spark):
    port = spark.client._builder.endpoint.rsplit(":", 1)[1]
    return port if port == sys.argv[1] else "other"

first = spark_session("sail")
print(where(first), first.range(2).count(), flush=True)
sys.stdin.readline()  # the server is stopped meanwhile
second = spark_session("sail")
print(where(second), second.range(3).count(), flush=True)
"""
"""A process that opens ``sail`` sessions before and after its server is stopped: where each
is (the started server's port, or ``other``) and a count on it."""


OWN_SERVER = """
import os, signal, sys
from pathlib import Path
from pipelines.spark.sail import owned_servers
from pipelines.spark.sail import MODES, SAIL_URLS
from pipelines.spark.session import SAIL_ENGINES, spark_session

spark = spark_session(sys.argv[1])
if sys.argv[1] == "sail-local-cluster":  # the bank on a driver and workers, against its oracle
    from pipelines.examples.demo import run_demo

    summary = run_demo(
        Path(sys.argv[3]), epochs=2, rows=200, accounts=10, spark_master=sys.argv[1], echo=print
    )
    assert summary.verified, summary.mismatches
(server,) = owned_servers()
print(server.pid, server.port, server.mode, flush=True)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize(
    ("engine", "end", "mode"),
    [("sail", "exit", "local"), ("sail-local-cluster", "kill", "local-cluster")],
)
def test_a_process_server_is_stopped_by_its_pid_when_the_process_ends(
    home: Path, engine: str, end: str, mode: str
) -> None:
    """On exit, by the exit handler; on SIGKILL, by the signal its parent's death sends it.
    The local-cluster one runs the bank demo first, checked against its oracle."""
    done = python(home, "-W", "ignore", "-c", OWN_SERVER, engine, end, str(home / "demo"))
    assert done.returncode == (-signal.SIGKILL if end == "kill" else 0), done.stderr[-3000:]
    pid, port, ran = done.stdout.splitlines()[-1].split()
    assert ran == mode
    wait_until(lambda: not alive(int(pid)), 10.0, f"the Sail server (pid {pid}) to end")
    # A local cluster's workers, forked by the server, hold its socket until they end too.
    wait_until(lambda: not accepts(int(port)), 10.0, f"nothing to listen on port {port}")


def owners(port: int) -> list[int]:
    """The pids of the processes whose command line names a Sail server on ``port``."""
    ps = subprocess.run(
        ["ps", "-e", "-ww", "-o", "pid=", "-o", "args="], capture_output=True, text=True, check=True
    )
    mark = f" epochgate-sail-server 127.0.0.1 {port}"
    return [int(line.split()[0]) for line in ps.stdout.splitlines() if line.rstrip().endswith(mark)]


def test_a_pid_file_naming_a_server_on_another_port_is_not_running(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pid reused by a server on another port (or any other program) is not this port's."""
    monkeypatch.setenv("EPOCHGATE_HOME", str(home))
    port, other = free_port(), free_port()
    stand_in = children.stand_in(SAIL_SERVER_MARK, HOST, str(other))
    try:
        for at in (port, other):
            (home / "sail" / str(at)).mkdir(parents=True)
            (home / "sail" / str(at) / "pid").write_text(f"{stand_in.pid}\n")
        assert [s.running for s in sail.statuses()] == [at == other for at in sorted([port, other])]
    finally:
        stand_in.kill()
        stand_in.wait()


def test_every_sail_engine_has_a_mode() -> None:
    assert set(SAIL_URLS) == set(SAIL_ENGINES)
    assert set(SAIL_URLS.values()) == set(MODES)


def test_sail_without_pysail_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pysail", None)  # as if it were not installed
    with pytest.raises(SparkUnavailableError) as raised:
        spark_session("sail")
    assert str(raised.value) == (
        "cannot use Spark at sail: Sail is not installed; "
        "install it with: pip install 'epochgate[sail]'"
    )


@pytest.mark.dagster
def test_make_demo_on_sail_drives_bank_through_dagster_and_verifies_every_stage(
    tmp_path: Path,
) -> None:
    """What ``EPOCHGATE_SPARK=sail make demo`` runs, smaller: bank's runs through Dagster on a
    Sail server the demo's process starts, every stage at every epoch against the oracle."""
    done = subprocess.run(
        [
            *(sys.executable, "-W", "ignore", "-m", "dagster_project.dev.demo"),
            *("--epochs", "3", "--rows", "120", "--accounts", "12", "--seed", "3"),
        ],
        env=environment(tmp_path / "home", EPOCHGATE_SPARK="sail"),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "8 stages x 3 epochs verified" in done.stdout, done.stdout[-3000:]
    assert "ledger: ok" in done.stdout
    assert not list((tmp_path / "home").glob("sail/owned/*.log"))  # its server stopped


def test_a_server_waited_for_must_listen_itself(tmp_path: Path) -> None:
    """What accepts on the port may be another process's server (two processes drew the same
    free port): the wait goes on until the server itself listens, or exits, or time is up."""
    with socket.socket() as other:
        other.bind((HOST, 0))
        other.listen()
        port = other.getsockname()[1]
        idle = children.stand_in()
        try:
            with pytest.raises(SailServerError, match="did not open its port in time"):
                sail._wait_until_serving(
                    port, idle, tmp_path / "server.log", deadline=time.monotonic() + 1.0
                )
        finally:
            idle.kill()
            idle.wait()
