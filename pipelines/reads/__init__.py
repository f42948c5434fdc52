"""Reads of keyed state: lookups, upqueries, pending reads and key scans."""
