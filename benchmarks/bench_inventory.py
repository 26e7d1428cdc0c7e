"""Wall time of an inventory-only run (`gpudoctor --json --no-probes`), median of several runs.

Usage: python benchmarks/bench_inventory.py [--runs N]
Also runs `python -m torch.utils.collect_env` (when torch is installed) for comparison: the doctor
answers the same question without importing torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def measure(argv: list[str], runs: int) -> tuple[float, float, float]:
    wall(argv)  # one warm-up so the page cache is the same for every run
    samples = [wall(argv) for _ in range(runs)]
    return statistics.median(samples), min(samples), max(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    options = parser.parse_args()
    # The console script a user runs, beside this interpreter (a venv's bin/), else on PATH.
    beside = Path(sys.executable).parent / "gpudoctor"
    doctor = str(beside) if beside.exists() else shutil.which("gpudoctor")
    argv = [doctor] if doctor else [sys.executable, "-m", "gpudoctor"]
    rows = [("gpudoctor --json --no-probes", [*argv, "--json", "--no-probes"])]
    if importlib.util.find_spec("torch") is not None:
        rows.append(("python -m torch.utils.collect_env", [sys.executable, "-m", "torch.utils.collect_env"]))
    results = {}
    print(f"{'command':<36} {'median':>8} {'min':>8} {'max':>8}   ({options.runs} runs)")
    for label, argv in rows:
        median, low, high = measure(argv, options.runs)
        results[label] = median
        print(f"{label:<36} {median:>7.3f}s {low:>7.3f}s {high:>7.3f}s")
    if len(results) == 2:
        doctor_s, collect_s = results.values()
        print(f"collect_env / gpudoctor inventory: {collect_s / doctor_s:.1f}x")
    target = 0.5
    verdict = "meets" if results[rows[0][0]] < target else "MISSES"
    print(f"inventory-only target < {target} s: {verdict}")
    preflight_ms()


def preflight_ms(runs: int = 20) -> None:
    """In-process: the stack facts the inventory adds (module locations, torch's CUDA build) and the pre-flight
    checks over an environment, each the median of ``runs``; goal (issue 14) <= 50 ms on top of the inventory."""
    from gpudoctor.facts.inventory import _local_stack_facts, collect_environment
    from gpudoctor.knowledge import load_knowledge, preflight

    environment = collect_environment()

    def median_ms(work: object) -> float:
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            work()  # type: ignore[operator]
            samples.append((time.perf_counter() - started) * 1000)
        return statistics.median(samples)

    import os

    from gpudoctor.facts.buildtools import build_facts, triton_ptxas
    from gpudoctor.facts.libraries import library_facts
    from gpudoctor.facts.requirements import unmet_requirements

    raw = _local_stack_facts()
    sites = [str(s) for s in raw["site_packages"]]
    torch_at = raw["modules"].get("torch")
    torch_folder = None if not torch_at else torch_at if os.path.isdir(torch_at) else os.path.dirname(torch_at)
    parts = {
        "stack facts (modules, torch's CUDA, bytecode, declared requirements)": _local_stack_facts,
        "declared requirements checked (packaging)": lambda: unmet_requirements(raw["distributions"], raw["markers"]),
        "CUDA libraries as the loader resolves them (ldconfig -p)": lambda: library_facts(sites),
        "extension build facts (nvcc --version/--dryrun, gcc, torch's arch names)": lambda: build_facts(
            os.environ, torch_folder, os.path.dirname(sys.executable)
        ),
        "Triton's ptxas (--version)": lambda: triton_ptxas(sites, os.environ),
        "knowledge loaded (each time, no cache) and the pre-flight checks": lambda: preflight(
            environment, load_knowledge.__wrapped__()
        ),
    }
    total = 0.0
    for label, work in parts.items():
        spent = median_ms(work)
        total += spent
        print(f"  {label:<76} {spent:7.1f} ms")
    print(f"on top of the inventory's own work: {total:.1f} ms (goal <= 50 ms)")


if __name__ == "__main__":
    main()
