"""A multiprocessing pool whose one task never ends: the worker that took item 3 waits on an event nobody sets, and
the parent waits in pool.map for its result. ``--pids FILE``: each worker writes "item pid" as it starts a task."""

from __future__ import annotations

import multiprocessing
import os
import sys
import time

PIDS = sys.argv[sys.argv.index("--pids") + 1] if "--pids" in sys.argv else None


def transform(item: int) -> int:
    if PIDS is not None:
        with open(PIDS, "a") as out:
            out.write(f"{item} {os.getpid()}\n")
    while item == 3:
        time.sleep(0.05)  # the worker with item 3 spins here
    return item * 2


if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(transform, range(6)))  # the parent waits here
