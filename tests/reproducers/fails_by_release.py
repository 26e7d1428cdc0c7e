"""A reproducer whose ending depends on the installed `max` release (tests/test_bisect.py builds a wheelhouse of
tiny `max` wheels 90.1.0 ... 90.9.0): it passes up to 90.4, dies of SIGSEGV from 90.5, and from 90.9 fails at
import, another way. argv[1]: seconds to sleep first (so a test can stop a bisect mid-cell)."""

import ctypes
import sys
import time
from importlib.metadata import version

time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0.0)
minor = int(version("max").split(".")[1])
if minor >= 9:
    raise ImportError("cannot import name 'CustomOpLibrary' from 'max.torch'")
if minor >= 5:
    ctypes.string_at(0)
print("ok on max", version("max"))
