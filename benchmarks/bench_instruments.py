"""What the GPU's instruments cost beside the program's own run: for each report of `gpudoctor run`, the command's
own seconds, the synchronous rerun's and compute-sanitizer memcheck's (caching allocators off), how many times the
program's own run the reruns took together, and the seconds of gpudoctor's control probes run beside it.

Usage: python benchmarks/bench_instruments.py [REPORT.json ...]
       (default: the H100 recordings, tests/fixtures/h100/runs/*.json, made by scripts/record_gpu_runs.sh; run that
       script on a GPU machine for fresh figures)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(paths: list[Path]) -> None:
    print(f"{'program':<24} {'outcome':>7} {'own s':>7} {'sync s':>7} {'memcheck s':>10} {'reruns / own':>12} "
          f"{'controls s':>10}")  # fmt: skip
    for path in paths:
        report = json.loads(path.read_text())
        result = next(r for r in report["results"] if r["id"] == "reproducer")
        said = {s["instrument"]: s["seconds"] for s in result["details"].get("instruments", [])}
        own = result["duration_s"]
        reruns = sum(said.values())
        ratio = f"{reruns / own:.1f}x" if said and own else "not rerun"
        sync, memcheck = said.get("synchronous"), said.get("memcheck")
        controls = sum(r["duration_s"] for r in report["results"] if r["id"] != "reproducer")
        print(f"{path.stem:<24} {result['outcome']:>7} {own:>7.1f} {sync if sync is not None else '-':>7} "
              f"{memcheck if memcheck is not None else '-':>10} {ratio:>12} {controls:>10.1f}")  # fmt: skip


if __name__ == "__main__":
    given = [Path(arg) for arg in sys.argv[1:]]
    main(given or sorted((ROOT / "tests" / "fixtures" / "h100" / "runs").glob("*.json")))
