"""Where an Airflow task finds epochgate: the ledger, the data root and the Spark engine, from an
Airflow connection of type ``epochgate`` (its extra's ``ledger``, ``data`` and ``spark``) or,
without one, from the same environment variables as the command line (``EPOCHGATE_HOME``,
``EPOCHGATE_LEDGER``, ``EPOCHGATE_DATA``, ``EPOCHGATE_SPARK``).

A ``Place`` is plain data, so a trigger carries it to the triggerer as its keyword arguments."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pipelines.cli.context import registrations
from pipelines.cli.references import choose
from pipelines.run.runtime import Runtime
from pipelines.settings import Settings
from pipelines.spark.session import quiet_session
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger


@dataclass(frozen=True)
class Place:
    """A ledger, a data root and a Spark engine (None: ``EPOCHGATE_SPARK`` or local)."""

    ledger: str
    data: str
    spark: str | None = None

    @classmethod
    def resolve(cls, extra: dict[str, Any] | None = None) -> Place:
        """From a connection's extra, then the environment, then the defaults (as the CLI)."""
        extra = extra or {}
        settings = Settings.resolve(extra.get("ledger"), extra.get("data"))
        return cls(str(settings.ledger), str(settings.data), extra.get("spark"))

    def as_kwargs(self) -> dict[str, Any]:
        return asdict(self)

    def open_ledger(self) -> Ledger:
        return Ledger(self.ledger)

    def pipeline(self, ledger: Ledger, reference: str) -> Pipeline:
        """The pipeline ``reference`` means: a registered name, an example or
        ``module:attribute`` (as ``-p`` on the command line)."""
        return choose(registrations(ledger), reference, ledger.path)

    def runtime(self, reference: str) -> Runtime:
        """The pipeline bound to this place (registering it, as ``epochgate run`` does); Spark
        starts when a stage first needs it."""
        ledger = self.open_ledger()
        pipeline = self.pipeline(ledger, reference)
        return Runtime(pipeline, ledger, partial(quiet_session, self.spark), Path(self.data))
