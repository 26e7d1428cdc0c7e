"""What the GPU's instruments cost beside the program's own run: for each report of `gpudoctor run`, its class of
failure (which chose the experiments), the command's own seconds, each instrument's (the synchronous rerun,
compute-sanitizer's memcheck, initcheck, racecheck and synccheck), how many times the program's own run the reruns
took together, and the seconds of gpudoctor's control probes run beside it. A hang is examined at its deadline and
never rerun: "not rerun".

Usage: python benchmarks/bench_instruments.py [REPORT.json ...]
       (default: the H100 recordings, tests/fixtures/h100/runs/*.json, made by scripts/record_gpu_runs.sh; run that
       script on a GPU machine for fresh figures)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


TOOLS = ("synchronous", "memcheck", "initcheck", "racecheck", "synccheck", "torch-stream-sanitizer")


def main(paths: list[Path]) -> None:
    """One line per report: its class of failure, the program's own seconds, each instrument's, the reruns against
    the program's own run, the controls' seconds; a hang shows that it was examined at its deadline, not rerun."""
    heads = " ".join(f"{'sync' if t == 'synchronous' else 'csan' if t.startswith('torch') else t:>9}" for t in TOOLS)
    print(f"{'program':<26} {'class':<14} {'outcome':>7} {'own s':>7} {heads} {'reruns/own':>10} {'controls s':>10}")
    for path in paths:
        report = json.loads(path.read_text())
        result = next(r for r in report["results"] if r["id"] == "reproducer")
        said = {s["instrument"]: s["seconds"] for s in result["details"].get("instruments", [])}
        own = result["duration_s"]
        reruns = sum(said.values())
        ratio = f"{reruns / own:.1f}x" if said and own else "not rerun"
        failure = result["details"].get("failure_class", "-")
        cells = " ".join(f"{said.get(t, '-'):>9}" for t in TOOLS)
        controls = sum(r["duration_s"] for r in report["results"] if r["id"] != "reproducer")
        print(f"{path.stem:<26} {failure:<14} {result['outcome']:>7} {own:>7.1f} {cells} {ratio:>10} {controls:>10.1f}")


if __name__ == "__main__":
    given = [Path(arg) for arg in sys.argv[1:]]
    main(given or sorted((ROOT / "tests" / "fixtures" / "h100" / "runs").glob("*.json")))
