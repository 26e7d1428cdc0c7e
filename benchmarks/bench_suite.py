"""Full-suite wall time: cold against warm compile caches, serial against parallel, the slowest single probe,
the critical path (which chain of steps bounds the run), the floor (import costs alone, in a bare process),
and the doctor's own peak memory. Prints figures; asserts nothing.

Usage: python benchmarks/bench_suite.py [--runs 3] [--jobs N ...] [--cold-runs 1]

Every run is a real diagnosis (`diagnose`, what `gpudoctor --json` runs) in a fresh process, which also records
when each probe run started and ended. The caches live in a scratch folder of their own (MODULAR_CACHE_DIR and
MODULAR_DERIVED_PATH for MAX, TORCHINDUCTOR_CACHE_DIR for torch.compile, GPUDOCTOR_CACHE_DIR for gpudoctor's
compiled control package, reserved temporary folders and learned durations), so "cold" means empty caches
whatever this machine ran before, and "warm" means the same caches after one full run. Serial is --jobs 1 (one
probe at a time), so its per-probe durations are each probe run alone.
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
from typing import Any

# Runs the doctor's pipeline in a fresh process, as the CLI does, noting when each run starts and ends, and
# reports the doctor's own peak RSS (its probes are separate processes).
_DOCTOR = """
import json, resource, sys, time
try:  # as the CLI does first (gpudoctor.cli.main); older checkouts have no such module
    from gpudoctor.suite.bytecode import keep_own_bytecode
    keep_own_bytecode()
except ImportError:
    pass
from gpudoctor.doctor import DoctorOptions, diagnose
from gpudoctor.report.codec import encode
t0 = time.monotonic()
timeline = {}
def started(run):
    timeline.setdefault(run.run_id, {})["start"] = time.monotonic() - t0
def ended(result):
    timeline.setdefault(result.id, {})["end"] = time.monotonic() - t0
report = diagnose(DoctorOptions(jobs=int(sys.argv[1])), on_start=started, on_result=ended)
json.dump({"report": encode(report), "timeline": timeline, "wall": time.monotonic() - t0,
           "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}, sys.stdout)
"""


class Run:
    """One measured diagnosis: wall time, each run's result and when it started and ended."""

    def __init__(self, wall: float, data: dict[str, Any]) -> None:
        self.wall = wall
        self.results = {r["id"]: r for r in data["report"]["results"] if r["outcome"] != "skipped"}
        self.timeline = data["timeline"]
        self.rss_kib = int(data["rss_kib"])

    @property
    def durations(self) -> dict[str, float]:
        return {run_id: r["duration_s"] for run_id, r in self.results.items()}

    @property
    def cpu_s(self) -> float:
        return sum(r.get("cpu_s") or 0.0 for r in self.results.values())


def run_suite(jobs: int, caches: Path, extra_env: dict[str, str] | None = None) -> Run:
    env = {**os.environ, **(extra_env or {})}
    env["MODULAR_CACHE_DIR"] = str(caches / "modular")
    env["MODULAR_DERIVED_PATH"] = str(caches / "modular-derived")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(caches / "inductor")
    env["GPUDOCTOR_CACHE_DIR"] = str(caches / "gpudoctor")
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", _DOCTOR, str(jobs)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - started
    run = Run(wall, json.loads(completed.stdout))
    problems = [f"{i} {r['outcome']}" for i, r in run.results.items() if r["outcome"] in ("fail", "crash", "timeout")]
    if problems:
        print(f"  (note: {', '.join(problems)})")
    return run


def critical_path(run: Run) -> list[str]:
    """The chain that bounds the run: from the probe process that ended last, back through the process whose
    end freed the job slot it started in, to the start; each with its steps. (A result may be announced later
    than its process ended, held for its prerequisites; the chain is about processes.)"""
    lines = []
    starts = {i: t["start"] for i, t in run.timeline.items() if "start" in t and i in run.results}
    ends = {i: starts[i] + run.results[i]["duration_s"] for i in starts}
    current = max(ends, key=lambda i: ends[i]) if ends else None
    while current is not None:
        start, result = starts[current], run.results[current]
        steps = ", ".join(f"{s['name']} {s['duration_s']:.1f}" for s in result.get("steps", []))
        lines.append(f"  {current}: {start:5.1f} s -> {ends[current]:5.1f} s  [{steps}]")
        freed = [i for i, end in ends.items() if i != current and 0 <= start - end < 0.1]
        current = max(freed, key=lambda i: ends[i]) if freed and start > 0.5 else None
    first_start = min(starts.values(), default=0.0)
    lines.append(f"  (inventory and planning before the first probe started: {first_start:.2f} s)")
    return lines


def run_table(run: Run) -> list[str]:
    lines = []
    for run_id, result in sorted(run.results.items(), key=lambda item: -item[1]["duration_s"]):
        cpu, rss = result.get("cpu_s") or 0.0, result.get("peak_rss_mib") or 0.0
        steps = ", ".join(f"{s['name'][:40]} {s['duration_s']:.1f}" for s in result.get("steps", []))
        lines.append(f"  {run_id:<30} {result['duration_s']:5.1f} s  cpu {cpu:5.1f} s  {rss:5.0f} MiB  [{steps}]")
    return lines


_BRIDGE = "import torch\ntry:\n import max.experimental.torch\nexcept ImportError:\n import max.torch"


def floor(scratch: Path) -> list[str]:
    """Import costs alone, each in a bare fresh process: no run that imports these can be faster. Where the
    environment turns Python's bytecode cache off (PYTHONDONTWRITEBYTECODE), also with bytecode kept outside the
    source tree, as the doctor's probes run there (its first, compiling, start not counted)."""
    cases: list[tuple[str, str, dict[str, str]]] = [
        ("python -c pass", "pass", {}),
        ("import torch", "import torch", {}),
        ("import torch + MAX bridge", _BRIDGE, {}),
    ]
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        kept = {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(scratch / "floor-pycache")}
        cases += [
            ("import torch, bytecode kept", "import torch", kept),
            ("torch + bridge, bytecode kept", _BRIDGE, kept),
        ]
    lines = []
    for label, code, extra in cases:
        env = {**os.environ, **extra}
        if extra:
            subprocess.run([sys.executable, "-c", code], capture_output=True, check=False, env=env)
        walls = []
        for _ in range(3):
            began = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], capture_output=True, check=False, env=env)
            walls.append(time.perf_counter() - began)
        lines.append(f"  {label:<30} median {statistics.median(walls):.2f} s")
    return lines


def describe(walls: list[float]) -> str:
    return f"median {statistics.median(walls):6.1f} s  (runs: {', '.join(f'{w:.1f}' for w in walls)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="warm runs of each --jobs value")
    parser.add_argument("--cold-runs", type=int, default=1, help="runs with empty caches (each is slow)")
    parser.add_argument("--serial-runs", type=int, help="warm --jobs 1 runs (default: --runs; 0: none)")
    parser.add_argument("--jobs", type=int, nargs="*", help="parallel --jobs values (default: the doctor's)")
    parser.add_argument("--caches", type=Path, help="keep the caches here (warm runs reuse them across calls)")
    options = parser.parse_args()
    if options.serial_runs is None:
        options.serial_runs = options.runs
    from gpudoctor.doctor import default_jobs

    parallel_jobs = options.jobs or [default_jobs()]
    print(f"machine: {os.cpu_count()} CPUs; the doctor's default --jobs here: {default_jobs()}")
    scratch = options.caches or Path(tempfile.mkdtemp(prefix="gpudoctor-bench-"))
    try:
        print("floor (import costs alone, a bare process each):")
        print("\n".join(floor(scratch)))
        cold = []
        cold_runs = []
        for index in range(max(1, options.cold_runs)):
            caches = scratch / f"cold-{index}"
            shutil.rmtree(caches, ignore_errors=True)
            run = run_suite(parallel_jobs[0], caches)
            cold.append(run.wall)
            cold_runs.append(run)
        warm_caches = scratch / "cold-0"
        print(f"cold caches, --jobs {parallel_jobs[0]}:  {describe(cold)}")
        print("critical path, cold:")
        print("\n".join(critical_path(cold_runs[-1])))
        figures: dict[int, list[float]] = {j: [] for j in parallel_jobs}
        serial_walls: list[float] = []
        slowest: list[tuple[float, str]] = []
        rss: list[int] = [r.rss_kib for r in cold_runs]
        last: dict[int, Run] = {}
        last_serial: Run | None = None
        cpu: list[float] = []

        def note_slowest(run: Run) -> None:
            durations = run.durations
            probe = max(durations, key=lambda k: durations[k])
            slowest.append((durations[probe], probe))
            cpu.append(run.cpu_s)

        for index in range(max(options.runs, options.serial_runs)):
            if index < options.serial_runs:
                run = run_suite(1, warm_caches)
                serial_walls.append(run.wall)
                rss.append(run.rss_kib)
                note_slowest(run)
                last_serial = run
            if index < options.runs:
                for jobs in parallel_jobs:
                    run = run_suite(jobs, warm_caches)
                    figures[jobs].append(run.wall)
                    rss.append(run.rss_kib)
                    last[jobs] = run
                    if not options.serial_runs:
                        note_slowest(run)
        if serial_walls:
            print(f"warm caches, --jobs 1:  {describe(serial_walls)}")
        for jobs, walls in figures.items():
            print(f"warm caches, --jobs {jobs}:  {describe(walls)}")
        print(f"critical path, warm, --jobs {parallel_jobs[0]}:")
        print("\n".join(critical_path(last[parallel_jobs[0]])))
        print(f"every run of the last warm --jobs {parallel_jobs[0]} run (wall, CPU, peak memory, steps):")
        print("\n".join(run_table(last[parallel_jobs[0]])))
        if last_serial is not None:
            # Each run alone: what a probe costs without the others beside it (the floor of the critical path).
            print("every run of the last warm --jobs 1 run, each alone (wall, CPU, peak memory, steps):")
            print("\n".join(run_table(last_serial)))
        alone = statistics.median(s for s, _ in slowest)
        names = sorted({name for _, name in slowest})
        how = "run alone (serial runs)" if serial_walls else "in the parallel runs (no serial run)"
        print(f"slowest probe {how}: median {alone:.1f} s ({', '.join(names)})")
        cpus = os.cpu_count() or 1
        per_cpu = statistics.median(cpu) / cpus
        print(f"probe CPU time: median {statistics.median(cpu):.1f} s; / {cpus} CPUs = {per_cpu:.1f} s")
        bound = max(alone, per_cpu)
        for jobs in parallel_jobs:
            parallel = statistics.median(figures[jobs])
            faster = f"{statistics.median(serial_walls) / parallel:.2f}x faster than serial; " if serial_walls else ""
            print(
                f"--jobs {jobs}: {faster}wall / slowest probe = {parallel / alone:.2f}; wall / max(slowest probe "
                f"{alone:.1f} s, CPU time / CPUs {per_cpu:.1f} s) = {parallel / bound:.2f} "
                "(target 1.3 on a small machine, 1.2 on the H100)"
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
