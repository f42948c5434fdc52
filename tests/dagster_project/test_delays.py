"""A delayed stage in Dagster: its run at epoch t is partition t, and a stage reading it reads
that partition at its own partition t + delay, as the ledger has it. Dagster 1.13 cannot draw
that offset between dynamic partitions, so the assets say it in their descriptions and
metadata (``dagster_project.delays``)."""

from __future__ import annotations

import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.definitions.partitions.mapping import PartitionMapping, UpstreamPartitionsResult
from dagster._core.remote_representation.external_data import asset_node_snaps_from_repo
from pyspark.sql import SparkSession

from dagster_project import LedgerResource, SparkResource, build_definitions
from dagster_project.names import stage_key
from dagster_project.partitions import epoch_key, epoch_partitions
from pipelines.run.runtime import Runtime
from pipelines.testing import close_sources, send_epochs
from tests.dagster_project.driver import Driver
from tests.dagster_project.meters import DELAY, meters

pytestmark = pytest.mark.dagster

LATE, READER = stage_key("meters", "yesterday"), stage_key("meters", "both_days")
NO_MAPPING = "Dagster has no partition mapping with an offset for dynamic partitions"


def test_the_delayed_stage_and_its_reader_say_how_their_partitions_map(tmp_path: Path) -> None:
    defs = build_definitions([meters()], ledger=LedgerResource(path=str(tmp_path / "l.duckdb")))
    graph = defs.resolve_asset_graph()
    late, reader = graph.get(LATE), graph.get(READER)
    assert late.metadata["delay"] == DELAY == 1
    assert (
        f"Partition t of this asset is its run at epoch t, whose output the stages reading it "
        f"read at epoch t + 1; Dagster's graph shows them depending on partition t ({NO_MAPPING})."
    ) in (late.description or "")
    assert (
        "Partition t reads partition t - 1 of yesterday (its output for epoch t - 1 belongs to "
        f"epoch t); Dagster's graph shows partition t ({NO_MAPPING})."
    ) in (reader.description or "")
    assert reader.metadata["partition_offsets"] == {"yesterday": -1}
    # What the graph shows instead: partition t on partition t.
    assert graph.get_partition_mapping(READER, LATE) == dg.IdentityPartitionMapping()
    # Stages neither delayed nor reading a delayed stage say nothing of it.
    for name in ("valid", "totals"):
        node = graph.get(stage_key("meters", name))
        assert NO_MAPPING not in (node.description or ""), name
        assert "partition_offsets" not in node.metadata, name


class Offset(PartitionMapping):
    """Partition t on partition t - 1: what the ledger does, as a mapping of one's own."""

    def validate_partition_mapping(self, upstream: Any, downstream: Any) -> None:
        pass

    def get_downstream_partitions_for_partitions(
        self,
        upstream_partitions_subset: Any,
        upstream_partitions_def: Any,
        downstream_partitions_def: Any,
        current_time: datetime | None = None,
        dynamic_partitions_store: Any = None,
    ) -> Any:
        keys = [epoch_key(int(k) + 1) for k in upstream_partitions_subset.get_partition_keys()]
        return downstream_partitions_def.subset_with_partition_keys(keys)

    def get_upstream_mapped_partitions_result_for_partitions(
        self,
        downstream_partitions_subset: Any,
        downstream_partitions_def: Any,
        upstream_partitions_def: Any,
        current_time: datetime | None = None,
        dynamic_partitions_store: Any = None,
    ) -> UpstreamPartitionsResult:
        keys = [epoch_key(int(k) - 1) for k in downstream_partitions_subset.get_partition_keys()]
        return UpstreamPartitionsResult(
            partitions_subset=upstream_partitions_def.subset_with_partition_keys(keys),
            required_but_nonexistent_subset=upstream_partitions_def.empty_subset(),
        )

    @property
    def description(self) -> str:
        return "partition t - 1"


def test_dagster_has_no_offset_mapping_for_dynamic_partitions() -> None:
    """Why the assets say it in words: if this fails, Dagster can map the offset now, and the
    dependency should carry the mapping instead."""
    epochs = epoch_partitions("meters")
    shifted = dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)
    with pytest.raises(dg.DagsterInvalidDefinitionError, match="TimeWindowPartitionsDefinition"):
        shifted.validate_partition_mapping(epochs, epochs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = dg.AssetSpec(
            "reader", partitions_def=epochs, deps=[dg.AssetDep("late", partition_mapping=Offset())]
        )
        defs = dg.Definitions(assets=[dg.AssetSpec("late", partitions_def=epochs), reader])
        repository = defs.get_repository_def()
    assert any("Non-built-in PartitionMappings" in str(w.message) for w in caught)
    # The asset graph the webserver and the daemon load leaves it out (they infer identity).
    snaps = {s.asset_key: s for s in asset_node_snaps_from_repo(repository)}
    [edge] = snaps[dg.AssetKey("reader")].parent_edges
    assert edge.parent_asset_key == dg.AssetKey("late")
    assert edge.partition_mapping is None


def materialization(instance: dg.DagsterInstance, key: dg.AssetKey, epoch: int) -> dict[str, Any]:
    """The metadata of the latest materialization of ``key`` at ``epoch``, as plain values."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[epoch_key(epoch)]),
        limit=1,
        ascending=False,
    ).records
    assert records, f"{key.to_user_string()} has no materialization at epoch {epoch}"
    event = records[0].asset_materialization
    assert event is not None
    return {k: v.value for k, v in event.metadata.items()}


@pytest.mark.spark
def test_partition_t_of_a_reader_reads_partition_t_minus_the_delay(
    tmp_path: Path, spark: SparkSession, instance: dg.DagsterInstance
) -> None:
    pipeline = meters()
    ledger = LedgerResource(path=str(tmp_path / "home" / "ledger.duckdb"))
    defs = build_definitions(
        [pipeline],
        spark=SparkResource(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"}),
        ledger=ledger,
    )
    rt = Runtime(pipeline, ledger.ledger(), spark, ledger.data_root)
    for worker in range(2):
        rows = {e: [(f"m{worker}", float(e + 1)), ("bad", -1.0)] for e in range(2)}
        send_epochs(rt, "readings", rows, worker=worker)
    close_sources(rt)
    Driver(defs, instance, pipeline="meters").drive()

    for epoch in range(2):
        late = materialization(instance, LATE, epoch)
        assert late["epoch"] == epoch
        assert late["output_epoch"] == epoch + DELAY  # the ledger's message of epoch t + 1
    # Partition 1 of both_days read what partition 0 of yesterday committed (its epoch 1).
    reader = materialization(instance, READER, 1)
    read = [(r["epoch"], r["attempt"]) for r in reader["reads"] if r["stage"] == "yesterday"]
    earlier = materialization(instance, LATE, 1 - DELAY)
    assert read == [(1, earlier["attempt"])]
    assert [m["epoch"] for m in earlier["messages"]] == [1]
