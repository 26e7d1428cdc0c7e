"""Crashes in a worker thread while the main thread waits, like seed 000's stack in MAX."""

import concurrent.futures
import ctypes

import _use_harness  # noqa: F401
from _harness import run_probe


def execute_on_worker():
    ctypes.string_at(0)


def main(ctx):
    ctx.step("execute on a worker thread")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(execute_on_worker).result()


run_probe("segfaults_in_thread", main, devices=())
