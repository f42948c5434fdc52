"""``pipelines.spark.spawn``: children started with no Python between fork and exec, which live
gRPC channels in the parent survive (grpcio 1.80 and later abort a child forked with a
``preexec_fn`` while channels are live); the child itself puts SIGINT back at its default and
ties itself to its parent's end."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from pipelines.spark.spawn import shimmed
from tests.waiting import wait_until

SIGINT_BIT = 1 << (signal.SIGINT - 1)


def status(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {field} for process {pid}")


def ignores_sigint(argv: list[str]) -> bool:
    """Whether ``argv``'s process, once it runs ``sleep``, ignores SIGINT; this process ignores
    it meanwhile (a child inherits that)."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        child = subprocess.Popen(argv)
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        wait_until(lambda: status(child.pid, "Name") == "sleep", 30, "the child's exec of sleep")
        return bool(int(status(child.pid, "SigIgn"), 16) & SIGINT_BIT)
    finally:
        child.kill()
        child.wait()


def test_a_child_puts_sigint_back_at_its_default_when_asked() -> None:
    assert ignores_sigint(shimmed(["sleep", "30"]))  # as without the shim
    assert not ignores_sigint(shimmed(["sleep", "30"], default_sigint=True))


TIED = """
import subprocess, sys
sys.path.insert(0, sys.argv[1])
from pipelines.spark.spawn import shimmed
child = subprocess.Popen(shimmed(["sleep", "60"], tied=True))
print(child.pid, flush=True)
sys.stdin.readline()
"""


def test_a_tied_child_ends_with_its_parent() -> None:
    repo = str(Path(__file__).resolve().parents[3])
    parent = subprocess.Popen(
        [sys.executable, "-c", TIED, repo], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdin is not None
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    wait_until(lambda: status(pid, "Name") == "sleep", 30, "the child's exec of sleep")
    assert status(pid, "PPid") == str(parent.pid)
    parent.stdin.close()  # the parent ends: its child gets SIGTERM
    parent.wait(timeout=30)
    gone = Path(f"/proc/{pid}")
    wait_until(lambda: not gone.exists() or status(pid, "State").startswith("Z"), 30, "its end")


@pytest.fixture
def live_channel(tmp_path: Path) -> Iterator[None]:
    """A gRPC channel of this process, in use by a thread all along (a health server in this
    process answers it)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = health_pb2_grpc.HealthStub(channel)
    done = threading.Event()

    def ask() -> None:
        while not done.is_set():
            stub.Check(health_pb2.HealthCheckRequest())

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    try:
        yield
    finally:
        done.set()
        asking.join(10)
        channel.close()
        server.stop(None)


@pytest.mark.usefixtures("live_channel")
def test_children_started_beside_live_grpc_channels_all_run_their_program() -> None:
    codes = [
        subprocess.run(shimmed(["true"], default_sigint=True, tied=True), check=False).returncode
        for _ in range(100)
    ]
    assert codes == [0] * 100
