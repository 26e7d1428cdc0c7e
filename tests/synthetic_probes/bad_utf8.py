"""Prints bytes that are not UTF-8, and a terminal escape sequence, then passes."""

import os

import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    ctx.step("print garbage")
    os.write(1, b"before \xff\xfe\xc3\x28 after\n\x1b[31mred\x1b[0m\n")
    os.write(2, b"\xed\xa0\x80 surrogate\n")
    return "printed invalid UTF-8"


run_probe("bad_utf8", main, devices=())
