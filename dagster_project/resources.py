"""What a pipeline's runs and sensors use: Spark, the ledger with its data, the state store.

``build_runtime`` binds a pipeline to them: the same ``Runtime`` the CLI and the tests drive, so
a Dagster run decides readiness and commits exactly as any other caller does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field, PrivateAttr

from pipelines.capture.follower import follow
from pipelines.run.runtime import Runtime
from pipelines.settings import DATA_DIR, STATE_FILE, absolute, data_path, ledger_path, state_path
from pipelines.spark.session import DEFAULT_MASTER, master_url, quiet, spark_session
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger
from progress.ledger.store import DEFAULT_LOCK_TIMEOUT
from state_store import KeyedState

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SparkResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """A Spark session for a run, started on first use and stopped after the run if it started it.

    ``master`` is ``local[2]``, any Spark master URL (``spark://host:7077``, ``yarn``) or a Spark
    Connect endpoint (``sc://host:15002``), which saves a JVM start per run. A session already
    active in the process with the same master is used as it is and left running (a Connect
    session on another server, or with another token, is stopped and replaced:
    ``pipelines.spark.session``).
    """

    master: str = Field(
        default=DEFAULT_MASTER,
        description="local[N], a Spark master URL, or sc://host:port for a Spark Connect server",
    )
    conf: dict[str, str] | None = Field(
        default=None, description="Extra Spark settings (for sc://, only spark.sql.* ones apply)"
    )

    _session: SparkSession | None = PrivateAttr(default=None)
    _owned: bool = PrivateAttr(default=False)

    @classmethod
    def from_settings(cls) -> SparkResource:
        """The master from ``$EPOCHGATE_SPARK``, else ``local[2]``."""
        return cls(master=master_url())

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # No session yet: a run that only checks the ledger never starts one.
        self._session, self._owned = None, False

    def session(self) -> SparkSession:
        """The run's session, started (and quieted) the first time it is asked for."""
        if self._session is None:
            from pyspark.sql import SparkSession

            before = SparkSession.getActiveSession()
            session = spark_session(self.master, dict(self.conf or {}))
            quiet(session)
            self._session, self._owned = session, session is not before
        return self._session

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        session, owned = self._session, self._owned
        self._session, self._owned = None, False
        if session is not None and owned:
            session.stop()


class LedgerResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The ledger file and the data directory whose attempts it catalogs.

    The two belong together: the ledger's messages name files under the data directory, so a
    ledger moved without its data (or read against another data directory) reads nothing.
    """

    path: str = Field(description="The ledger file (DuckDB)")
    data_dir: str = Field(
        default="",
        description=f"Where stages write their outputs; empty: {DATA_DIR}/ beside the ledger",
    )
    lock_timeout: float = Field(
        default=DEFAULT_LOCK_TIMEOUT,
        description="Seconds to wait for another process's hold on the ledger before failing",
    )

    @classmethod
    def from_settings(cls) -> LedgerResource:
        """``$EPOCHGATE_LEDGER`` and ``$EPOCHGATE_DATA``, else under ``$EPOCHGATE_HOME``."""
        return cls(path=str(ledger_path()), data_dir=str(data_path()))

    @property
    def ledger_path(self) -> Path:
        return absolute(self.path)

    @property
    def data_root(self) -> Path:
        if self.data_dir:
            return absolute(self.data_dir)
        return self.ledger_path.with_name(DATA_DIR)

    def exists(self) -> bool:
        """Whether the ledger file exists (opening a missing one creates it)."""
        return self.ledger_path.exists()

    def ledger(self) -> Ledger:
        ledger = Ledger(self.ledger_path, lock_timeout=self.lock_timeout)
        follow(ledger)  # its commits (runs, epoch clock) sync the pipeline's captures
        return ledger


class StateStoreResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The keyed state of stateful stages (a DuckDB file)."""

    path: str = Field(
        default="", description=f"The state store file; empty: {STATE_FILE} beside the ledger"
    )
    lock_timeout: float = Field(
        default=DEFAULT_LOCK_TIMEOUT,
        description="Seconds to wait for another process's hold on the file before failing",
    )

    def state_path(self, ledger: LedgerResource) -> Path:
        if self.path:
            return absolute(self.path)
        return state_path(ledger.ledger_path)

    def store(self, ledger: LedgerResource) -> KeyedState:
        return KeyedState(self.state_path(ledger), lock_timeout=self.lock_timeout)


def build_runtime(
    pipeline: Pipeline,
    *,
    spark: SparkResource,
    ledger: LedgerResource,
    state: StateStoreResource,
) -> Runtime:
    """``pipeline`` bound to these resources (registering its graph in the ledger if needed);
    the run's Spark session starts when a stage run first needs it."""
    return Runtime(
        pipeline,
        ledger.ledger(),
        spark.session,
        ledger.data_root,
        state=state.store(ledger),
    )
