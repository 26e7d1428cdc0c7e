"""The one pipeline every face uses: inventory -> plan -> run -> report.

Faces pass options and callbacks in and get a Report back; they compute nothing themselves.
"""

from __future__ import annotations

import dataclasses
import datetime
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor import __version__
from gpudoctor.catalog import default_probe_dir, load_catalog
from gpudoctor.errors import GpuDoctorError
from gpudoctor.inventory import collect_environment
from gpudoctor.knowledge import load_known_issues, match_findings
from gpudoctor.model import Device, Environment, Finding, Outcome, ProbeResult, ProbeSpec, Report
from gpudoctor.patches import PATCH_FILES_ENV, PATCH_MODULES, patch_file
from gpudoctor.runner import run_probe
from gpudoctor.suite import PlannedRun, ResultCallback, StartCallback, plan_runs, run_plan


@dataclass(frozen=True)
class DoctorOptions:
    """What the user asked for; the defaults give a full diagnosis with the doctor's own interpreter."""

    python: str | None = None
    probe_dir: Path | None = None
    only: tuple[str, ...] | None = None
    devices: tuple[Device, ...] | None = None
    jobs: int = 2
    timeout_s: float | None = None
    run_probes: bool = True


def resolve_python(python: str | None) -> str:
    """An absolute path to the interpreter to examine, or a usage error naming what was wrong."""
    if python is None:
        return sys.executable
    found = shutil.which(python) if "/" not in python else python
    if found is None or not Path(found).is_file():
        raise GpuDoctorError(f"--python {python!r}: no such interpreter", hint="give the path to a python executable")
    return str(Path(found).absolute())


def make_report(
    environment: Environment, results: Iterable[ProbeResult] = (), kernel: Mapping[str, Any] | None = None
) -> Report:
    """The report with the known issues its results (and, for `gpudoctor kernel`, its scan) show."""
    report = Report(
        doctor_version=__version__,
        created=datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        environment=environment,
        results=tuple(results),
        kernel=kernel,
    )
    return dataclasses.replace(report, findings=match_findings(report, load_known_issues()))


def verify_patches(report: Report, planned: Sequence[PlannedRun]) -> Report:
    """Rerun each failing probe a finding has a patch for, with the patch applied; record what happened.

    A finding says its patch fixes the problem only when every rerun passed.
    """
    invocations = {run.run_id: run.invocation for run in planned}
    issues = {issue.id: issue for issue in load_known_issues()}
    findings: list[Finding] = []
    for finding in report.findings:
        issue = issues.get(finding.id)
        if finding.patch is None or issue is None or finding.patch not in PATCH_MODULES:
            findings.append(finding)
            continue
        failing = [r for r in report.results if r.outcome.is_problem and any(ev.matches(r) for ev in issue.evidence)]
        notes: list[str] = []
        verified = bool(failing)
        for result in failing:
            patched = dataclasses.replace(
                invocations[result.id], extra_env={PATCH_FILES_ENV: str(patch_file(finding.patch))}
            )
            rerun = run_probe(patched)
            verified = verified and rerun.outcome is Outcome.PASS
            notes.append(
                f"{result.id} rerun with the patch: {rerun.outcome.value} ({rerun.summary}); by hand: {rerun.command}"
            )
        if failing:
            headline = f"fixed by patch {finding.patch}" if verified else f"patch {finding.patch} did not fix it"
            finding = dataclasses.replace(
                finding, patch_verified=verified, patch_note=headline + ": " + "; ".join(notes)
            )
        findings.append(finding)
    return dataclasses.replace(report, findings=tuple(findings))


def plan(options: DoctorOptions, environment: Environment, specs: Sequence[ProbeSpec]) -> list[PlannedRun]:
    return plan_runs(
        specs,
        environment,
        python=resolve_python(options.python),
        probe_dir=probe_directory(options),
        only=options.only,
        devices=options.devices,
        timeout_s=options.timeout_s,
    )


def probe_directory(options: DoctorOptions) -> Path:
    return (options.probe_dir or default_probe_dir()).absolute()


PlanCallback = Callable[[Environment, Sequence[PlannedRun]], None]


def diagnose(
    options: DoctorOptions,
    *,
    on_plan: PlanCallback | None = None,
    on_start: StartCallback | None = None,
    on_result: ResultCallback | None = None,
) -> Report:
    """Run the whole pipeline and return the report.

    ``on_plan`` hears the environment and every planned run before any probe starts (a face can draw them);
    ``on_start`` and ``on_result`` hear each run as it starts and ends, from worker threads.
    """
    python = resolve_python(options.python)
    if not options.run_probes:
        environment = collect_environment(python)
        if on_plan is not None:
            on_plan(environment, [])
        return make_report(environment)
    specs = load_catalog(probe_directory(options))
    environment = collect_environment(python, extra_packages=(n for s in specs for n in s.needs_packages))
    planned = plan(options, environment, specs)
    if on_plan is not None:
        on_plan(environment, planned)
    results = run_plan(planned, jobs=options.jobs, on_start=on_start, on_result=on_result)
    return verify_patches(make_report(environment, results), planned)
