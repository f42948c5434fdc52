"""Ports on 127.0.0.1 for the servers tests start (Spark Connect, the Dagster webserver), and
the addresses a process listens on."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

from pipelines.spark.servers import LISTEN, socket_inodes


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


def listening(pid: int) -> list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """The TCP addresses process ``pid`` listens on, read from ``/proc`` (no tool needed):
    the LISTEN sockets of ``/proc/net/tcp{,6}`` whose inode is one of the process's fds."""
    inodes = socket_inodes(pid)
    found = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            columns = line.split()
            local, state, inode = columns[1], columns[3], columns[9]
            if state != LISTEN or inode not in inodes:
                continue
            address, port = local.split(":")
            raw = bytes.fromhex(address)  # 32-bit words in host (little-endian) order
            packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.append((ipaddress.ip_address(socket.inet_ntop(family, packed)), int(port, 16)))
    return found


def loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """127.0.0.0/8 or ::1, also written as an IPv4-mapped IPv6 address (``::ffff:127.0.0.1``)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def listeners(port: int) -> list[int]:
    """The processes that listen on TCP ``port`` (on any address), found through ``/proc``."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            columns = line.split()
            if columns[3] == LISTEN and int(columns[1].split(":")[1], 16) == port:
                inodes.add(columns[9])
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            held = socket_inodes(int(proc.name))
        except OSError:  # gone, or not ours to read
            continue
        if held & inodes:
            found.append(int(proc.name))
    return found


def started_from(pid: int, home: Path) -> bool:
    """Whether process ``pid`` was started with ``EPOCHGATE_HOME`` set to ``home``: one of the
    services a test started there (another test's server may take the same port after)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"EPOCHGATE_HOME={home}".encode() in environ
