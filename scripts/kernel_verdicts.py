"""Run `gpudoctor kernel` on each of issue 39's test kernels N times in a row and print the finding ids each run
got: one kernel, one verdict, whatever buffer the op was handed. Here: `python scripts/kernel_verdicts.py --runs 20`;
on a GPU machine add `--device cuda` (or `--device cpu --device cuda`).

Prints one line per kernel (the tally of problem finding ids over the runs) and exits 1 when a kernel got more than
one verdict or not the expected one.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "kernels"
CASES = {  # folder: (op, the finding expected on a device where the bug shows)
    "never_writes": ("conv1d_stub", "kernel-output-ignores-inputs"),
    "adds_into": ("add_into", "kernel-accumulates-into-output"),
    "races": ("racy_copy", "kernel-not-repeatable"),
}
# On a GPU (MAX 26.7, H100) two of them fault before their CPU bug can show: both read through a pointer taken from
# the output in `execute`, and the run dies with CUDA_ERROR_ILLEGAL_ADDRESS while the control kernel passes. One
# verdict there too, a different one: the kernel's fault, named by the general GPU-fault entry for Mojo.
ON_CUDA = {"adds_into": "cuda-kernel-fault-mojo", "races": "cuda-kernel-fault-mojo"}


def one_run(folder: str, op: str, devices: list[str]) -> dict[str, list[str]]:
    """The problem findings of one `gpudoctor kernel` run, by the run ids they name."""
    command = [sys.executable, "-m", "gpudoctor", "kernel", str(KERNELS / folder), "--op", op, "--shape", "4x4"]
    for device in devices:
        command += ["--device", device]
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=1800)
    if not done.stdout.strip():  # no report: say how it ended instead of a verdict
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"(no report)": [f"exit {done.returncode}: {last[:200]}"]}
    report = json.loads(done.stdout)
    by_run: dict[str, list[str]] = {}
    for finding in report["findings"]:
        if finding["severity"] == "problem":
            for run in finding.get("runs") or ["(report)"]:
                by_run.setdefault(run, []).append(finding["id"])
    return {run: sorted(ids) for run, ids in sorted(by_run.items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--device", action="append", choices=["cpu", "cuda"], help="default: cpu")
    parser.add_argument("--kernel", action="append", choices=sorted(CASES), help="default: all three")
    options = parser.parse_args()
    devices = options.device or ["cpu"]
    failed = False
    for folder in options.kernel or sorted(CASES):
        op, expected = CASES[folder]
        tally: collections.Counter[str] = collections.Counter()
        started = time.monotonic()
        for _ in range(options.runs):
            found = one_run(folder, op, devices)
            tally[json.dumps(found, sort_keys=True)] += 1
        verdicts = ", ".join(f"{count}x {key}" for key, count in tally.most_common())
        found = json.loads(next(iter(tally)))
        wanted = {run: [ON_CUDA.get(folder, expected) if "cuda" in run else expected] for run in found}
        right = len(tally) == 1 and bool(found) and found == wanted
        failed |= not right
        print(f"{folder:13} {op:12} {options.runs} runs in {time.monotonic() - started:5.0f} s: {verdicts}"
              f"  -> {'one verdict, the right one' if right else 'NOT ONE RIGHT VERDICT'}", flush=True)  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
