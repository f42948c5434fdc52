"""epochgate beside plain PySpark, bytewax and Pathway on the same inputs (``bench_peers.py``).

``workloads``: the inputs, the order they arrive in and the DuckDB oracle; ``record``: what each
tool's run records (arrivals, emissions, memory); one module per tool; ``report``: the table,
``bench/RESULTS.md`` and the plots.
"""
