"""A program that starts hundreds of processes (forked, each paused) and waits for them: the examination at the
deadline reads a bounded number and counts the rest. argv[1]: how many (300 by default)."""

from __future__ import annotations

import os
import signal
import sys

children = []
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 300):
    pid = os.fork()
    if pid == 0:
        signal.pause()  # each child waits here
        os._exit(0)
    children.append(pid)
for child in children:
    os.waitpid(child, 0)  # the parent waits here
