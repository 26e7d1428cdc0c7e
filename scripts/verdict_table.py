"""Over every `gpudoctor run` recorded on a GPU machine (issue 44's programs and issue 49's), replayed through the real
codec and today's knowledge: the class triage gave the run, how many problems its report has, the finding that leads
its verdict, what is folded into it, and whether any problem blames what is not at fault (the stack, a driver or a
package, for a program whose own fault it is).

    .venv/bin/python scripts/verdict_table.py            # the table, then the totals
    .venv/bin/python scripts/verdict_table.py --markdown # the same as a Markdown table
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = [
    ROOT / "tests" / "fixtures" / d
    for d in ("h100/classes", "h100/runs", "h100/verdicts", "h200x2-ranks", "h100/launches", "h200x2-launches")
]
# Findings that blame the stack (MAX, a driver, a package): never right for a program's own fault.
STACK_BLAME = frozenset({"max-cuda-illegal-address", "gpu-fault-in-the-stack-too", "torch-driver-too-old",
                         "cuda-runtime-newer-than-driver", "control-kernel-fails-too"})  # fmt: skip
# Recordings of a program whose failure comes from the stack itself, where blaming it is right.
STACK_AT_FAULT = frozenset({"numba_oob_write-numpy2.5"})


def rows() -> list[dict[str, object]]:
    from gpudoctor.knowledge import load_knowledge, match_findings
    from gpudoctor.report.codec import decode

    found = []
    for folder in RECORDED:
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            report = decode(json.loads(path.read_text()))
            run = report.result("reproducer")
            if run is None:
                continue
            findings = match_findings(report, load_knowledge())
            problems = [f for f in findings if f.is_problem and f.id != "bytecode-never-cached"]
            folded = [f.id for f in findings if f.part_of]
            blame = sorted({f.id for f in problems} & STACK_BLAME) if path.stem not in STACK_AT_FAULT else []
            found.append({
                "program": f"{folder.name}/{path.stem}", "outcome": run.outcome.value,
                "class": run.details.get("failure_class", "-"), "problems": len(problems),
                "leads": problems[0].id if problems else "-", "folded": len(folded), "blames": ",".join(blame) or "-",
            })  # fmt: skip
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    table = rows()
    columns = ["program", "outcome", "class", "problems", "leads", "folded", "blames"]
    if args.markdown:
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for row in table:
            print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    else:
        widths = {c: max(len(c), *(len(str(r[c])) for r in table)) for c in columns}
        print("  ".join(c.ljust(widths[c]) for c in columns))
        for row in table:
            print("  ".join(str(row[c]).ljust(widths[c]) for c in columns))
    failing = [r for r in table if r["outcome"] != "pass" or r["problems"]]
    one = sum(1 for r in failing if r["problems"] == 1)
    blamed = sum(1 for r in table if r["blames"] != "-")
    print(f"\n{len(table)} recorded runs; {len(failing)} with a failure or a problem: {one} with exactly one problem; "
          f"verdicts blaming what is not at fault: {blamed}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
