import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    ctx.skip("the thing this probe needs is absent")


run_probe("skips", main, devices=())
