"""Would a pre-started interpreter (a fork server that has imported torch and MAX's bridge, never CUDA) make
probes cheaper without weakening isolation? Measures both sides and prints the figures.

Usage: python benchmarks/bench_forkserver.py [--runs 5]

Cost side: the wall time of what every probe process pays before its own work — a fresh interpreter that
imports torch and the bridge — against forking an already-warm server and running the same tiny torch op in
the child. Isolation side: what the server process looks like at the moment it would fork (threads alive,
and what Python says about forking it), and whether a probe that must control the import itself (the float8
patch is applied before MAX's bridge is imported) can still run in a forked child.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import warnings

FRESH = (
    "import time, torch, importlib\n"
    "for name in ('max.torch', 'max.experimental.torch'):\n"
    "    try:\n"
    "        importlib.import_module(name); break\n"
    "    except ModuleNotFoundError:\n"
    "        pass\n"
    "print(float((torch.arange(4.0) + 1).sum()))\n"
)


def fresh_process_s() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", FRESH], check=True, capture_output=True)
    return time.perf_counter() - started


def threads() -> list[str]:
    names = []
    for task in sorted(os.listdir("/proc/self/task")):
        with open(f"/proc/self/task/{task}/comm") as handle:
            names.append(handle.read().strip())
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()

    fresh = [fresh_process_s() for _ in range(options.runs)]
    print(
        f"fresh interpreter, import torch + bridge, one op: median {statistics.median(fresh):.2f} s "
        f"(runs: {', '.join(f'{w:.2f}' for w in fresh)})"
    )

    before = len(threads())
    started = time.perf_counter()
    import importlib

    import torch

    for name in ("max.torch", "max.experimental.torch"):
        try:
            importlib.import_module(name)
            break
        except ModuleNotFoundError:
            continue
    warm_up = time.perf_counter() - started
    alive = threads()
    print(f"server warm-up (imports, once): {warm_up:.2f} s; threads before {before}, after {len(alive)}: {alive}")

    forked = []
    caught: list[str] = []
    for _ in range(options.runs):
        started = time.perf_counter()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            pid = os.fork()
        if pid == 0:  # the child: the probe's own work would start here
            value = float((torch.arange(4.0) + 1).sum())
            os._exit(0 if value == 10.0 else 1)
        _, status = os.waitpid(pid, 0)
        forked.append(time.perf_counter() - started)
        caught += [str(w.message) for w in seen]
        assert os.waitstatus_to_exitcode(status) == 0
    print(f"fork of the warm server, one op in the child: median {statistics.median(forked) * 1000:.1f} ms")
    saved = statistics.median(fresh) - statistics.median(forked)
    print(f"saved per probe process: {saved:.2f} s")
    if caught:
        print(f"Python warns at fork: {caught[0]}")
    if len(alive) > 1:
        print(
            f"isolation: the server has {len(alive)} threads when it forks; POSIX gives the child only the forking "
            "thread, so a lock another thread holds at that moment stays locked in the child forever (a hang "
            "the doctor would blame on the stack)."
        )
    print(
        "correctness: max-import checks that the bridge imports, and the float8 patch must run before the bridge "
        "is imported; in a child of a server that already imported it, neither can be observed — those probes "
        "and every patched rerun would still need a fresh interpreter."
    )


if __name__ == "__main__":
    main()
