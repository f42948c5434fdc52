"""The Airflow connection type ``epochgate``: where the ledger and the data are, and which Spark
engine runs the stages. Its extra holds ``ledger``, ``data`` and ``spark``; a task whose
connection does not exist uses the environment, as the command line does."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from pipelines.airflow.place import Place


class EpochgateHook(BaseHook):
    """Resolves a ``Place`` from the connection ``epochgate_conn_id``."""

    conn_name_attr = "epochgate_conn_id"
    default_conn_name = "epochgate_default"
    conn_type = "epochgate"
    hook_name = "epochgate"

    def __init__(self, epochgate_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.epochgate_conn_id = epochgate_conn_id

    def place(self) -> Place:
        """The connection's place; the environment's when it does not exist."""
        try:
            connection = self.get_connection(self.epochgate_conn_id)
        except AirflowNotFoundException:
            return Place.resolve()
        return Place.resolve(connection.extra_dejson)

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["host", "schema", "login", "password", "port"],
            "placeholders": {
                "extra": '{"ledger": "/srv/epochgate/ledger.duckdb", "data": "/srv/epochgate/data",'
                ' "spark": "sc://127.0.0.1:15002"}'
            },
        }
