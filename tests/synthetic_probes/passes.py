import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    ctx.step("add numbers")
    ctx.detail("answer", 1 + 1)
    ctx.check(1 + 1 == 2, "arithmetic is broken")
    return "1 + 1 == 2"


run_probe("passes", main)
