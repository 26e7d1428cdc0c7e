"""Writes 10 MB to stdout and to stderr before passing."""

import sys

import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    ctx.step("flood")
    line = "x" * 1023 + "\n"
    for _ in range(10 * 1024):
        sys.stdout.write(line)
        sys.stderr.write(line)
    sys.stdout.write("END-OF-FLOOD\n")
    return "flooded"


run_probe("floods", main, devices=())
