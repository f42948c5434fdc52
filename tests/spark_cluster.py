"""A Spark standalone cluster on 127.0.0.1 for tests: a master and workers from the pyspark
wheel (``bin/spark-class``), each a JVM of its own started in the foreground and stopped by its
pid, with logs and work directories under one directory.

``hidden`` names a directory the workers do not see: they run in a mount namespace of their own
where an empty file system covers it (as an executor on another host would not see a local
disk of the driver's). That needs root and ``unshare``; ``can_hide()`` says whether it works.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.spark import jvm
from pipelines.spark._internals import SPARK_CLASS_SCRIPT, pyspark_home
from tests.sockets import accepts, free_port

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
    ports: list[int]
    """Every port the master and the workers listen on."""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
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
    }
    root.mkdir(parents=True, exist_ok=True)
    port, web = free_port(), free_port()
    cluster = Cluster(f"spark://{HOST}:{port}", web, [port, web])
    try:
        master = [script, MASTER_CLASS, "--host", HOST, "--port", str(port)]
        cluster.processes.append(_start([*master, "--webui-port", str(web)], env, root / "master"))
        for n in range(workers):
            wport, wweb = free_port(), free_port()
            command = [script, WORKER_CLASS, "--host", HOST, "--port", str(wport)]
            command += ["--webui-port", str(wweb), "--cores", "1", "--memory", memory]
            command += ["--work-dir", str(root / f"work-{n}"), cluster.url]
            if hidden is not None:
                command = ["unshare", "--mount", "sh", "-c", HIDE, "sh", str(hidden), *command]
            cluster.processes.append(_start(command, env, root / f"worker-{n}"))
            cluster.ports += [wport, wweb]
            cluster.workers.append(wweb)
        _wait_for_workers(cluster, workers, root, deadline=time.monotonic() + 180)
        yield cluster
    finally:
        stop(cluster)


def stop(cluster: Cluster) -> None:
    """Workers first (each ends its executors), then the master: SIGTERM, then SIGKILL."""
    for process in reversed(cluster.processes):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    end = time.monotonic() + 30
    while any(accepts(p) for p in cluster.ports) and time.monotonic() < end:
        time.sleep(0.2)
    left = [p for p in cluster.ports if accepts(p)]
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


def _wait_for_workers(cluster: Cluster, workers: int, root: Path, *, deadline: float) -> None:
    while True:
        for process in cluster.processes:
            if process.poll() is not None:
                logs = "\n".join(p.read_text()[-1500:] for p in sorted(root.glob("*.log")))
                raise AssertionError(f"a cluster process exited ({process.args}):\n{logs}")
        try:
            alive = [w for w in cluster.state()["workers"] if w["state"] == "ALIVE"]
        except OSError:
            alive = []
        if len(alive) == workers:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(alive)} of {workers} workers registered in time")
        time.sleep(0.5)
