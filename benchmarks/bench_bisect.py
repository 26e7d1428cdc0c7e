"""Cells and seconds of `gpudoctor bisect` against a full scan (`--scan`: every release, what a sweep of the range
costs) of the same reproducer over the same MAX releases, each in a fresh folder of environments (uv's own cache
as the machine has it), one cell at a time.

Usage: python benchmarks/bench_bisect.py [--max 25.3..26.7] [--bad 25.4] [--torch 2.13.0] [--inherit PYTHON]
       [-- CMD ARGS...]   (default: seed 002's reproducer, tests/reproducers/seed002_default_parameter/repro.py)
The machine's uv configuration (indexes, find-links) applies, as for every sweep.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED002 = ["python", str(ROOT / "tests" / "reproducers" / "seed002_default_parameter" / "repro.py")]


def bisect(options: argparse.Namespace, command: list[str], *extra: str) -> tuple[float, dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="bench-bisect-") as envs:
        argv = [sys.executable, "-m", "gpudoctor", "bisect", "--json", "--max", options.max, "--envs", envs,
                "--torch", options.torch, *(["--bad", options.bad] if options.bad else []),
                *(["--inherit", options.inherit] if options.inherit else []), *extra, "--", *command]  # fmt: skip
        started = time.perf_counter()
        completed = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
        seconds = time.perf_counter() - started
    if not completed.stdout:
        raise SystemExit(completed.stderr[-2000:])
    return seconds, json.loads(completed.stdout)


def main() -> None:
    own, _, command = " ".join(sys.argv[1:]).partition(" -- ")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", default="25.3..26.7")
    parser.add_argument("--bad", default="25.4")
    parser.add_argument("--torch", default="2.13.0")
    parser.add_argument("--inherit", default=sys.executable)
    options = parser.parse_args(own.split())
    argv = command.split() if command else SEED002
    for label, extra in (("bisect", ()), ("full scan", ("--scan",))):
        seconds, report = bisect(options, argv, *extra)
        cells = report["cells"]
        assert isinstance(cells, list)
        changes = [f"{t['before']} -> {t['after']}" for t in report["transitions"] if t["exact"]]  # type: ignore[index, union-attr]
        print(f"{label:<10} {len(cells):>3} cells  {seconds:7.1f} s  exact changes: {', '.join(changes)}")


if __name__ == "__main__":
    main()
