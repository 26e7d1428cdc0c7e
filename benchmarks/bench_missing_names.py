"""The lookup of a missing name in an environment (facts.missing_names), on the real MAX installed beside this
interpreter: seconds to ask the interpreter for its path, and to look up a moved module, a typo (a search of every
Python file of max for the name, 1,900 files / 20 MB for MAX 26.7) and a name no file has; files and bytes read.

Usage: python benchmarks/bench_missing_names.py [--python PATH] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAILURES = {
    "moved module": "ModuleNotFoundError: No module named 'max.torch'",
    "typo": "ImportError: cannot import name 'opz' from 'max.graph'",
    "renamed attribute": "AttributeError: module 'max.graph' has no attribute 'TensorTyp'",
    "name nowhere": "ImportError: cannot import name 'no_such_name_anywhere' from 'max.graph'",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from gpudoctor.facts.distributions import Environment
    from gpudoctor.facts.interpreter import search_path
    from gpudoctor.facts.missing_names import look_up, missing_name

    asking = []
    for _ in range(options.runs):
        started = time.perf_counter()
        answer = search_path(options.python)
        asking.append(time.perf_counter() - started)
    assert answer is not None, "the interpreter did not answer"
    print(f"asking the interpreter for its path: median {statistics.median(asking) * 1000:.0f} ms")
    for label, text in FAILURES.items():
        missing = missing_name(text)
        assert missing is not None
        times = []
        for _ in range(options.runs):
            environment = Environment([Path(p) for p in answer[0]])  # nothing cached between runs
            started = time.perf_counter()
            detail = look_up(missing, environment, answer[1])
            times.append(time.perf_counter() - started)
        searched = detail.get("searched", {})
        said = detail.get("found") or detail.get("close") or "nothing"
        print(f"{label:18} median {statistics.median(times) * 1000:6.0f} ms, max {max(times) * 1000:6.0f} ms; "
              f"files searched {searched.get('files', '-')}; found {said}")  # fmt: skip


if __name__ == "__main__":
    main()
