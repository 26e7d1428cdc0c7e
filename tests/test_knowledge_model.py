"""The one knowledge model: a failure seen before a run and in it is one entry with one text, checks are registered
in one place and the loader holds entries to it, the knowledge is read once per process, severities are an enum."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import ROOT

from gpudoctor.errors import GpuDoctorError
from gpudoctor.knowledge import load_knowledge, match_findings, preflight
from gpudoctor.knowledge.registry import REGISTRY, check
from gpudoctor.knowledge.text import fill
from gpudoctor.model import Device, Finding, Outcome, ProbeResult, Report, Severity
from gpudoctor.report.codec import decode, encode

H100 = decode(json.loads((ROOT / "tests" / "fixtures" / "h100-suite-report.json").read_text()))
ENTRIES = {entry.id: entry for entry in load_knowledge()}
MAX_MESSAGE = (
    "Exception: At oss/modular/mojo/stdlib/std/gpu/host/device_context.mojo:3112:17: MAX doesn't support your "
    "current NVIDIA GPU driver. MAX requires a minimum driver version of 580 and CUDA version 13.0. Your driver "
    "version is 570.133.20"
)


def _failing(report: Report, probe: str, outcome: Outcome, text: str) -> Report:
    result = ProbeResult(
        id=f"{probe}/cuda", probe=probe, device=Device.CUDA, outcome=outcome, duration_s=1.0, message=text,
    )  # fmt: skip
    return dataclasses.replace(report, results=(result,), findings=())


def test_the_max_driver_floor_is_one_entry_seen_before_the_run_and_in_it_with_one_text() -> None:
    entry = ENTRIES["max-driver-floor"]
    assert entry.before is not None and entry.in_run is not None
    old = dataclasses.replace(H100.environment.driver, version="570.133.20", cuda_driver_version="12.8")
    environment = dataclasses.replace(H100.environment, driver=old)
    (before,) = [f for f in preflight(environment) if f.id == "driver-below-max-floor-preflight"]
    report = _failing(dataclasses.replace(H100, environment=environment), "dlpack", Outcome.FAIL, MAX_MESSAGE)
    (seen,) = [f for f in match_findings(report) if f.id == "max-driver-floor"]
    assert before.severity is Severity.NOTICE and seen.severity is Severity.PROBLEM  # read, then seen
    expected = "MAX 26.7.0 is reported to need NVIDIA driver 580 or newer; this driver is 570.133.20"
    assert before.title == seen.title == expected
    assert before.explanation == seen.explanation == entry.explanation and before.fix == seen.fix
    assert seen.runs == ("dlpack/cuda",)
    # the text alone (a field report, on a machine whose driver is new enough): the values MAX's message gives
    (quoted,) = [f for f in match_findings(_failing(H100, "dlpack", Outcome.FAIL, MAX_MESSAGE)) if "floor" in f.id]
    assert quoted.title == "MAX is reported to need NVIDIA driver 580 or newer; this driver is 570.133.20"


def test_the_nvml_mismatch_and_cudas_error_803_are_one_entry() -> None:
    stack = dataclasses.replace(H100.environment.stack, kernel_module="570.124.06", nvml_library="570.124")
    (before,) = [f for f in preflight(dataclasses.replace(H100.environment, stack=stack)) if "mismatch" in f.id]
    assert before.id == "nvml-driver-library-mismatch"
    text = "RuntimeError: CUDA driver error: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"
    (seen,) = match_findings(_failing(H100, "torch-env", Outcome.FAIL, text))
    assert seen.id == before.id and seen.explanation == before.explanation
    assert seen.title == "The loaded NVIDIA kernel module and the user-space driver library differ"
    assert not any(entry.id == "cuda-driver-mismatch" for entry in load_knowledge())


def test_torch_cuda_newer_than_the_driver_is_one_entry_with_the_pre_flight_id_kept() -> None:
    entry = ENTRIES["driver-older-than-torch-cuda"]
    assert entry.before is not None and entry.before.id == "torch-cuda-newer-than-driver-preflight"
    assert entry.over_report == ("torch_cuda_newer_than_driver",)
    ids = [e.before.id or e.id for e in load_knowledge() if e.before]
    assert len(ids) == len(set(ids)) and not set(ids) & (set(ENTRIES) - {e.id for e in load_knowledge() if e.before})


def _load(tmp_path: Path, text: str) -> None:
    path = tmp_path / "entries.toml"
    path.write_text(text)
    load_knowledge((path,))


def test_the_loader_holds_before_clauses_to_the_registered_checks(tmp_path: Path) -> None:
    base = '[[issue]]\nid = "x"\ntitle = "t"\nexplanation = "e"\nfix = "f"\n'
    with pytest.raises(GpuDoctorError, match=r"issue #1 \(x\): field 'check' names unknown check 'nope'"):
        _load(tmp_path, base + 'before.check = "nope"\n')
    with pytest.raises(GpuDoctorError, match=r"field 'predicates' names unknown predicate 'driver_floor'"):
        _load(tmp_path, base + 'over_report.predicates = ["driver_floor"]\n')  # a check, not a predicate
    with pytest.raises(GpuDoctorError, match=r"table row #1: unknown field 'colour'"):
        _load(tmp_path, base + 'before.check = "driver_floor"\n[[issue.before.table]]\ncolour = "red"\n')
    with pytest.raises(GpuDoctorError, match=r"is not a template"):
        _load(tmp_path, base.replace('title = "t"', 'title = "op[{...]"') + 'before.check = "bytecode_off"\n')
    with pytest.raises(GpuDoctorError, match=r"'stack_only' blames the stack and 'where_controls_pass' your code"):
        _load(tmp_path, base + 'in_run.stack_only = true\nin_run.where_controls_pass = true\n'
                              'in_run.evidence = [{ probe = "*", outcome = "fail" }]\n')  # fmt: skip
    with pytest.raises(ValueError, match="registered twice"):
        check("driver_floor")(REGISTRY["driver_floor"].environment)  # type: ignore[arg-type]


def test_the_knowledge_is_read_once_per_process() -> None:
    from gpudoctor.doctor import make_report

    assert load_knowledge() is load_knowledge()
    misses = load_knowledge.cache_info().misses
    for _ in range(3):
        make_report(H100.environment, H100.results)  # the TUI makes one per plan
    assert load_knowledge.cache_info().misses == misses


def test_severity_is_an_enum_whose_json_is_the_word_it_always_was() -> None:
    notice = Finding(id="x", title="t", evidence=(), explanation="e", fix="f", severity=Severity.NOTICE)
    assert not notice.is_problem and dataclasses.replace(notice, severity=Severity.PROBLEM).is_problem
    report = dataclasses.replace(H100, findings=(notice,))
    assert encode(report)["findings"][0]["severity"] == "notice"
    assert decode(encode(report)).findings[0].severity is Severity.NOTICE
    assert f"{notice.severity}: " == "notice: "  # as the text report and the TUI write it


def test_one_filler_leaves_out_what_nobody_gave() -> None:
    template = "MAX {installed?} needs {floor}; this driver (version {driver?}) is old"
    assert fill(template, {}) == "MAX needs unknown; this driver is old"
    assert fill(template, {"installed": "26.7", "floor": "580", "driver": "570"}) == (
        "MAX 26.7 needs 580; this driver (version 570) is old"
    )
    assert fill("op[{{...}}]", {}) == "op[{...}]"
