"""A parent that waits for a child which made itself unreadable (prctl PR_SET_DUMPABLE 0: no ptrace, no
process_vm_readv by a tracer without CAP_SYS_PTRACE), and a second child that keeps exiting and being replaced while
the deadline's reads run."""

from __future__ import annotations

import ctypes
import multiprocessing
import subprocess
import sys
import time

PR_SET_DUMPABLE = 4


def hidden() -> None:
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    while True:
        time.sleep(0.05)  # the unreadable child spins here


if __name__ == "__main__":
    child = multiprocessing.get_context("fork").Process(target=hidden)
    child.start()
    while True:  # short-lived children: some exit while they are being read
        subprocess.run([sys.executable, "-c", "pass"], check=False)
