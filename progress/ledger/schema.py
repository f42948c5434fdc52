"""The ledger's versioned schema: forward migrations, applied in order inside one transaction.

``counts`` holds the sum of every update of batches up to the ``counts_through`` watermark in
``meta``, zero sums removed; the updates of later batches (the tail) are added on read and
folded into ``counts`` every so many batches.

Times are stored as two BIGINT columns (``progress.timestamp.time_to_columns``): an epoch ``t``
as ``(t, -1)``, a ``Product(o, i)`` of epochs as ``(o, i)``. Locations are ``(kind, node, port)``
with kind 0 for an output port (``Source``) and 1 for an input port (``Target``).
"""

from __future__ import annotations

from typing import Any

from progress.location import Location, Source, Target

MIGRATIONS: tuple[str, ...] = (
    # 1: the control plane and the message catalog.
    """
    CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
    CREATE TABLE graphs (
        pipeline VARCHAR PRIMARY KEY,
        hash VARCHAR NOT NULL,
        spec VARCHAR NOT NULL,
        registered_at TIMESTAMP NOT NULL
    );
    CREATE SEQUENCE batch_ids START 1;
    CREATE TABLE batches (
        batch_id BIGINT PRIMARY KEY,
        pipeline VARCHAR NOT NULL,
        key VARCHAR NOT NULL,
        origin VARCHAR NOT NULL,
        node VARCHAR,
        worker INTEGER,
        t0 BIGINT,
        t1 BIGINT,
        n_updates INTEGER NOT NULL,
        committed_at TIMESTAMP NOT NULL,
        UNIQUE (pipeline, key)
    );
    CREATE TABLE updates (
        batch_id BIGINT NOT NULL,
        pipeline VARCHAR NOT NULL,
        kind TINYINT NOT NULL,
        node VARCHAR NOT NULL,
        port INTEGER NOT NULL,
        t0 BIGINT NOT NULL,
        t1 BIGINT NOT NULL,
        delta BIGINT NOT NULL
    );
    CREATE TABLE counts (
        pipeline VARCHAR NOT NULL,
        kind TINYINT NOT NULL,
        node VARCHAR NOT NULL,
        port INTEGER NOT NULL,
        t0 BIGINT NOT NULL,
        t1 BIGINT NOT NULL,
        count BIGINT NOT NULL,
        PRIMARY KEY (pipeline, kind, node, port, t0, t1)
    );
    CREATE TABLE messages (
        pipeline VARCHAR NOT NULL,
        stage VARCHAR NOT NULL,
        port INTEGER NOT NULL,
        t0 BIGINT NOT NULL,
        t1 BIGINT NOT NULL,
        attempt VARCHAR NOT NULL,
        path VARCHAR,
        rows BIGINT NOT NULL,
        bytes BIGINT NOT NULL,
        batch_id BIGINT NOT NULL,
        current BOOLEAN NOT NULL,
        PRIMARY KEY (pipeline, stage, port, t0, t1, attempt)
    );
    CREATE TABLE capabilities (
        pipeline VARCHAR NOT NULL,
        node VARCHAR NOT NULL,
        worker INTEGER NOT NULL,
        t0 BIGINT,
        t1 BIGINT,
        PRIMARY KEY (pipeline, node, worker)
    );
    """,
    # 2: run records, so status can show running work and history can show every attempt.
    """
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,
        pipeline VARCHAR NOT NULL,
        stage VARCHAR NOT NULL,
        t0 BIGINT NOT NULL,
        t1 BIGINT NOT NULL,
        attempt VARCHAR,
        status VARCHAR NOT NULL,
        pid INTEGER,
        started_at TIMESTAMP NOT NULL,
        finished_at TIMESTAMP,
        batch_id BIGINT,
        error VARCHAR
    );
    CREATE INDEX batches_by_origin ON batches (pipeline, node, t0);
    """,
    # 3: counts are compacted in bulk: the table holds the log through a watermark, and the
    # batches after it are summed on read, so a commit only appends.
    """
    INSERT INTO meta
    SELECT 'counts_through', CAST(coalesce(max(batch_id), 0) AS VARCHAR) FROM batches;
    """,
    # 4: message lineage: which input attempts each committed output read, so a revision can
    # tell which outputs it made stale.
    """
    CREATE TABLE reads (
        pipeline VARCHAR NOT NULL,
        batch_id BIGINT NOT NULL,
        stage VARCHAR NOT NULL,
        t0 BIGINT NOT NULL,
        t1 BIGINT NOT NULL,
        attempt VARCHAR NOT NULL,
        input_stage VARCHAR NOT NULL,
        input_port INTEGER NOT NULL,
        input_t0 BIGINT NOT NULL,
        input_t1 BIGINT NOT NULL,
        input_attempt VARCHAR NOT NULL
    );
    """,
    # 5: a stage batch's run kind ('run' or 'revision', NULL for any other batch) as a column,
    # filled for older batches from their keys. Some DuckDB releases refuse ALTER TABLE on a
    # table with an index; with the index dropped around it, the change works on 1.2 and 2.0
    # alike (300,000 batches: 0.1 s).
    """
    DROP INDEX batches_by_origin;
    ALTER TABLE batches ADD COLUMN run_kind VARCHAR;
    UPDATE batches SET run_kind = CASE
        WHEN starts_with(key, 'run:') THEN 'run'
        WHEN starts_with(key, 'revise:') THEN 'revision'
    END
    WHERE origin = 'stage';
    CREATE INDEX batches_by_origin ON batches (pipeline, node, t0);
    """,
    # 6: where each registered pipeline's code is (an example name or module:attribute), so a
    # command can load a pipeline named by its registered name; NULL when it was registered
    # from code that did not say (older ledgers, Python callers).
    """
    ALTER TABLE graphs ADD COLUMN definition VARCHAR;
    """,
    # 7: pending upqueries: reads of a partial stage as of an epoch it had not processed yet,
    # one row per key (its values as a JSON list), until an upquery run fills it.
    """
    CREATE SEQUENCE upquery_ids START 1;
    CREATE TABLE upqueries (
        upquery_id BIGINT PRIMARY KEY,
        pipeline VARCHAR NOT NULL,
        stage VARCHAR NOT NULL,
        key VARCHAR NOT NULL,
        as_of BIGINT NOT NULL,
        requested_at TIMESTAMP NOT NULL,
        filled_at TIMESTAMP
    );
    """,
    # 8: captures (a stage output recorded into a directory, until stopped) and replays (how
    # far each captured stream has been fed into a replayed source: the next event index,
    # moved in the same transaction as the batch that feeds the event).
    """
    CREATE TABLE captures (
        pipeline VARCHAR NOT NULL,
        stage VARCHAR NOT NULL,
        port INTEGER NOT NULL,
        worker INTEGER,
        directory VARCHAR NOT NULL,
        stream VARCHAR NOT NULL,
        from_epoch BIGINT,
        started_batch BIGINT NOT NULL,
        started_at TIMESTAMP NOT NULL,
        stopped_at TIMESTAMP,
        PRIMARY KEY (pipeline, directory)
    );
    CREATE TABLE replays (
        pipeline VARCHAR NOT NULL,
        node VARCHAR NOT NULL,
        stream VARCHAR NOT NULL,
        directory VARCHAR NOT NULL,
        worker INTEGER NOT NULL,
        next_index BIGINT NOT NULL,
        PRIMARY KEY (pipeline, node, stream)
    );
    """,
    # 9: expectations: each result of a stage's checks with the run (or send) it checked, and
    # where the rows its ``drop`` expectations removed from an attempt are kept (quarantine).
    # Both are written in the transaction that commits the attempt (a failed run records its
    # results with its failure): a killed run leaves none.
    """
    CREATE TABLE checks (
        pipeline VARCHAR NOT NULL,
        stage VARCHAR NOT NULL,
        t0 BIGINT NOT NULL,
        t1 BIGINT NOT NULL,
        attempt VARCHAR NOT NULL,
        run_id VARCHAR,
        expectation VARCHAR NOT NULL,
        action VARCHAR NOT NULL,
        rows_checked BIGINT NOT NULL,
        rows_failing BIGINT NOT NULL,
        committed BOOLEAN NOT NULL,
        recorded_at TIMESTAMP NOT NULL
    );
    CREATE TABLE quarantine (
        pipeline VARCHAR NOT NULL,
        stage VARCHAR NOT NULL,
        t0 BIGINT NOT NULL,
        t1 BIGINT NOT NULL,
        attempt VARCHAR NOT NULL,
        path VARCHAR NOT NULL,
        rows BIGINT NOT NULL,
        bytes BIGINT NOT NULL,
        PRIMARY KEY (pipeline, stage, attempt)
    );
    """,
    # 10: every commit first looks up its key (is it committed already?): DuckDB scans with a
    # one-column index only, so without this one that look read every batch (24 ms behind
    # 100,000 closed epochs, a dozen times an epoch). And marks: how far a reader of a stage's
    # port has seen its messages (a sink, named by its place: ``pipelines.run.sinks``), so it
    # looks again only at what was committed since; one per port, the last reader's.
    """
    CREATE INDEX batches_by_key ON batches (key);
    CREATE TABLE marks (
        pipeline VARCHAR NOT NULL,
        stage VARCHAR NOT NULL,
        port INTEGER NOT NULL,
        reader VARCHAR NOT NULL,
        through BIGINT NOT NULL,
        PRIMARY KEY (pipeline, stage, port)
    );
    """,
)

VERSION = len(MIGRATIONS)
"""The schema version this code writes."""


def current_version(con: Any) -> int:
    """The schema version of an open ledger; 0 for an empty file."""
    exists = con.execute(
        "SELECT count(*) FROM duckdb_tables() "
        "WHERE database_name = current_database() AND table_name = 'meta'"
    ).fetchone()[0]
    if not exists:
        return 0
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(con: Any, found: int, target: int = VERSION) -> None:
    """Apply migrations ``found+1 .. target`` in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        for script in MIGRATIONS[found:target]:
            con.execute(script)
        con.execute(
            "INSERT INTO meta VALUES ('schema_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [str(target)],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def location_columns(location: Location) -> tuple[int, str, int]:
    """A location as the ledger's ``(kind, node, port)`` columns.

    >>> location_columns(Target("validate", 1))
    (1, 'validate', 1)
    """
    return (0 if isinstance(location, Source) else 1, location.node, location.port)


def location_from_columns(kind: int, node: str, port: int) -> Location:
    """The location stored as ``(kind, node, port)``.

    >>> location_from_columns(0, "payments", 0)
    Source('payments', 0)
    """
    return Source(node, port) if kind == 0 else Target(node, port)
