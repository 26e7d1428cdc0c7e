"""Nothing unexplained: every failure, crash or timeout in every environment the sweeps and the H100 examined
(their real reports, kept as fixtures) is explained by a known issue with evidence, a version range and a fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TESTS, validate_report

from gpudoctor.knowledge import load_knowledge, match_findings
from gpudoctor.model import Report
from gpudoctor.report.codec import decode

FIXTURES = TESTS / "fixtures"
GPU_SWEEP = FIXTURES / "gpu-sweep"  # every MAX release on the H100, six on the H200 (sweep --find-links --offline)
RECORDED = [
    *sorted((FIXTURES / "sweep-cpu").glob("*.json")),
    *sorted((FIXTURES / "h100").glob("*.json")),
    *sorted(GPU_SWEEP.glob("*/*.report.json")),
]
KNOWLEDGE = load_knowledge()
# the known issues: every entry but the general ones (a class of failure, `patterns`: explained and fixed by class)
ISSUES = {issue.id: issue for issue in KNOWLEDGE if not (issue.in_run and issue.in_run.patterns)}


def _report(path: Path) -> Report:
    document = json.loads(path.read_text())
    validate_report(document)
    return decode(document)


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_every_problem_in_a_recorded_environment_is_explained(path: Path) -> None:
    report = _report(path)
    findings = match_findings(report, KNOWLEDGE)
    explained = {run_id for f in findings if f.severity == "problem" for run_id in f.runs}
    for result in report.results:
        if result.outcome.is_problem:
            assert result.id in explained, f"{path.name}: {result.id} {result.outcome.value}: {result.summary}"
    for finding in findings:
        issue = ISSUES.get(finding.id)
        if issue is None:  # a mechanism (mechanisms.toml): explained and fixed by class
            assert finding.fix and finding.explanation and finding.evidence
            continue
        evidence = issue.in_run.evidence if issue.in_run else ()
        assert issue.fix and issue.explanation and (issue.affects or issue.severity == "notice" or evidence)


def test_the_recorded_grid_shows_the_transitions_the_knowledge_base_names() -> None:
    """The explanations are not made up: the releases they name are where the recorded outcomes change."""
    outcomes: dict[tuple[str, str, str], str] = {}
    summaries: dict[tuple[str, str, str], str] = {}
    for path in RECORDED:
        report = _report(path)
        torch_line = ".".join(str(report.environment.packages.get("torch")).split(".")[:2])  # 2.13, 2.6
        where = "h100" if path.parent.name == "h100" else torch_line
        for result in report.results:
            key = (where, str(report.environment.packages.get("max")), result.id)
            outcomes[key], summaries[key] = result.outcome.value, result.summary
    assert outcomes[("2.13", "25.3.0", "max-import")] == "fail"  # torch 2.13: no torch plugin for it in 25.3
    assert outcomes[("2.6", "25.3.0", "max-import")] == "pass"  # torch 2.6: plugin shipped ...
    assert outcomes[("2.6", "25.3.0", "custom-op/cpu")] == "skipped"  # ... but no CustomOpLibrary yet
    assert outcomes[("2.13", "25.4.0", "custom-op-params/cpu")] == "fail"  # the default-parameter bug
    assert outcomes[("2.6", "25.4.0", "custom-op-params/cpu")] == "fail"
    assert outcomes[("2.13", "25.5.0", "custom-op-params/cpu")] == "pass"
    assert outcomes[("h100", "25.4.0", "custom-op-params/cuda")] == "fail"  # the same bug on the GPU
    assert outcomes[("h100", "26.1.0", "custom-op-params/cuda")] == "pass"
    assert outcomes[("2.13", "25.4.0", "graph-op/cpu")] == "skipped"  # no graph_op before 25.5
    assert outcomes[("2.13", "25.5.0", "graph-op/cpu")] == "pass"
    assert outcomes[("2.6", "25.6.1", "custom-op/cpu")] == "pass"  # torch 2.6 is fine until MAX 25.7 ...
    assert outcomes[("2.6", "25.7.0", "custom-op/cpu")] == "fail"  # ... which needs float8_e8m0fnu
    carried = summaries[("2.6", "26.1.0", "custom-op-params/cpu")]
    assert outcomes[("2.6", "26.1.0", "custom-op-params/cpu")] == "pass"
    assert carried.startswith("with patch float8-e8m0fnu-alias: ")  # what works once the patch is in
    assert outcomes[("h100", "26.1.0", "kernel/cuda")] == "crash"  # seed 000 on its own era ...
    assert outcomes[("h100", "26.1.0", "custom-op/cuda")] == "pass"  # ... next to a passing control


def _gpu_outcomes(folder: str) -> dict[tuple[str, str], str]:
    outcomes = {}
    for path in sorted((GPU_SWEEP / folder).glob("*.report.json")):
        report = _report(path)
        for result in report.results:
            outcomes[(str(report.environment.packages.get("max")), result.id)] = result.outcome.value
    return outcomes


def test_the_gpu_grid_every_max_release_on_the_h100_and_six_on_the_h200() -> None:
    """The GPU half of the map, from real runs: 13 releases on the H100, 6 on the H200 (the releases around the
    CPU grid's transitions), each cell's GPU and driver as recorded; the same transitions on both GPUs as on the
    CPU — max-import needs a torch plugin MAX 25.3 does not ship for torch 2.11, the default-parameter bug in 25.4
    — and one H100 failure that did not come back (26.2, custom-op-params/cuda, "Failed to compile the model" once
    with four releases compiling at once; 3 of 3 alone passed, as on the H200)."""
    h100, h200 = _gpu_outcomes("h100"), _gpu_outcomes("h200")
    assert len({m for m, _ in h100}) == 13 and len({m for m, _ in h200}) == 6
    for outcomes in (h100, h200):
        assert outcomes[("25.3.0", "max-import")] == "fail"
        assert outcomes[("25.4.0", "custom-op-params/cuda")] == "fail"
        assert outcomes[("25.4.0", "custom-op/cuda")] == "pass"
        assert outcomes[("25.5.0", "custom-op-params/cuda")] == "pass"
        assert outcomes[("25.5.0", "graph-op/cuda")] == "pass"
    assert all(outcome == "pass" for (m, _), outcome in h100.items() if m not in ("25.3.0", "25.4.0", "26.2.0"))
    assert h100[("26.2.0", "custom-op-params/cuda")] == "fail" and h200[("26.2.0", "custom-op-params/cuda")] == "pass"
    rerun = [_report(p) for p in sorted((GPU_SWEEP / "h100-rerun").glob("*.report.json"))]
    assert len(rerun) == 3 and all(r.result("custom-op-params/cuda").outcome.value == "pass" for r in rerun)  # type: ignore[union-attr]
    for path in sorted(GPU_SWEEP.glob("h*/*.report.json")):
        gpus = _report(path).environment.driver.gpus
        assert gpus and gpus[0].name in ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
