"""``bank`` on a Spark standalone cluster: a master and two workers from the pyspark wheel on
127.0.0.1, the executors in JVMs of their own, the driver in a child process (the suite's own
process has its local session). One cluster and one application of it serve the module (the
bank checks, then an epoch whose data root the executors do not see); every process of it is
stopped by its pid at the end and nothing is left listening.
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

pytestmark = [pytest.mark.spark, pytest.mark.slow(75)]


@pytest.fixture(scope="module")
def blind_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory the workers do not see (their executors neither)."""
    return tmp_path_factory.mktemp("blind")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, blind_root: Path) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster")
    with standalone_cluster(root, hidden=blind_root if can_hide() else None) as running:
        yield running


@pytest.fixture(scope="module")
def found(cluster: Cluster, blind_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What ``tests.fixtures.on_cluster`` printed, run once with ``EPOCHGATE_SPARK`` set to the
    cluster's URL: the bank checks, and the blind epoch's error where a directory can be hidden
    from the workers."""
    home = tmp_path_factory.mktemp("bank")
    env = without_settings()
    env |= {
        "EPOCHGATE_SPARK": cluster.url,
        "EPOCHGATE_HOME": str(home / "state"),
        "SPARK_LOCAL_IP": "127.0.0.1",  # the driver's sockets, where the executors reach it
        "PYSPARK_PYTHON": sys.executable,
    }
    blind = [str(blind_root / "bank")] if can_hide() else []
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "tests.fixtures.on_cluster", str(home), *blind],
        env=env,
        cwd=Path(__file__).parents[3],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_bank_on_a_standalone_cluster_matches_the_oracle(cluster: Cluster, found: Any) -> None:
    bank = found["bank"]
    assert bank["master"] == cluster.url
    assert bank["mismatches"] == []  # every stage and epoch, lookups, the replayed capture
    assert bank["done"] == bank["stages"]
    assert bank["replayed"] == 0
    assert bank["verified"]
    ran = {web for web, app in cluster.executors() if app == bank["app"]}
    assert ran == set(cluster.workers), "an executor on each worker, each a JVM of its own"


@pytest.mark.skipif(not can_hide(), reason="hiding a directory from the workers needs root")
def test_a_stage_whose_executors_cannot_see_the_data_root_names_it(
    found: Any, blind_root: Path
) -> None:
    blind = found["blind"]
    assert blind["error"] is not None, "the run succeeded on executors that see no data"
    assert blind["epoch"] == "0"
    data = blind_root / "bank" / "data"
    assert blind["error"].startswith(f"stage {blind['stage']!r}, epoch 0 failed: ")
    assert f"cannot read {data}" in blind["error"], blind["error"]
    assert "every executor" in blind["error"]
    assert blind["error"].endswith("; nothing was committed")
