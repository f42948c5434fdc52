"""Tools for developing and testing epochgate's Dagster integration, apart from the library.

``server`` runs ``dagster dev`` (or the webserver alone) on a workspace file as a child process,
``driver`` drives a pipeline's sensors and runs in one process as the daemon would,
``run_timeline`` reads where a run's seconds went, ``instance`` makes a Dagster instance
directory with the project's settings, and ``demo`` is ``make demo``. Importing this package
imports none of them.
"""
