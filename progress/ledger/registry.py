"""The registry of pipelines: each one's graph, registered once and only ever extended."""

from __future__ import annotations

import json
from collections.abc import Sequence

from progress.errors import GraphChangeError
from progress.graph import Graph
from progress.ledger.records import Origin, OriginKind, Registration
from progress.ledger.sessions import Session
from progress.ledger.writer import write_batch
from progress.location import Target
from progress.spec import diff, spec_hash, to_spec
from progress.timestamp import time_from_columns, time_to_columns
from progress.tracker import Update


def register(
    s: Session, pipeline: str, graph: Graph, *, from_start: bool, definition: str | None = None
) -> str:
    """Register ``graph`` as ``pipeline``'s, in the caller's transaction; see
    ``Ledger.register``."""
    spec = to_spec(graph)
    digest = spec_hash(spec)
    row = s.row("SELECT hash, spec, definition FROM graphs WHERE pipeline = ?", [pipeline])
    if row is not None and definition is not None and row[2] != definition:
        s.con.execute("UPDATE graphs SET definition = ? WHERE pipeline = ?", [definition, pipeline])
    if row is not None and row[0] == digest:
        return "unchanged"
    if row is None:
        s.con.execute(
            "INSERT INTO graphs (pipeline, hash, spec, registered_at, definition) "
            "VALUES (?, ?, ?, now(), ?)",
            [pipeline, digest, json.dumps(spec), definition],
        )
        added = list(graph.nodes)
        announce: list[Update] = []
        outcome = "registered"
    else:
        change = diff(json.loads(row[1]), spec)
        if not change.only_adds:
            raise GraphChangeError(pipeline, change.refused)
        s.con.execute(
            "UPDATE graphs SET hash = ?, spec = ?, registered_at = now() WHERE pipeline = ?",
            [digest, json.dumps(spec), pipeline],
        )
        added = list(change.added_nodes)
        announce = reannounce(s, pipeline, change.added_edges) if from_start else []
        outcome = "extended"
    s.registered(pipeline, digest, graph)
    initial = [
        (src, graph.minimum, spec_.workers)
        for name in added
        for spec_ in (graph.node(name),)
        if spec_.workers
        for src in spec_.sources()
    ]
    write_batch(
        s,
        pipeline=pipeline,
        graph=graph,
        batch=initial + announce,
        key=f"{outcome}:{digest}",
        origin=Origin(OriginKind.REGISTER),
        messages=(),
    )
    for name in added:
        spec_ = graph.node(name)
        if not spec_.inputs:
            t0, t1 = time_to_columns(graph.minimum)
            for w in range(spec_.workers):
                s.con.execute(
                    "INSERT INTO capabilities VALUES (?, ?, ?, ?, ?)", [pipeline, name, w, t0, t1]
                )
    return outcome


def reannounce(
    s: Session, pipeline: str, edges: Sequence[tuple[str, int, str, int]]
) -> list[Update]:
    """One message at each added edge's target for every current message of its source."""
    out: list[Update] = []
    for src, port, tgt, inp in edges:
        rows = s.rows(
            "SELECT t0, t1 FROM messages WHERE pipeline = ? AND stage = ? AND port = ? AND current",
            [pipeline, src, port],
        )
        out.extend((Target(tgt, inp), time_from_columns(t0, t1), 1) for t0, t1 in rows)
    return out


def unchanged(s: Session, pipeline: str, graph: Graph, definition: str | None) -> bool:
    """Whether registering ``graph`` (and ``definition``, when given) as ``pipeline``'s would
    change nothing."""
    row = s.row("SELECT hash, definition FROM graphs WHERE pipeline = ?", [pipeline])
    if row is None or row[0] != spec_hash(to_spec(graph)):
        return False
    return definition is None or row[1] == definition


def pipelines(s: Session) -> list[str]:
    """The registered pipelines (not the scopes of their iterative stages)."""
    return [r.pipeline for r in registrations(s)]


def registrations(s: Session) -> list[Registration]:
    """The registered pipelines (not the scopes of their iterative stages) with where their
    code is, by name."""
    rows = s.rows("SELECT pipeline, definition FROM graphs ORDER BY pipeline")
    return [Registration(name, definition) for name, definition in rows if "." not in name]
