"""A user's reproducer that hangs: the main thread waits for a worker that waits for a lock nobody releases, and a
child process it started sleeps on. Writes its own pid and the child's to the file named by argv[1]."""

import subprocess
import sys
import threading

lock = threading.Lock()
lock.acquire()


def waiter() -> None:
    lock.acquire()  # never released


child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
with open(sys.argv[1], "w") as pids:
    pids.write(f"{child.pid}\n")
worker = threading.Thread(target=waiter, name="waiter")
worker.start()
worker.join()
