"""The JUnit report, read back with a real JUnit parser (junitparser): recorded real reports with passes,
crashes, failures and skips, and a real doctor run writing --junit beside its JSON."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT, SYNTHETIC, run_cli
from junitparser import Error, Failure, JUnitXml, Skipped

from gpudoctor.junit import to_junit
from gpudoctor.model import Report

FIXTURES = ROOT / "tests" / "fixtures"


def _parse(tmp_path: Path, text: str) -> JUnitXml:
    path = tmp_path / "report.xml"
    path.write_text(text, encoding="utf-8")
    return JUnitXml.fromfile(str(path))


def test_every_run_is_a_test_case_with_its_outcome(tmp_path: Path) -> None:
    report = Report.from_dict(json.loads((FIXTURES / "h100-kernel-cpu-zeros.json").read_text()))
    xml = _parse(tmp_path, to_junit(report))
    (suite,) = list(xml)
    cases = {case.name: case for case in suite}
    assert set(cases) == {r.id for r in report.results}
    assert cases["kernel/cuda"].is_passed and cases["custom-op/cpu"].is_passed
    (failure,) = cases["kernel/cpu"].result
    assert isinstance(failure, Failure)
    assert "differs from your reference" in failure.message
    assert "fix (kernel-differs-from-reference):" in failure.message  # the finding that names this run
    assert "reproduce:" in failure.text
    assert suite.tests == len(cases) and suite.failures == 1 and suite.errors == 0


def test_a_crash_is_an_error_with_its_signal_and_step(tmp_path: Path) -> None:
    report = Report.from_dict(json.loads((FIXTURES / "h100-kernel-host-indexing.json").read_text()))
    (suite,) = list(_parse(tmp_path, to_junit(report)))
    crashed = [case for case in suite if case.name.startswith("kernel/cuda")]
    (error,) = crashed[0].result
    assert isinstance(error, Error) and error.type == "SIGSEGV"
    assert "last step: call copy_first on cuda" in error.message


def test_the_doctor_writes_junit_beside_json_with_skips_and_crashes(tmp_path: Path) -> None:
    """A real run of the synthetic probes (a segfault, an abort, a skip, a flood of invalid UTF-8 ...)."""
    junit = tmp_path / "out" / "gpudoctor.xml"
    completed = run_cli("--json", "--probes", str(SYNTHETIC), "--jobs", "4", "--timeout", "20", "--junit", str(junit))
    document = json.loads(completed.stdout)
    (suite,) = list(JUnitXml.fromfile(str(junit)))
    cases = {case.name: case for case in suite}
    assert set(cases) >= {r["id"] for r in document["results"]}
    outcome = {r["id"]: r["outcome"] for r in document["results"]}
    for run_id, case in cases.items():
        if run_id not in outcome:
            continue
        kinds = {type(r) for r in case.result}
        expected = {"pass": set(), "skipped": {Skipped}, "interrupted": {Skipped}, "crash": {Error},
                    "fail": {Failure}, "timeout": {Failure}}[outcome[run_id]]  # fmt: skip
        assert kinds == expected, (run_id, outcome[run_id], kinds)
    assert cases["segfaults"].result[0].type == "SIGSEGV"
    assert junit.stat().st_mode & 0o777 == 0o644
