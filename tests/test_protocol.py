"""The probe protocol contract: the harness (which runs by hand, without gpudoctor) and the runner speak the
same protocol, from one source; every detail key a probe publishes or the doctor reads is declared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SYNTHETIC

from gpudoctor import protocol
from gpudoctor.kernel.subject import kernel_probe
from gpudoctor.knowledge import load_knowledge
from gpudoctor.model import Device, Outcome, ProbeSpec, Report
from gpudoctor.patches import patch_file
from gpudoctor.report.codec import decode
from gpudoctor.suite.catalog import default_probe_dir, load_catalog
from gpudoctor.suite.runner import ProbeInvocation, classify, read_events

SPECS = {spec.id: spec for spec in (*load_catalog(default_probe_dir()), kernel_probe(default_probe_dir()))}
FIXTURES = ROOT / "tests" / "fixtures"


def test_the_probes_copy_of_the_protocol_is_the_doctors() -> None:
    source = (ROOT / "src" / "gpudoctor" / "protocol.py").read_bytes()
    copy = (ROOT / "probes" / "_protocol.py").read_bytes()
    assert copy == source, "probes/_protocol.py differs: cp src/gpudoctor/protocol.py probes/_protocol.py"


def _run_by_hand(script: Path, tmp_path: Path, extra_env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The probe as a user runs it, in a bare interpreter that cannot import gpudoctor, with the side channel on."""
    result_file = tmp_path / "events.jsonl"
    env = {"PATH": os.environ["PATH"], protocol.RESULT_FILE_ENV: str(result_file), **(extra_env or {})}
    completed = subprocess.run(
        [sys.executable, "-E", "-s", "-S", str(script), "--device", "cpu"], env=env, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    assert "No module named 'gpudoctor'" not in completed.stderr
    return read_events(result_file)


def test_what_the_harness_writes_is_what_the_runner_reads(tmp_path: Path) -> None:
    events = _run_by_hand(SYNTHETIC / "passes.py", tmp_path)
    kinds = [e["event"] for e in events]
    assert kinds == [protocol.EVENT_STEP, protocol.EVENT_RESULT, protocol.EVENT_STEP]
    assert {k: v for k, v in events[-1].items() if k != "t"} == {
        k: v for k, v in protocol.step_event(protocol.SHUTDOWN_STEP).items() if k != "t"
    }
    stamps = [e["t"] for e in events]
    assert stamps == sorted(stamps)  # CLOCK_MONOTONIC, shared with the runner: each step can be timed
    result = events[1]
    assert result["status"] in protocol.STATUSES
    assert set(result) - {"event", "status"} <= set(protocol.RESULT_FIELDS)
    spec = ProbeSpec(id="passes", script="passes.py", title="passes", devices=(Device.CPU,), details=("answer",))
    invocation = ProbeInvocation(spec, Device.CPU, sys.executable, SYNTHETIC, 60)
    classified = classify(
        invocation, returncode=0, timed_out=False, duration_s=0.1, events=events, stdout="", stderr=""
    )
    assert classified.outcome is Outcome.PASS and classified.details == {"answer": 2}
    assert classified.last_step == "add numbers"


def test_a_patch_is_applied_through_the_protocol_and_recorded(tmp_path: Path) -> None:
    patch = tmp_path / "note_patch.py"
    patch.write_text("import os\nos.environ['PATCHED'] = '1'\n")
    events = _run_by_hand(SYNTHETIC / "passes.py", tmp_path, {protocol.PATCH_FILES_ENV: str(patch)})
    assert events[0]["event"] == protocol.EVENT_STEP and events[0]["name"] == "apply patch note_patch.py"
    assert events[-2]["details"][protocol.DetailKey.PATCHES_APPLIED] == ["note_patch.py"]
    assert patch_file("float8-e8m0fnu-alias").is_file()


def test_every_detail_key_the_doctor_reads_is_declared_by_a_probe() -> None:
    declared = {key for spec in SPECS.values() for key in spec.details} | set(protocol.HARNESS_DETAILS)
    read_by_code = {v for k, v in vars(protocol.DetailKey).items() if k.isupper()}
    assert read_by_code <= declared
    for issue in load_knowledge():
        for evidence in issue.in_run.evidence if issue.in_run else ():
            if evidence.probe == "*":
                assert not evidence.detail, issue.id  # detail keys belong to one probe
                continue
            spec = SPECS[evidence.probe.split("/")[0]]
            assert set(evidence.detail) <= set(spec.details), (issue.id, evidence.probe, spec.details)


def _undeclared(report: Report) -> list[tuple[str, str]]:
    allowed = set(protocol.HARNESS_DETAILS)
    return [
        (result.id, key)
        for result in report.results
        for key in result.details
        if result.probe in SPECS and key not in set(SPECS[result.probe].details) | allowed
    ]


@pytest.mark.parametrize(
    "fixture",
    [
        "cpu-max26.7-report.json",
        "h100-suite-report.json",
        "h100-suite-report-cached.json",
        "h100-kernel-host-indexing.json",
        "h200x2-kernel-control.json",
    ],
)
def test_recorded_runs_publish_only_declared_detail_keys(fixture: str) -> None:
    """The recorded GPU runs cover the probes that cannot run here (cffi, fork, cuda graphs)."""
    report = decode(json.loads((FIXTURES / fixture).read_text()))
    assert _undeclared(report) == []


def test_a_real_run_publishes_only_declared_detail_keys(default_suite: tuple[int, dict[str, Any]]) -> None:
    _, document = default_suite
    assert _undeclared(decode(document)) == []
