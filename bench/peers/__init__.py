"""epochgate beside plain PySpark, bytewax and Pathway on the same inputs (``bench_peers.py``).

``workloads``: the inputs, the order they arrive in and the DuckDB oracle; ``record``: what each
tool's run records (arrivals, emissions, the memory of its process tree); ``spark_tools``:
epochgate (on local Spark or Sail) and the plain PySpark script; ``bytewax_tool`` and
``pathway_tool``: each peer's fastest exact form, with the forms measured to choose it;
``bytewax_watermark`` and ``pathway_watermark``: their naive forms; ``bytewax_feed`` and
``pathway_feed``: what a tool's two forms share; ``report``: the table, the goals,
``bench/RESULTS.md`` and the plots; ``kept``: the figures of each size between runs.
"""
