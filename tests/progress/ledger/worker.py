"""A child process for ledger tests: commits batches in a loop and reports what was acknowledged.

    python -m tests.progress.ledger.worker PATH WORKER_ID COMMITS [--forever]

Each commit is 20 updates (+1 at ``validate``'s input, spread over epochs 0..9, and one message
entry), keyed ``w{id}:{n}``. After each acknowledged commit the key is printed and flushed, so a
parent can tell exactly which commits were acknowledged before a kill.
"""

from __future__ import annotations

import sys

from progress import Target
from progress.ledger import Ledger, MessageEntry


def batch(worker: int, n: int) -> list[tuple[Target, int, int]]:
    return [(Target("validate"), (worker + n + k) % 10, 1) for k in range(20)]


def main() -> None:
    path, worker, commits = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    forever = "--forever" in sys.argv
    ledger = Ledger(path, lock_timeout=120)
    n = 0
    while forever or n < commits:
        key = f"w{worker}:{n}"
        message = MessageEntry("validate", 0, n % 10, attempt=key, path=f"/data/{key}", rows=n)
        ledger.commit("bank", batch(worker, n), key=key, messages=[message])
        print(key, flush=True)
        n += 1


if __name__ == "__main__":
    main()
