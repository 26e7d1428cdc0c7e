"""Print how the knowledge base does on the field corpus (tests/field_corpus): per stack, recognised with the right
explanation, missed, and misattributed; then every miss with what was found instead.

    .venv/bin/python scripts/field_corpus.py            # the corpus the rules were written with
    .venv/bin/python scripts/field_corpus.py --heldout  # reports gathered apart, judged before the rules ran on them
    .venv/bin/python scripts/field_corpus.py --heldout --now  # ... counting the mechanisms added after that measurement
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_field_corpus import (
    CORPUS,
    EXPECTED,
    HELDOUT,
    HELDOUT_EXPECTED,
    _toolchain_of,
    findings_for,
    wrong_attributions,
)


def main() -> None:
    heldout = "--heldout" in sys.argv[1:]
    corpus, expected = (HELDOUT, HELDOUT_EXPECTED) if heldout else (CORPUS, EXPECTED)
    totals: Counter[str] = Counter()
    right: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    misses = []
    caught: Counter[str] = Counter()  # mechanism or known issue -> reports it recognised
    for report in corpus:
        stack = report["stack"]
        found = findings_for(report["quote"])
        totals[stack] += 1
        judged = expected[report["id"]]
        accepted = set(judged["expect"]) | (set(judged.get("expect_now", [])) if "--now" in sys.argv[1:] else set())
        if accepted & found:
            right[stack] += 1
            caught.update(_toolchain_of(f)[0] for f in accepted & found)
        else:
            misses.append(f"  {report['id']} ({report['source']}): found {sorted(found) or 'nothing'}")
        if wrong_attributions(report["id"], found, expected):
            wrong[stack] += 1
    print(f"{'stack':<18} {'reports':>7} {'recognised':>10} {'misattributed':>13}")
    for stack in sorted(totals):
        print(f"{stack:<18} {totals[stack]:>7} {right[stack]:>10} {wrong[stack]:>13}")
    total = sum(totals.values())
    print(
        f"{'all':<18} {total:>7} {sum(right.values()):>10} {sum(wrong.values()):>13}"
        f"   ({100 * sum(right.values()) / total:.0f} % recognised)"
    )
    print("recognised by:")
    for name, count in caught.most_common():
        print(f"  {name:<44} {count:>3}")
    print("missed:")
    print("\n".join(misses) or "  none")


if __name__ == "__main__":
    main()
