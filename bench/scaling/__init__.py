"""The parts of ``bench/bench_scaling.py``: generated pipelines and their inputs, closed
epochs written into a ledger, and the report (lines, Markdown section, plots)."""
