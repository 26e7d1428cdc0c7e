"""The first run a user sees (every cache empty) against the longest MAX compile chain alone, and the warm run against
its slowest probe alone (issue 38's ratios: first run <= 1.1 x the chain alone and under 60 s on the H100; warm
<= 1.1 x the slowest probe alone). Prints figures; asserts nothing.

Usage: python benchmarks/bench_first_run.py [--jobs N] [--chain custom-op-source,custom-op-params] [--device cuda]

In order, each a real diagnosis in a fresh process, with caches in scratch folders of their own (MAX's, Inductor's,
gpudoctor's, bytecode where PYTHONDONTWRITEBYTECODE is set):
1. the full suite, cold: its wall time, and every run's start and end (a long run that starts late shows here);
2. the chain alone, cold (``--only`` the chain's probes, on one device, with what they build on, on new empty caches);
3. the full suite again on the caches of 1., warm;
4. the warm run's slowest probe alone (``--only`` it, one job at a time: its own duration with nothing beside it).
Runs standalone with PYTHONPATH=src (no pytest).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# The doctor's pipeline in a fresh process, as the CLI runs it, noting when each run starts and ends.
_DOCTOR = """
import json, sys, time
from gpudoctor.suite.bytecode import keep_own_bytecode
keep_own_bytecode()
from gpudoctor.doctor import DoctorOptions, default_jobs, diagnose
from gpudoctor.model import Device
from gpudoctor.report.codec import encode
asked = json.loads(sys.argv[1])
t0 = time.monotonic()
timeline = {}
def started(run):
    timeline.setdefault(run.run_id, {})["start"] = time.monotonic() - t0
def ended(result):
    timeline.setdefault(result.id, {})["end"] = time.monotonic() - t0
options = DoctorOptions(jobs=asked["jobs"] or default_jobs(), only=asked["only"],
                        devices=tuple(Device(d) for d in asked["devices"]) if asked["devices"] else None, advice=False)
report = diagnose(options, on_start=started, on_result=ended)
json.dump({"report": encode(report), "timeline": timeline, "wall": time.monotonic() - t0, "jobs": options.jobs},
          sys.stdout)
"""


def diagnosis(
    caches: Path, *, jobs: int | None, only: list[str] | None = None, devices: list[str] | None = None
) -> dict[str, Any]:
    env = dict(os.environ)
    if importlib.util.find_spec("gpudoctor") is None:  # run from a checkout: the sources beside this script
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    env.update(MODULAR_CACHE_DIR=str(caches / "modular"), MODULAR_DERIVED_PATH=str(caches / "modular-derived"),
               TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"),
               GPUDOCTOR_CACHE_DIR=str(caches / "gpudoctor"))  # fmt: skip
    asked = json.dumps({"jobs": jobs, "only": only, "devices": devices})
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _DOCTOR, asked], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    if done.returncode not in (0, 1) or not done.stdout.strip():
        raise SystemExit(f"the diagnosis failed ({done.returncode}): {done.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(done.stdout)
    data["process_wall"] = time.perf_counter() - started
    return data


def ran(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in data["report"]["results"] if r["outcome"] != "skipped"}


def timeline(data: dict[str, Any]) -> list[str]:
    results, times = ran(data), data["timeline"]
    rows = sorted(((times[i].get("start", 0.0), i) for i in results if i in times), key=lambda row: row[0])
    lines = []
    for start, run_id in rows:
        result = results[run_id]
        end = start + result["duration_s"]
        lines.append(
            f"  {run_id:<28} {start:6.1f} s -> {end:6.1f} s  ({result['duration_s']:5.1f} s, {result['outcome']})"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=None, help="default: the doctor's own default")
    parser.add_argument("--chain", default="custom-op-source,custom-op-params", help="probe ids of the MAX chain")
    parser.add_argument("--device", default=None, help="the chain's device (default: cuda with a GPU, else cpu)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpudoctor-first-run-") as scratch:
        first = diagnosis(Path(scratch) / "first", jobs=options.jobs)
        results = ran(first)
        device = options.device or ("cuda" if any(r.endswith("/cuda") for r in results) else "cpu")
        print(f"1. full suite, cold (every cache empty), --jobs {first['jobs']}: {first['wall']:.1f} s "
              f"({first['process_wall']:.1f} s with the doctor's start)")  # fmt: skip
        print("\n".join(timeline(first)))
        chain = diagnosis(Path(scratch) / "chain", jobs=options.jobs, only=options.chain.split(","), devices=[device])
        chain_runs = ran(chain)
        print(f"2. the chain {options.chain} on {device} alone, cold: {chain['wall']:.1f} s")
        print("\n".join(timeline(chain)))
        warm = diagnosis(Path(scratch) / "first", jobs=options.jobs)
        warm_runs = ran(warm)
        print(f"3. full suite, warm: {warm['wall']:.1f} s")
        print("\n".join(timeline(warm)))
        slowest = max(warm_runs, key=lambda i: warm_runs[i]["duration_s"])
        probe = slowest.split("/")[0]
        alone = diagnosis(
            Path(scratch) / "first", jobs=1, only=[probe], devices=[slowest.split("/")[1]] if "/" in slowest else None
        )
        alone_s = ran(alone)[slowest]["duration_s"]
        print(f"4. the warm run's slowest probe, {slowest}, alone (one job at a time): {alone_s:.1f} s")
    longest = max(chain_runs.values(), key=lambda r: r["duration_s"])
    print()
    print(f"first run, cold:                 {first['wall']:6.1f} s   (goal on the H100: < 60 s)")
    print(
        f"the MAX chain alone, cold:       {chain['wall']:6.1f} s   "
        f"(its longest run: {longest['id']} {longest['duration_s']:.1f} s)"
    )
    print(f"first run / chain alone:         {first['wall'] / chain['wall']:6.2f}     (goal: <= 1.1)")
    print(f"warm full run:                   {warm['wall']:6.1f} s")
    print(f"slowest probe alone ({slowest}): {alone_s:6.1f} s")
    print(f"warm / slowest probe alone:      {warm['wall'] / alone_s:6.2f}     (goal: <= 1.1)")
    cpu = sum(r.get("cpu_s") or 0.0 for r in warm_runs.values())
    print(f"warm run's probe CPU time / CPUs: {cpu:.1f} s / {os.cpu_count()} = {cpu / (os.cpu_count() or 1):.1f} s "
          "(no schedule ends before this)")  # fmt: skip


if __name__ == "__main__":
    main()
