"""What one sweep cell costs: its environment built with an empty uv cache (cold) and with a warm one, the disk a
warm cell adds (bytes not shared with uv's cache through hardlinks), and the doctor's run in it.

    .venv/bin/python benchmarks/bench_sweep.py --torch 2.13.0 --max 26.7.0 [--doctor]

Prints figures; asserts nothing. Where uv finds packages is uv's own configuration (UV_* variables).
Goal (issue 13): a warm-cache cell builds in <= 3 s and adds <= 20 MB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpudoctor.process.cancel import CancelScope
from gpudoctor.sweep.envs import Built, EnvironmentBuilder
from gpudoctor.sweep.grid import Cell


def unique_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` that have no other link (a hardlink into uv's cache costs nothing)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            info = os.lstat(os.path.join(root, name))
            if info.st_nlink == 1:
                total += info.st_size
    return total


def build(root: Path, cell: Cell) -> Built:
    result = EnvironmentBuilder(root).build(cell, CancelScope())
    if not isinstance(result, Built):
        sys.exit(f"the cell could not be built: {result.reason}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="2.13.0")
    parser.add_argument("--max", default="26.7.0")
    parser.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}")
    parser.add_argument("--doctor", action="store_true", help="also time the doctor's full run in the warm cell")
    options = parser.parse_args()
    cell = Cell(options.torch, options.max, options.python)
    with tempfile.TemporaryDirectory(prefix="bench-sweep-", dir=os.environ.get("BENCH_DIR")) as scratch:
        work = Path(scratch)
        os.environ["UV_CACHE_DIR"] = str(work / "uv-cache")  # empty: the first build is cold
        started = time.monotonic()
        build(work / "cold", cell)
        cold = time.monotonic() - started
        started = time.monotonic()
        warm_env = build(work / "warm", cell)
        warm = time.monotonic() - started
        added = unique_bytes(work / "warm")
        cache = sum(os.lstat(os.path.join(r, f)).st_size for r, _, fs in os.walk(work / "uv-cache") for f in fs)
        print(f"cell {cell.key}: torch {warm_env.installed.get('torch')}, max {warm_env.installed.get('max')}")
        print(f"  environment build, cold uv cache:  {cold:7.1f} s")
        print(f"  environment build, warm uv cache:  {warm:7.1f} s   (goal <= 3 s)")
        print(f"  disk a warm cell adds:             {added / 2**20:7.1f} MB  (goal <= 20 MB; files not hardlinked)")
        print(f"  uv cache after the two builds:     {cache / 2**20:7.1f} MB")
        if options.doctor:
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "gpudoctor", "--json", "--python", str(warm_env.python)],
                stdout=subprocess.DEVNULL,
                check=False,
            )
            print(f"  doctor, full run in the cell:      {time.monotonic() - started:7.1f} s")


if __name__ == "__main__":
    main()
