"""Report predicates (an entry's ``over_report`` clause): what a whole report shows that no single run's text does —
the kernel package's static scan against its runs, a kernel run against its control, torch's CUDA against the
driver's. Pure functions of a Report; each returns what it saw and the run it saw it in.
"""

from __future__ import annotations

from pathlib import Path

from gpudoctor.kernelsection import KernelOp
from gpudoctor.knowledge.checks.common import parse_version
from gpudoctor.knowledge.registry import PredicateEvidence, predicate
from gpudoctor.model import Device, Outcome, ProbeResult, Report
from gpudoctor.protocol import CONTROL_PROBE, KERNEL_PROBE, DetailKey, ReproducerDetail
from gpudoctor.protocol import REPRODUCER_RUN_ID as RUN_ID


@predicate("torch_cuda_newer_than_driver")
def torch_cuda_newer_than_driver(report: Report) -> list[PredicateEvidence]:
    driver = parse_version(report.environment.driver.cuda_driver_version)
    for result in report.results:
        torch_cuda = parse_version(result.details.get(DetailKey.TORCH_CUDA))
        if driver and torch_cuda and torch_cuda.release[:2] > driver.release[:2]:
            text = (
                f"torch was built for CUDA {result.details[DetailKey.TORCH_CUDA]}, the driver supports CUDA "
                f"{report.environment.driver.cuda_driver_version} ({result.id})"
            )
            return [(text, None)]
    return []


def _control_id(result: ProbeResult) -> str:
    """The control run next to a kernel run: kernel/cuda:1 -> custom-op/cuda:1."""
    return CONTROL_PROBE + result.id[len(result.probe) :]


def _kernel_runs(report: Report) -> list[tuple[ProbeResult, ProbeResult | None]]:
    return [(r, report.result(_control_id(r))) for r in report.results if r.probe == KERNEL_PROBE]


def controls_beside(report: Report, result: ProbeResult) -> list[ProbeResult]:
    """gpudoctor's own known-good runs beside a user's run on the same device and stack: a kernel run's control
    (custom-op on that device), or the controls run beside a command (``_controls``); none for its own probes."""
    if result.probe == KERNEL_PROBE:
        control = report.result(_control_id(result))
        return [] if control is None else [control]
    return _controls(report) if result.id == RUN_ID else []


def controls_pass_beside(report: Report, result: ProbeResult) -> bool:
    """Whether gpudoctor's own known-good kernels passed beside a user's run on the same device and stack: a kernel
    run's control, or every control run beside a command. False for gpudoctor's own probes, and where none ran."""
    controls = controls_beside(report, result)
    return bool(controls) and all(r.outcome is Outcome.PASS for r in controls)


def _scanned_ops(report: Report, called: bool) -> list[KernelOp]:
    """The scanned ops this run called (``called``) or did not call. With no call at all (the package was only
    compiled) every op counts as called: the scan is all the run has to judge the package by."""
    if not report.kernel:
        return []
    names = {call["op"] for call in report.kernel["calls"]}
    ops = report.kernel["scan"]["ops"]
    return [op for op in ops if (not names or op["name"] in names) is called]


def _runs_contradict_scan(report: Report) -> bool:
    """Every device's kernel run passed against the user's reference: what the static scan suspects did not
    happen on any device that ran (a scan that lost its way in the source, or code that is right after all)."""
    runs = [r for r, _ in _kernel_runs(report)]
    return (
        bool(runs)
        and all(r.outcome is Outcome.PASS and r.details.get(DetailKey.RESULTS_CHECKED) == "reference" for r in runs)
        and any(r.device is Device.CUDA for r in runs)
    )


@predicate("kernel_host_indexing")
def kernel_host_indexing(report: Report) -> list[PredicateEvidence]:
    """The lines of the user's execute() that index tensors outside foreach (from the static scan), in the ops
    this run called — unless every device's run passed against a reference (then a notice says what the scan saw)."""
    if _runs_contradict_scan(report):
        return []
    return [
        (f"static scan: {line['file']}:{line['line']}: `{line['text']}` (op {op['name']}, outside foreach)", None)
        for op in _scanned_ops(report, called=True)
        for line in op["host_indexing"]
    ]


@predicate("kernel_host_indexing_contradicted")
def kernel_host_indexing_contradicted(report: Report) -> list[PredicateEvidence]:
    """The scan's lines when every device's run passed against the reference, GPU included."""
    if not _runs_contradict_scan(report):
        return []
    return [
        (f"static scan: {line['file']}:{line['line']}: `{line['text']}` (op {op['name']}); every device passed "
         "against your reference", None)
        for op in _scanned_ops(report, called=True)
        for line in op["host_indexing"]
    ]  # fmt: skip


@predicate("kernel_host_indexing_not_called")
def kernel_host_indexing_not_called(report: Report) -> list[PredicateEvidence]:
    """The same lines in ops of the package that this run did not call: what the scan saw there, not a verdict
    on the ops that ran."""
    return [
        (
            f"static scan: {line['file']}:{line['line']}: `{line['text']}` (op {op['name']}, outside foreach; "
            f"{op['name']} was not called in this run)",
            None,
        )
        for op in _scanned_ops(report, called=False)
        for line in op["host_indexing"]
    ]


@predicate("reproducer_host_indexing")
def reproducer_host_indexing(report: Report) -> list[PredicateEvidence]:
    """`gpudoctor run`: a reproducer that crashed on a GPU stack, with lines of the Mojo packages beside it that
    index tensors from host code (the static scan of gpudoctor.reproducer.subject)."""
    result = report.result(RUN_ID)
    if result is None or result.outcome is not Outcome.CRASH or not report.environment.driver.gpus:
        return []
    lines = result.details.get(ReproducerDetail.HOST_INDEXING)
    if not isinstance(lines, list):
        return []
    return [(f"static scan: {line}", result.id) for line in lines if isinstance(line, str)]


@predicate("reproducer_instruments_located")
def reproducer_instruments_located(report: Report) -> list[PredicateEvidence]:
    """`gpudoctor run` on a GPU: what the synchronous rerun and compute-sanitizer said about the failing command,
    when they named something on its failing path (a raising line, a kernel's error, an API error the failure
    reports) other than the classes with their own entry (a race, an uninitialised read, a misaligned access, a host
    address, a refused launch: knowledge.checks.runs)."""
    from gpudoctor.knowledge.checks.runs import of_kinds

    return of_kinds(report, None)


def _controls(report: Report, *, located: bool = True) -> list[ProbeResult]:
    """gpudoctor's own probes run on the GPU beside a command the instruments reran: with ``located``, only where they
    named its fault (it failed, or passed and compute-sanitizer caught it anyway under `run --sanitize`) — what "the
    fault is your program's" needs; without, beside any rerun command — enough for "the stack fails too"."""
    command = report.result(RUN_ID)
    if command is None or ReproducerDetail.INSTRUMENTS not in command.details:
        return []
    from gpudoctor.knowledge.checks.runs import located_causes  # the failing path's own causes

    if located and not located_causes(report):
        return []
    return [r for r in report.results if r.id != RUN_ID and r.device is Device.CUDA]


@predicate("reproducer_controls_pass")
def reproducer_controls_pass(report: Report) -> list[PredicateEvidence]:
    """Every control beside the failing command passed: the stack runs gpudoctor's kernels here."""
    controls = _controls(report)
    if not controls or any(r.outcome is not Outcome.PASS for r in controls):
        return []
    return [(f"{r.id} passes on this GPU and stack: {r.summary}", r.id) for r in controls]


@predicate("reproducer_controls_fail")
def reproducer_controls_fail(report: Report) -> list[PredicateEvidence]:
    """A control beside the failing command failed too: the stack is at fault there, not only the program."""
    controls = _controls(report, located=False)
    return [(f"{r.id} {r.outcome.value}: {r.summary}", r.id) for r in controls if r.outcome.is_problem]


@predicate("reproducer_instruments_not_run")
def reproducer_instruments_not_run(report: Report) -> list[PredicateEvidence]:
    """`gpudoctor run`: why an instrument did not rerun the failing command (no GPU here, no compute-sanitizer)."""
    result = report.result(RUN_ID)
    lines = result.details.get(ReproducerDetail.INSTRUMENTS_NOT_RUN) if result is not None else None
    if result is None or not isinstance(lines, list):
        return []
    return [(str(line), result.id) for line in lines]


@predicate("kernel_crashes_where_control_passes")
def kernel_crashes_where_control_passes(report: Report) -> list[PredicateEvidence]:
    evidence: list[PredicateEvidence] = []
    for kernel, control in _kernel_runs(report):
        crashed = kernel.device is Device.CUDA and kernel.outcome is Outcome.CRASH
        if crashed and control is not None and control.outcome is Outcome.PASS:
            text = (
                f"{kernel.id} crashed ({kernel.signal or 'no signal'}) while the control kernel "
                f"{control.id} passed on the same GPU and stack"
            )
            evidence.append((text, kernel.id))
    return evidence


@predicate("control_fails_with_kernel")
def control_fails_with_kernel(report: Report) -> list[PredicateEvidence]:
    return [
        (f"{k.id} {k.outcome.value} and the control kernel {c.id} {c.outcome.value} too", k.id)
        for k, c in _kernel_runs(report)
        if c is not None and k.outcome.is_problem and c.outcome.is_problem
    ]


MAX_SOURCE_EVIDENCE = 12


@predicate("kernel_source_rejected")
def kernel_source_rejected(report: Report) -> list[PredicateEvidence]:
    """Lines of the user's package that the installed MAX does not accept (the version-aware source check),
    and the compiler diagnostics they explain."""
    if not report.kernel or "source" not in report.kernel:
        return []
    from gpudoctor.kernel.source.check import from_dict, translate
    from gpudoctor.kernel.source.render import run_there_command

    check = from_dict(report.kernel["source"])
    version = check.installed.get("max")
    rejected = [h for h in check.rejected() if h.rule.package == "max"]
    if not rejected or version is None:
        return []
    evidence: list[PredicateEvidence] = []
    written = check.written_for_text()
    evidence.append(
        (
            f"source check: written for {written or 'an unknown MAX release'}; {len(rejected)} line(s) are not "
            f"accepted by the installed max {version}",
            None,
        )
    )
    explained = set()
    for kernel, _ in _kernel_runs(report):
        diagnostics = kernel.details.get(DetailKey.COMPILE_ERRORS)
        if isinstance(diagnostics, list):
            for translation in translate([str(d) for d in diagnostics], check):
                evidence.append((translation.statement(), kernel.id))
                explained.add(translation.hit)
    rest = [hit for hit in rejected if hit not in explained]
    evidence += [(hit.statement(version), None) for hit in rest[:MAX_SOURCE_EVIDENCE]]
    if len(rest) > MAX_SOURCE_EVIDENCE:
        evidence.append(
            (f"... and {len(rest) - MAX_SOURCE_EVIDENCE} more line(s): gpudoctor scan PATH lists all", None)
        )
    command = run_there_command(check, Path(report.kernel["package"]), report.environment.packages.get("torch"))
    if command:
        evidence.append((f"to run it on the release it was written for: {command}", None))
    return list(dict.fromkeys(evidence))


def _sanitized(report: Report, probe: str) -> list[ProbeResult]:
    """`gpudoctor kernel --sanitize`: the runs of ``probe`` under compute-sanitizer that it judged."""
    from gpudoctor.instruments.reruns import SanitizerDetail

    return [r for r in report.results if r.probe == probe and SanitizerDetail.ERRORS in r.details]


@predicate("kernel_sanitizer_caught")
def kernel_sanitizer_caught(report: Report) -> list[PredicateEvidence]:
    """What compute-sanitizer named in the user's kernel, one line per distinct cause."""
    from gpudoctor.instruments.reruns import SanitizerDetail

    return [
        (f"compute-sanitizer {r.details[SanitizerDetail.TOOL]}: {line}", r.id)
        for r in _sanitized(report, KERNEL_PROBE)
        if r.details.get(SanitizerDetail.CAUGHT)
        for line in r.details.get(SanitizerDetail.FOUND) or [f"{r.details[SanitizerDetail.ERRORS]} errors"]
    ]


@predicate("kernel_sanitizer_control_clean")
def kernel_sanitizer_control_clean(report: Report) -> list[PredicateEvidence]:
    """The control kernel ran clean under every instrument that caught something in the user's kernel."""
    from gpudoctor.instruments.reruns import SanitizerDetail

    caught = {
        r.details[SanitizerDetail.TOOL]
        for r in _sanitized(report, KERNEL_PROBE)
        if r.details.get(SanitizerDetail.CAUGHT)
    }
    controls = {r.details[SanitizerDetail.TOOL]: r for r in _sanitized(report, CONTROL_PROBE)}
    if not caught or not caught <= set(controls):
        return []
    if any(controls[tool].outcome is not Outcome.PASS for tool in caught):
        return []
    return [(f"{controls[tool].id}: {controls[tool].summary}", controls[tool].id) for tool in sorted(caught)]


@predicate("kernel_sanitizer_control_dirty")
def kernel_sanitizer_control_dirty(report: Report) -> list[PredicateEvidence]:
    """The control kernel is not clean under an instrument: what it names there may be the stack's, not the kernel's."""
    from gpudoctor.instruments.reruns import SanitizerDetail

    return [
        (f"{r.id}: {line}", r.id)
        for r in _sanitized(report, CONTROL_PROBE)
        if r.details.get(SanitizerDetail.CAUGHT)
        for line in r.details.get(SanitizerDetail.FOUND) or [r.summary]
    ]
