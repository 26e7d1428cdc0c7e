"""Full-suite wall time: cold against warm compile caches, serial against parallel, the slowest single probe,
and the doctor's own peak memory. Prints figures; asserts nothing.

Usage: python benchmarks/bench_suite.py [--runs 3] [--jobs N ...] [--cold-runs 1]

Every run is a real `gpudoctor --json` in a fresh process. The caches live in a scratch folder of their own
(MODULAR_DERIVED_PATH for MAX's compiled kernels, TORCHINDUCTOR_CACHE_DIR for torch.compile,
GPUDOCTOR_CACHE_DIR for gpudoctor's compiled control package), so "cold" means
empty caches whatever this machine ran before, and "warm" means the same caches after one full run.
Serial is --jobs 1 (one probe at a time), so its per-probe durations are each probe run alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Runs the doctor in-process and reports the doctor's own peak RSS (its probes are separate processes).
_DOCTOR = (
    "import resource, sys\n"
    "from gpudoctor.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stderr.write('doctor-maxrss-kib %d\\n' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def run_suite(jobs: int, caches: Path) -> tuple[float, dict[str, float], int]:
    env = dict(os.environ)
    env["MODULAR_DERIVED_PATH"] = str(caches / "modular")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(caches / "inductor")
    env["GPUDOCTOR_CACHE_DIR"] = str(caches / "gpudoctor")
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", _DOCTOR, "--json", "--jobs", str(jobs)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - started
    results = json.loads(completed.stdout)["results"]
    problems = [f"{r['id']} {r['outcome']}" for r in results if r["outcome"] in ("fail", "crash", "timeout")]
    if problems:
        print(f"  (note: {', '.join(problems)})")
    rss = next(int(line.split()[1]) for line in completed.stderr.splitlines() if line.startswith("doctor-maxrss"))
    return wall, {r["id"]: r["duration_s"] for r in results if r["outcome"] != "skipped"}, rss


def describe(walls: list[float]) -> str:
    return f"median {statistics.median(walls):6.1f} s  (runs: {', '.join(f'{w:.1f}' for w in walls)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="warm runs of each --jobs value")
    parser.add_argument("--cold-runs", type=int, default=1, help="runs with empty caches (each is slow)")
    parser.add_argument("--jobs", type=int, nargs="*", help="parallel --jobs values (default: the doctor's)")
    parser.add_argument("--caches", type=Path, help="keep the caches here (warm runs reuse them across calls)")
    options = parser.parse_args()
    from gpudoctor.doctor import default_jobs

    parallel_jobs = options.jobs or [default_jobs()]
    print(f"machine: {os.cpu_count()} CPUs; the doctor's default --jobs here: {default_jobs()}")
    scratch = options.caches or Path(tempfile.mkdtemp(prefix="gpudoctor-bench-"))
    try:
        cold = []
        for index in range(options.cold_runs):
            caches = scratch / f"cold-{index}"
            shutil.rmtree(caches, ignore_errors=True)
            wall, _, _ = run_suite(parallel_jobs[0], caches)
            cold.append(wall)
        warm_caches = scratch / "cold-0"
        if cold:
            print(f"cold caches, --jobs {parallel_jobs[0]}:  {describe(cold)}")
        figures: dict[int, list[float]] = {1: [], **{j: [] for j in parallel_jobs}}
        slowest: list[tuple[float, str]] = []
        rss: list[int] = []
        for _ in range(options.runs):
            for jobs in figures:
                wall, durations, doctor_rss = run_suite(jobs, warm_caches)
                figures[jobs].append(wall)
                rss.append(doctor_rss)
                if jobs == 1:
                    probe = max(durations, key=lambda k: durations[k])
                    slowest.append((durations[probe], probe))
        for jobs, walls in figures.items():
            print(f"warm caches, --jobs {jobs}:  {describe(walls)}")
        serial = statistics.median(figures[1])
        alone = statistics.median(s for s, _ in slowest)
        names = sorted({name for _, name in slowest})
        print(f"slowest probe run alone (serial runs): median {alone:.1f} s ({', '.join(names)})")
        for jobs in parallel_jobs:
            parallel = statistics.median(figures[jobs])
            print(
                f"--jobs {jobs}: {serial / parallel:.2f}x faster than serial; "
                f"wall / slowest probe = {parallel / alone:.2f} (target 1.3)"
            )
        if cold:
            ratio = statistics.median(cold) / statistics.median(figures[parallel_jobs[0]])
            print(f"cold / warm at --jobs {parallel_jobs[0]}: {ratio:.2f}x")
        print(f"doctor's own peak RSS: max {max(rss) / 1024:.1f} MiB over {len(rss)} runs (probes run apart)")
    finally:
        if options.caches is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
