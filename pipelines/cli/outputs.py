"""The commands that read a stage's output: ``read`` (one epoch, once it is final) and ``tail``
(each epoch as it becomes final).

An epoch that is not final is not printed: ``read`` exits with ``NOT_FINAL`` and says what holds
it, in the sentences ``status`` gives (``pipelines.reads.final``). ``read`` reads the committed
files in its own process (``Runtime.read_arrow``): no Spark starts for a materialized stage.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.cli.context import bound
from pipelines.cli.keyed import plain, shown, table
from pipelines.cli.options import STAGE, WAIT, Commands, command, engine, non_negative
from pipelines.errors import EpochNotCompleteError, UsageError
from pipelines.reads.arrow_rows import collected_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

NOT_FINAL = 3
"""The exit status of ``read`` when the epoch is not final."""

FORMATS = ("table", "csv", "json", "parquet")


def rows_and_columns(df: DataFrame, limit: int | None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The frame's columns and rows (the first ``limit`` of them, when given)."""
    taken = df if limit is None else df.limit(limit)
    return list(df.columns), [tuple(row) for row in taken.collect()]


def table_rows(read: pa.Table) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The table's columns and rows, each value as ``rows_and_columns`` gives it."""
    return read.column_names, collected_rows(read, read.column_names)


def write_table(
    out: IO[str], columns: Sequence[str], rows: Sequence[tuple[Any, ...]], indent: str = ""
) -> None:
    cells = [[shown(value) for value in row] for row in rows]
    for line in table(columns, cells):
        out.write(indent + line + "\n")


def write_csv(out: IO[str], columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)


def write_json(out: IO[str], columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    """One JSON object per row, one per line."""
    for row in rows:
        out.write(json.dumps(plain(dict(zip(columns, row, strict=True)))) + "\n")


TEXT_WRITERS: dict[str, Callable[[IO[str], Sequence[str], Sequence[tuple[Any, ...]]], None]] = {
    "table": write_table,
    "csv": write_csv,
    "json": write_json,
}


@contextmanager
def destination(path: Path | None) -> Iterator[IO[str]]:
    """Standard output, or the file ``path`` (written whole once the rows are all there)."""
    if path is None:
        yield sys.stdout
        return
    buffer = io.StringIO()
    yield buffer
    path.write_text(buffer.getvalue())


def cmd_read(args: argparse.Namespace) -> int:
    if args.format == "parquet" and args.out is None:
        raise UsageError("--format parquet writes a file: give it with --out PATH")
    rt = bound(args)
    try:
        read = rt.read_arrow(
            args.stage,
            args.epoch,
            complete=not args.not_final,
            wait=args.wait,
            quarantine=args.quarantine,
        )
    except EpochNotCompleteError as err:
        print(f"epochgate: {err}", file=sys.stderr)
        return NOT_FINAL
    if args.limit is not None:
        read = read.slice(0, args.limit)
    if args.format == "parquet":
        pq.write_table(read, args.out)
        print(f"{read.num_rows} row(s) of {args.stage} epoch {args.epoch} written to {args.out}")
        return 0
    columns, rows = table_rows(read)
    with destination(args.out) as out:
        TEXT_WRITERS[args.format](out, columns, rows)
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    rt = bound(args)
    timeout = None if args.follow else 0.0
    for done in rt.subscribe(args.stage, from_epoch=args.first, timeout=timeout):
        columns, rows = rows_and_columns(done.frame, None)
        again = ", revised" if done.revision else ""
        print(f"{args.stage} epoch {done.epoch} (final{again}): {len(rows)} row(s)", flush=True)
        if rows:
            write_table(sys.stdout, columns, rows, indent="  ")
        sys.stdout.flush()
    return 0


def add_commands(commands: Commands) -> None:
    read = command(
        commands,
        "read",
        "print a stage's output at an epoch once the epoch is final",
        handler=cmd_read,
        parents=[engine()],
        description=(
            "Print a stage's output at an epoch once the epoch is final: no input worker can "
            f"still add to it and no re-run is pending. Otherwise exit {NOT_FINAL}, saying "
            "what holds it."
        ),
    )
    STAGE.add(read)
    read.add_argument("epoch", type=non_negative, help="the epoch")
    WAIT.add(read, default=0.0, default_text="0: exit at once, saying what holds it")
    read.add_argument(
        "--not-final",
        action="store_true",
        help="print what is committed now, final or not (for debugging)",
    )
    read.add_argument(
        "--quarantine",
        action="store_true",
        help="print the rows the stage's drop expectations removed from the epoch instead",
    )
    read.add_argument("--format", choices=FORMATS, default="table", help="(default: table)")
    read.add_argument("--out", type=Path, metavar="PATH", help="write to this file")
    read.add_argument(
        "--limit", type=non_negative, metavar="N", help="at most N rows (default: every row)"
    )
    tail = command(
        commands,
        "tail",
        "print each epoch of a stage's output as it becomes final",
        handler=cmd_tail,
        parents=[engine()],
    )
    STAGE.add(tail)
    tail.add_argument(
        "--from",
        dest="first",
        type=non_negative,
        default=0,
        metavar="EPOCH",
        help="the first epoch (default: 0)",
    )
    tail.add_argument(
        "--follow",
        action="store_true",
        help="keep printing epochs as they become final, until every input worker has closed",
    )
