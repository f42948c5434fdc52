"""A send's private copy of its input: the same bytes whichever way the copy goes (the kernel's
``copy_file_range``, or through memory where it cannot or says it copied nothing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipelines.errors import InputChangedError
from pipelines.run import snapshot as snap

pytestmark = pytest.mark.unit

BLOB = bytes(range(256)) * 4099  # about 1 MB, not a multiple of any chunk below


def source(tmp_path: Path) -> Path:
    path = tmp_path / "in" / "orders.parquet"
    path.parent.mkdir()
    path.write_bytes(BLOB)
    return path


def test_the_kernel_copies_the_file_whole_in_as_many_calls_as_it_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = os.copy_file_range

    def counted(fin: int, fout: int, count: int) -> int:
        calls.append(count)
        return real(fin, fout, count)

    monkeypatch.setattr(snap, "COPY_CHUNK", 100_000)
    monkeypatch.setattr(os, "copy_file_range", counted)
    copy = snap.snapshot("orders", 3, source(tmp_path), tmp_path / "copy")
    assert copy.read_bytes() == BLOB
    assert len(calls) == len(BLOB) // 100_000 + 2  # the last call copies nothing: the end


@pytest.mark.parametrize("kernel", ["refuses", "copies nothing", "absent"])
def test_where_the_kernel_cannot_copy_the_file_is_copied_through_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel: str
) -> None:
    real = os.copy_file_range

    def refuses(fin: int, fout: int, count: int) -> int:
        real(fin, fout, 1000)  # some bytes first: the copy through memory starts again
        raise OSError(18, "Invalid cross-device link")

    if kernel == "absent":
        monkeypatch.delattr(os, "copy_file_range")
    else:
        monkeypatch.setattr(os, "copy_file_range", refuses if kernel == "refuses" else lambda *_: 0)
    copy = snap.snapshot("orders", 3, source(tmp_path), tmp_path / "copy")
    assert copy.read_bytes() == BLOB


def test_a_file_rewritten_during_the_copy_is_refused_and_nothing_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = source(tmp_path)
    real = os.copy_file_range

    def rewriting(fin: int, fout: int, count: int) -> int:
        path.write_bytes(BLOB[:1000])  # in place, by another writer
        return real(fin, fout, count)

    monkeypatch.setattr(os, "copy_file_range", rewriting)
    with pytest.raises(InputChangedError) as err:
        snap.snapshot("orders", 3, path, tmp_path / "copy")
    assert (err.value.file, err.value.stage, err.value.epoch) == (str(path), "orders", 3)
    assert not (tmp_path / "copy").exists()


def test_a_directory_whose_copied_file_is_replaced_before_the_last_is_copied_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that renames a new version over each part in turn: each part's own copy is
    whole, but part-0 copied before its rename and part-1 after its would mix two versions."""
    folder = tmp_path / "in" / "orders"
    folder.mkdir(parents=True)
    for part in ("part-0.parquet", "part-1.parquet"):
        (folder / part).write_bytes(BLOB)
    real, copies = snap._copy_file, []

    def then_rewrite(source: Path, target: Path) -> snap.Identity | None:
        copied = real(source, target)
        copies.append(source.name)
        if source.name == "part-0.parquet":  # the writer's new version, renamed over the old
            for part in ("part-0.parquet", "part-1.parquet"):
                fresh = folder / f".{part}.new"
                fresh.write_bytes(BLOB[:5000])
                fresh.rename(folder / part)
        return copied

    monkeypatch.setattr(snap, "_copy_file", then_rewrite)
    with pytest.raises(InputChangedError) as err:
        snap.snapshot("orders", 2, folder, tmp_path / "copy")
    assert copies == ["part-0.parquet", "part-1.parquet"]  # each copy whole, the pair torn
    assert err.value.file == str(folder / "part-0.parquet")
    assert not (tmp_path / "copy").exists()


@pytest.mark.parametrize("change", ["came", "went"])
def test_a_directory_whose_files_come_or_go_during_the_copy_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    folder = tmp_path / "in" / "orders"
    folder.mkdir(parents=True)
    for part in ("part-0.parquet", "part-1.parquet"):
        (folder / part).write_bytes(BLOB)
    real = snap._copy_file

    def then_change(source: Path, target: Path) -> snap.Identity | None:
        copied = real(source, target)
        if source.name == "part-0.parquet":
            if change == "came":
                (folder / "part-2.parquet").write_bytes(BLOB)
            else:
                (folder / "part-1.parquet").unlink()
        return copied

    monkeypatch.setattr(snap, "_copy_file", then_change)
    with pytest.raises(InputChangedError) as err:
        snap.snapshot("orders", 2, folder, tmp_path / "copy")
    assert err.value.file == str(folder)
    assert not (tmp_path / "copy").exists()


def test_a_directory_copied_whole_holds_every_file(tmp_path: Path) -> None:
    folder = tmp_path / "in" / "orders"
    (folder / "region=north").mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes(BLOB)
    (folder / "region=north" / "part-1.parquet").write_bytes(BLOB[:777])
    copy = snap.snapshot("orders", 2, folder, tmp_path / "copy")
    assert (copy / "part-0.parquet").read_bytes() == BLOB
    assert (copy / "region=north" / "part-1.parquet").read_bytes() == BLOB[:777]
