"""A Spark standalone cluster on 127.0.0.1 for tests: a master and workers from the pyspark
wheel (``bin/spark-class``), each a JVM of its own started in the foreground and stopped by its
pid, with logs and work directories under one directory.

``hidden`` names a directory the workers do not see: they run in a mount namespace of their own
where an empty file system covers it (as an executor on another host would not see a local
disk of the driver's). That needs root and ``unshare``; ``can_hide()`` says whether it works.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.spark import jvm
from pipelines.spark._internals import SPARK_CLASS_SCRIPT, pyspark_home
from tests.sockets import accepts, listening

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DAEMON_MEMORY = "256m"
"""The heap of the master and of each worker (they only schedule; executors do the work)."""
HIDE = 'mount -t tmpfs epochgate-hidden "$1" && shift && exec "$@"'


@dataclass
class Cluster:
    """A running master and its workers: the master's URL, and every process by its pid."""

    url: str
    web: int
    """The master's web UI port (its ``/json/`` says which workers are alive)."""
    processes: list[subprocess.Popen[bytes]]
    workers: list[int] = field(default_factory=list)
    """Each worker's web UI port (its ``/json/`` lists the executors it ran)."""

    def state(self, port: int | None = None) -> dict[str, Any]:
        """The JSON the master's (or a worker's, by its web port) UI serves."""
        with urllib.request.urlopen(f"http://{HOST}:{port or self.web}/json/", timeout=5) as r:
            found: dict[str, Any] = json.load(r)
            return found

    def executors(self) -> list[tuple[int, str]]:
        """Every executor the workers ran or run: (the worker's web port, the application)."""
        found = []
        for web in self.workers:
            worker = self.state(web)
            for executor in worker.get("executors", []) + worker.get("finishedexecutors", []):
                found.append((web, executor["appid"]))
        return found


def can_hide() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None


@contextmanager
def standalone_cluster(
    root: Path, *, workers: int = 2, memory: str = "1g", hidden: Path | None = None
) -> Iterator[Cluster]:
    """A master and ``workers`` workers (one core and ``memory`` each) on 127.0.0.1, logs and
    work directories under ``root``; every process stopped by its pid after the block, and
    none of their ports left open."""
    home = pyspark_home()
    script = str(home / SPARK_CLASS_SCRIPT)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_DAEMON_JAVA_OPTS": jvm.options(),  # the master's and workers'
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",  # no REST server on 6066
    }
    root.mkdir(parents=True, exist_ok=True)
    processes: list[subprocess.Popen[bytes]] = []
    deadline = time.monotonic() + 180
    try:
        # Port 0 everywhere: each JVM binds a port of its own choosing, and says which in its
        # log (the master) or to the master (the workers); a port chosen beforehand could be
        # taken by another process before the JVM binds it.
        master = [script, MASTER_CLASS, "--host", HOST, "--port", "0", "--webui-port", "0"]
        processes.append(_start(master, env, root / "master"))
        url, web = _master_address(processes, root, deadline)
        cluster = Cluster(url, web, processes)
        for n in range(workers):
            command = [script, WORKER_CLASS, "--host", HOST, "--port", "0", "--webui-port", "0"]
            command += ["--cores", "1", "--memory", memory]
            command += ["--work-dir", str(root / f"work-{n}"), url]
            if hidden is not None:
                command = ["unshare", "--mount", "sh", "-c", HIDE, "sh", str(hidden), *command]
            processes.append(_start(command, env, root / f"worker-{n}"))
        cluster.workers = _wait_for_workers(cluster, workers, root, deadline=deadline)
        yield cluster
    finally:
        stop(processes)


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Workers first (each ends its executors), then the master: SIGTERM, then SIGKILL; then
    nothing listens on any port they listened on."""
    ports: set[int] = set()
    for process in processes:
        with contextlib.suppress(OSError):  # already gone
            ports |= {port for _, port in listening(process.pid)}
    for process in reversed(processes):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    end = time.monotonic() + 30
    while any(accepts(p) for p in ports) and time.monotonic() < end:
        time.sleep(0.2)
    left = sorted(p for p in ports if accepts(p))
    assert not left, f"something still listens on the cluster's ports {left}"


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.with_suffix(".log").open("wb") as out:
        return subprocess.Popen(
            command,
            env=env,
            cwd=log.parent,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _exited(processes: list[subprocess.Popen[bytes]], root: Path) -> None:
    for process in processes:
        if process.poll() is not None:
            logs = "\n".join(p.read_text()[-1500:] for p in sorted(root.glob("*.log")))
            raise AssertionError(f"a cluster process exited ({process.args!r}):\n{logs}")


def _master_address(
    processes: list[subprocess.Popen[bytes]], root: Path, deadline: float
) -> tuple[str, int]:
    """The master's URL and web UI port, as its log says once it has bound them."""
    log = root / "master.log"
    while True:
        _exited(processes, root)
        text = log.read_text(errors="replace") if log.exists() else ""
        url = re.search(r"Starting Spark master at (spark://\S+)", text)
        web = re.search(r"Successfully started service 'MasterUI' on port (\d+)", text)
        if url and web:
            return url.group(1), int(web.group(1))
        if time.monotonic() > deadline:
            raise AssertionError(f"the master did not start in time:\n{text[-3000:]}")
        time.sleep(0.2)


def _wait_for_workers(cluster: Cluster, workers: int, root: Path, *, deadline: float) -> list[int]:
    """Each alive worker's web UI port, once ``workers`` have registered with the master."""
    while True:
        _exited(cluster.processes, root)
        try:
            alive = [w for w in cluster.state()["workers"] if w["state"] == "ALIVE"]
        except OSError:
            alive = []
        if len(alive) == workers:
            return [urllib.parse.urlsplit(w["webuiaddress"]).port or 0 for w in alive]
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(alive)} of {workers} workers registered in time")
        time.sleep(0.5)
