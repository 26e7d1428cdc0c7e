"""Field reports as known issues: each entry matches the exact error text its public report quotes (these are
"text only": the driver, GPU or package that fails that way does not exist here; entries shown for real are
tested where they were shown: the probes, the pre-flight checks, the recorded H100 runs)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from conftest import ROOT

from gpudoctor.knowledge import load_knowledge, match_findings
from gpudoctor.model import Device, Frame, Outcome, ProbeResult, Report
from gpudoctor.report.codec import decode

ISSUES = {issue.id: issue for issue in load_knowledge()}
H100 = decode(json.loads((ROOT / "tests" / "fixtures" / "h100-suite-report.json").read_text()))

# entry id -> (probe, outcome, the error text exactly as the report quotes it)
QUOTED = {
    "torch-driver-too-old": (
        "torch-env", Outcome.FAIL,
        "RuntimeError: The NVIDIA driver on your system is too old (found version 12020). Please update your GPU "
        "driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx",
    ),
    "torch-arch-not-in-build": (
        "torch-env", Outcome.FAIL,
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
        "installation. The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 "
        "sm_90.\nRuntimeError: CUDA error: no kernel image is available for execution on the device",
    ),
    "nvml-driver-library-mismatch": (
        "torch-env", Outcome.FAIL, "Failed to initialize NVML: Driver/library version mismatch"
    ),
    "max-driver-floor": (
        "dlpack", Outcome.FAIL,
        "Exception: At oss/modular/mojo/stdlib/std/gpu/host/device_context.mojo:3112:17: MAX doesn't support your "
        "current NVIDIA GPU driver. MAX requires a minimum driver version of 580 and CUDA version 13.0. Your driver "
        "version is 570.",
    ),
    "mojo-ptxas-arch-dropped": (
        "custom-op", Outcome.FAIL, "error: ptxas fatal   : Value 'sm_52' is not defined for option 'gpu-name'"
    ),
    "mojo-unknown-gpu-arch": (
        "custom-op", Outcome.FAIL,
        "info.mojo:2104:5: note: constraint failed: Unknown GPU architecture detected. Supported GPU architectures: "
        "NVIDIA: sm_52",
    ),
    "nvjitlink-symbol-mismatch": (
        "torch-env", Outcome.FAIL,
        "ImportError: /venv/lib/python3.11/site-packages/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: "
        "undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12",
    ),
    "cuda-python-13-namespace": (
        "kernel", Outcome.FAIL, "ImportError: cannot import name 'cuda' from 'cuda' (unknown location)"
    ),
    "cuda-core-experimental-removed": (
        "cuda-graph-arg-lifetime", Outcome.FAIL, "ModuleNotFoundError: No module named 'cuda.core.experimental'"
    ),
    "dlpack-keyword-skew": (
        "dlpack", Outcome.FAIL, "TypeError: Tensor.__dlpack__() got an unexpected keyword argument 'dl_device'"
    ),
    "max-cuda-illegal-address": (
        "graph-op", Outcome.FAIL, "RuntimeError: CUDA call failed: CUDA_ERROR_ILLEGAL_ADDRESS"
    ),
    "cuda-core-1x-renamed-calls": (
        "cuda-graph-arg-lifetime", Outcome.FAIL,
        "AttributeError: 'System' object has no attribute 'get_driver_version'",
    ),
    "mojo-fn-removed-format": (
        "kernel", Outcome.FAIL, "error: cannot format repro.mojo: Cannot parse: 1:3: fn bar():"
    ),
}  # fmt: skip


def _report_with(probe: str, outcome: Outcome, text: str, **changes: object) -> Report:
    result = ProbeResult(
        id=f"{probe}/cuda", probe=probe, device=Device.CUDA, outcome=outcome, duration_s=1.0,
        summary=text.splitlines()[0][:200], message=text, stderr_tail=text, **changes,  # type: ignore[arg-type]
    )  # fmt: skip
    return dataclasses.replace(H100, results=(result,), findings=())


@pytest.mark.parametrize("issue_id", sorted(QUOTED))
def test_each_field_report_matches_its_quoted_error(issue_id: str) -> None:
    probe, outcome, text = QUOTED[issue_id]
    findings = {f.id: f for f in match_findings(_report_with(probe, outcome, text), list(ISSUES.values()))}
    assert issue_id in findings, sorted(findings)
    assert findings[issue_id].runs == (f"{probe}/cuda",)
    assert ISSUES[issue_id].shown == "text only"


def test_the_customop_segfault_report_matches_a_crash_in_model_execute() -> None:
    crash = _report_with(
        "custom-op", Outcome.CRASH, "Fatal Python error: Segmentation fault", signal="SIGSEGV",
        frames=(Frame("/site/max/engine/api.py", 125, "_Model_execute"),),
    )  # fmt: skip
    older = dataclasses.replace(crash, environment=dataclasses.replace(
        crash.environment, packages={**crash.environment.packages, "max": "26.1.0"}))  # fmt: skip
    assert "max-customop-library-cuda-segv" in {f.id for f in match_findings(older, list(ISSUES.values()))}
    assert "max-customop-library-cuda-segv" not in {f.id for f in match_findings(crash, list(ISSUES.values()))}


def test_the_macos_pin_report_matches_only_the_max_it_was_about() -> None:
    text = "MAX Engine will crash when attempting to load your model"
    report = _report_with("max-import", Outcome.CRASH, text, signal="SIGSEGV")
    then = dataclasses.replace(report, environment=dataclasses.replace(
        report.environment, packages={**report.environment.packages, "max": "24.4.0"}))  # fmt: skip
    assert "max-torch-macos-pin" in {f.id for f in match_findings(then, list(ISSUES.values()))}
    assert "max-torch-macos-pin" not in {f.id for f in match_findings(report, list(ISSUES.values()))}


# Reproduced here: the real packages raise the real error in a fresh interpreter, as a probe would see it.
REPRODUCED = {
    "dlpack-stream-semantics": "import torch\ntorch.ones(2).__dlpack__(stream=2)\n",
    "max-graph-tensor-type-needs-device": (
        "from max.dtype import DType\nfrom max.graph import TensorType\nTensorType(DType.float32, [2])\n"
    ),
}


@pytest.mark.parametrize("issue_id", sorted(REPRODUCED))
def test_field_reports_reproduced_with_the_real_packages(issue_id: str) -> None:
    done = subprocess.run([sys.executable, "-c", REPRODUCED[issue_id]], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    error = done.stderr.strip().splitlines()[-1]
    findings = {f.id for f in match_findings(_report_with("dlpack", Outcome.FAIL, error), list(ISSUES.values()))}
    assert issue_id in findings, (error, sorted(findings))
    assert ISSUES[issue_id].shown == "reproduced here"


def test_every_field_entry_names_its_public_source_and_how_it_was_shown() -> None:
    field = [issue for issue in ISSUES.values() if issue.shown is not None]
    assert len(field) >= 18
    for issue in field:
        assert issue.references and all(r.startswith("https://") for r in issue.references), issue.id
