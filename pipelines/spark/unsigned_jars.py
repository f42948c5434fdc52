"""Unsigned copies of the signed jars among PySpark's, for the class-data archive.

A JVM archives no class from a signed jar: it loads and verifies those classes, and checks the
jar's signature, every time it starts. PySpark ships two (Janino and its compiler interface, in
every Spark job that generates code: about 450 classes). A copy of each without its signature
files, ahead of the original on the driver's class path, holds the same classes, which the
archive then maps like the others: about 0.4 CPU-s less for each JVM that starts a session and
runs a stage (8.60 against 8.95 CPU-s of the JVM, medians of 8 alternating runs of one bank epoch
and a lookup). The copies are made with the archive, beside it, and go with it
(``pipelines.spark.jvm``).
"""

from __future__ import annotations

import os
import re
import shutil
import zipfile
from pathlib import Path

SIGNATURE = re.compile(r"META-INF/[^/]+\.(SF|DSA|RSA|EC)", re.IGNORECASE)
"""The entries that sign a jar (its manifest's digests are checked only when one is present)."""


def signed(jar: Path) -> bool:
    """Whether ``jar`` is signed (has a signature file); an unreadable one counts as not."""
    try:
        with zipfile.ZipFile(jar) as archive:
            return any(SIGNATURE.fullmatch(name) for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def write_unsigned(jars: Path, folder: Path) -> None:
    """Into ``folder`` (made whole or not at all): a copy of each signed jar of ``jars``, without
    its signature files, entries stored, names and times kept."""
    partial = folder.with_name(f"{folder.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for jar in sorted(jars.glob("*.jar")):
            if signed(jar):
                _copy_unsigned(jar, partial / jar.name)
        partial.rename(folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _copy_unsigned(jar: Path, copy: Path) -> None:
    with zipfile.ZipFile(jar) as source, zipfile.ZipFile(copy, "w") as target:
        for entry in source.infolist():
            if SIGNATURE.fullmatch(entry.filename):
                continue
            kept = zipfile.ZipInfo(entry.filename, entry.date_time)
            kept.external_attr = entry.external_attr
            target.writestr(kept, source.read(entry), compress_type=zipfile.ZIP_STORED)


def unsigned_jars(folder: Path) -> list[str]:
    """The copies in ``folder``, in class-path order (none when it is missing)."""
    return sorted(str(jar) for jar in folder.glob("*.jar")) if folder.is_dir() else []


def after(class_path: str, first: str, jars: list[str]) -> str:
    """``class_path`` with ``jars`` right after its entry ``first`` (at its start without one),
    unless it has them already.

    >>> after("/a.jar:/u.jar", "/a.jar", ["/j1.jar", "/j2.jar"])
    '/a.jar:/j1.jar:/j2.jar:/u.jar'
    >>> after("/u.jar", "/a.jar", ["/j1.jar"])
    '/j1.jar:/u.jar'
    >>> after("/a.jar:/j1.jar", "/a.jar", ["/j1.jar"])
    '/a.jar:/j1.jar'
    """
    parts = [part for part in class_path.split(os.pathsep) if part]
    if not jars or set(jars) <= set(parts):
        return class_path
    at = parts.index(first) + 1 if first in parts else 0
    return os.pathsep.join([*parts[:at], *jars, *parts[at:]])
