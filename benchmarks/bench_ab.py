"""Two gpudoctor checkouts on one machine, their warm full runs interleaved (A, B, A, B, ...), so that the
machine's drift (these machines differ by 20-50 % from one to the next, and within minutes) hits both alike.
Prints every round and the medians; asserts nothing.

Usage: python benchmarks/bench_ab.py --a OLD/src --b src [--rounds 4] [--jobs N] [--cold]

Each side gets caches of its own (as bench_suite.py: MAX's, Inductor's and gpudoctor's), warmed by one full run
that is not counted (with --cold, none: every run gets empty caches of its own). Then each round runs A and B once,
in turn (which goes first alternates). Per side: wall times, the median, the run that ended last in each round
(when it started: a late start is queueing for a slot) and the probe CPU time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_suite import Run, run_suite


def side_env(src: Path) -> dict[str, str]:
    """PYTHONPATH with this checkout's src first (packages the machine lacks may follow, from $PYTHONPATH)."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != src]
    return {"PYTHONPATH": os.pathsep.join([str(src), *rest])}


def slowest(run: Run) -> str:
    """The run that ended last, when it started and how long it took (the start shows queueing for a slot)."""
    starts = {i: t["start"] for i, t in run.timeline.items() if "start" in t and i in run.durations}
    run_id = max(starts, key=lambda i: starts[i] + run.durations[i])
    return f"{run_id} {starts[run_id]:.1f} s -> {starts[run_id] + run.durations[run_id]:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="src/ of the first checkout (the baseline)")
    parser.add_argument("--b", type=Path, required=True, help="src/ of the second checkout")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--cold", action="store_true", help="every run with empty caches of its own (no warm-up)")
    options = parser.parse_args()
    sides = {"A": options.a.resolve(), "B": options.b.resolve()}
    scratch = Path(tempfile.mkdtemp(prefix="gpudoctor-ab-"))
    kind = "cold" if options.cold else "warm"
    try:
        for name, src in ({} if options.cold else sides).items():
            warmup = run_suite(options.jobs, scratch / name, side_env(src))
            print(
                f"{name} = {src}: warm-up (cold caches) {warmup.wall:.1f} s, {len(warmup.results)} runs, "
                f"last to end {slowest(warmup)}"
            )
        walls: dict[str, list[float]] = {name: [] for name in sides}
        cpu: dict[str, list[float]] = {name: [] for name in sides}
        for index in range(options.rounds):
            order = list(sides) if index % 2 == 0 else list(reversed(sides))
            cells = []
            for name in order:
                caches = scratch / (f"{name}-{index}" if options.cold else name)
                run = run_suite(options.jobs, caches, side_env(sides[name]))
                walls[name].append(run.wall)
                cpu[name].append(run.cpu_s)
                cells.append(f"{name} {run.wall:5.1f} s (last to end {slowest(run)}, probe CPU {run.cpu_s:.0f} s)")
            print(f"round {index + 1}: " + "; ".join(cells))
        for name in sides:
            print(
                f"{name}: {kind} --jobs {options.jobs} median {statistics.median(walls[name]):.1f} s "
                f"({', '.join(f'{w:.1f}' for w in walls[name])}); probe CPU median {statistics.median(cpu[name]):.0f} s"
            )
        ratio = statistics.median(walls["B"]) / statistics.median(walls["A"])
        print(f"B / A (medians): {ratio:.3f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
