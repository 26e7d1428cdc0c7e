import time

import _use_harness  # noqa: F401
from _harness import run_probe


def wait_for_device():
    time.sleep(3600)


def main(ctx):
    ctx.step("wait for the device")
    wait_for_device()


run_probe("hangs", main, devices=())
