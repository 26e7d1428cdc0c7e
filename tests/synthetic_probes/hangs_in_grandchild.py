"""Starts a grandchild that would outlive everyone, then hangs; the runner must kill both."""

import os
import subprocess
import sys
import time

import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    marker = ctx.options.marker
    ctx.step("start a grandchild")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(marker, "w") as handle:
        handle.write(str(child.pid))
    ctx.step("hang")
    time.sleep(3600)


def arguments(parser):
    parser.add_argument("--marker", default=os.path.join(os.getcwd(), "grandchild.pid"))


run_probe("hangs_in_grandchild", main, devices=(), add_arguments=arguments)
