"""A user's reproducer, as a user writes one: a worker thread dereferences a bad pointer through ctypes and the
process dies of SIGSEGV with no Python exception."""

import ctypes
import threading
import time


def worker() -> None:
    time.sleep(0.1)
    ctypes.string_at(0)  # reads address 0: SIGSEGV in the C library, inside this thread


thread = threading.Thread(target=worker, name="worker")
thread.start()
thread.join()
print("never reached")
