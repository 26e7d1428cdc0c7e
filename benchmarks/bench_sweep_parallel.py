"""Sweep cells at once against one at a time, and the compile caches that cells of one MAX release share.

    .venv/bin/python benchmarks/bench_sweep_parallel.py --torch 2.13.0,2.9.1 --max 26.7.0 --envs DIR \\
        [--runs 3] [--parallel N]

Every sweep is a real `gpudoctor sweep --refresh --no-matrix --json` over the grid (its environments are built
once first, or reused from --envs, so what is timed is the examination), with gpudoctor's cache folder (MAX's
model IR cache, Inductor's cache, the reserved temporary folders, bytecode) in a scratch folder of its own:
1. cold: the folder empty, one cell at a time, in grid order: a later cell of the same MAX release starts with
   what the earlier one compiled (compare the cells' durations);
2. warm: --parallel 1 against --parallel N (default: what the sweep picks on this machine, at least 2).
MAX's own kernel cache (MODULAR_CACHE_DIR) and derived folder live in the scratch folder too. Prints figures;
asserts nothing.
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


def sweep(options: argparse.Namespace, caches: Path, parallel: int, refresh: bool = True) -> tuple[float, Any]:
    env = dict(os.environ)
    env["GPUDOCTOR_CACHE_DIR"] = str(caches / "gpudoctor")
    env["MODULAR_CACHE_DIR"] = str(caches / "modular")
    env["MODULAR_DERIVED_PATH"] = str(caches / "modular-derived")
    argv = [sys.executable, "-m", "gpudoctor", "sweep", "--torch", options.torch, "--max", options.max,
            "--envs", str(options.envs), "--no-matrix", "--json", "--parallel", str(parallel)]  # fmt: skip
    if refresh:
        argv.append("--refresh")
    started = time.perf_counter()
    completed = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - started
    if completed.returncode not in (0, 1):
        sys.exit(f"sweep failed (exit {completed.returncode}): {completed.stderr.strip()[-2000:]}")
    return wall, json.loads(completed.stdout)


def cells(document: Any) -> list[str]:
    rows = []
    for result in document["cells"]:
        cell = result["cell"]
        rows.append(f"torch {cell['torch']} + max {cell['max']}: {result['status']} in {result['duration_s']:.1f} s")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch", required=True)
    parser.add_argument("--max", required=True)
    parser.add_argument("--envs", type=Path, required=True, help="where the cells' environments are (or go)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallel", type=int, help="cells at once for the parallel figure")
    options = parser.parse_args()
    from gpudoctor.doctor import default_jobs

    parallel = options.parallel or max(2, default_jobs() // 4)
    print(f"machine: {os.cpu_count()} CPUs; the doctor's default --jobs {default_jobs()}; "
          f"the sweep's default --parallel {max(1, default_jobs() // 4)}")  # fmt: skip
    scratch = Path(tempfile.mkdtemp(prefix="gpudoctor-bench-sweep-"))
    try:
        sweep(options, scratch / "build", 1, refresh=False)  # builds (or reuses) the environments, untimed
        cold_wall, cold = sweep(options, scratch / "caches", 1)
        print(f"cold caches, --parallel 1: {cold_wall:.1f} s")
        print("\n".join(f"  {row}" for row in cells(cold)))
        walls: dict[int, list[float]] = {1: [], parallel: []}
        last: dict[int, Any] = {}
        for _ in range(options.runs):
            for n in walls:
                wall, last[n] = sweep(options, scratch / "caches", n)
                walls[n].append(wall)
        for n, samples in walls.items():
            runs = ", ".join(f"{w:.1f}" for w in samples)
            print(f"warm caches, --parallel {n}: median {statistics.median(samples):.1f} s  (runs: {runs})")
            print("\n".join(f"  {row}" for row in cells(last[n])))
        serial, together = statistics.median(walls[1]), statistics.median(walls[parallel])
        print(f"--parallel {parallel} against --parallel 1: {serial / together:.2f}x")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
