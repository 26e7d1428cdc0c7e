"""A user's reproducer that leaves processes running: one started in a session of its own (setsid), one daemonized
by a double fork, and one left in its own process group; then it exits (argv[1] "exit"), hangs ("hang"), or ends
as tests/reproducers/fails_by_release.py does by the installed `max` release ("release"). Each helper sleeps for 10
minutes with argv[2], a marker, on its command line, so a test can tell them from any other process."""

import ctypes
import os
import subprocess
import sys
import time

mode, marker = sys.argv[1], sys.argv[2]
sleeper = [sys.executable, "-c", "import time; time.sleep(600)", marker]
subprocess.Popen([*sleeper, "setsid"], start_new_session=True)
if os.fork() == 0:  # the classic daemon: fork, setsid, fork again, the middle one exits
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [*sleeper, "double-fork"])
    os._exit(0)
os.wait()
subprocess.Popen([*sleeper, "in-group"])
print("started the helpers", flush=True)
if mode == "hang":
    time.sleep(3600)
elif mode == "release":
    from importlib.metadata import version

    if int(version("max").split(".")[1]) >= 5:
        ctypes.string_at(0)
