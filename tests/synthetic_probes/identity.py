import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    import os
    import tempfile
    import time

    ctx.step("note who and where it is")
    ctx.detail("pid", os.getpid())
    ctx.detail("pgid", os.getpgrp())
    ctx.detail("tmpdir", tempfile.gettempdir())
    with open(os.path.join(tempfile.gettempdir(), f"mine-{os.getpid()}"), "w") as handle:
        handle.write("a file of this run's own\n")
    ctx.step("stay a while, so that its neighbours run at the same time")
    time.sleep(1.0)
    return f"pid {os.getpid()} in group {os.getpgrp()}"


run_probe("identity", main, devices=("cpu",))
