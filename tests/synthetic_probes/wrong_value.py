import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    ctx.step("compare")
    ctx.check([1.0, 2.0] == [1.0, 2.5], "expected [1.0, 2.0], got [1.0, 2.5]")


run_probe("wrong_value", main)
