"""How long `gpudoctor run --timeout 20` takes over a two-process hang (tests/multiproc_programs: rank 1 in its own
loop, rank 0 in all_reduce, on gloo), and where the time went: the limit, the examination at the deadline (py-spy's
reads, the debugger), faulthandler's grace and the kill, and gpudoctor's own start and report. Figures only; the
target on this CPU is <= 30 s (1.5 x the limit).

    python benchmarks/bench_hang_processes.py [--timeout 20] [--program rank_stuck_in_own_loop.py]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--program", default="rank_stuck_in_own_loop.py")
    args = parser.parse_args()
    program = ROOT / "tests" / "multiproc_programs" / args.program
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "run", "--json", "--timeout", f"{args.timeout:g}", "--", sys.executable,
         str(program)], capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.monotonic() - started
    document = json.loads(completed.stdout)
    (result,) = document["results"]
    read = result["details"].get("processes") or {}
    timings = read.get("timings_s") or {}
    examination = timings.get("examination", 0.0)
    print(f"program: {args.program}, --timeout {args.timeout:g} s")
    print(f"whole `gpudoctor run`: {wall:.1f} s ({wall / args.timeout:.2f} x the limit; target <= 1.5 x)")
    print(f"  the command, start to reaped: {result['duration_s']:.1f} s")
    print(f"    its limit: {args.timeout:g} s")
    print(f"    examination at the deadline: {examination:.1f} s of a {read.get('budget_s')} s budget")
    for name, seconds in timings.items():
        if name != "examination":
            print(f"      {name}: {seconds:.2f} s")
    count, collected = len(read.get("processes") or ()), read.get("seconds")
    print(f"      every read collected (py-spy on all {count} processes, in parallel): {collected} s")
    print(f"    faulthandler's grace and the kill: {result['duration_s'] - args.timeout - examination:.1f} s")
    print(f"  gpudoctor's own start, facts and report: {wall - result['duration_s']:.1f} s")
    print(f"native frames: {(result.get('native') or {}).get('how')}")
    for finding in document["findings"]:
        print(f"finding {finding['id']}:")
        for line in finding["evidence"]:
            print(f"  {line}")


if __name__ == "__main__":
    main()
