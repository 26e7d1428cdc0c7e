"""Reports a pass, then segfaults during interpreter teardown (an atexit handler)."""

import atexit
import ctypes

import _use_harness  # noqa: F401
from _harness import run_probe

atexit.register(lambda: ctypes.string_at(0))


def main(ctx):
    ctx.step("do the work")
    return "work done"


run_probe("crashes_at_exit", main, devices=())
