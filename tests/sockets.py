"""Ports on 127.0.0.1 for the servers tests start (Spark Connect, the Dagster webserver)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def accepts(port: int) -> bool:
    """Whether something listens on ``port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    except OSError:
        return False
    return True
