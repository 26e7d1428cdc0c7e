"""The one pipeline every face uses: ``examine(subject, ...)``: inventory -> pre-flight -> plan -> schedule ->
conclusion -> advice, for any subject (the probe suite, a kernel package, a user's command).

Faces pass a subject, options and events in and get a Report back; they compute nothing themselves.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor import __version__
from gpudoctor.errors import GpuDoctorError
from gpudoctor.examination import Events, RunContext
from gpudoctor.facts.interpreter import resolve_python
from gpudoctor.facts.inventory import collect_environment
from gpudoctor.kernelsection import KernelSection
from gpudoctor.knowledge import match_findings, preflight
from gpudoctor.model import Device, Environment, Finding, ProbeResult, ProbeSpec, Report, Severity
from gpudoctor.process.cancel import CancelScope
from gpudoctor.subject import ProbeSuite, Subject
from gpudoctor.suite.caches import expected_durations, record_durations
from gpudoctor.suite.catalog import default_probe_dir, load_catalog, run_ids

if (
    TYPE_CHECKING
):  # running probes and advising pins import theirs where they happen: the inventory-only run does neither
    from gpudoctor.matrix.schema import Row
    from gpudoctor.suite.patch_runs import PatchRuns
    from gpudoctor.suite.plan import PlannedRun
    from gpudoctor.suite.schedule import FaceCallbacks, ResultCallback, Schedule, ScheduleHandler, StartCallback

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
    """What the user asked for; the defaults give a full diagnosis with the doctor's own interpreter."""

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
        created=datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
        environment=environment,
        results=tuple(results),
        kernel=kernel,
    )
    findings = preflight(environment) + match_findings(report)
    return dataclasses.replace(report, findings=findings)


def looked_up(
    results: Sequence[ProbeResult], python: str, cancel: CancelScope | None = None
) -> tuple[ProbeResult, ...]:
    """``results`` with, on each failing run that missed a name (cannot import name, no attribute, no module), what
    the examined interpreter's environment says of it (facts.missing_names; knowledge.located words it)."""
    if not any(r.outcome.is_problem for r in results):
        return tuple(results)  # the lookup's modules are imported where a run failed: a passing run needs none
    from gpudoctor.facts.missing_names import with_lookups
    from gpudoctor.knowledge.located import import_distributions

    return with_lookups(results, python, cancel, import_distributions())


def findings_of_one(environment: Environment) -> Callable[[ProbeResult], tuple[Finding, ...]]:
    """The known issues that one result alone shows: which patch could fix a run, asked as each run ends."""
    return lambda result: match_findings(Report(__version__, "", environment, results=(result,)))


def run_with_patches(
    environment: Environment, schedule: Schedule, handlers: Sequence[ScheduleHandler], faces: FaceCallbacks
) -> PatchRuns:
    """Run the schedule, with the reruns that verify a patch and the runs a verified patch carries on as runs of it
    (one ``--jobs`` limit, one event stream: the faces hear them too). ``handlers`` hear the schedule before the
    patch runs and the faces do (the kernel's CPU-done marker)."""
    from gpudoctor.suite.patch_runs import PatchRuns
    from gpudoctor.suite.schedule import run_schedule

    patches = PatchRuns(schedule, explain=findings_of_one(environment))
    run_schedule(schedule, [*handlers, patches, faces])
    return patches


def conclude(
    environment: Environment,
    results: Sequence[ProbeResult],
    patches: PatchRuns,
    *,
    kernel: KernelSection | None = None,
) -> Report:
    """The report of a run to its end: findings matched once, over the final results (the runs a verified patch
    carried on among them), then each finding's patch verification from its reruns."""
    return patches.noted(make_report(environment, results, kernel=kernel))


def plan(options: DoctorOptions, environment: Environment, specs: Sequence[ProbeSpec]) -> list[PlannedRun]:
    from gpudoctor.suite.plan import plan_runs

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


PlanCallback = Callable[[Environment, Sequence["PlannedRun"]], None]


def examine(
    subject: Subject, options: DoctorOptions, events: Events | None = None, cancel: CancelScope | None = None
) -> Report:
    """Examine ``subject`` with ``options.python`` and return the report: inventory, pre-flight, the subject's plan
    run as one schedule (patch verification and carry-on among its runs, within ``options.jobs``), the subject's
    own run where it has one (a user's command), findings matched once, and for a matrix row the pin advice.

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
    from gpudoctor.process.scratch import remove_abandoned, scratch_folder
    from gpudoctor.suite.schedule import FaceCallbacks, Schedule

    remove_abandoned()  # what runs killed outright (SIGKILL) left under the temporary folder
    environment = collect_environment(python, extra_packages=subject.needs_packages, cancel=cancel)
    with scratch_folder() as scratch:
        context = RunContext(python, scratch, options.jobs, events, cancel, environment)
        planned = subject.plan(environment, python, context.scratch)
        events.planned(environment, planned)
        schedule = Schedule(planned, jobs=options.jobs, expected=expected_durations(), cancel=cancel)
        faces = FaceCallbacks(events.start, events.result)
        patches = run_with_patches(environment, schedule, subject.handlers(context), faces)
        record_durations(schedule.results())  # the plan's own runs, the stack as it is: the slow ones go first
        results = looked_up((*patches.results(schedule), *subject.run_own(context)), python, cancel)
        report = conclude(environment, results, patches, kernel=subject.section(environment, results))
    report = subject.concluded(report)
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
    from gpudoctor.matrix.pins import machine_timelines, pin_options

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
        severity=Severity.NOTICE,
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
    from gpudoctor.suite.schedule import FaceCallbacks, Schedule

    schedule = Schedule(planned, jobs=options.jobs, given=given, cancel=cancel)
    patches = run_with_patches(report.environment, schedule, (), FaceCallbacks(on_start, on_result))
    results = looked_up(patches.results(schedule), resolve_python(options.python), cancel)
    again_report = conclude(report.environment, results, patches)
    return with_pin_advice(again_report, options, specs)
