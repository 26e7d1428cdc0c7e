import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    ctx.step("look up a missing key")
    {}["float8_e8m0fnu"]


run_probe("raises", main, devices=())
