"""Reruns go through the doctor's pipeline (``doctor.rerun``), as the TUI's `r` does: prerequisites, what
builds on the rerun, findings and patch verification behave as in a full run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SYNTHETIC, contradicting_reasons

from gpudoctor.doctor import DoctorOptions, diagnose, rerun
from gpudoctor.model import Device, Outcome
from gpudoctor.report.codec import decode
from gpudoctor.report.text import to_markdown, to_text


def test_a_rerun_runs_what_builds_on_it_and_keeps_the_rest() -> None:
    options = DoctorOptions(probe_dir=SYNTHETIC, only=("after-segfault", "raises"), jobs=2)
    first = diagnose(options)
    outcomes = {r.id: r.outcome for r in first.results}
    assert outcomes == {"segfaults": Outcome.CRASH, "after-segfault": Outcome.SKIPPED, "raises": Outcome.FAIL}
    started: list[str] = []
    again = rerun(options, first, ["segfaults"], on_start=lambda run: started.append(run.run_id))
    assert sorted(started) == ["after-segfault", "segfaults"]  # what builds on it runs again (speculatively)
    skipped = again.result("after-segfault")
    assert skipped is not None and skipped.skip_reason is not None
    assert skipped.skip_reason.startswith("prerequisite segfaults crashed")
    assert again.result("raises") == first.result("raises")  # kept as it was
    assert again.result("segfaults").outcome is Outcome.CRASH  # type: ignore[union-attr]
    assert again.result("segfaults").duration_s != first.result("segfaults").duration_s  # type: ignore[union-attr]
    assert [f.id for f in again.findings] == [f.id for f in first.findings]


def test_a_rerun_verifies_the_patch_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch without float8_e8m0fnu (as torch 2.6): after `r` the finding still carries its verified patch."""
    (tmp_path / "sitecustomize.py").write_text("import torch\ndel torch.float8_e8m0fnu\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the probes inherit it
    options = DoctorOptions(only=("max-import",), jobs=2)
    first = diagnose(options)
    again = rerun(options, first, ["max-import"])
    for report in (first, again):
        (finding,) = [f for f in report.findings if f.id == "torch-lacks-float8-e8m0fnu"]
        assert finding.runs == ("max-import",)
        assert finding.patch_verified is True
        assert finding.patch_note is not None and finding.patch_note.startswith("fixed by patch float8-e8m0fnu-alias")


def test_rerunning_an_unknown_run_is_a_usage_error() -> None:
    from gpudoctor.errors import GpuDoctorError

    options = DoctorOptions(probe_dir=SYNTHETIC, only=("raises",))
    report = diagnose(options)
    with pytest.raises(GpuDoctorError, match="cannot rerun nope: not in this plan"):
        rerun(options, report, ["nope"])


def test_a_verified_patch_carries_the_run_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch without float8_e8m0fnu: max-import fails, the patch is verified, and everything that failure kept from
    running, directly or through runs it skipped, runs on with the patch — the run shows that custom ops work
    eagerly, under torch.compile, through graph_op and with defaulted parameters once the fix is in."""
    (tmp_path / "sitecustomize.py").write_text("import torch\ndel torch.float8_e8m0fnu\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    options = DoctorOptions(
        only=("custom-op-compiled", "custom-op-via-graph", "custom-op-params", "custom-op-source"),
        devices=(Device.CPU,),
        jobs=2,
    )
    report = diagnose(options)
    results = {r.id: r for r in report.results}
    assert results["max-import"].outcome is Outcome.FAIL  # the stack as it is
    unblocked = ["custom-op-source", "custom-op/cpu"]
    unblocked += ["custom-op-compiled/cpu", "custom-op-via-graph/cpu", "custom-op-params/cpu"]  # two levels down
    assert sorted(results) == sorted(["torch-env/cpu", "max-import", "dlpack/cpu", *unblocked])
    for run_id in unblocked:
        carried = results[run_id]
        assert carried.outcome is Outcome.PASS, (run_id, carried.summary)
        assert carried.summary.startswith("with patch float8-e8m0fnu-alias: ")
        assert carried.details["patches_applied"] == ["float8.py"]
    (finding,) = [f for f in report.findings if f.id == "torch-lacks-float8-e8m0fnu"]
    assert finding.patch_verified is True
    assert report.exit_code == 1
    assert contradicting_reasons(report) == []
    assert f"with a verified patch applied (the stack with the fix in, not as it is): {', '.join(unblocked)}" in (
        to_text(report)
    )
    assert "; 5 of them with a verified patch applied" in to_markdown(report).splitlines()[2]


def test_runs_left_skipped_after_a_patch_name_the_outcomes_the_report_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same torch, and a DLPack probe that fails: graph_op and the custom-op runs need DLPack, so they stay
    skipped after the float8 patch — and their reasons now name the outcome the report shows (DLPack failed), not
    an outcome of the first pass that the patched run replaced."""
    (tmp_path / "sitecustomize.py").write_text(
        "import torch\ndel torch.float8_e8m0fnu\n"
        "import os, sys\n"
        "if os.path.basename(sys.argv[0]) == 'dlpack.py':\n"
        "    raise SystemExit('DLPack is broken on purpose')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    report = diagnose(DoctorOptions(only=("custom-op-params", "custom-op-source"), devices=(Device.CPU,), jobs=2))
    results = {r.id: r for r in report.results}
    assert results["max-import"].outcome is Outcome.FAIL and results["dlpack/cpu"].outcome is Outcome.FAIL
    assert results["custom-op-source"].outcome is Outcome.PASS  # needs only max-import: the patch lets it run
    assert results["custom-op/cpu"].outcome is Outcome.SKIPPED
    assert results["custom-op/cpu"].skip_reason == "prerequisite dlpack/cpu failed"
    assert results["custom-op-params/cpu"].skip_reason == (
        "prerequisite custom-op/cpu was skipped, because dlpack/cpu failed"
    )
    assert contradicting_reasons(report) == []


def test_the_recorded_torch_2_6_cell_carries_every_run_the_float8_patch_unblocked() -> None:
    """A real sweep cell (torch 2.6.0 from the registry, MAX 26.7.0, this machine's CPU), recorded with this code:
    max-import fails as the stack is; everything it kept from running ran with the patch and passed."""
    import json

    from conftest import TESTS

    document = json.loads((TESTS / "fixtures" / "sweep-cpu" / "py3.11_torch-2.6.0_max-26.7.0.json").read_text())
    report = decode(document)
    assert report.environment.packages["torch"] == "2.6.0"
    assert report.result("max-import").outcome is Outcome.FAIL  # type: ignore[union-attr]
    carried = [r.id for r in report.results if r.patched]
    assert carried == [
        "graph-op/cpu", "custom-op-source", "custom-op/cpu",
        "custom-op-compiled/cpu", "custom-op-via-graph/cpu", "custom-op-params/cpu",
    ]  # fmt: skip
    assert all(report.result(i).outcome is Outcome.PASS for i in carried)  # type: ignore[union-attr]
    assert [r.id for r in report.results if r.outcome is Outcome.SKIPPED and r.device is not Device.CUDA] == []
    assert contradicting_reasons(report) == []
