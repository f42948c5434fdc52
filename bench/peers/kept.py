"""The peers' figures kept by size, each size with the run that measured it, in a JSON file
beside the results file (``peers_figures.json``).

A run rewrites the sizes it measured and keeps the figures of the other sizes from earlier runs
of the same plan (``BENCH_SIZE``), so one size can be measured again on its own (1,000,000 rows
per epoch takes most of two hours with three repeats). Every figure of one size comes from one
run: the ratios against the fastest tool and the goals compare tools measured side by side.
Each plan's sizes are kept apart: a quick run never mixes with the full sizes, nor drops them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from peers.report import Figure

FILE = "peers_figures.json"
FORM = 2
"""The form of the bench the kept figures were measured with: figures of an earlier form (other
tools, other peer code, other inputs) are not kept beside this one's."""


@dataclass(frozen=True)
class Measured:
    """Every figure of one size, and the run that measured them (``about_this_run``'s
    lines: machine, date, command)."""

    rows: int
    about: tuple[str, ...]
    figures: tuple[Figure, ...]

    def said(self) -> str:
        """When and how this size was measured, as a line of the results section."""
        facts = {
            line.removeprefix("- ").split(":", 1)[0]: line.split(":", 1)[1].strip()
            for line in self.about
            if ":" in line
        }
        repeats = max((f.repeats for f in self.figures), default=0)
        return (
            f"{self.rows:,} rows/epoch: {facts.get('date', '?')}, {facts.get('command', '?')}, "
            f"{repeats} repeat{'s' if repeats != 1 else ''} of each tool"
        )


def path_beside(results: Path) -> Path:
    return results.with_name(FILE)


def merge(path: Path, plan: str, now: list[Measured]) -> list[Measured]:
    """Write ``now`` over the sizes of ``plan`` it measured, keeping its other sizes (and every
    other plan's); every size of ``plan``, smallest first."""
    plans = _read(path)
    kept = {m.rows: m for m in _sizes(plans.get(plan, []))}
    kept.update({m.rows: m for m in now})
    merged = [kept[rows] for rows in sorted(kept)]
    plans[plan] = [_dump(m) for m in merged]
    path.write_text(json.dumps(dict(sorted(plans.items())), indent=1) + "\n")
    return merged


def load(path: Path, plan: str) -> list[Measured]:
    """The sizes kept at ``path`` for ``plan`` (none without the file)."""
    return _sizes(_read(path).get(plan, []))


def _read(path: Path) -> dict[str, list[dict[str, Any]]]:
    if not path.exists():
        return {}
    raw: dict[str, list[dict[str, Any]]] = json.loads(path.read_text())
    return raw


def _sizes(raw: list[dict[str, Any]]) -> list[Measured]:
    return [
        Measured(
            rows=m["rows"],
            about=tuple(m["about"]),
            figures=tuple(Figure(**f) for f in m["figures"]),
        )
        for m in raw
        if m.get("form") == FORM
    ]


def _dump(m: Measured) -> dict[str, Any]:
    figures = [asdict(f) for f in m.figures]
    return {"form": FORM, "rows": m.rows, "about": list(m.about), "figures": figures}
