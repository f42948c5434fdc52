"""The code location of the ``bank`` example: what ``workspace.yaml`` and ``make ui`` load.

Importing it builds ``defs`` with every setting from the environment, as ``build_definitions``
reads them (``$EPOCHGATE_SENSOR_INTERVAL``, ``$EPOCHGATE_SPARK``, ``$EPOCHGATE_LEDGER``,
``$EPOCHGATE_DATA``, ``$EPOCHGATE_HOME``). A project of one's own has a module like it::

    defs = build_definitions([my_pipeline()])
"""

from __future__ import annotations

from dagster_project.definitions import build_definitions
from pipelines.examples import bank

defs = build_definitions([bank.pipeline()])
