import ctypes

import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    ctx.step("read address 0")
    ctypes.string_at(0)


run_probe("segfaults", main, devices=())
