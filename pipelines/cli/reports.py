"""Plain-text and JSON renderings of what the ledger says: status, history, verification."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from progress import Product, Time
from progress.ledger import History, StageStatus
from progress.timestamp import describe_time, format_time, time_to_data


def compress(times: Sequence[Time]) -> str:
    """Epochs as ranges: ``[0, 1, 2, 5]`` -> ``0-2, 5``; ``-`` when empty.

    >>> compress([0, 1, 2, 5, 7, 8])
    '0-2, 5, 7-8'
    """
    if not times:
        return "-"
    if any(isinstance(t, Product) for t in times):
        return ", ".join(format_time(t) for t in times)
    parts: list[str] = []
    start = prev = int(times[0])  # type: ignore[arg-type]
    for t in [*times[1:], None]:
        if t is not None and t == prev + 1:
            prev = t
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if t is not None:
            start = prev = t  # type: ignore[assignment]
    return ", ".join(parts)


def status_table(statuses: Sequence[StageStatus]) -> str:
    """One block per pipeline: a row per stage, then what holds the oldest waiting epoch."""
    lines: list[str] = []
    for pipeline in sorted({s.pipeline for s in statuses}):
        rows = [s for s in statuses if s.pipeline == pipeline]
        lines.append(f"pipeline {pipeline}")
        header = ("stage", "input frontier", "done", "ready", "running", "waiting", "stale")
        table = [header]
        for s in rows:
            if s.is_input:
                held = ", ".join(
                    f"w{w}@{'closed' if t is None else format_time(t)}" for w, t in s.workers
                )
                table.append((s.stage, f"source: {held or 'no workers'}", "", "", "", "", ""))
                continue
            frontier = ", ".join(format_time(t) for t in s.frontier) or "done"
            table.append(
                (
                    s.stage,
                    frontier,
                    f"{compress(s.done)}" + (f" ({len(s.done)})" if len(s.done) > 1 else ""),
                    compress(s.ready),
                    compress(s.running),
                    compress(s.waiting),
                    compress(s.stale),
                )
            )
        widths = [max(len(r[i]) for r in table) for i in range(len(header))]
        for row in table:
            lines.append(
                "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            )
        for s in rows:
            for t in s.rounds:
                assert isinstance(t, Product)
                how = "running" if t.outer in s.running else "a new run resumes there"
                lines.append(f"  {s.stage} epoch {t.outer} is at round {t.inner} ({how})")
            if s.holds:
                lines.append(f"  {s.stage} {describe_time(s.waiting[0])} is not ready:")
                lines.extend(f"    - {h.text}" for h in s.holds)
            lines.extend(f"  {f.text}" for f in s.failed)
    return "\n".join(lines)


def status_json(statuses: Sequence[StageStatus]) -> list[dict[str, Any]]:
    return [
        {
            "pipeline": s.pipeline,
            "stage": s.stage,
            "source": s.is_input,
            "frontier": [time_to_data(t) for t in s.frontier],
            "done": [time_to_data(t) for t in s.done],
            "ready": [time_to_data(t) for t in s.ready],
            "running": [time_to_data(t) for t in s.running],
            "waiting": [time_to_data(t) for t in s.waiting],
            "stale": [time_to_data(t) for t in s.stale],
            "blockers": [h.text for h in s.holds],
            "workers": {str(w): None if t is None else time_to_data(t) for w, t in s.workers},
            "rounds": [time_to_data(t) for t in s.rounds],
            "failed": [{"epoch": time_to_data(f.time), "why": f.text} for f in s.failed],
        }
        for s in statuses
    ]


def history_text(history: History) -> str:
    lines = [f"{history.pipeline} {history.stage} {describe_time(history.time)}"]
    lines.append("  batches:" if history.batches else "  batches: none")
    lines.extend(
        f"    #{b.batch_id} {b.committed_at:%Y-%m-%d %H:%M:%S} {b.origin:<6} key={b.key} "
        f"updates={b.n_updates}"
        for b in history.batches
    )
    lines.append("  messages:" if history.messages else "  messages: none")
    lines.extend(
        f"    port {m.port} attempt {m.attempt} rows={m.rows} bytes={m.bytes} "
        f"batch #{m.batch_id} {'current' if m.current else 'replaced'}"
        + (f" path={m.path}" if m.path else "")
        for m in history.messages
    )
    lines.append("  runs:" if history.runs else "  runs: none")
    lines.extend(
        f"    {r.run_id[:12]} {r.status:<9} started {r.started_at:%Y-%m-%d %H:%M:%S}"
        + (f" pid {r.pid}" if r.pid else "")
        + (f" batch #{r.batch_id}" if r.batch_id is not None else "")
        + (f" error: {r.error}" if r.error else "")
        for r in history.runs
    )
    return "\n".join(lines)
