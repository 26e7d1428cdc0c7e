"""One kernel, one verdict (issue 39): a kernel that never writes its output, one that adds into it, and one whose
CPU threads race are each named the same way every time, told apart by experiment (other inputs, other starting
contents), not by what the buffer MAX 26.7's CPU path hands the op happened to hold. Real MAX, real processes,
several at once; `scripts/kernel_verdicts.py` repeats it 20 times in a row and prints the tally."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, TESTS, run_cli, validate_report

KERNELS = TESTS / "kernels"
# kernel folder, op, the detail its run must carry, the one finding, and what the evidence says
CASES = [
    ("never_writes", "conv1d_stub", "ignores_inputs", "kernel-output-ignores-inputs", "does not follow the inputs"),
    ("adds_into", "add_into", "accumulates_into_output", "kernel-accumulates-into-output", "gave 2 times the result"),
    ("races", "racy_copy", "not_repeatable", "kernel-not-repeatable", "changed from call to call while the output"),
]
TENSOR = {"shape": [4, 4], "dtype": "float32"}
CALLS = json.dumps([{"op": "OP", "outputs": [TENSOR], "inputs": [TENSOR]}])


def _probe_detail(folder: str, op: str, result_file: Path) -> tuple[str, dict[str, Any]]:
    """Run the kernel probe by hand (as the report's reproduce command does) and read its result's details."""
    command = [sys.executable, str(ROOT / "probes" / "kernel.py"), "--device", "cpu"]
    command += ["--package", str(KERNELS / folder), "--calls", CALLS.replace("OP", op)]
    env = {**os.environ, "GPUDOCTOR_RESULT_FILE": str(result_file)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode != 0, done.stdout
    events = [json.loads(line) for line in result_file.read_text().splitlines() if line.strip()]
    result = next(e for e in events if e.get("event") == "result")
    return str(result.get("message", "")), dict(result.get("details") or {})


@pytest.mark.parametrize(("folder", "op", "detail", "finding", "evidence"), CASES, ids=[c[0] for c in CASES])
def test_each_kernel_gets_one_verdict_in_every_process(
    folder: str, op: str, detail: str, finding: str, evidence: str, tmp_path: Path
) -> None:
    completed = run_cli("kernel", str(KERNELS / folder), "--op", op, "--shape", "4x4", "--device", "cpu", "--json")
    report = json.loads(completed.stdout)
    validate_report(report)
    run = next(r for r in report["results"] if r["id"] == "kernel/cpu")
    assert completed.returncode == 1 and run["outcome"] == "fail" and run["details"].get(detail) is True
    assert evidence in run["summary"]
    assert [f["id"] for f in report["findings"] if f["severity"] == "problem"] == [finding]
    # Three more processes at once, the package compiled and cached by then: the same verdict in each.
    with ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda n: _probe_detail(folder, op, tmp_path / f"result-{n}.jsonl"), range(3)))
    for message, details in runs:
        verdicts = {k for k in ("ignores_inputs", "accumulates_into_output", "not_repeatable", "output_unwritten",
                                "output_all_zero") if details.get(k)}  # fmt: skip
        assert verdicts == {detail}, message
        assert evidence in message


def test_no_fix_advises_barriers_or_tolerance_without_the_evidence_for_them() -> None:
    """Only the finding whose evidence is a race (same inputs, other outputs, while the output follows the inputs)
    advises synchronising threads; only the one whose evidence is a rounding-sized difference advises setting a
    tolerance (others say that loosening it would hide the fault)."""
    from gpudoctor.knowledge import load_knowledge

    fixes = {entry.id: " ".join([entry.fix, *entry.fixes.values()]).lower() for entry in load_knowledge()}
    assert {i for i, fix in fixes.items() if "barrier" in fix or "between threads" in fix} == {"kernel-not-repeatable"}
    advising = {i for i, fix in fixes.items() if ("rtol" in fix or "tolerance" in fix) and "would hide" not in fix}
    assert advising == {"kernel-differs-slightly"}
