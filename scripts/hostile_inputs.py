"""Run every hostile input of tests/hostile_cases.py as a real gpudoctor process and write the table of what the
doctor answered to docs/hostile-inputs.md (tests/test_hostile.py keeps it in step with the cases).

    .venv/bin/python scripts/hostile_inputs.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from hostile_cases import CASES, can_mount, expand, prepare, run_case  # noqa: E402

HEADER = """# Hostile and careless inputs

Every input below was run as a real `gpudoctor` process by `scripts/hostile_inputs.py` (the cases are
`tests/hostile_cases.py`; `tests/test_hostile.py` asserts each answer). `$D` is a scratch folder holding bad
interpreters (shell scripts that print something else, nothing, 50 MB, or crash; one posing as PyPy, one as
Python 2), FIFOs, sparse 100 MB files, broken TOML and JSON. Read-only and full disks are real tmpfs mounts in
a private mount namespace. Exit status: 0 healthy, 1 a problem found, 2 bad input or usage.

| case | input tried | command | exit | what the doctor answers |
| --- | --- | --- | --- | --- |
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("\x1b", "\\x1b")


def main() -> int:
    mounts = can_mount()
    lines = [HEADER]
    with tempfile.TemporaryDirectory(prefix="gpudoctor-hostile-") as folder:
        d = Path(folder)
        prepare(d)
        for case in CASES:
            answer = run_case(case, d, mounts)
            shown_args = [expand(a, d).replace(str(d), "$D").replace(str(ROOT), ".") for a in case.args]
            shown_args = [a if len(a) <= 40 else a[:20] + f"...({len(a)} chars)" for a in shown_args]
            command = "gpudoctor " + " ".join(shown_args)
            if answer is None:
                exit_text, said = "skipped", "(needs root with unshare to make the file system)"
            else:
                exit_text = str(answer.exit)
                said = answer.stderr.strip() if answer.exit == 2 else (answer.stdout + answer.stderr).strip()
                said = said.splitlines()[-1] if said else ""
                said = said.replace(str(d), "$D").replace(str(ROOT), ".")[:240]
                if answer.exit != case.exit:
                    print(f"{case.id}: exit {answer.exit}, expected {case.exit}: {said}", file=sys.stderr)
            lines.append(f"| `{case.id}` | {_cell(case.tried)} | `{_cell(command)}` | {exit_text} | {_cell(said)} |\n")
    (ROOT / "docs" / "hostile-inputs.md").write_text("".join(lines))
    print(f"wrote docs/hostile-inputs.md ({len(CASES)} cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
