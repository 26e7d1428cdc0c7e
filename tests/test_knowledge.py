"""Known issues: the shipped file validates, bad entries are named, matching is pure, patches are verified."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from conftest import ROOT, run_cli, validate_report

from gpudoctor.errors import GpuDoctorError
from gpudoctor.knowledge import load_knowledge, match_findings
from gpudoctor.model import Device, Frame, Outcome, ProbeResult, Report
from gpudoctor.report.codec import decode

BASE = 'id = "x"\ntitle = "t"\nexplanation = "e"\nfix = "f"\n'


def _h100() -> Report:
    return decode(json.loads((ROOT / "tests" / "fixtures" / "h100-suite-report.json").read_text()))


def test_shipped_known_issues_are_valid_and_cover_the_seeds() -> None:
    issues = {i.id for i in load_knowledge()}
    assert len(issues) >= 10
    for expected in (
        "torch-lacks-float8-e8m0fnu",
        "max-torch-moved",
        "mojo1-kernel-migration",
        "host-code-indexes-device-tensor",
        "custom-op-library-not-a-package",
        "custom-op-output-not-preallocated",
        "custom-op-parameter-mismatch",
        "cuda-graph-kernel-args-not-kept-alive",
        "cuda-initialised-before-fork",
        "driver-older-than-torch-cuda",
    ):
        assert expected in issues


def test_recorded_h100_run_gives_only_notices() -> None:
    findings = {f.id: f for f in match_findings(_h100(), load_knowledge())}
    assert set(findings) == {"max-torch-moved", "cuda-initialised-before-fork"}
    assert findings["max-torch-moved"].evidence == ("max-import pass, bridge_module = 'max.experimental.torch'",)
    assert all(f.severity == "notice" for f in findings.values())


def test_seed_000_crash_matches_host_indexing_with_its_evidence() -> None:
    report = _h100()
    crash = ProbeResult(
        id="custom-op/cuda",
        probe="custom-op",
        device=Device.CUDA,
        outcome=Outcome.CRASH,
        duration_s=9.0,
        signal="SIGSEGV",
        frames=(Frame("/site/max/engine/api.py", 125, "_Model_execute", "0x7f"),),
    )
    report = dataclasses.replace(report, results=(*report.results, crash))
    (finding,) = [f for f in match_findings(report, load_knowledge()) if f.id == "host-code-indexes-device-tensor"]
    assert finding.evidence == ("custom-op/cuda crash (SIGSEGV), matching '_Model_execute'",)
    assert "foreach" in finding.fix


def test_version_constraints_and_predicates() -> None:
    report = _h100()
    env = report.environment
    old_driver = dataclasses.replace(env, driver=dataclasses.replace(env.driver, cuda_driver_version="12.4"))
    findings = {f.id: f for f in match_findings(dataclasses.replace(report, environment=old_driver), load_knowledge())}
    assert findings["driver-older-than-torch-cuda"].evidence[0].startswith("torch was built for CUDA 13.0")
    # max.torch moved only applies from MAX 26.7 on
    old_max = dataclasses.replace(env, packages={**env.packages, "max": "26.1.0.dev2026010305"})
    ids = {f.id for f in match_findings(dataclasses.replace(report, environment=old_max), load_knowledge())}
    assert "max-torch-moved" not in ids


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            'title = "t"\nexplanation = "e"\nfix = "f"\nin_run.evidence = [{probe = "p", outcome = "fail"}]',
            "issue #1: field 'id' must be a non-empty string",
        ),
        (
            BASE + 'in_run.evidence = [{probe = "p", outcome = "exploded"}]',
            "issue #1 (x): evidence #1: field 'outcome'",
        ),
        (
            BASE + 'in_run.evidence = [{probe = "p", outcome = "fail", pattern = "("}]',
            "issue #1 (x): evidence #1: field 'pattern' is not a valid regex",
        ),
        (
            BASE + 'affects = {torch = "<<2"}\nin_run.evidence = [{probe = "p", outcome = "fail"}]',
            "issue #1 (x): field 'affects.torch' is not a version specifier",
        ),
        (BASE, "issue #1 (x): needs at least one 'evidence' item"),
        (
            BASE + 'over_report.predicates = ["nope"]',
            "issue #1 (x): field 'predicates' names unknown predicate 'nope'",
        ),
        (
            BASE + 'severity = "meh"\nin_run.evidence = [{probe = "p", outcome = "fail"}]',
            "issue #1 (x): field 'severity' must be one of problem, notice",
        ),
        (
            BASE + "colour = 1\nin_run.evidence = []",
            "issue #1: unknown field 'colour'",
        ),
        (
            BASE + 'verdict.stands_alone = true\nin_run.evidence = [{probe = "p", outcome = "fail"}]',
            "issue #1 (x): field 'verdict.stands_alone' is for a support",
        ),
    ],
)
def test_malformed_known_issue_names_entry_and_field(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "known_issues.toml"
    path.write_text("[[issue]]\n" + entry + "\n")
    with pytest.raises(GpuDoctorError) as raised:
        load_knowledge((path,))
    assert str(path) in raised.value.message and message in raised.value.message


def test_float8_patch_is_verified_by_a_real_rerun(tmp_path: Path) -> None:
    """A torch without float8_e8m0fnu (removed before MAX's bridge is imported, as torch 2.6 lacks it):
    max-import fails, the finding names the patch, and the doctor's rerun with the patch passes."""
    (tmp_path / "sitecustomize.py").write_text("import torch\ndel torch.float8_e8m0fnu\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    completed = run_cli("--json", "--only", "max-import", "--device", "cpu", env=env)
    assert completed.returncode == 1  # the stack as it is still fails; the patch is advice, verified
    document = json.loads(completed.stdout)
    validate_report(document)
    results = {r["id"]: r for r in document["results"]}
    assert results["max-import"]["outcome"] == "fail"
    (finding,) = [f for f in document["findings"] if f["id"] == "torch-lacks-float8-e8m0fnu"]
    assert finding["patch"] == "float8-e8m0fnu-alias"
    assert finding["patch_verified"] is True
    assert finding["patch_note"].startswith(
        "fixed by patch float8-e8m0fnu-alias: max-import rerun with the patch: pass"
    )
    assert "GPUDOCTOR_PATCH_FILES=" in finding["patch_note"]


def test_max_aborts_when_its_runtime_is_tuned_from_the_environment() -> None:
    """Found here: with MODULAR_THREAD_BUSY_WAIT_US set, the real MAX aborts building graph_op's graph; the
    doctor names it (and shows the variable in the inventory)."""
    import json
    import os

    from conftest import run_cli

    env = {**os.environ, "MODULAR_THREAD_BUSY_WAIT_US": "1"}
    completed = run_cli("--json", "--only", "graph-op", "--device", "cpu", env=env)
    document = json.loads(completed.stdout)
    result = next(r for r in document["results"] if r["id"] == "graph-op/cpu")
    assert result["outcome"] == "crash" and result["signal"] == "SIGABRT", result["summary"]
    finding = next(f for f in document["findings"] if f["id"] == "max-runtime-env-context-abort")
    assert finding["runs"] == ["graph-op/cpu"]
    assert document["environment"]["env_vars"]["MODULAR_THREAD_BUSY_WAIT_US"] == "1"
