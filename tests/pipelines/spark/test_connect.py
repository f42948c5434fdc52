"""Spark Connect: ``epochgate spark start|stop|status``, the server's token, and the bank demo
and the engine conformance cases (``engine_cases.py``) through a server.

Every command runs in a child process with ``EPOCHGATE_HOME`` in the test's directory: the
suite's own classic session (tests/conftest.py) stays the only Spark in the pytest process.
The server fixture stops its server by pid even when the test fails, and kills it if needed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.spark import connect_server
from pipelines.spark.connect_server import SERVER_CLASS
from pipelines.spark.servers import ended
from tests import children
from tests.environment import without_settings
from tests.pipelines.spark.conformance import BANK_CASE, run_cases
from tests.sockets import accepts, free_port, listening, loopback
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow(190)]

EPOCHGATE = Path(sys.executable).parent / "epochgate"
PID_GLOB = "connect/*/pid/*.pid"
TOKEN_GLOB = "connect/*/token"


@dataclass(frozen=True)
class Server:
    port: int
    home: Path
    pid: int

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


def epochgate(*args: str, home: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run the console script with its state under ``home`` (and its cwd beside it)."""
    env = without_settings()
    env["EPOCHGATE_HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [str(EPOCHGATE), *args],
        env=env,
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


def kill_leftovers(home: Path) -> None:
    """SIGKILL any server a pid file under ``home`` still names (after a failed stop)."""
    for pid_file in home.glob(PID_GLOB):
        pid = int(pid_file.read_text().strip())
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


CLIENT = """
import sys
from pipelines.errors import SparkUnavailableError
from pipelines.spark.session import spark_session
try:
    print(spark_session(sys.argv[1]).range(3).count())
except SparkUnavailableError as err:
    print(err)
"""
RAW_CLIENT = """
import sys
from pyspark.sql import SparkSession
print(SparkSession.builder.remote(sys.argv[1]).getOrCreate().range(3).count())
"""


def client(
    url: str, *, home: Path, raw: bool = False, token: str | None = None
) -> subprocess.Popen[str]:
    """A client process that counts 3 rows on ``url`` (or prints why it cannot): epochgate's
    ``spark_session`` or, with ``raw``, PySpark's own builder; ``token`` in its environment."""
    env = without_settings()
    env.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
    env["EPOCHGATE_HOME"] = str(home)
    if token is not None:
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    return subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", RAW_CLIENT if raw else CLIENT, url],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def answers(process: subprocess.Popen[str]) -> tuple[str, str]:
    out, err = process.communicate(timeout=120)
    return out.strip(), err


def check_token(server: Server, tmp_path: Path) -> None:
    """The server asks for its token: kept 0600 beside its record, on no command line and in
    no output; a client without it is refused, with it (from the file, the URL or the
    environment) it runs."""
    (token_file,) = server.home.glob(TOKEN_GLOB)
    assert token_file.parent.name == str(server.port)
    assert token_file.stat().st_mode & 0o777 == 0o600
    token = token_file.read_text().strip()
    assert len(token) >= 32
    assert token not in Path(f"/proc/{server.pid}/cmdline").read_text()
    status = epochgate("spark", "status", home=server.home)
    assert "token required" in status.stdout
    assert token not in status.stdout + status.stderr

    elsewhere = tmp_path / "elsewhere"  # a home with no token for this port
    local = f"sc://localhost:{server.port}"
    clients = {
        "raw, no token": client(server.url, home=server.home, raw=True),
        "raw, token in the URL": client(f"{local}/;token={token}", home=elsewhere, raw=True),
        "epochgate, token from the home": client(server.url, home=server.home),
        "epochgate, token in the environment": client(server.url, home=elsewhere, token=token),
        "epochgate, token in the URL": client(f"{server.url}/;token={token}", home=elsewhere),
        "epochgate, no token": client(server.url, home=elsewhere),
        "epochgate, a wrong token": client(f"{server.url}/;token=wrong", home=elsewhere),
    }
    said = {name: answers(process) for name, process in clients.items()}
    out, err = said.pop("raw, no token")
    assert "UNAUTHENTICATED" in err, err[-2000:]
    assert "No authentication token provided" in err
    where = elsewhere / "connect" / str(server.port) / "token"
    hint = (
        f"; a server that epochgate spark start runs keeps its token in {where} (under "
        "$EPOCHGATE_HOME), else give the server's token as ;token= in the URL or in "
        "$SPARK_CONNECT_AUTHENTICATE_TOKEN"
    )
    assert said.pop("epochgate, no token")[0] == (
        f"cannot use Spark at {server.url}: the server refused the client: No authentication "
        f"token provided{hint}"
    )
    assert said.pop("epochgate, a wrong token")[0] == (  # the URL named without its token
        f"cannot use Spark at {server.url}/: the server refused the client: Invalid "
        f"authentication token{hint}"
    )
    for name, (out, err) in said.items():
        assert out == "3", f"{name}: {out}\n{err[-2000:]}"
        assert token not in out + err, name


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    port, home = free_port(), tmp_path / "home"
    try:
        started = epochgate("spark", "start", "--port", str(port), home=home, timeout=180)
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip().splitlines()[-1] == f"sc://127.0.0.1:{port}"
        assert "token" not in started.stdout + started.stderr
        (pid_file,) = home.glob(PID_GLOB)
        yield Server(port, home, int(pid_file.read_text().strip()))
    finally:
        epochgate("spark", "stop", "--port", str(port), home=home, timeout=60)
        kill_leftovers(home)


def test_bank_demo_and_the_engine_cases_run_through_a_connect_server(
    server: Server, tmp_path: Path
) -> None:
    assert alive(server.pid)
    sockets = listening(server.pid)  # its gRPC port, driver RPC and block manager
    assert server.port in [port for _, port in sockets]
    outside = [f"{address}:{port}" for address, port in sockets if not loopback(address)]
    assert outside == [], f"the server listens beyond 127.0.0.1: {outside}"
    status = epochgate("spark", "status", home=server.home)
    assert f"running      {server.url}  pid {server.pid}  token required" in status.stdout

    again = epochgate("spark", "start", "--port", str(server.port), home=server.home)
    assert again.returncode == 0, again.stderr
    assert f"already running on port {server.port} (pid {server.pid})" in again.stdout
    check_token(server, tmp_path)

    demo = epochgate(
        "demo",
        *("--epochs", "2", "--rows", "200", "--accounts", "20"),
        *("--home", str(tmp_path / "demo"), "--spark", server.url),
        home=server.home,
        timeout=240,
    )
    # The engine conformance cases, as on Sail: the token comes from the server's home. The
    # bank case's outputs are the demo's, verified above (its lookups: the upquery case).
    env = without_settings()
    env |= {"EPOCHGATE_HOME": str(server.home), "EPOCHGATE_SPARK": server.url}
    run_cases(env, tmp_path / "cases", without=(BANK_CASE,))

    stopped = epochgate("spark", "stop", "--port", str(server.port), home=server.home)
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped the Spark Connect server on port {server.port}" in stopped.stdout
    wait_until(lambda: not alive(server.pid), 10, f"the end of the server's process {server.pid}")
    assert not accepts(server.port)
    assert not list(server.home.glob(PID_GLOB))
    assert not list(server.home.glob(TOKEN_GLOB))
    status = epochgate("spark", "status", "--port", str(server.port), home=server.home)
    assert f"not running  {server.url}" in status.stdout

    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "8 stages x 2 epochs verified" in demo.stdout
    assert "ledger: ok" in demo.stdout


def test_stop_and_status_when_nothing_runs(tmp_path: Path) -> None:
    port, home = free_port(), tmp_path / "home"
    stopped = epochgate("spark", "stop", "--port", str(port), home=home)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == f"no Spark Connect server running on port {port}"
    status = epochgate("spark", "status", home=home)
    assert status.stdout.strip() == "not running  sc://127.0.0.1:15002"


def test_start_refuses_a_port_another_process_holds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = epochgate("spark", "start", "--port", str(port), home=home)
    assert started.returncode == 1
    assert started.stderr.strip() == (
        f"epochgate: Spark Connect server on port {port}: the port is in use by another "
        "process; pass --port to choose another"
    )
    assert not list(home.glob(PID_GLOB))


def test_a_server_that_cannot_start_names_why_and_its_log(tmp_path: Path) -> None:
    port, home = free_port(), tmp_path / "home"
    try:
        started = epochgate(
            "spark", "start", "--port", str(port), "--master", "bogus://nowhere", home=home
        )
        assert started.returncode == 1
        error = started.stderr.strip()
        assert error.startswith(
            f"epochgate: Spark Connect server on port {port}: the server exited while starting "
            "(org.apache.spark.SparkException: Master must either be yarn or start with"
        )
        (log,) = home.glob("connect/*/log/*.out")
        assert error.endswith(f"; its log is {log.resolve()}")
        assert not list(home.glob(PID_GLOB))
    finally:
        kill_leftovers(home)


def test_a_client_without_a_server_fails_at_once(tmp_path: Path) -> None:
    port, home = free_port(), tmp_path / "home"
    url = f"sc://127.0.0.1:{port}"
    # Columns in another order than the schema's: the file needs Spark to be sent.
    accounts = tmp_path / "accounts.parquet"
    pq.write_table(pa.table({"region": ["north"], "holder": ["Ann"], "account_id": [1]}), accounts)
    sent = epochgate("send", "-p", "bank", "accounts", str(accounts), "--spark", url, home=home)
    assert sent.returncode == 1
    assert sent.stderr.strip() == (
        f"epochgate: cannot use Spark at {url}: no Spark Connect server answers "
        f"(Connection refused); start one with: epochgate spark start --port {port}"
    )
    assert epochgate("status", home=home).stdout.strip() == "no pipelines registered"


SESSION = """
import sys
from pipelines.spark import connect_server

with connect_server.connect_session(port=int(sys.argv[1]), timeout=180) as connected:
    print(connected.url, connected.spark.range(3).count(), connected.start_seconds is not None)
"""


def test_a_connect_session_starts_its_server_and_stops_it_after_the_block(tmp_path: Path) -> None:
    port, home = free_port(), tmp_path / "home"
    env = without_settings()
    env["EPOCHGATE_HOME"] = str(home)
    try:
        done = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", SESSION, str(port)],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip().splitlines()[-1] == f"sc://127.0.0.1:{port} 3 True"
        assert not accepts(port)
        assert not list(home.glob(PID_GLOB))
    finally:
        kill_leftovers(home)


def test_a_token_that_is_not_key_value_is_refused_without_being_shown(tmp_path: Path) -> None:
    home = tmp_path / "home"
    accounts = tmp_path / "accounts.parquet"  # columns out of order: sending it needs Spark
    pq.write_table(pa.table({"region": ["north"], "holder": ["Ann"], "account_id": [1]}), accounts)
    with socket.socket() as listener:  # something answers: the URL is read before any call
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        url = f"sc://127.0.0.1:{port}/;token=secret-part=="
        sent = epochgate("send", "-p", "bank", "accounts", str(accounts), "--spark", url, home=home)
    assert sent.returncode == 1
    assert sent.stderr.strip() == (
        f"epochgate: cannot use Spark at sc://127.0.0.1:{port}/: a parameter of the URL is not "
        "key=value (a value may hold no = or ;)"
    )
    assert "secret-part" not in sent.stdout + sent.stderr


def test_a_pid_file_naming_a_server_on_another_port_is_not_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pid reused by a server on another port (or any other program) is not this port's."""
    monkeypatch.setenv("EPOCHGATE_HOME", str(tmp_path / "home"))
    port, other = free_port(), free_port()
    args = [SERVER_CLASS, "--conf", f"spark.connect.grpc.binding.port={other}"]
    stand_in = children.stand_in(*args)
    try:
        for at in (port, other):
            connect_server.pid_file(at).parent.mkdir(parents=True)
            connect_server.pid_file(at).write_text(f"{stand_in.pid}\n")
        running = [s.running for s in connect_server.statuses()]
        assert running == [at == other for at in sorted([port, other])]
    finally:
        stand_in.kill()
        stand_in.wait()
