import os

import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    ctx.step("abort")
    os.abort()


run_probe("aborts", main, devices=())
