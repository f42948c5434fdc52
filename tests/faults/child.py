"""The process a fault campaign kills: one action of the runs side on a campaign's home.

    EPOCHGATE_FAULT=POINT[:N] python -m tests.faults.child HOME ACTION [ARG...]

ACTION is ``run`` (``bank`` then ``rebank``), ``stage NAME EPOCH``, ``backfill NAME E,E``,
``lookup K,K`` / ``evict K,K`` (accounts of the partial ``balances``), ``replay`` (``rebank``
only), ``advance SOURCE WORKER EPOCH`` (an input worker moves on) or ``dagster EPOCH`` (the
stages of ``bank`` at EPOCH as one Dagster run on the instance in ``HOME/dagster``). It prints
``done`` once the action is over; killed, it prints nothing more.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import SparkSession

from pipelines.spark.session import quiet, spark_session
from tests.faults.scenario import Home

CONF = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}


def keys(text: str) -> list[int]:
    return [int(k) for k in text.split(",") if k]


def dagster_run(home: Home, epoch: int) -> None:
    import dagster as dg

    from dagster_project.definitions import build_definitions
    from dagster_project.names import job_name
    from dagster_project.partitions import epoch_key, partitions_name
    from dagster_project.resources import LedgerResource, SparkResource
    from tests.faults.scenario import pipeline

    defs = build_definitions(
        [pipeline()],
        spark=SparkResource(master="local[2]", conf=CONF),
        ledger=LedgerResource(path=str(home.ledger_path), data_dir=str(home.root / "data")),
    )
    (home.root / "dagster").mkdir(exist_ok=True)
    instance = dg.DagsterInstance.local_temp(str(home.root / "dagster"))
    instance.add_dynamic_partitions(partitions_name("bank"), [epoch_key(epoch)])
    job = defs.resolve_job_def(job_name("bank"))
    job.execute_in_process(instance=instance, partition_key=epoch_key(epoch))


def spark() -> SparkSession:
    """A local session, started when an action first needs one (an eviction does not)."""
    session = spark_session("local[2]", CONF)
    quiet(session)
    return session


def main(argv: list[str]) -> int:
    home, action, args = Home(Path(argv[0])), argv[1], argv[2:]
    if action == "dagster":
        dagster_run(home, int(args[0]))
        print("done", flush=True)
        return 0
    if action in ("run", "replay"):
        if action == "run":
            home.runtime(spark).run()
        if home.capture.exists():
            home.rebank(spark).run()
    elif action == "stage":
        home.runtime(spark).run_stage(args[0], int(args[1]))
    elif action == "backfill":
        home.runtime(spark).backfill(args[0], keys(args[1]))
    elif action == "lookup":
        home.runtime(spark).lookup("balances", keys(args[0]))
    elif action == "evict":
        home.runtime(spark).evict("balances", keys(args[0]))
    elif action == "advance":
        home.runtime(spark).input(args[0], int(args[1])).advance_to(int(args[2]))
    else:
        raise SystemExit(f"unknown action {action!r}")
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
