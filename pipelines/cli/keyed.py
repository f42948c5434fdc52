"""The command line's reads of keyed state: ``lookup``, ``evict`` and ``state``.

A key is given as text (``--key 7``) and converted to its key column's type: an int for an
integral column, a float (a ``Decimal`` for a decimal column), text as it is, a date or a time
in ISO 8601, ``true``/``false``. A key of several columns is their values separated by commas,
in key-column order (``--key 7,2026-11-21``). The types are the declared ones (the stage's
schema, else its input's, up the chain of stages that carry the key); only a key whose columns
no declaration types asks Spark for them.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.cli.context import chosen, registering, runtime
from pipelines.cli.options import JSON, WAIT, Commands, command, engine, non_negative
from pipelines.errors import StateReadError
from pipelines.reads.lookup import KeyedReads, Lookup, StateInfo, declared_key_types
from pipelines.stages.families import followers
from pipelines.stages.kinds import KeyedStage

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

    from pipelines.run.runtime import Runtime


@dataclass(frozen=True)
class Request:
    """What a command asks for, checked before anything is read: the stage it names (None:
    every keyed stage) and its keys as ``Runtime.lookup`` takes them."""

    spec: KeyedStage | None
    keys: list[Any]


KEY_HELP = (
    "a key, converted to the key column's type (an int, a float, text, a date as 2026-11-21, "
    "true/false); a key of several columns is their values separated by commas, in key-column "
    "order (7,2026-11-21); repeat --key for more keys"
)


def key_types(rt: Runtime, spec: KeyedStage) -> list[DataType]:
    """The types of ``spec``'s key columns: declared by the stage or, up its first inputs,
    by the nearest stage that declares the column; else the columns Spark finds for its
    input."""
    found = declared_key_types(rt.pipeline.stages, spec)
    if len(found) < len(spec.key):
        schema = rt.executor.schema_of(spec.inputs[0])
        if schema is not None:
            names = schema.fieldNames()
            found.update({c: schema[c].dataType for c in spec.key if c in names and c not in found})
    for column in spec.key:
        if column not in found:
            raise StateReadError(
                spec.name,
                f"the type of key column {column!r} is not known yet (no declared schema has "
                "it and its input has no data)",
            )
    return [found[c] for c in spec.key]


def convert(data_type: DataType, text: str) -> object:
    """``text`` as a value of ``data_type``; ValueError when it is not one."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.BooleanType):
        if text.strip().lower() not in ("true", "false"):
            raise ValueError(text)
        return text.strip().lower() == "true"
    if isinstance(data_type, T.IntegralType):
        return int(text)
    if isinstance(data_type, T.DecimalType):
        try:
            return decimal.Decimal(text.strip())
        except decimal.InvalidOperation:
            raise ValueError(text) from None
    if isinstance(data_type, T.FractionalType):
        return float(text)
    if isinstance(data_type, T.StringType):
        return text
    if isinstance(data_type, T.DateType):
        return datetime.date.fromisoformat(text.strip())
    if isinstance(data_type, T.TimestampType | T.TimestampNTZType):
        return datetime.datetime.fromisoformat(text.strip())
    raise TypeError(data_type.simpleString())


def parse_key(spec: KeyedStage, types: Sequence[DataType], text: str) -> Any:
    """A key given on the command line as the value ``Runtime.lookup`` takes: a scalar for a
    one-column key (the whole text, commas included), else a tuple of the comma-separated
    values in key-column order."""
    parts = [text] if len(spec.key) == 1 else text.split(",")
    if len(parts) != len(spec.key):
        raise StateReadError(
            spec.name,
            f"key {text!r}: a key of {spec.name!r} is {len(spec.key)} comma-separated values "
            f"({', '.join(spec.key)})",
            key=text,
        )
    values = []
    for column, data_type, part in zip(spec.key, types, parts, strict=True):
        try:
            values.append(convert(data_type, part))
        except ValueError:
            raise StateReadError(
                spec.name,
                f"key {text!r}: column {column!r} is {data_type.simpleString()}, "
                f"{part!r} is not one",
                key=text,
            ) from None
        except TypeError:
            raise StateReadError(
                spec.name,
                f"key {text!r}: column {column!r} is {data_type.simpleString()}, which the "
                "command line cannot give",
                key=text,
            ) from None
    return values[0] if len(values) == 1 else tuple(values)


def prepare(rt: Runtime, args: argparse.Namespace) -> Request:
    """The stage a command names, which must keep keyed state, and its ``--key`` values
    converted to the key columns' types (``StateReadError`` naming the stage and the key)."""
    if args.stage is None:
        return Request(None, [])
    spec = KeyedReads(rt).keyed(args.stage)
    texts: list[str] = getattr(args, "keys", None) or []
    types = key_types(rt, spec) if texts else []
    return Request(spec, [parse_key(spec, types, t) for t in texts])


def requested(args: argparse.Namespace) -> tuple[Runtime, Request]:
    """The runtime of the pipeline ``-p`` means and the command's request: a command that
    fails before it reads (an unknown stage, a bad key) registers nothing."""
    pipeline, ledger = chosen(args)
    with registering(ledger, pipeline):
        rt = runtime(args, pipeline, ledger)
        request = prepare(rt, args)
    return rt, request


def plain(value: object) -> object:
    """``value`` as JSON has it: a date or time in ISO 8601, a decimal as text, a tuple as a
    list."""
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def shown(value: object) -> str:
    """A key or a value as the text tables print it."""
    if value is None:
        return "null"
    if isinstance(value, tuple):
        return ",".join(shown(v) for v in value)
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    return str(value)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    ]


def lookup_text(spec: KeyedStage, found: Lookup, keys: Sequence[Any]) -> str:
    """The rows, then the keys answered from state and by an upquery, and those with no row."""
    lines = [
        f"{found.stage} as of epoch {found.as_of}: {len(found.rows)} row(s) in {found.seconds:.3f}s"
    ]
    if found.rows:
        header = list(found.rows[0])
        cells = [[shown(r[c]) for c in header] for r in found.rows]
        lines += ["  " + line for line in table(header, cells)]
    with_rows = {tuple(r[c] for c in spec.key) for r in found.rows}
    empty = [k for k in keys if (k if isinstance(k, tuple) else (k,)) not in with_rows]
    lines.append(f"hits: {', '.join(shown(k) for k in found.hits) or '-'}")
    lines.append(f"upqueried: {', '.join(shown(k) for k in found.upqueried) or '-'}")
    if empty:
        lines.append(f"no state row: {', '.join(shown(k) for k in empty)}")
    return "\n".join(lines)


def lookup_json(found: Lookup) -> dict[str, Any]:
    return {
        "rows": plain(found.rows),
        "hits": plain(found.hits),
        "upqueried": plain(found.upqueried),
        "as_of": found.as_of,
        "seconds": found.seconds,
    }


def state_text(infos: Sequence[StateInfo]) -> str:
    header = (
        "stage",
        "state",
        "present keys",
        "rows",
        "bytes",
        "hits",
        "misses",
        "upqueries",
        "evictions",
        "max_keys",
    )
    rows = [
        (
            i.stage,
            "partial" if i.partial else "full",
            str(i.present_keys),
            str(i.rows),
            str(i.bytes),
            str(i.hits),
            str(i.misses),
            str(i.upqueries),
            str(i.evictions),
            "-" if i.max_keys is None else str(i.max_keys),
        )
        for i in infos
    ]
    return "\n".join(table(header, rows))


def cmd_lookup(args: argparse.Namespace) -> int:
    rt, request = requested(args)
    spec, keys = request.spec, request.keys
    assert spec is not None
    if args.wait is None:  # a partial stage's read of an epoch not processed yet is recorded
        found = rt.pending_reads.lookup_or_request(spec.name, keys, as_of=args.as_of)
    else:
        found = rt.lookup(spec.name, keys, as_of=args.as_of, wait=args.wait)
    if args.json:
        print(json.dumps(lookup_json(found)))
    else:
        print(lookup_text(spec, found, keys))
    return 0


def cmd_evict(args: argparse.Namespace) -> int:
    rt, request = requested(args)
    spec = request.spec
    assert spec is not None
    removed = rt.evict(spec.name, request.keys)
    below = [s for s in followers(rt.pipeline.stages, spec.name) if rt.pipeline.stage(s).partial]
    where = ", ".join([spec.name, *below])
    if removed:
        print(f"holes now in {where}: {', '.join(shown(k) for k in removed)}")
    else:
        print(f"nothing evicted from {where}: no key given was present")
    return 0


def cmd_state(args: argparse.Namespace) -> int:
    rt, request = requested(args)
    if request.spec is not None:
        names = [request.spec.name]
    else:
        names = [s.name for s in rt.pipeline.stages.values() if isinstance(s, KeyedStage)]
    infos = [rt.state_info(n) for n in names]
    if args.json:
        print(json.dumps([i.as_dict() for i in infos], indent=2))
    elif infos:
        print(state_text(infos))
    else:
        print(f"pipeline {rt.pipeline.name} has no stateful or aggregate stage")
    return 0


def add_commands(commands: Commands) -> None:
    lookup = command(
        commands,
        "lookup",
        "read keys of a stateful or aggregate stage; a partial one fills its holes first",
        handler=cmd_lookup,
        parents=[engine()],
        description=(
            "Print the state rows of the keys, which keys were answered from state (hits) and "
            "which by an upquery, the epoch answered and the time taken."
        ),
    )
    lookup.add_argument("stage", help="a stateful or aggregate stage, full or partial")
    lookup.add_argument(
        "--key", dest="keys", action="append", required=True, metavar="K", help=KEY_HELP
    )
    lookup.add_argument(
        "--as-of",
        type=non_negative,
        metavar="EPOCH",
        help="the state after this epoch (default: the last the stage has processed)",
    )
    WAIT.add(
        lookup,
        default_text="fail at once, naming what holds it; a partial stage's read is then "
        "recorded as a pending upquery, which the Dagster upquery sensor fills",
    )
    JSON.add(lookup)
    evict = command(
        commands,
        "evict",
        "turn keys of a partial stage into holes (and in the partial stages below it)",
        handler=cmd_evict,
        parents=[engine()],
    )
    evict.add_argument("stage", help="a partial stateful or aggregate stage")
    evict.add_argument(
        "--key", dest="keys", action="append", required=True, metavar="K", help=KEY_HELP
    )
    state = command(
        commands,
        "state",
        "the keyed state of every stateful and aggregate stage (or one): partial or full, "
        "present keys, rows, bytes, hits, misses, upqueries, evictions",
        handler=cmd_state,
        parents=[engine()],
    )
    state.add_argument(
        "stage", nargs="?", help="one stateful or aggregate stage (default: every one)"
    )
    JSON.add(state)
