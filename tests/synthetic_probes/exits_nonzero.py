"""Leaves through os._exit without reporting, as a library calling exit() deep inside would."""

import os

import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    ctx.step("exit abruptly")
    os._exit(3)


run_probe("exits_nonzero", main, devices=())
