"""The figures of the fault campaigns: one recorder the campaigns report to, written as the
``faults`` section of ``bench/RESULTS.md`` when ``FAULTS_RESULTS`` names that file."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.invariants import Tally

RESULTS_ENV = "FAULTS_RESULTS"
"""The results file to write the section into (``make faults`` sets it); unset: none."""
SIZE_ENV = "FAULTS"
"""``full``: the long form of the campaigns."""


def full() -> bool:
    return os.environ.get(SIZE_ENV, "") == "full"


@dataclass
class Campaign:
    """What one campaign tried and found."""

    name: str
    points: set[str] = field(default_factory=set)
    kills: int = 0
    survived: int = 0
    """Children the armed fault never reached (they finished)."""
    recoveries: int = 0
    recover_seconds: list[float] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)

    def killed(self, point: str) -> None:
        self.points.add(point)
        self.kills += 1

    def recovered(self, seconds: float) -> None:
        self.recoveries += 1
        self.recover_seconds.append(seconds)

    def checked(self, tally: Tally) -> None:
        self.tally.add(tally)


@dataclass
class Recorder:
    campaigns: dict[str, Campaign] = field(default_factory=dict)

    def campaign(self, name: str) -> Campaign:
        return self.campaigns.setdefault(name, Campaign(name))

    def section(self, about: list[str]) -> str:
        """The Markdown section: one row per campaign, then the fault points tried."""
        lines = [
            "## faults: kills at fault points and at random instants, each recovered and checked",
            "",
            *about,
            "",
            "Each kill is a SIGKILL of a process running `bank` (its local Spark JVM dies with "
            "it), at a fault point (`EPOCHGATE_FAULT`) or after a random delay; then the runs "
            "are recovered without the fault and every invariant is checked (ledger verify, "
            "every output against DuckDB SQL over the raw inputs, nothing uncommitted visible, "
            "no frontier moved back, the partial state against its full twin, the capture "
            "against the ledger). Rows lost and rows counted twice: goal 0. The `full disk` and "
            "`ledger files` campaigns kill nothing: each of their faults (a full file system, the "
            "ledger file or its lock file deleted or made immutable) is recovered once the space "
            "or the file is back, then checked the same way.",
            "",
            "| campaign | kills | finished unkilled | recoveries | checks | rows compared "
            "| rows lost | rows counted twice | recovery (median, max) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        points: set[str] = set()
        for c in self.campaigns.values():
            points |= c.points
            secs = c.recover_seconds
            recover = f"{statistics.median(secs):.1f} s, {max(secs):.1f} s" if secs else "-"
            lines.append(
                f"| {c.name} | {c.kills} | {c.survived} | {c.recoveries} | {c.tally.checks} "
                f"| {c.tally.rows:,} | {c.tally.lost} | {c.tally.doubled} | {recover} |"
            )
        lines += ["", f"Fault points killed at: {', '.join(sorted(points)) or '(none)'}."]
        problems = [p for c in self.campaigns.values() for p in c.tally.problems]
        lines.append(f"Problems found by the checks: {len(problems)}.")
        lines += [f"- {p}" for p in problems[:20]]
        return "\n".join(lines)

    def write(self) -> None:
        """Write the section into ``$FAULTS_RESULTS`` (when set and anything was recorded)."""
        target = os.environ.get(RESULTS_ENV)
        if not target or not self.campaigns:
            return
        from tests.bench.scripts import load

        results_file = load("results_file")
        about = [*results_file.about_this_run()[:2], "- command: `make faults` (FAULTS=full)"]
        results_file.write_section(Path(target), "faults", self.section(about))
