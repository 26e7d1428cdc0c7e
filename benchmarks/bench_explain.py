"""`gpudoctor explain` on a large CI log: seconds for reading it and finding what the knowledge reads (the windows
around its errors), for matching the knowledge over that, and for the whole command (with the inventory).

Usage: python benchmarks/bench_explain.py [--megabytes 10] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_log(path: Path, megabytes: float) -> None:
    """Compiler chatter with a CUDA fault buried in the middle, as a long CI job's log."""
    line = "[1234/5678] Building CUDA object kernels/attention.cu.o -O3 --use_fast_math -gencode arch=compute_90\n"
    chatter = line * int(megabytes * 2**20 / len(line) / 2)
    fault = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    path.write_text(chatter + fault + chatter)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    import json

    from gpudoctor.knowledge import load_knowledge, match_findings
    from gpudoctor.model import Report
    from gpudoctor.report.codec import decode
    from gpudoctor.reproducer.log import log_result, read_log

    load_knowledge()  # loaded once per process, as in the command
    h100 = decode(json.loads((ROOT / "tests" / "fixtures" / "h100-suite-report.json").read_text())).environment
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "ci.log"
        make_log(log, options.megabytes)
        reading, matching, whole = [], [], []
        for _ in range(options.runs):
            started = time.perf_counter()
            result = log_result(*read_log(str(log)))
            reading.append(time.perf_counter() - started)
            started = time.perf_counter()
            findings = match_findings(Report("0", "", h100, results=(result,)))
            matching.append(time.perf_counter() - started)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gpudoctor", "explain", str(log), "--json"], capture_output=True,
                           check=False)  # fmt: skip
            whole.append(time.perf_counter() - started)
        size = log.stat().st_size / 2**20
    print(f"a {size:.1f} MiB log, median of {options.runs}: read and cut {statistics.median(reading):.3f} s, "
          f"knowledge {statistics.median(matching):.3f} s, the whole command {statistics.median(whole):.2f} s "
          f"(inventory included); found {sorted(f.id for f in findings)}")  # fmt: skip


if __name__ == "__main__":
    main()
