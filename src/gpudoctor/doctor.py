"""The one pipeline every face uses: ``examine(subject, ...)``: inventory -> pre-flight -> plan -> schedule ->
conclude -> advice, for any subject (gpudoctor.subject). Faces pass a subject, options and Events in and get a
Report back; they compute nothing themselves.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor import __version__
from gpudoctor.errors import GpuDoctorError
from gpudoctor.examination import Events, RunContext
from gpudoctor.facts.interpreter import resolve_python
from gpudoctor.facts.inventory import collect_environment
from gpudoctor.kernel.section import KernelSection
from gpudoctor.knowledge import load_known_issues, match_findings
from gpudoctor.matrix.query import machine_timelines, pin_options
from gpudoctor.matrix.schema import Row
from gpudoctor.model import Device, Environment, Finding, Outcome, ProbeResult, ProbeSpec, Report
from gpudoctor.patches import PATCH_FILES_ENV, PATCH_MODULES, patch_file
from gpudoctor.preflight import preflight
from gpudoctor.process.cancel import CancelScope
from gpudoctor.subject import ProbeSuite, Subject
from gpudoctor.suite.catalog import default_probe_dir, load_catalog, run_ids
from gpudoctor.suite.runner import run_probe
from gpudoctor.suite.schedule import PlannedRun, ResultCallback, StartCallback, plan_runs, run_plan

PROBE_MEMORY_GIB = 1.5  # a probe process with torch and MAX loaded, measured at 0.7-1.3 GiB peak


def default_jobs() -> int:
    """Probe processes at once by default: one per CPU, at least 2, at most 16, and no more than the available
    memory holds (a probe with torch and MAX loaded takes about a GiB)."""
    jobs = max(2, min(16, os.cpu_count() or 2))
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            available_kib = next(int(line.split()[1]) for line in handle if line.startswith("MemAvailable:"))
        jobs = min(jobs, max(1, int(available_kib / (PROBE_MEMORY_GIB * 1024 * 1024))))
    except (OSError, StopIteration, ValueError):
        pass
    return jobs


@dataclass(frozen=True)
class DoctorOptions:
    """What the user asked for; the defaults give a full diagnosis with the doctor's own interpreter.

    ``probe_dir``, ``only``, ``devices`` and ``timeout_s`` select the probe suite (``suite_of``); any other subject
    carries its own selection, and ``examine`` takes the rest from here."""

    python: str | None = None
    probe_dir: Path | None = None
    only: tuple[str, ...] | None = None
    devices: tuple[Device, ...] | None = None
    jobs: int = field(default_factory=default_jobs)
    timeout_s: float | None = None
    run_probes: bool = True
    matrix: Path | None = None  # where "what should I pin?" looks (default: matrix.default_matrix_dir)
    advice: bool = True  # add that answer to a report with problems


def make_report(
    environment: Environment, results: Iterable[ProbeResult] = (), kernel: KernelSection | None = None
) -> Report:
    """The report with the known issues its results (and, for `gpudoctor kernel`, its scan) show."""
    report = Report(
        doctor_version=__version__,
        created=datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        environment=environment,
        results=tuple(results),
        kernel=kernel,
    )
    findings = preflight(environment) + match_findings(report, load_known_issues())
    return dataclasses.replace(report, findings=findings)


def verify_patches(report: Report, planned: Sequence[PlannedRun], cancel: CancelScope | None = None) -> Report:
    """Rerun each failing run a finding matched and has a patch for, with the patch applied; record what
    happened. A finding says its patch fixes the problem only when every rerun passed."""
    invocations = {run.run_id: run.invocation for run in planned}
    findings: list[Finding] = []
    for finding in report.findings:
        failing = [
            result
            for run_id in finding.runs
            if (result := report.result(run_id)) is not None and result.outcome.is_problem and run_id in invocations
        ]
        if finding.patch is None or finding.patch not in PATCH_MODULES or not failing:
            findings.append(finding)
            continue
        notes: list[str] = []
        verified = True
        for result in failing:
            patched = dataclasses.replace(
                invocations[result.id], extra_env={PATCH_FILES_ENV: str(patch_file(finding.patch))}
            )
            rerun = run_probe(patched, cancel.child() if cancel is not None else None)
            if rerun.outcome is Outcome.INTERRUPTED:
                break  # the session was stopped: nothing verified either way
            verified = verified and rerun.outcome is Outcome.PASS
            notes.append(
                f"{result.id} rerun with the patch: {rerun.outcome.value} ({rerun.summary}); by hand: {rerun.command}"
            )
        else:
            headline = f"fixed by patch {finding.patch}" if verified else f"patch {finding.patch} did not fix it"
            note = headline + ": " + "; ".join(notes)
            finding = dataclasses.replace(finding, patch_verified=verified, patch_note=note)
        findings.append(finding)
    return dataclasses.replace(report, findings=tuple(findings))


def conclude(
    environment: Environment,
    results: Sequence[ProbeResult],
    planned: Sequence[PlannedRun],
    *,
    cancel: CancelScope | None = None,
    kernel: KernelSection | None = None,
    jobs: int = 1,
    on_start: StartCallback | None = None,
    on_result: ResultCallback | None = None,
) -> Report:
    """The report of a run: findings matched once, their patches verified, and where a patch was verified, the
    runs it unblocked run on with it — unless the session was stopped."""
    report = make_report(environment, results, kernel=kernel)
    if cancel is not None and cancel.cancelled:
        return report
    report = verify_patches(report, planned, cancel)
    return carry_on_with_patches(report, planned, jobs=jobs, on_start=on_start, on_result=on_result, cancel=cancel)


PATCHED_PREFIX = "with patch"


def carry_on_with_patches(
    report: Report,
    planned: Sequence[PlannedRun],
    *,
    jobs: int = 1,
    on_start: StartCallback | None = None,
    on_result: ResultCallback | None = None,
    cancel: CancelScope | None = None,
) -> Report:
    """Run what a verified patch unblocked, with the patch applied, so one run shows what works once it is fixed.

    The runs the patch fixed keep their real (failing) result: the stack as it is still fails there. The runs
    skipped because of them run with every verified patch applied; their summaries start "with patch ID:".
    """
    verified = [f for f in report.findings if f.patch_verified and f.patch in PATCH_MODULES]
    fixed = {run_id for finding in verified for run_id in finding.runs}
    blocked = unblocked_by(planned, report, fixed)
    if not blocked or (cancel is not None and cancel.cancelled):
        return report
    patches = [finding.patch for finding in verified if finding.patch is not None]
    env = {PATCH_FILES_ENV: os.pathsep.join(str(patch_file(patch)) for patch in patches)}
    again = fixed | set(blocked)
    patched_plan = [
        dataclasses.replace(
            run, invocation=dataclasses.replace(run.invocation, extra_env={**run.invocation.extra_env, **env})
        )
        if run.run_id in again
        else run
        for run in planned
    ]
    label = f"{PATCHED_PREFIX} {', '.join(patches)}"
    announce = None if on_result is None else lambda r: on_result(_labelled(r, label) if r.id in blocked else r)
    given = {r.id: r for r in report.results if r.id not in again}
    results = run_plan(patched_plan, jobs=jobs, on_start=on_start, on_result=announce, cancel=cancel, given=given)
    merged = [
        _labelled(result, label) if result.id in blocked else (report.result(result.id) or result) for result in results
    ]
    carried = make_report(report.environment, merged, kernel=report.kernel)
    earlier = {f.id: f for f in report.findings}
    findings = tuple(earlier.get(f.id, f) for f in carried.findings)  # keep the verification notes
    return dataclasses.replace(carried, created=report.created, findings=findings)


def unblocked_by(planned: Sequence[PlannedRun], report: Report, fixed: set[str]) -> list[str]:
    """The runs skipped, directly or through a chain of skipped runs, because a run in ``fixed`` did not pass, in
    plan order: what a patch that fixes ``fixed`` lets run. A run skipped for a reason known before it started (no
    CUDA device, a missing package) stays skipped: the patch changes nothing there."""
    blocked: list[str] = []
    for run in planned:  # plan order puts prerequisites first, so one pass follows every chain
        result = report.result(run.run_id)
        if (
            run.run_id not in fixed
            and run.skip_reason is None
            and result is not None
            and result.outcome is Outcome.SKIPPED
            and fixed.union(blocked).intersection(run.prerequisites)
        ):
            blocked.append(run.run_id)
    return blocked


def _labelled(result: ProbeResult, label: str) -> ProbeResult:
    return dataclasses.replace(result, summary=f"{label}: {result.summary}")


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


def examine(
    subject: Subject, options: DoctorOptions, events: Events | None = None, cancel: CancelScope | None = None
) -> Report:
    """Examine ``subject`` with ``options.python`` and return the report: inventory, pre-flight, plan, schedule,
    conclusion (findings, patches verified), and where the subject is a matrix row, the pin advice.

    ``events`` hears the plan before any run starts and each run as it starts and ends (from worker threads).
    Cancelling ``cancel`` (from any thread or a signal handler) kills every running process at once: the report
    then keeps what had ended and marks the rest INTERRUPTED.
    """
    events = events if events is not None else Events()
    python = resolve_python(options.python)
    if not options.run_probes:
        environment = collect_environment(python, cancel=cancel)
        events.planned(environment, [])
        return make_report(environment)
    environment = collect_environment(python, extra_packages=subject.needs_packages, cancel=cancel)
    with tempfile.TemporaryDirectory(prefix="gpudoctor-") as scratch:
        planned = subject.plan(environment, python, Path(scratch))
        events.planned(environment, planned)
        context = RunContext(python, Path(scratch), options.jobs, events, cancel)
        results = subject.run(planned, context)
        report = conclude(
            environment,
            results,
            planned,
            cancel=cancel,
            kernel=subject.section(environment, results),
            jobs=options.jobs,
            on_start=events.start,
            on_result=events.result,
        )
    if not subject.records_matrix_row:
        return report
    return with_pin_advice(report, options, subject.matrix_probes())


def diagnose(
    options: DoctorOptions,
    *,
    on_plan: PlanCallback | None = None,
    on_start: StartCallback | None = None,
    on_result: ResultCallback | None = None,
    cancel: CancelScope | None = None,
) -> Report:
    """``examine`` of the probe suite ``options`` select (kept for callers that hold only options)."""
    return examine(suite_of(options), options, Events(on_plan, on_start, on_result), cancel)


def suite_of(options: DoctorOptions) -> ProbeSuite:
    """The probe suite the options select: ``--probes``, ``--only``, ``--device``, ``--timeout``."""
    return ProbeSuite(options.probe_dir, options.only, options.devices, options.timeout_s)


PIN_FINDING = "pin-nearest-passing"


def pin_advice(report: Report, rows: Sequence[Row], known: Iterable[str]) -> Finding | None:
    """ "What should I pin?": the nearest passing environments of the matrix on this machine, as a finding."""
    options = pin_options(report, rows, known)
    if not options:
        return None
    best = options[0]
    failing = sorted({probe for o in options for probe in o.fixes})
    story = tuple(machine_timelines(report, rows, failing))  # the matrix's record of these probes here, by release
    evidence = story + tuple(
        f"{o.change_text()}: matrix row {o.row.file_name} passes all {len(o.row.results)} probes "
        f"(here {', '.join(o.fixes)} {'fails' if len(o.fixes) == 1 else 'fail'})"
        for o in options
    )
    patched = [f for f in report.findings if f.patch and f.patch_verified]
    fix = "; or ".join(" and ".join(o.commands()) for o in options[:2] if o.commands())
    if patched:
        fix += f"; or stay and apply the verified patch: gpudoctor patch install {patched[0].patch}"
    return Finding(
        id=PIN_FINDING,
        title=f"What to pin: {best.change_text()} reaches an environment where every probe passes",
        evidence=evidence,
        explanation="The matrix's passing environments on this machine (same GPU, OS and architecture) that "
        "differ from this one only in what can be installed, fewest changes first; each passes the probes that "
        "fail here. First, what the matrix recorded for these probes across MAX releases on this machine. "
        "`gpudoctor matrix near` shows every nearby row and what changing one thing did.",
        fix=fix or "Install the versions named above.",
        severity="notice",
    )


def with_pin_advice(report: Report, options: DoctorOptions, specs: Sequence[ProbeSpec]) -> Report:
    """The report with the pin advice added when it has problems and a matrix can be read (else unchanged)."""
    if not options.advice or not any(r.outcome.is_problem for r in report.results):
        return report
    from gpudoctor.matrix import MatrixError, MatrixStore, default_matrix_dir

    try:
        rows = MatrixStore(default_matrix_dir(options.matrix, writing=False)).load()
    except (MatrixError, GpuDoctorError):
        return report  # no matrix here: nothing to compare with
    advice = pin_advice(report, rows, run_ids(specs))
    kept = tuple(f for f in report.findings if f.id != PIN_FINDING)  # a report read back may carry older advice
    return report if advice is None else dataclasses.replace(report, findings=(*kept, advice))


def dependents(planned: Sequence[PlannedRun], run_ids: Iterable[str]) -> list[str]:
    """``run_ids`` and every planned run that builds on them, directly or not, in plan order."""
    chosen = set(run_ids)
    for run in planned:  # plan order puts prerequisites first, so one pass closes the set
        if chosen.intersection(run.prerequisites):
            chosen.add(run.run_id)
    return [run.run_id for run in planned if run.run_id in chosen]


def rerun(
    options: DoctorOptions,
    report: Report,
    run_ids: Iterable[str],
    *,
    on_plan: PlanCallback | None = None,
    on_start: StartCallback | None = None,
    on_result: ResultCallback | None = None,
    cancel: CancelScope | None = None,
) -> Report:
    """Run ``run_ids`` again in the environment of ``report``, with every run that builds on them.

    The same plan, prerequisites, findings and patch verification as a full run; the results of the other
    runs are kept from ``report`` and their outcomes gate what is rerun exactly as in a full run.
    """
    specs = load_catalog(probe_directory(options))
    planned = plan(options, report.environment, specs)
    wanted = list(run_ids)
    unknown = sorted(set(wanted) - {run.run_id for run in planned})
    if unknown:
        raise GpuDoctorError(f"cannot rerun {', '.join(unknown)}: not in this plan")
    again = set(dependents(planned, wanted))
    given = {r.id: r for r in report.results if r.id not in again}
    if on_plan is not None:
        on_plan(report.environment, planned)
    results = run_plan(planned, jobs=options.jobs, on_start=on_start, on_result=on_result, cancel=cancel, given=given)
    again_report = conclude(
        report.environment, results, planned, cancel=cancel, jobs=options.jobs, on_start=on_start, on_result=on_result
    )
    return with_pin_advice(again_report, options, specs)
