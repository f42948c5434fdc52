"""Child processes started from a process that may hold live gRPC channels.

A Spark Connect session (PySpark's client) and Dagster's code servers keep gRPC channels with
threads of their own. From grpcio 1.80 on, a child forked while such channels are live can be
killed by gRPC's own fork handling before it gets to exec its program ("epoll_wait error: Bad
file descriptor", the child aborted: grpc/grpc#43055). ``subprocess`` forks with ``vfork``,
which runs none of those handlers, unless it must run Python in the child between fork and
exec (``preexec_fn``). So no child epochgate starts has a ``preexec_fn``: what a child must do
before its program runs (its SIGINT back at the default, a signal when its parent dies) it does
itself, in a small Python that then replaces itself with the program (``shimmed``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

SHIM = """\
import os, signal, sys
parent, sigint, tie, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
if sigint == "default":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
if tie == "tie":
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent ended before the tie was made
        sys.exit(1)
os.execvp(argv[0], argv)
"""
"""The child's first program: its arguments are the parent's pid, ``default`` or ``-`` (SIGINT),
``tie`` or ``-`` (SIGTERM on the parent thread's end, kept across exec), then the command."""


def shimmed(argv: Sequence[str], *, default_sigint: bool = False, tied: bool = False) -> list[str]:
    """``argv`` run by way of ``SHIM``: with ``default_sigint``, SIGINT at its default (a
    parent that ignores it would pass that on); with ``tied`` (Linux only), the child gets
    SIGTERM when the thread that started it ends, as ``prctl(PR_SET_PDEATHSIG)`` gives it."""
    tie = "tie" if tied and sys.platform.startswith("linux") else "-"
    sigint = "default" if default_sigint else "-"
    return [sys.executable, "-I", "-S", "-c", SHIM, str(os.getpid()), sigint, tie, *argv]
