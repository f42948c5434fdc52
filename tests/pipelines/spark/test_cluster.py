"""``bank`` on a Spark standalone cluster: a master and two workers from the pyspark wheel on
127.0.0.1, the executors in JVMs of their own, the driver in a child process (the suite's own
process has its local session). One cluster serves the module; every process of it is stopped
by its pid at the end and nothing is left listening.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.environment import without_settings
from tests.spark_cluster import Cluster, can_hide, standalone_cluster

pytestmark = [pytest.mark.spark, pytest.mark.slow(150)]


@pytest.fixture(scope="module")
def blind_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory the workers do not see (their executors neither)."""
    return tmp_path_factory.mktemp("blind")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, blind_root: Path) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster")
    with standalone_cluster(root, hidden=blind_root if can_hide() else None) as running:
        yield running


def on_cluster(cluster: Cluster, home: Path, *args: str) -> dict[str, Any]:
    """``tests.fixtures.on_cluster`` run with ``EPOCHGATE_SPARK`` set to the cluster's URL."""
    env = without_settings()
    env |= {
        "EPOCHGATE_SPARK": cluster.url,
        "EPOCHGATE_HOME": str(home / "state"),
        "SPARK_LOCAL_IP": "127.0.0.1",  # the driver's sockets, where the executors reach it
        "PYSPARK_PYTHON": sys.executable,
    }
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "tests.fixtures.on_cluster", str(home), *args],
        env=env,
        cwd=Path(__file__).parents[3],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_bank_on_a_standalone_cluster_matches_the_oracle(cluster: Cluster, tmp_path: Path) -> None:
    found = on_cluster(cluster, tmp_path / "bank")
    assert found["master"] == cluster.url
    assert found["mismatches"] == []  # every stage and epoch, lookups, the replayed capture
    assert found["done"] == found["stages"]
    assert found["replayed"] == 0
    assert found["verified"]
    ran = {web for web, app in cluster.executors() if app == found["app"]}
    assert ran == set(cluster.workers), "an executor on each worker, each a JVM of its own"


@pytest.mark.skipif(not can_hide(), reason="hiding a directory from the workers needs root")
def test_a_stage_whose_executors_cannot_see_the_data_root_names_it(
    cluster: Cluster, blind_root: Path
) -> None:
    home = blind_root / "bank"
    found = on_cluster(cluster, home, "--blind")
    assert found["error"] is not None, "the run succeeded on executors that see no data"
    assert found["epoch"] == "0"
    data = home / "data"
    assert found["error"].startswith(f"stage {found['stage']!r}, epoch 0 failed: ")
    assert f"cannot read {data}" in found["error"], found["error"]
    assert "every executor" in found["error"]
    assert found["error"].endswith("; nothing was committed")
