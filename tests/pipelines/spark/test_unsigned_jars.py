"""Unsigned copies of PySpark's signed jars: made whole, only of the signed ones, the same classes
without the signature files; on a driver's class path right after epochgate's jar while they are
beside the archive, and gone with it."""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import pytest

from pipelines.spark import jvm
from pipelines.spark.local_fs import CLASSPATH_KEY, JAR
from pipelines.spark.unsigned_jars import signed, unsigned_jars, write_unsigned

pytestmark = pytest.mark.unit

CLASSES = {"org/x/A.class": b"\xca\xfe a", "org/x/B.class": b"\xca\xfe b"}


def _jar(path: Path, *, signature: bool) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        if signature:
            jar.writestr("META-INF/DUMMY.SF", "Signature-Version: 1.0\n")
            jar.writestr("META-INF/DUMMY.DSA", b"\x30\x82")
        for name, data in CLASSES.items():
            jar.writestr(name, data)
    return path


def test_only_signed_jars_are_copied_whole_without_their_signature(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    _jar(jars / "signed.jar", signature=True)
    _jar(jars / "plain.jar", signature=False)
    (jars / "broken.jar").write_bytes(b"not a jar")
    folder = tmp_path / "spark-abc.jars"
    write_unsigned(jars, folder)
    assert unsigned_jars(folder) == [str(folder / "signed.jar")]
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
    copy = folder / "signed.jar"
    assert signed(jars / "signed.jar")
    assert not signed(copy)
    with zipfile.ZipFile(copy) as made, zipfile.ZipFile(jars / "signed.jar") as original:
        assert made.namelist() == ["META-INF/MANIFEST.MF", *CLASSES]
        for name in made.namelist():
            assert made.read(name) == original.read(name)
            assert made.getinfo(name).date_time == original.getinfo(name).date_time
    assert unsigned_jars(tmp_path / "none") == []


def test_a_driver_has_the_copies_right_after_epochgates_jar_while_they_are_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(tmp_path))
    asked: list[Path] = []  # no archive here: a driver asks for one, made in the background
    monkeypatch.setattr(jvm, "_start_maker", asked.append)
    path = jvm.archive_path(tmp_path)
    folder = jvm.unsigned_dir(path)
    assert jvm.driver_conf({}, "local[2]")[CLASSPATH_KEY] == str(JAR)  # none made yet
    assert asked == [path]
    folder.mkdir()
    copies = [_jar(folder / name, signature=False) for name in ("b.jar", "a.jar")]
    mine = jvm.driver_conf({CLASSPATH_KEY: "/opt/mine.jar"}, "spark://node:7077")
    assert mine[CLASSPATH_KEY].split(os.pathsep) == [
        str(JAR),
        *sorted(map(str, copies)),
        "/opt/mine.jar",
    ]
    monkeypatch.setenv(jvm.ARCHIVE_ENV, "off")
    assert jvm.driver_conf({}, "local[2]")[CLASSPATH_KEY] == str(JAR)


def test_a_pruned_archive_takes_its_copies_and_a_dead_makers_half_copies_go(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    old = []
    for days in range(jvm.KEEP + 1):  # the oldest beyond the KEEP - 1 kept beside a new one
        path = tmp_path / f"spark-old{days}.jsa"
        path.write_bytes(b"an archive")
        path.with_suffix(".lock").write_text("")
        then = time.time() - (days + 1) * 86_400
        os.utime(path.with_suffix(".lock"), (then, then))
        jvm.unsigned_dir(path).mkdir()
        old.append(path)
    half = tmp_path / "spark-gone.jars.999999999.partial"  # no such process
    half.mkdir()
    path = jvm.archive_path(tmp_path)
    monkeypatch.setattr(jvm, "write_unsigned", lambda jars, folder: folder.mkdir())
    monkeypatch.setattr(jvm, "_dump", lambda partial: partial.write_bytes(b"a new archive"))
    jvm._make(path, wait=None)
    assert jvm.unsigned_dir(path).is_dir()
    kept = sorted(p.name for p in tmp_path.glob("*.jars"))
    assert kept == sorted(jvm.unsigned_dir(p).name for p in [path, *old[: jvm.KEEP - 1]])
    assert not half.exists()
