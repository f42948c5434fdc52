"""Sinks: paths checked when defined, relative ones under the runtime's home, each committed
epoch published atomically after its commit, and what a killed run left published next time."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from pipelines.errors import PipelineDefinitionError, SinkPublishError
from pipelines.run import sinks
from pipelines.run.published import Committed
from pipelines.run.runtime import Runtime
from pipelines.run.sinks import VERSIONS, SinkDirectory, resolve_sink_path
from pipelines.run.storage import runtime_home
from pipelines.stages.pipeline import Pipeline
from tests.children import run_in_group
from tests.fixtures import exports
from tests.fixtures.exports import (
    SALES,
    assert_hard_links,
    attempt_rows,
    catalog,
    commit_export,
    oracle,
    published,
    write_input,
)
from tests.pipelines.cli.places import on, run

pytestmark = pytest.mark.slow(40)

REPO = Path(__file__).resolve().parents[3]


# -- paths ---------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("..", "climbs out of the runtime's home"),
        ("../x", "climbs out of the runtime's home"),
        ("out/../../x", "climbs out of the runtime's home"),
        (".", "is the runtime's home itself"),
        ("out/..", "is the runtime's home itself"),
        ("out\0x", "holds a NUL character"),
        (None, "is not a path"),
    ],
)
def test_a_bad_sink_path_is_refused_when_defined(path: object, why: str) -> None:
    p = Pipeline("shop")
    orders = p.source("orders", schema=SALES)
    with pytest.raises(PipelineDefinitionError, match=why) as err:
        p.sink("export", orders, path=path)  # type: ignore[arg-type]
    assert (err.value.pipeline, err.value.stage) == ("shop", "export")
    assert str(err.value).startswith(f"pipeline 'shop', stage 'export': path {path!r} ")
    assert "export" not in p.stages


@pytest.mark.unit
def test_relative_sink_paths_are_under_the_home_absolute_ones_are_kept(tmp_path: Path) -> None:
    p = Pipeline("shop")
    orders = p.source("orders", schema=SALES)
    p.sink("a", orders, path="out/a")
    p.sink("b", orders, path="out/x/../b")  # stays under the home
    p.sink("c", orders, path=tmp_path / "c")  # a PathLike is taken as its string
    home = tmp_path / "home"
    assert resolve_sink_path("out/a", home) == home / "out" / "a"
    assert resolve_sink_path("out/x/../b", home) == home / "out" / "b"
    assert resolve_sink_path(str(tmp_path / "c"), home) == tmp_path / "c"
    assert resolve_sink_path("~/c", home) == Path.home() / "c"
    assert p.stage("a").describe() == (
        "Sink: publishes each committed epoch to out/a under the runtime's home (epoch=N)"
    )
    assert (
        p.stage("c").describe()
        == f"Sink: publishes each committed epoch to {tmp_path / 'c'} (epoch=N)"
    )
    assert runtime_home(Path("rel") / "ledger.duckdb") == Path.cwd() / "rel"


# -- publishing, without Spark -------------------------------------------------------------


def attempt_files(root: Path, name: str, values: list[int]) -> Path:
    """A committed attempt's directory as a run leaves it: one Parquet part and a marker."""
    path = root / name
    path.mkdir(parents=True)
    pq.write_table(pa.table({"v": values}), path / f"part-00000-{name}.snappy.parquet")
    (path / "_SUCCESS").touch()
    return path


@pytest.mark.unit
def test_publishing_swaps_a_link_to_a_complete_version_and_keeps_only_the_one_before(
    tmp_path: Path,
) -> None:
    sink = SinkDirectory("shop", "export", tmp_path / "out")
    first = attempt_files(tmp_path / "data", "a1", [1, 2])
    second = attempt_files(tmp_path / "data", "a2", [3])
    assert sink.published(0) is None
    sink.publish(Committed(0, "a1", 1, first))
    sink.publish(Committed(1, "b1", 1, None))  # a committed message without files: an empty epoch
    assert os.readlink(sink.link(0)) == f"{VERSIONS}/epoch=0/a1"
    assert (sink.published(0), sink.published(1)) == ("a1", "b1")
    assert sorted(p.name for p in sink.link(0).iterdir()) == sorted(p.name for p in first.iterdir())

    sink.publish(Committed(0, "a2", 1, second))
    assert sink.published(0) == "a2"
    assert sorted(p.name for p in sink.versions(0).iterdir()) == ["a1", "a2"]  # a1 until next
    sink.publish(Committed(0, "a3", 1, second))
    assert sorted(p.name for p in sink.versions(0).iterdir()) == ["a2", "a3"]
    assert sorted(os.listdir(sink.root)) == [VERSIONS, "epoch=0", "epoch=1"]
    rows = duckdb.sql(
        f"SELECT epoch, v FROM read_parquet('{sink.root}/*/*.parquet', hive_partitioning = true)"
    ).fetchall()
    assert rows == [(0, 3)]
    assert ds.dataset(sink.root, partitioning="hive").to_table().to_pylist() == [
        {"v": 3, "epoch": 0}
    ]
    assert first.is_dir()  # the committed attempt itself is the ledger's: never touched
    part = next(second.glob("*.parquet"))
    linked = sink.versions(0) / "a3" / part.name
    assert linked.stat().st_ino == part.stat().st_ino  # a hard link: no bytes copied


@pytest.mark.unit
def test_publishing_copies_where_no_hard_link_can_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cross_device(source: str, target: str) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link", source)

    monkeypatch.setattr(os, "link", cross_device)
    sink = SinkDirectory("shop", "export", tmp_path / "out")
    files = attempt_files(tmp_path / "data", "a1", [1, 2])
    sink.publish(Committed(0, "a1", 1, files))
    part = next(files.glob("*.parquet"))
    copied = sink.link(0) / part.name
    assert copied.stat().st_ino != part.stat().st_ino
    assert pq.read_table(copied).column("v").to_pylist() == [1, 2]


@pytest.mark.unit
def test_publishing_replaces_a_plain_epoch_directory_and_clears_what_a_crash_left(
    tmp_path: Path,
) -> None:
    sink = SinkDirectory("shop", "export", tmp_path / "out")
    plain = attempt_files(sink.root, "epoch=0", [9])  # the layout before versions
    half = sink.versions(0) / ".a1.1234abcd"  # a copy a killed publish left half done
    half.mkdir(parents=True)
    (half / "part-0.parquet").write_bytes(b"PAR1")
    os.symlink("nowhere", sink.versions(0) / ".link.1234abcd")  # a link it never swapped
    assert sink.published(0) is None
    sink.publish(Committed(0, "a1", 1, attempt_files(tmp_path / "data", "a1", [1])))
    assert plain.is_symlink()
    assert sink.published(0) == "a1"
    assert [p.name for p in sink.versions(0).iterdir()] == ["a1"]
    assert pq.read_table(sink.link(0)).column("v").to_pylist() == [1]


@pytest.mark.unit
def test_at_every_step_of_a_republish_a_reader_finds_the_epoch_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = SinkDirectory("shop", "export", tmp_path / "out")
    old = attempt_files(tmp_path / "data", "old", [1, 2])
    new = attempt_files(tmp_path / "data", "new", [3])
    sink.publish(Committed(0, "a1", 1, old))
    whole = {frozenset(os.listdir(old)), frozenset(os.listdir(new))}
    seen: list[frozenset[str]] = []

    def read() -> None:  # a reader arriving now: the epoch is there, one version, complete
        names = frozenset(os.listdir(sink.link(0)))
        assert names in whole, f"epoch=0 shows {sorted(names)}"
        seen.append(names)

    def observed(call: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: object, **kwargs: object) -> Any:
            read()
            done = call(*args, **kwargs)
            read()
            return done

        return step

    for name in ("mkdir", "rename", "replace", "symlink", "unlink", "rmdir"):
        monkeypatch.setattr(os, name, observed(getattr(os, name)))
    sink.publish(Committed(0, "a2", 1, new))
    sink.publish(Committed(0, "a3", 1, old))  # removes a1
    monkeypatch.undo()
    assert sink.published(0) == "a3"
    assert set(seen) == whole  # the reader saw the swaps happen


@pytest.mark.unit
def test_a_publish_that_fails_names_the_sink_epoch_and_path(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    sink = SinkDirectory("shop", "export", blocked / "out")
    with pytest.raises(SinkPublishError, match="the next run\\(\\) publishes it") as err:
        sink.publish(Committed(3, "a1", 1, attempt_files(tmp_path / "data", "a1", [1])))
    assert (err.value.pipeline, err.value.stage, err.value.epoch) == ("shop", "export", 3)
    assert err.value.path == blocked / "out"
    assert str(err.value).startswith(
        f"pipeline 'shop', sink 'export', epoch 3: cannot publish to {blocked / 'out'}: "
    )


# -- runs ----------------------------------------------------------------------------------


def inputs(tmp_path: Path, epochs: int) -> dict[int, Path]:
    return {e: write_input(tmp_path / "raw", e) for e in range(epochs)}


def committed(rt: Runtime) -> dict[object, str]:
    """The ledger's committed attempt of the sink at each epoch."""
    return {m.time: m.attempt for m in rt.ledger.messages("sales", "export", 0)}


def shown(rt: Runtime) -> dict[object, str | None]:
    """The attempt the sink's path shows at each epoch it has a link for."""
    sink = SinkDirectory("sales", "export", rt.sink_path("export"))
    epochs = sorted(int(p.name.removeprefix("epoch=")) for p in sink.root.glob("epoch=*"))
    return {e: sink.published(e) for e in epochs}


@pytest.mark.spark
def test_a_sink_publishes_each_committed_epoch_under_the_home_for_spark_duckdb_and_pyarrow(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a relative sink path never lands in the working directory
    files = inputs(tmp_path, 3)
    home = tmp_path / "home"
    rt = exports.runtime(home, spark)
    assert rt.home == home
    assert rt.sink_path("export") == home / "exports" / "totals"
    exports.send(rt, files)
    rt.run()
    assert list(elsewhere.iterdir()) == []
    for epoch in range(3):  # the sink's message is its input's committed files, hard-linked
        assert_hard_links(rt.ledger, "sales", "export", "totals", epoch)
    root = rt.sink_path("export")
    assert sorted(p.name for p in root.iterdir()) == [VERSIONS, "epoch=0", "epoch=1", "epoch=2"]
    assert shown(rt) == committed(rt)
    expected = oracle(files)
    assert published(root) == expected  # DuckDB: PATH/*/*.parquet, hive partitioning
    from_spark = spark.read.parquet(str(root)).select("epoch", "item", "total").collect()
    assert sorted((r.epoch, r.item, round(r.total, 6)) for r in from_spark) == expected
    from_arrow = ds.dataset(root, partitioning="hive").to_table().to_pylist()
    assert sorted((r["epoch"], r["item"], round(r["total"], 6)) for r in from_arrow) == expected
    one = spark.read.parquet(str(root / "epoch=1")).collect()  # a reader of one epoch folder
    assert sorted((1, r.item, round(r.total, 6)) for r in one) == [t for t in expected if t[0] == 1]
    assert rt.publish_sinks() == []  # nothing to do

    before = committed(rt)
    revised = rt.revise("export", [1])  # a revision publishes its new attempt
    assert [r.status for r in revised] == ["revised"]
    assert committed(rt)[1] != before[1]
    assert shown(rt) == committed(rt)
    versions = sorted(p.name for p in (root / VERSIONS / "epoch=1").iterdir())
    assert versions == sorted([before[1], committed(rt)[1]])  # the one before, until the next
    assert published(root) == expected


def run_child(home: Path, point: str, epoch: int, *extra: str) -> None:
    """Run ``tests.fixtures.exports`` in a child that must kill itself at ``point``, with its
    working directory elsewhere (which it must leave empty)."""
    cwd = home.parent / "child-cwd"
    cwd.mkdir(exist_ok=True)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    child = run_in_group(
        [sys.executable, "-m", "tests.fixtures.exports", str(home), point, str(epoch), *extra],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert child.returncode == -signal.SIGKILL, child.stdout[-2000:] + child.stderr[-2000:]
    assert list(cwd.iterdir()) == []


@pytest.mark.spark
def test_a_run_killed_before_or_after_its_sink_commit_leaves_only_committed_epochs(
    tmp_path: Path, spark: SparkSession
) -> None:
    files = inputs(tmp_path, 3)
    expected = oracle(files)
    home = tmp_path / "home"
    rt = exports.runtime(home, spark)
    exports.send(rt, files)
    root = rt.sink_path("export")

    run_child(home, "commit", 1)  # epoch 1 written, not committed
    assert list(committed(rt)) == [0]
    assert shown(rt) == committed(rt)
    assert published(root) == [t for t in expected if t[0] == 0]

    run_child(home, "publish", 1)  # epoch 1 committed, not published
    assert list(committed(rt)) == [0, 1]
    assert shown(rt) == {0: committed(rt)[0]}
    assert published(root) == [t for t in expected if t[0] == 0]

    results = rt.run()  # publishes epoch 1 first, then runs epoch 2
    assert [(r.stage, r.epoch) for r in results] == [("totals", 2), ("export", 2)]
    assert shown(rt) == committed(rt)
    assert list(committed(rt)) == [0, 1, 2]
    assert published(root) == expected
    assert rt.ledger.verify().ok


@pytest.mark.spark
def test_a_run_looks_at_the_sink_epochs_since_its_mark_and_publish_at_every_one(
    tmp_path: Path,
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sinks, "MARK_AFTER", 2)  # the mark moves once two epochs are shown
    files = inputs(tmp_path, 4)
    home = tmp_path / "home"
    rt = exports.runtime(home, spark)
    exports.send(rt, files)
    root = rt.sink_path("export")
    run_child(home, "publish", 1)  # epoch 1 committed, not published
    place = SinkDirectory("sales", "export", root).reader()  # named by epoch 0's publish
    assert place is not None
    assert [m.time for m in rt.ledger.unmarked("sales", "export", 0, place)] == [0, 1]
    assert rt.publish_sinks() == [("export", 1)]  # no mark yet: every epoch looked at
    assert rt.ledger.unmarked("sales", "export", 0, place) == []  # two shown: marked

    (root / "epoch=0").unlink()  # by hand, behind the mark: run() does not look again
    results = rt.run()
    assert [(r.stage, r.epoch) for r in results] == [
        ("totals", 2),
        ("export", 2),
        ("totals", 3),
        ("export", 3),
    ]
    assert sorted(shown(rt)) == [1, 2, 3]
    where = on("tests.fixtures.exports:pipeline", home)
    code, out, _ = run(capsys, ["sinks", *where])
    assert code == 0
    assert out.splitlines()[1].split()[:5] == ["export", "parquet", "3", "of", "4"]
    code, out, _ = run(capsys, ["sinks", "--publish", *where])
    assert code == 0
    assert out.splitlines()[0] == "published export epoch 0"
    assert out.splitlines()[2].split()[:5] == ["export", "parquet", "4", "of", "4"]
    assert shown(rt) == committed(rt)
    assert published(root) == oracle(files)
    code, out, err = run(capsys, ["sinks", "--publish", "--json", *where])
    assert err.strip() == "every committed epoch is published"
    assert json.loads(out)["published"] == 4

    shutil.rmtree(root)  # the whole directory, made anew: another place, no mark
    assert rt.run() == []
    assert shown(rt) == committed(rt)
    assert SinkDirectory("sales", "export", root).reader() not in (None, place)
    assert published(root) == oracle(files)


@pytest.mark.ledger
def test_a_publish_that_fails_leaves_the_mark_where_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sinks, "MARK_AFTER", 2)
    ledger = catalog(tmp_path / "ledger.duckdb")
    sink = SinkDirectory("sales", "export", tmp_path / "out")
    commit_export(ledger, 0, attempt_rows(tmp_path / "a0", "tea", 1.0))
    assert sinks.publish_committed(ledger, "sales", [sink]) == [("export", 0)]  # names it
    place = sink.reader()
    assert place is not None
    for epoch in (1, 2, 3):
        commit_export(ledger, epoch, attempt_rows(tmp_path / f"a{epoch}", "jam", epoch))
    publish = SinkDirectory.publish

    def failing(self: SinkDirectory, committed: Committed) -> None:
        if committed.epoch == 2:
            raise SinkPublishError("sales", "export", 2, self.root, "no space left")
        publish(self, committed)

    monkeypatch.setattr(SinkDirectory, "publish", failing)
    with pytest.raises(SinkPublishError):
        sinks.publish_committed(ledger, "sales", [sink])
    unmarked = [m.time for m in ledger.unmarked("sales", "export", 0, place)]
    assert unmarked == [0, 1, 2, 3]  # epoch 1 shown, 2 not: the mark did not move
    monkeypatch.setattr(SinkDirectory, "publish", publish)
    assert sinks.publish_committed(ledger, "sales", [sink]) == [("export", 2), ("export", 3)]
    assert ledger.unmarked("sales", "export", 0, place) == []
    assert [e for e, _, _ in published(sink.root)] == [0, 1, 2, 3]


@pytest.mark.spark
def test_a_revision_killed_before_its_swap_leaves_the_old_version_until_the_next_run(
    tmp_path: Path, spark: SparkSession
) -> None:
    files = inputs(tmp_path, 2)
    expected = oracle(files)
    home = tmp_path / "home"
    rt = exports.runtime(home, spark)
    exports.send(rt, files)
    rt.run()
    before = committed(rt)
    root = rt.sink_path("export")

    run_child(home, "swap", 0, "revise")  # the new version copied, the link not swapped
    after = committed(rt)
    assert after[0] != before[0]
    assert shown(rt) == before  # readers still find the old version, whole
    assert published(root) == expected
    copied = (root / VERSIONS / "epoch=0" / after[0]).stat().st_ino  # complete, not linked

    assert rt.run() == []  # nothing to run: it only publishes what is committed
    assert shown(rt) == after
    versions = sorted(p.name for p in (root / VERSIONS / "epoch=0").iterdir())
    assert versions == sorted([before[0], after[0]])
    assert (root / VERSIONS / "epoch=0" / after[0]).stat().st_ino == copied  # not copied again
    assert published(root) == expected
