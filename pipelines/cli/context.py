"""What every command shares: the places it uses, its ledger, the pipeline it means, its runtime.

A command that is given ``-p`` as a reference (``module:attribute`` or an example) records it
in the pipeline's registration: one that drives the pipeline registers it with its reference;
one that only reads the ledger (``status``, ``ledger verify``, ``ledger history``) or checks
the pipeline records the reference when the registered graph is the one the code defines. A
later command then finds the code without ``-p``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from functools import partial

from pipelines.capture.follower import follow
from pipelines.cli.references import choose, choose_names, given_reference, load
from pipelines.errors import UsageError
from pipelines.run.iteration import describe_round
from pipelines.run.runtime import Runtime
from pipelines.settings import LEDGER_ENV, Settings
from pipelines.spark.session import quiet_session
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger, Registration


def settings(args: argparse.Namespace) -> Settings:
    """The places this command uses, resolved once (in ``main``)."""
    found: Settings = args.settings
    return found


def open_ledger(args: argparse.Namespace) -> Ledger:
    """The ledger of a command that only reads it: it must exist."""
    path = settings(args).ledger
    if not path.exists():
        raise UsageError(
            f"no ledger at {path}; pass --ledger PATH or set {LEDGER_ENV} "
            "(a ledger is created when a pipeline is first registered)"
        )
    return Ledger(path, lock_timeout=args.lock_timeout)


def registrations(ledger: Ledger) -> list[Registration]:
    """The ledger's registered pipelines; none, without creating it, when it does not exist."""
    return ledger.registrations() if ledger.path.exists() else []


def pick_pipelines(args: argparse.Namespace, ledger: Ledger) -> list[str]:
    """Every registered pipeline, or the one ``-p`` names; a reference given is recorded."""
    registered = registrations(ledger)
    names = choose_names(registered, args.pipeline, ledger.path)
    reference = given_reference(registered, args.pipeline)
    if reference is not None:
        remember(ledger, load(reference))
    return names


def remember(ledger: Ledger, pipeline: Pipeline) -> None:
    """Record where ``pipeline``'s code is (its ``definition``) in its registration, when it
    is registered with the graph this code defines and the ledger says otherwise or nothing.
    A registered graph that differs is left alone: only a command that drives the pipeline
    registers a change."""
    if pipeline.definition is None:
        return
    recorded = {r.pipeline: r.definition for r in registrations(ledger)}
    if pipeline.name not in recorded or recorded[pipeline.name] == pipeline.definition:
        return
    with ledger.atomic():
        if ledger.registered(pipeline.name, pipeline.graph()):
            pipeline.register(ledger)  # the same graph: only the definition changes


def chosen(args: argparse.Namespace) -> tuple[Pipeline, Ledger]:
    """The pipeline ``-p`` means (the ledger's only one without it), and its ledger; nothing
    is registered yet."""
    ledger = Ledger(settings(args).ledger, lock_timeout=args.lock_timeout)
    follow(ledger)  # its commits (advance, close, clock) sync the pipeline's captures
    return choose(registrations(ledger), args.pipeline, ledger.path), ledger


def runtime(args: argparse.Namespace, pipeline: Pipeline, ledger: Ledger) -> Runtime:
    """``pipeline`` bound to the command's ledger and data (registering it); Spark starts only
    when something needs it."""
    return Runtime(
        pipeline,
        ledger,
        partial(quiet_session, args.spark),
        settings(args).data,
        on_round=lambda *progress: print(f"    {describe_round(*progress)}", flush=True),
    )


def bound(args: argparse.Namespace) -> Runtime:
    """The runtime of the pipeline ``-p`` means (registering it)."""
    return runtime(args, *chosen(args))


@contextmanager
def registering(ledger: Ledger, pipeline: Pipeline) -> Iterator[None]:
    """Where a command registers ``pipeline`` and acts: when registering changes anything, one
    ledger transaction holds both, so a command that fails leaves nothing registered."""
    needed = not pipeline.registered_in(ledger)
    with ledger.atomic() if needed else nullcontext():
        yield
