"""Engines: Spark sessions, the Spark Connect server, Parquet footers and checksums."""
