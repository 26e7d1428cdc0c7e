"""The public-reports corpus and its matcher (knowledge.public, issue 51): how long the corpus takes to load and a
2,000-line log to be explained, and a leave-one-out measure — each report's error matched against the corpus with
its own thread left out: how often some other report has the same error, and how often the nearest one's cause is
the same (by the words of the two causes: a proxy, printed beside a sample to judge by hand); and the same match for
the quotes of the field sets gathered blind (tests/field_corpus/heldout12..18), which predicts what the corpus does
for a failure it was not gathered around better than leave-one-out does (the corpus's own reports cluster by query).

    .venv/bin/python benchmarks/bench_public_reports.py            # figures
    .venv/bin/python benchmarks/bench_public_reports.py --sample 30 # and 30 nearest pairs to judge by hand
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpudoctor.knowledge.public import FOLDER, SAME_CAUSE, Corpus, load_corpus

ROOT = Path(__file__).resolve().parents[1]


def leave_one_out(corpus: Corpus, sample: int) -> None:
    established = [n for n, r in enumerate(corpus.reports) if r.resolved != "open" and r.cause != "not established"]
    matched = agreed = 0
    pairs = []
    for n in established:
        report = corpus.reports[n]
        nearest = corpus.nearest(report.error.splitlines(), leave_out=n)
        nearest = [(s, r) for s, r in nearest if r.source != report.source]
        if not nearest:
            continue
        matched += 1
        score, other = nearest[0]
        same = corpus.same_cause(report, other)
        agreed += same >= SAME_CAUSE
        pairs.append((report, other, score, same))
    total = len(established)
    print(f"leave-one-out over {total} reports with an established cause (of {len(corpus.reports)}):")
    print(f"  some other report has the same error: {matched} ({matched / max(total, 1):.0%})")
    print(f"  the nearest one's cause is the same (cause words' cosine >= {SAME_CAUSE}): {agreed} "
          f"({agreed / max(total, 1):.0%} of all, {agreed / max(matched, 1):.0%} of those matched)")  # fmt: skip
    for report, other, score, same in random.Random(7).sample(pairs, min(sample, len(pairs))):
        print(f"\n- {report.source} [{report.stack}] error: {report.error.strip().splitlines()[-1][:160]}")
        print(f"  cause: {report.cause[:200]}")
        print(f"  nearest {other.source} (score {score}, cause words {same:.2f}): {other.cause[:200]}")


FRESH_SETS = (
    "heldout12",
    "heldout13",
    "heldout14",
    "heldout15",
    "heldout16",
    "heldout17",
    "heldout18",
    "heldout19",
    "heldout20",
)


def fresh_sets(corpus: Corpus) -> None:
    """What the corpus does for failures it was not gathered around: the quotes of the field sets gathered blind by
    neutral queries (tests/field_corpus), each matched whole — how many have a same-error public report, how many one
    whose thread found a cause, and how many of those hold the record's own cause among the first three (the proxy)."""
    import tomllib

    from gpudoctor.knowledge.public import error_lines

    print("fresh quotes (the blind field sets, neutral queries), against the whole corpus:")
    for name in FRESH_SETS:
        path = ROOT / "tests" / "field_corpus" / f"{name}.toml"
        if not path.is_file():
            continue
        records = tomllib.loads(path.read_text())["report"]
        same = caused = agreeing = 0
        for record in records:
            nearest = [r for _, r in corpus.nearest(error_lines(record["quote"]))]
            same += bool(nearest)
            established = [r for r in nearest if r.established][:3]
            caused += bool(established)
            agreeing += any(corpus.same_cause(record["mechanism"], r) >= SAME_CAUSE for r in established)
        print(f"  {name} ({len(records)} quotes): a same-error report {same}, one whose thread found a cause {caused}, "
              f"its cause the record's (proxy, first three) {agreeing}")  # fmt: skip


def explain_cost(runs: int) -> None:
    """`gpudoctor explain` of 2,000-line logs (a build log's noise around a real error of the corpus): five errors,
    the corpus's reports at a fifth, two fifths, … of it (a known mechanism, a generic reading and public reports each
    cost differently), each run ``runs`` times; and the corpus's load and one match, in this process."""
    corpus = load_corpus()
    noise = [f"  Downloading package-{n}.whl ({n % 97} kB)" if n % 3 else f"[{n}/2000] compiling object {n}.o"
             for n in range(1990)]  # fmt: skip
    medians = []
    with tempfile.TemporaryDirectory() as folder:
        for part in range(1, 6):
            error = corpus.reports[len(corpus.reports) * part // 6].error.strip()
            log = Path(folder) / f"build{part}.log"
            log.write_text("\n".join([*noise, *error.splitlines()]) + "\n")
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "gpudoctor", "explain", "--json", str(log)],
                               capture_output=True, check=False)  # fmt: skip
                times.append(time.perf_counter() - start)
            times.sort()
            medians.append(times[len(times) // 2])
            lines = log.read_text().splitlines()
            print(
                f"explain of a {len(lines):,}-line log ending in {error.splitlines()[-1][:60]!r}, whole command "
                f"(interpreter start included), {runs} runs: median {medians[-1]:.2f} s, max {times[-1]:.2f} s"
            )
        start = time.perf_counter()
        load_corpus.cache_clear()
        load_corpus()
        loaded = time.perf_counter() - start
    from gpudoctor.knowledge.public import error_lines

    start = time.perf_counter()
    for _ in range(20):
        load_corpus().nearest(error_lines("\n".join(lines)))
    matched = (time.perf_counter() - start) / 20
    print(f"the five logs' medians: {', '.join(f'{m:.2f}' for m in medians)} s (slowest {max(medians):.2f} s)")
    print(f"corpus load ({len(load_corpus().reports)} reports from {FOLDER.name}/, warm): {loaded * 1000:.0f} ms; "
          f"the match of the last log against it: {matched * 1000:.1f} ms")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=0, help="nearest pairs to print for judging by hand")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    explain_cost(args.runs)
    leave_one_out(load_corpus(), args.sample)
    fresh_sets(load_corpus())
    return 0


if __name__ == "__main__":
    sys.exit(main())
