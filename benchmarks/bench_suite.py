"""Wall time of the full probe suite, serial (--jobs 1) against parallel (--jobs N), and the slowest probe.

Usage: python benchmarks/bench_suite.py [--runs N] [--jobs 2]
Each run is a real `gpudoctor --json` in a fresh process; the first run warms MAX's compile cache,
so its figure is reported apart as the cold run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def run_suite(jobs: int) -> tuple[float, dict[str, float]]:
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "--json", "--jobs", str(jobs)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    wall = time.perf_counter() - started
    results = json.loads(completed.stdout)["results"]
    return wall, {r["id"]: r["duration_s"] for r in results if r["outcome"] != "skipped"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    options = parser.parse_args()
    cold, _ = run_suite(options.jobs)
    print(f"first run (--jobs {options.jobs}, compile cache as found): {cold:.1f} s")
    figures: dict[int, list[float]] = {1: [], options.jobs: []}
    slowest: list[float] = []
    for _ in range(options.runs):
        for jobs in figures:
            wall, durations = run_suite(jobs)
            figures[jobs].append(wall)
            if jobs == 1:
                slowest.append(max(durations.values()))
    for jobs, walls in figures.items():
        print(f"--jobs {jobs}: median {statistics.median(walls):.1f} s  (runs: {', '.join(f'{w:.1f}' for w in walls)})")
    serial, parallel = statistics.median(figures[1]), statistics.median(figures[options.jobs])
    print(f"speed-up --jobs {options.jobs} over serial: {serial / parallel:.2f}x")
    print(
        f"slowest single probe (in serial runs): median {statistics.median(slowest):.1f} s; "
        f"parallel wall / slowest = {parallel / statistics.median(slowest):.2f}"
    )


if __name__ == "__main__":
    main()
