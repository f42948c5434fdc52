"""What a sink's publish costs per epoch, against writing the same rows with the format's own
library directly.

    .venv/bin/python bench/bench_sinks.py            # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_sinks.py [--results bench/RESULTS.md]

Each epoch's committed attempt is a Parquet file of seeded rows (as a stage's run leaves it).
Then, per format, epoch by epoch:

* **parquet**: ``SinkDirectory.publish`` (hard links into a version directory, then a symlink
  swap) against ``pyarrow.parquet.write_table`` of the same rows to a folder per epoch;
* **delta**: ``DeltaSink.publish`` (the attempt's file taken as it is: a hard link in the
  epoch's folder, one commit with the commit info and application transaction) against
  ``deltalake.write_deltalake`` of the same rows (already in memory, with their ``epoch``
  column) to a table of its own, as the same predicate overwrite of the epoch (what replaces
  an epoch's rows; an append would count a re-run twice);
* **iceberg**: ``IcebergSink.publish`` (the attempt's file taken as it is: a hard link in the
  epoch's folder, one overwrite snapshot with its summary) against pyiceberg's
  ``overwrite`` of the same rows, in memory, filtered on the epoch, in a table of its own
  (both tables in one SQLite catalog).

Figures: each format's per-epoch publish and direct write (medians over the epochs after the
first), and their ratio (goal <= 1.2; the full form has 1,000,000 rows per epoch). Every ratio
is of figures from the same run. The figures go to the ``bench_sinks`` section of
``bench/RESULTS.md`` (``--results`` names another file).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table
from results_file import Report, chosen_size, figure_line, section, spread, write_section
from scratch import scratch

from pipelines.run.delta_sink import DeltaSink
from pipelines.run.iceberg_sink import IcebergSink, resolved
from pipelines.run.published import Committed
from pipelines.run.sinks import SinkDirectory

GOAL = 1.2
"""A publish may cost at most this much more than writing the same rows directly."""


@dataclass(frozen=True)
class Size:
    rows: int
    epochs: int


SIZES = {"fast": Size(rows=20_000, epochs=3), "full": Size(rows=1_000_000, epochs=6)}


def attempt(root: Path, epoch: int, rows: int) -> Path:
    """A committed attempt's directory: one Parquet file of seeded rows for ``epoch``."""
    folder = root / f"attempt-{epoch}"
    folder.mkdir(parents=True)
    ids = pa.array(range(epoch * rows, (epoch + 1) * rows), pa.int64())
    table = pa.table(
        {
            "account_id": ids,
            "category": pa.array([f"c{i % 17}" for i in range(rows)]),
            "amount_cents": pa.array([(i * 37) % 10_000 - 5_000 for i in range(rows)], pa.int64()),
        }
    )
    pq.write_table(table, folder / "part-00000.parquet")
    return folder


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def measure(size: Size, root: Path) -> dict[str, tuple[list[float], list[float]]]:
    """Per format, the seconds of each epoch's publish and of its direct write."""
    attempts = [attempt(root / "attempts", e, size.rows) for e in range(size.epochs)]
    parquet = SinkDirectory("bench", "export", root / "parquet")
    delta = DeltaSink("bench", "lake", root / "delta")
    catalog = {"type": "sql", "uri": "sqlite:///iceberg/catalog.db", "warehouse": "iceberg/wh"}
    iceberg = IcebergSink("bench", "ice", root, "bench.ice", catalog)
    direct_ice: Table | None = None
    out: dict[str, tuple[list[float], list[float]]] = {
        "parquet": ([], []),
        "delta": ([], []),
        "iceberg": ([], []),
    }
    for epoch, files in enumerate(attempts):
        committed = Committed(epoch, f"a{epoch}", epoch + 1, files)
        rows = pq.read_table(files / "part-00000.parquet")
        folder = root / "direct-parquet" / f"epoch={epoch}"
        folder.mkdir(parents=True)
        tagged = rows.append_column("epoch", pa.repeat(pa.scalar(epoch, pa.int64()), rows.num_rows))
        direct = str(root / "direct-delta")
        out["parquet"][0].append(timed(partial(parquet.publish, committed)))
        out["parquet"][1].append(timed(partial(pq.write_table, rows, folder / "part.parquet")))
        out["delta"][0].append(timed(partial(delta.publish, committed)))
        replace = partial(
            write_deltalake,
            direct,
            tagged,
            mode="overwrite",
            predicate=f"epoch = {epoch}",
            partition_by=["epoch"],
        )
        out["delta"][1].append(timed(replace))
        out["iceberg"][0].append(timed(partial(iceberg.publish, committed)))
        if direct_ice is None:
            made = iceberg.loaded()
            assert made is not None
            direct_ice = _direct_table(root, catalog, made)
        ice = partial(direct_ice.overwrite, tagged, overwrite_filter=f"epoch = {epoch}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out["iceberg"][1].append(timed(ice))
    return out


def _direct_table(root: Path, catalog: dict[str, str], like: Table) -> Table:
    """A table of its own with the schema and partitioning of ``like``, in the same catalog."""
    made = load_catalog("default", **resolved(catalog, root))
    return made.create_table("bench.direct", schema=like.schema(), partition_spec=like.spec())


def run(size: Size, root: Path) -> list[str]:
    """Measure, print and return the figures (see the module docs)."""
    report = Report()
    for fmt, (published, direct) in measure(size, root).items():
        ours, theirs = published[1:], direct[1:]  # the first epoch warms up
        millis = [1000 * x for x in ours], [1000 * x for x in theirs]
        report.detail(f"{fmt}, publish per epoch: {spread(millis[0], unit=' ms', digits=1)}")
        report.detail(f"{fmt}, direct write per epoch: {spread(millis[1], unit=' ms', digits=1)}")
        ratio = statistics.median(ours) / statistics.median(theirs)
        report.figure(
            figure_line(f"{fmt}: publish / direct write", ratio, GOAL, why="of the medians")
        )
    return report.lines


def sinks_section(lines: list[str], size: Size, name: str) -> str:
    return section(
        f"bench_sinks: a sink's publish against the format's own write ({name})",
        [
            f"size: {name}; {size.epochs} epochs (the first a warm-up) of {size.rows:,} rows, "
            "3 columns"
        ],
        lines,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path(__file__).with_name("RESULTS.md"))
    args = parser.parse_args()
    name, size = chosen_size(SIZES)
    print(f"bench_sinks, size {name}: {size.epochs} epochs of {size.rows:,} rows", flush=True)
    with scratch("bench-sinks-") as root:
        lines = run(size, root)
    write_section(args.results, "bench_sinks", sinks_section(lines, size, name))
    print(f"figures written to {args.results}")


if __name__ == "__main__":
    main()
