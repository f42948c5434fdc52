"""The regression diff: a pipeline's committed outputs against captured outputs, per stage and
epoch (``epochgate replay --diff``).

A captured output is a capture of one stage's output stream (its header names the stage). Per
epoch, its rows are the messages the stream holds there (a revision replaces its stream's
messages at its time); the pipeline's are the stage's current committed messages there. Rows
are compared as multisets over the captured columns, by name (DuckDB ``EXCEPT ALL`` over the
Parquet files, both ways): the counts of rows only in the pipeline and only in the capture.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from pipelines.capture.log import read
from pipelines.errors import PipelineError
from progress.capture import Messages, Progress

if TYPE_CHECKING:
    from pipelines.run.runtime import Runtime


@dataclass(frozen=True)
class Difference:
    """One stage and epoch compared: how many rows only the pipeline has, and only the
    capture has."""

    stage: str
    epoch: int
    only_in_pipeline: int
    only_in_capture: int

    @property
    def differs(self) -> bool:
        return bool(self.only_in_pipeline or self.only_in_capture)


@dataclass
class _Captured:
    """The captured output of one stage: its columns and, per epoch, its data files."""

    columns: list[str]
    files: dict[int, list[str]]


def captured_outputs(directories: Sequence[str | Path]) -> dict[str, _Captured]:
    """The captures in ``directories`` by the stage they recorded (several captures of one
    stage, one per worker, are that stage's output together); each is read and checked
    whole (``StreamError`` for a damaged one)."""
    out: dict[str, _Captured] = {}
    for directory in directories:
        log = read(directory, check_data=True)
        columns = [f["name"] for f in json.loads(log.header.schema or "{}").get("fields", [])]
        found = out.setdefault(log.header.stage, _Captured(columns, {}))
        if found.columns != columns:
            raise PipelineError(
                f"captured outputs of stage {log.header.stage!r} disagree on columns: "
                f"{', '.join(found.columns)} and, in {log.directory}, {', '.join(columns)}"
            )
        mine: dict[int, list[str]] = {}
        for event in log.events:
            if isinstance(event, Progress):
                continue
            paths = [str(log.directory / f.path) for f in event.files]
            if isinstance(event, Messages):
                mine.setdefault(event.time, []).extend(paths)
            else:
                mine[event.time] = paths
        for epoch, paths in mine.items():
            found.files.setdefault(epoch, []).extend(paths)
    return out


def diff_outputs(rt: Runtime, directories: Sequence[str | Path]) -> list[Difference]:
    """Each captured stage's committed output compared with its capture, epoch by epoch (the
    epochs either side has), in stage then epoch order."""
    captured = captured_outputs(directories)
    p = rt.pipeline.name
    out: list[Difference] = []
    con = duckdb.connect()
    try:
        for stage, capture in sorted(captured.items()):
            if stage not in rt.pipeline.stages:
                raise PipelineError(
                    f"a captured output is of stage {stage!r}, which pipeline {p!r} does not have"
                )
            ours: dict[int, list[str]] = {}
            for m in rt.ledger.messages(p, stage, 0):
                if isinstance(m.time, int):
                    paths = [f"{m.path}/*.parquet"] if m.path else []
                    ours.setdefault(m.time, []).extend(paths)
            for epoch in sorted(set(ours) | set(capture.files)):
                mine, theirs = ours.get(epoch, []), capture.files.get(epoch, [])
                out.append(
                    Difference(
                        stage,
                        epoch,
                        _except_all(con, mine, theirs, capture.columns),
                        _except_all(con, theirs, mine, capture.columns),
                    )
                )
    finally:
        con.close()
    return out


def _except_all(
    con: duckdb.DuckDBPyConnection, left: list[str], right: list[str], columns: list[str]
) -> int:
    """How many rows of the files ``left`` are not matched by a row of ``right``."""
    if not left:
        return 0
    names = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
    query = f"SELECT {names} FROM read_parquet(?)"
    if right:
        sql = f"SELECT count(*) FROM ({query} EXCEPT ALL {query})"
        row = con.execute(sql, [left, right]).fetchone()
    else:
        row = con.execute(f"SELECT count(*) FROM ({query})", [left]).fetchone()
    return int(row[0]) if row else 0


def diff_table(differences: Sequence[Difference]) -> str:
    """The differences as a table, one line per stage and epoch that differs (or a line
    saying none does)."""
    differ = [d for d in differences if d.differs]
    compared = len({(d.stage, d.epoch) for d in differences})
    if not differ:
        return f"no difference in {compared} captured (stage, epoch) output(s)"
    width = max(len("stage"), *(len(d.stage) for d in differ))
    lines = [f"{'stage':<{width}}  {'epoch':>5}  {'only in pipeline':>16}  {'only in capture':>15}"]
    lines += [
        f"{d.stage:<{width}}  {d.epoch:>5}  {d.only_in_pipeline:>16}  {d.only_in_capture:>15}"
        for d in differ
    ]
    lines.append(f"{len(differ)} of {compared} captured (stage, epoch) output(s) differ")
    return "\n".join(lines)
