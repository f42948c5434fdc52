"""How far behind each stage is, and how late each input worker is: ``Runtime.lag`` and
``Runtime.lateness``, from the moments the ledger recorded (``progress.ledger.timeline``).

Per stage: its latest final epoch (``pipelines.reads.final``), when its input there became
complete (the last release among the workers of the sources above it: ``progress.lateness``),
when its output there became final (that, or its commit if later), the latency between the
two, and its oldest epoch that is not final, how long ago its first message arrived, and what
holds it (the sentences ``status`` gives).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from pipelines.reads.final import Finality
from pipelines.stages.kinds import Stage
from progress import Source, sentences
from progress.lateness import WorkerLateness, complete_at, lateness
from progress.ledger import Ledger
from progress.ledger.timeline import Timeline


@dataclass(frozen=True)
class StageLag:
    """Where one stage stands in time (see the module docs); times are the ledger's clock."""

    stage: str
    latest_final: int | None
    input_complete_at: datetime | None
    final_at: datetime | None
    latency_seconds: float | None
    """From its input's completion to its output's finality, at ``latest_final``."""
    oldest_open: int | None
    """Its oldest epoch that is not final (None once every epoch is, every input closed)."""
    open_seconds: float | None
    """How long ago the first message of ``oldest_open`` arrived (None: none has yet)."""
    blockers: tuple[str, ...]
    freshness_seconds: float | None = None
    """Its declared freshness (``Pipeline.freshness``), if any."""

    @property
    def behind(self) -> bool:
        """Whether its oldest open epoch has been open longer than its freshness allows."""
        if self.freshness_seconds is None or self.open_seconds is None:
            return False
        return self.open_seconds > self.freshness_seconds

    def describe(self) -> str:
        """One line: ``valid: epoch 7 final 0.8s after its input; epoch 8 open for 40.2s: ...``."""
        if self.latest_final is None:
            text = f"{self.stage}: no epoch final yet"
        else:
            text = f"{self.stage}: epoch {self.latest_final} final"
            if self.latency_seconds is not None:
                text += f" {self.latency_seconds:.1f}s after its input was complete"
        if self.oldest_open is not None:
            age = "" if self.open_seconds is None else f" for {self.open_seconds:.1f}s"
            text += f"; epoch {self.oldest_open} open{age}"
            if self.blockers:
                text += f": {'; '.join(self.blockers)}"
        if self.behind:
            text += f" (behind: fresh within {self.freshness_seconds:.0f}s)"
        return text

    def behind_sentence(self) -> str | None:
        """``stage valid is behind: epoch 8 has been open for 400s, its freshness is 300s``."""
        if not self.behind:
            return None
        assert self.oldest_open is not None
        assert self.open_seconds is not None
        assert self.freshness_seconds is not None
        return sentences.behind(
            self.stage, self.oldest_open, self.open_seconds, self.freshness_seconds
        )


def stage_lags(
    stages: Mapping[str, Stage],
    finality: Finality,
    ledger: Ledger,
    freshness: Mapping[str, timedelta] | None = None,
) -> list[StageLag]:
    """The lag of every stage of ``stages`` (in definition order), with its ``freshness``."""
    p = finality.pipeline
    with ledger.session():
        timeline = ledger.timeline(p)
        tracker = ledger.tracker(p)
        frontiers = {name: tracker.frontier(Source(name, 0)).elements for name in stages}
    out = []
    for name, stage in stages.items():
        if not stage.outputs:  # a sink: its input's lag is the stage above's
            continue
        sources = _source_shifts(stages, name)
        frontier = min((t for t in frontiers[name] if isinstance(t, int)), default=None)
        found = _lag(stage, sources, frontier, timeline, finality)
        within = (freshness or {}).get(name)
        if within is not None:
            found = replace(found, freshness_seconds=within.total_seconds())
        out.append(found)
    return out


def _lag(
    stage: Stage,
    sources: Mapping[str, set[int]],
    frontier: int | None,
    timeline: Timeline,
    finality: Finality,
) -> StageLag:
    name = stage.name
    done = sorted(
        e for (s, e) in timeline.commits if s == name and (frontier is None or e < frontier)
    )
    latest = next((e for e in reversed(done) if not finality.holds(name, e)), None)
    workers = {s: finality.stages[s].workers for s in sources}
    complete = final = None
    if latest is not None:
        complete = complete_at(timeline.releases, workers, _reads(sources, latest))
        committed = timeline.commits.get((name, latest))
        final = max((t for t in (complete, committed) if t is not None), default=None)
        if stage.is_source:
            final = complete
    latency = None if complete is None or final is None else (final - complete).total_seconds()
    stale = [at for s, at in finality.stale_above(name) if isinstance(at, int)]
    opened = min([*stale, *([frontier] if frontier is not None else [])], default=None)
    blockers: tuple[str, ...] = ()
    age = None
    if opened is not None:
        blockers = tuple(finality.holds(name, opened)) or (sentences.stage_holds(name, opened),)
        arrived = [
            timeline.arrivals[s, opened - shift]
            for s, shifts in sources.items()
            for shift in shifts
            if (s, opened - shift) in timeline.arrivals
        ]
        if arrived:
            age = (timeline.now - min(arrived)).total_seconds()
    return StageLag(name, latest, complete, final, latency, opened, age, blockers)


@dataclass(frozen=True)
class EpochTimes:
    """One epoch of one stage, in time: when its input was complete, when its output there
    was committed, and whether it is final now (then ``final_at`` is the later of the two)."""

    stage: str
    epoch: int
    input_complete_at: datetime | None
    committed_at: datetime | None
    final: bool

    @property
    def final_at(self) -> datetime | None:
        if not self.final:
            return None
        found = [t for t in (self.input_complete_at, self.committed_at) if t is not None]
        return max(found, default=None)

    @property
    def latency_seconds(self) -> float | None:
        """From its input's completion to its output's finality."""
        final = self.final_at
        if final is None or self.input_complete_at is None:
            return None
        return (final - self.input_complete_at).total_seconds()


def epoch_times(
    stages: Mapping[str, Stage], finality: Finality, ledger: Ledger, stage: str, epoch: int
) -> EpochTimes:
    """``stage``'s run at ``epoch`` in time (see ``EpochTimes``): the epoch of its output (a
    delayed stage's is later)."""
    out = stages[stage].output_time(epoch)
    assert isinstance(out, int)
    sources = _source_shifts(stages, stage)
    reads = _reads(sources, out)
    timeline = ledger.epoch_timeline(finality.pipeline, stage, out, reads)
    workers = {s: stages[s].workers for s in sources}
    complete = complete_at(timeline.releases, workers, reads)
    spec = stages[stage]
    shown = stage if spec.outputs else spec.inputs[0]  # a sink shows its input's epoch
    final = not finality.holds(shown, out)
    return EpochTimes(stage, out, complete, timeline.commits.get((stage, out)), final)


def _reads(sources: Mapping[str, set[int]], epoch: int) -> dict[str, list[int]]:
    """Per source above a stage (with the delays on the ways), the epochs of it that the
    stage's ``epoch`` reads."""
    return {
        s: [epoch - shift for shift in shifts if epoch >= shift] for s, shifts in sources.items()
    }


def _source_shifts(stages: Mapping[str, Stage], name: str) -> dict[str, set[int]]:
    """The sources above ``name`` (itself, for a source), each with the delays its messages
    gather on their ways to ``name``'s output; a loop's way back is not followed."""
    out: dict[str, set[int]] = {}

    def walk(stage: str, shift: int, path: frozenset[str]) -> None:
        spec = stages[stage]
        shift += spec.delay
        if spec.is_source:
            out.setdefault(stage, set()).add(shift)
            return
        for upstream in spec.inputs:
            if upstream not in path:
                walk(upstream, shift, path | {upstream})

    walk(name, 0, frozenset({name}))
    return out


def worker_lateness(
    stages: Mapping[str, Stage], ledger: Ledger, pipeline: str, source: str, last: int
) -> list[WorkerLateness]:
    """Each worker of ``source``: how long after the first worker it released each of the last
    ``last`` epochs, median and worst."""
    spec = stages[source]
    releases = ledger.timeline(pipeline).releases
    return lateness(releases, source, spec.workers, last=last)
