"""The ``epochgate`` command line, one module per command group."""
