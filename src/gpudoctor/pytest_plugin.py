"""A pytest plugin: tests that need a part of the GPU stack are skipped with the doctor's explanation when that part
is broken here, instead of segfaulting the test run.

    pytest --gpudoctor                        # run the doctor once for the session (this interpreter's stack)
    pytest --gpudoctor-report report.json     # or read a saved `gpudoctor --json`

    @pytest.mark.gpu_stack("custom-op/cuda")  # a run id, or a probe id for all of its devices
    def test_my_op_on_the_gpu(): ...

Without either option the marker changes nothing. Registered through the ``pytest11`` entry point.

    GPUDOCTOR_CALL_CHECKS=raise pytest        # every custom-op call checked against its op's declaration
                                              # (gpudoctor.calls; =warn warns instead)
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.calls.channel import MODE_ENV
from gpudoctor.model import Outcome, ProbeResult, Report
from gpudoctor.report.codec import decode

_KEY = pytest.StashKey[Report | None]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpudoctor", "skip tests whose GPU stack gpudoctor finds broken")
    group.addoption("--gpudoctor", action="store_true", help="run gpudoctor once for the session")
    group.addoption("--gpudoctor-report", metavar="PATH", help="read a saved `gpudoctor --json` report instead")
    group.addoption(
        "--gpudoctor-args", default="", metavar="ARGS", help='arguments for the doctor run, e.g. "--only custom-op"'
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gpu_stack(*runs): the test needs these gpudoctor runs (e.g. 'custom-op/cuda', or a probe id for all its "
        "devices) to pass; with --gpudoctor it is skipped, with the doctor's explanation, when one does not",
    )
    # Read (or run) the doctor here, once: a bad report is a usage error before any test, not an error in each.
    config.stash[_KEY] = _load(config)
    if os.environ.get(MODE_ENV):  # GPUDOCTOR_CALL_CHECKS=raise pytest: every custom-op call of the suite checked
        from gpudoctor.calls.wrap import install

        install()


def _report(config: pytest.Config) -> Report | None:
    return config.stash.get(_KEY, None)


def _load(config: pytest.Config) -> Report | None:
    path = config.getoption("--gpudoctor-report")
    if path:
        from gpudoctor.errors import GpuDoctorError
        from gpudoctor.report.files import read_report

        try:
            report = read_report(Path(path))
        except GpuDoctorError as error:
            raise pytest.UsageError(error.one_line()) from None
    elif config.getoption("--gpudoctor"):
        argv = [sys.executable, "-m", "gpudoctor", "--json", *shlex.split(config.getoption("--gpudoctor-args"))]
        completed = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
        try:
            report = decode(json.loads(completed.stdout))
        except ValueError:  # not JSON, or not a report (codec.ReportError is a ValueError)
            said = (completed.stderr.strip().splitlines() or ["no output"])[-1]
            raise pytest.UsageError(f"gpudoctor did not produce a report: {said}") from None
    else:
        return None
    return report


def _matching(report: Report, wanted: str) -> list[ProbeResult]:
    return [r for r in report.results if r.id == wanted or r.probe == wanted or r.id.split(":")[0] == wanted]


def skip_reason(report: Report, wanted: str) -> str | None:
    """Why a test needing ``wanted`` cannot run on this stack, or None when it can (or the doctor says nothing)."""
    for result in _matching(report, wanted):
        if result.outcome is Outcome.SKIPPED:
            return f"gpudoctor did not run {result.id} here: {result.skip_reason or result.summary}"
        if result.outcome.is_problem or result.outcome is Outcome.INTERRUPTED:
            reason = f"gpudoctor: {result.id} {result.outcome.value}: {result.summary}"
            for finding in report.findings:
                if result.id in finding.runs:
                    reason += f" | {finding.title}: {finding.fix}"
            return reason
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    markers = list(item.iter_markers(name="gpu_stack"))
    if not markers:
        return
    report = _report(item.config)
    if report is None:
        return
    for marker in markers:
        for wanted in marker.args:
            reason = skip_reason(report, str(wanted))
            if reason is not None:
                pytest.skip(reason)


def pytest_report_header(config: pytest.Config) -> str | None:
    if not (config.getoption("--gpudoctor") or config.getoption("--gpudoctor-report")):
        return None
    return "gpudoctor: tests marked gpu_stack are skipped where the doctor finds that part of the stack broken"
