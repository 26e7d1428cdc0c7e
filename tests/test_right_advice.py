"""Right in its advice (issue 43): a sentence that names no package is not blamed on one, a log without a failure
is no failure, and a report about a failure leads with what explains it. Real logs under `gpudoctor explain` (the
one-line texts from the issue and the public reports of the same shapes from the corpora, each with its source);
the ordering through the real text and Markdown renderers."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from conftest import ROOT, TESTS, run_cli

from gpudoctor.knowledge.answer import GENERIC_ID
from gpudoctor.model import Device, Finding, Outcome, ProbeResult, Report, Severity
from gpudoctor.report.codec import decode
from gpudoctor.report.text import to_markdown, to_text

H100 = decode(json.loads((ROOT / "tests" / "fixtures" / "h100-suite-report.json").read_text())).environment
HELDOUT2 = {r["id"]: r for r in tomllib.loads((TESTS / "field_corpus" / "heldout2.toml").read_text())["report"]}


def _explain(tmp_path: Path, text: str) -> tuple[int, dict[str, Any]]:
    log = tmp_path / "job.log"
    log.write_text(text)
    completed = run_cli("explain", "--json", str(log), timeout=120)
    assert completed.returncode in (0, 1), completed.stderr
    report: dict[str, Any] = json.loads(completed.stdout)
    return completed.returncode, report


def _on_log(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings that answer the log (what supports or follows from one is said inside it: not counted)."""
    return [f for f in report["findings"] if "log" in f["runs"] and not f.get("part_of")]


def test_the_runtimes_sentence_alone_names_no_package(tmp_path: Path) -> None:
    """A CuPy report's one line, with nothing of CuPy's in it: what the words mean and how to see whose runtime it
    is — not torch's driver advice."""
    rc, report = _explain(tmp_path, "CUDA driver version is insufficient for CUDA runtime version\n")
    (finding,) = _on_log(report)
    assert rc == 1 and finding["id"] == "cuda-runtime-newer-than-driver"
    assert finding["title"] == "The NVIDIA driver is missing, or older than the CUDA runtime the failing program uses"
    for package in ("torch", "CuPy", "numba"):
        assert package not in finding["title"]
    assert "gpudoctor does not guess one" in finding["explanation"]
    assert "nvidia-smi" in finding["fix"] and "torch.version.cuda" in finding["fix"]
    assert "/proc/PID/maps" in finding["fix"]


def test_a_package_is_named_only_from_the_texts_own_marks(tmp_path: Path) -> None:
    # NVIDIA/FastPhotoStyle#68: CuPy's frames and its error name
    _, report = _explain(tmp_path, HELDOUT2["fastphotostyle-cupy-insufficient-driver"]["quote"])
    (finding,) = _on_log(report)
    assert finding["id"] == "cuda-runtime-newer-than-driver-cupy" and finding["title"].endswith("(CuPy's)")
    assert "cupy-cuda13x" in finding["fix"]
    # nagadomi/nunif#702 (FIELD-REPORTS: cuda13-driver-insufficient): torch's own "CUDA error: " words
    _, report = _explain(
        tmp_path, "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n"
    )
    assert [f["id"] for f in _on_log(report)] == ["torch-driver-too-old"]


def test_a_log_without_a_failure_is_no_failure(tmp_path: Path) -> None:
    for text in (
        "============ 12 passed in 3.1s ============\nall tests passed\n",
        # pip's own last line after an install that worked
        "Collecting cupy-cuda12x\n  Downloading cupy_cuda12x-13.3.0.whl (90.4 MB)\n"
        "Installing collected packages: fastrlock, cupy-cuda12x\nSuccessfully installed cupy-cuda12x-13.3.0\n",
        "",
    ):
        rc, report = _explain(tmp_path, text)
        (run,) = report["results"]
        assert rc == 0 and run["outcome"] == "pass", text
        assert run["summary"] == "job.log: no failure found in this log"
        assert _on_log(report) == [] and GENERIC_ID not in {f["id"] for f in report["findings"]}


def test_a_log_with_an_error_still_gets_an_answer(tmp_path: Path) -> None:
    rc, report = _explain(tmp_path, "Traceback (most recent call last):\nValueError: the moon is made of cheese\n")
    assert rc == 1 and report["results"][0]["outcome"] == "fail"
    assert [f["id"] for f in _on_log(report)] == [GENERIC_ID]


def _report_with_an_environment_notice() -> Report:
    environment_notice = Finding(
        "python-compiles-from-source", "Every Python process here compiles torch from source (PYTHONDONTWRITEBYTECODE)",
        severity=Severity.NOTICE, evidence=("PYTHONDONTWRITEBYTECODE=1",), explanation="Slow starts.",
        fix="python -m compileall -q -j 0 <site-packages>",
    )  # fmt: skip
    failure = Finding(
        "cuda-kernel-fault", "The kernel scale_rows writes out of bounds", evidence=("run fail: memcheck ...",),
        runs=("run",), explanation="An index past the end.", fix="Fix the bounds check in scale_rows.",
    )  # fmt: skip
    other_problem = Finding(
        "driver-vs-library", "The loaded NVIDIA kernel module and the driver library differ", evidence=("NVML",),
        explanation="Reboot.", fix="Reboot.",
    )  # fmt: skip
    run = ProbeResult("run", "run", Device.NONE, Outcome.FAIL, 1.0, summary="prog.py failed", command="python prog.py")
    return Report("0", "2026-11-27T00:00:00+00:00", H100, results=(run,),
                  findings=(environment_notice, other_problem, failure))  # fmt: skip


def test_a_report_about_a_failure_leads_with_what_explains_it() -> None:
    report = _report_with_an_environment_notice()
    leading, aside = report.findings_in_order()
    assert [f.id for f in leading] == ["cuda-kernel-fault", "driver-vs-library"]
    assert [f.id for f in aside] == ["python-compiles-from-source"]
    text = to_text(report)
    assert text.index("scale_rows writes out of bounds") < text.index("compiles torch from source")
    assert "python -m compileall" not in text  # one line: the title; the full text is in the JSON and the TUI
    assert "    Every Python process here compiles torch from source (PYTHONDONTWRITEBYTECODE) [python-compiles" in text
    markdown = to_markdown(report)
    assert markdown.index("scale_rows writes out of bounds") < markdown.index("compiles torch from source")
    assert "python -m compileall" not in markdown
    # no failing run: every finding leads, in the order found, in full
    passing = Report("0", "", H100, findings=report.findings)
    assert passing.findings_in_order() == (report.findings, ())
    assert "python -m compileall" in to_text(passing)
