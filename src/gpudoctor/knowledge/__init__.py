"""Known issues as data: load and validate ``known_issues.toml``, and match them against a report.

Matching is a pure function of a Report; each finding says which evidence matched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpudoctor.errors import GpuDoctorError
from gpudoctor.kernel.section import KernelOp
from gpudoctor.mechanisms import Rules, load_rules, mechanism_findings, searchable
from gpudoctor.model import Device, Environment, Finding, Outcome, ProbeResult, Report
from gpudoctor.protocol import DetailKey
from gpudoctor.reproducer.command import HOST_INDEXING_DETAIL, RUN_ID
from gpudoctor.tomlcheck import checked_table, read_toml, string_list

KNOWN_ISSUES = Path(__file__).with_name("known_issues.toml")
MAX_KNOWN_ISSUES_BYTES = 1024 * 1024
KERNEL_PROBE = "kernel"  # `gpudoctor kernel`: the user's package
CONTROL_PROBE = "custom-op"  # the control kernel run next to it
# gpudoctor's probes that run MAX (catalog.toml: needs max): their errors come from MAX's toolchain
MAX_PROBES = frozenset({
    "max-import", "dlpack", "graph-op", "custom-op", "custom-op-source", "custom-op-compiled", "custom-op-via-graph",
    "custom-op-params", KERNEL_PROBE,
})  # fmt: skip
SEVERITIES = ("problem", "notice")
ANY_PROBE = "*"
SHOWN = ("reproduced here", "on the H100", "text only")
_ISSUE_FIELDS = {
    "id",
    "title",
    "severity",
    "affects",
    "evidence",
    "predicates",
    "explanation",
    "fix",
    "references",
    "patch",
    "shown",
    "toolchain",
}
_EVIDENCE_FIELDS = {"probe", "outcome", "signal", "pattern", "detail"}


@dataclass(frozen=True)
class Evidence:
    """One observable sign of a known issue in one probe result."""

    probe: str
    outcome: Outcome
    signal: str | None = None
    pattern: re.Pattern[str] | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, result: ProbeResult) -> bool:
        # "kernel/cuda" names every GPU's run: kernel/cuda:0, kernel/cuda:1, ...; "*" names any probe (an error
        # text that means the same wherever it appears, like one quoted from a field report).
        names = (result.probe, result.id, result.id.split(":")[0], ANY_PROBE)
        if self.probe not in names or result.outcome is not self.outcome:
            return False
        if self.signal is not None and result.signal != self.signal:
            return False
        if any(result.details.get(key) != value for key, value in self.detail.items()):
            return False
        return self.pattern is None or bool(self.pattern.search(searchable(result)))

    def describe(self, result: ProbeResult) -> str:
        what = f"{result.id} {result.outcome.value}"
        if result.signal:
            what += f" ({result.signal})"
        if self.pattern is not None:
            found = self.pattern.search(searchable(result))
            if found:
                what += f", matching {found.group(0)!r}"
        for key, value in self.detail.items():
            what += f", {key} = {value!r}"
        return what


@dataclass(frozen=True)
class KnownIssue:
    id: str
    title: str
    severity: str
    explanation: str
    fix: str
    evidence: tuple[Evidence, ...] = ()
    affects: Mapping[str, SpecifierSet] = field(default_factory=dict)
    predicates: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    patch: str | None = None
    shown: str | None = None  # how the entry was shown: reproduced here, on the H100, or on its report's text only
    toolchain: str | None = None  # whose errors it explains (mechanisms.toml): another toolchain's text never matches


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    numbers = re.findall(r"\d+", text or "")
    return tuple(int(n) for n in numbers[:2]) if len(numbers) >= 2 else None


# A predicate's evidence: what it saw, and the run it saw it in (None for the report as a whole).
PredicateEvidence = tuple[str, str | None]


def _torch_cuda_newer_than_driver(report: Report) -> list[PredicateEvidence]:
    driver = _version_tuple(report.environment.driver.cuda_driver_version)
    for result in report.results:
        torch_cuda = _version_tuple(str(result.details.get(DetailKey.TORCH_CUDA) or ""))
        if driver and torch_cuda and torch_cuda > driver:
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
    return bool(runs) and all(
        r.outcome is Outcome.PASS and r.details.get(DetailKey.RESULTS_CHECKED) == "reference" for r in runs
    ) and any(r.device is Device.CUDA for r in runs)


def _kernel_host_indexing(report: Report) -> list[PredicateEvidence]:
    """The lines of the user's execute() that index tensors outside foreach (from the static scan), in the ops
    this run called — unless every device's run passed against a reference (then a notice says what the scan saw)."""
    if _runs_contradict_scan(report):
        return []
    return [
        (f"static scan: {line['file']}:{line['line']}: `{line['text']}` (op {op['name']}, outside foreach)", None)
        for op in _scanned_ops(report, called=True)
        for line in op["host_indexing"]
    ]


def _kernel_host_indexing_contradicted(report: Report) -> list[PredicateEvidence]:
    """The scan's lines when every device's run passed against the reference, GPU included."""
    if not _runs_contradict_scan(report):
        return []
    return [
        (f"static scan: {line['file']}:{line['line']}: `{line['text']}` (op {op['name']}); every device passed "
         "against your reference", None)
        for op in _scanned_ops(report, called=True)
        for line in op["host_indexing"]
    ]  # fmt: skip


def _kernel_host_indexing_not_called(report: Report) -> list[PredicateEvidence]:
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


def _reproducer_host_indexing(report: Report) -> list[PredicateEvidence]:
    """`gpudoctor run`: a reproducer that crashed on a GPU stack, with lines of the Mojo packages beside it that
    index tensors from host code (the static scan of gpudoctor.reproducer.diagnose)."""
    result = report.result(RUN_ID)
    if result is None or result.outcome is not Outcome.CRASH or not report.environment.driver.gpus:
        return []
    lines = result.details.get(HOST_INDEXING_DETAIL)
    if not isinstance(lines, list):
        return []
    return [(f"static scan: {line}", result.id) for line in lines if isinstance(line, str)]


def _kernel_crashes_where_control_passes(report: Report) -> list[PredicateEvidence]:
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


def _control_fails_with_kernel(report: Report) -> list[PredicateEvidence]:
    return [
        (f"{k.id} {k.outcome.value} and the control kernel {c.id} {c.outcome.value} too", k.id)
        for k, c in _kernel_runs(report)
        if c is not None and k.outcome.is_problem and c.outcome.is_problem
    ]


MAX_SOURCE_EVIDENCE = 12


def _kernel_source_rejected(report: Report) -> list[PredicateEvidence]:
    """Lines of the user's package that the installed MAX does not accept (the version-aware source check),
    and the compiler diagnostics they explain."""
    from gpudoctor.kernel.source.check import from_dict, translate
    from gpudoctor.kernel.source.render import run_there_command

    if not report.kernel or "source" not in report.kernel:
        return []
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


PREDICATES: Mapping[str, Callable[[Report], list[PredicateEvidence]]] = {
    "reproducer_host_indexing": _reproducer_host_indexing,
    "kernel_host_indexing_contradicted": _kernel_host_indexing_contradicted,
    "kernel_source_rejected": _kernel_source_rejected,
    "torch_cuda_newer_than_driver": _torch_cuda_newer_than_driver,
    "kernel_host_indexing": _kernel_host_indexing,
    "kernel_host_indexing_not_called": _kernel_host_indexing_not_called,
    "kernel_crashes_where_control_passes": _kernel_crashes_where_control_passes,
    "control_fails_with_kernel": _control_fails_with_kernel,
}


def installed_version(environment: Environment, name: str) -> str | None:
    """A package version, or the driver ("driver") and CUDA driver ("cuda-driver") versions."""
    if name == "driver":
        return environment.driver.version
    if name == "cuda-driver":
        return environment.driver.cuda_driver_version
    return environment.packages.get(name)


def _affected(issue: KnownIssue, environment: Environment) -> bool:
    for name, specifier in issue.affects.items():
        version = installed_version(environment, name)
        if version is None:
            return False
        try:
            if not specifier.contains(Version(version), prereleases=True):
                return False
        except InvalidVersion:
            return False
    return True


def match_findings(report: Report, issues: Sequence[KnownIssue]) -> tuple[Finding, ...]:
    """Every known issue whose version constraints hold and whose evidence or predicate is in ``report``; then, for
    the failing runs no known problem explains, the mechanisms (mechanisms.toml) their texts show."""
    findings: list[Finding] = []
    rules = load_rules()
    for issue in issues:
        if not _affected(issue, report.environment):
            continue
        matched = [
            (ev, r) for ev in issue.evidence for r in report.results if ev.matches(r) and _emitted_by(issue, r, rules)
        ]
        evidence = [ev.describe(r) for ev, r in matched]
        predicated = [seen for name in issue.predicates for seen in PREDICATES[name](report)]
        evidence += [text for text, _ in predicated]
        if evidence:
            findings.append(
                Finding(
                    id=issue.id,
                    title=issue.title,
                    severity=issue.severity,
                    evidence=tuple(dict.fromkeys(evidence)),
                    explanation=issue.explanation,
                    fix=issue.fix,
                    references=issue.references,
                    patch=issue.patch,
                    runs=tuple(
                        dict.fromkeys([r.id for _, r in matched] + [run for _, run in predicated if run is not None])
                    ),
                )
            )
    explained: dict[str, list[str]] = {}  # run -> the known problems that explain it: the mechanisms stay silent there
    for finding in findings:
        for run_id in finding.runs if finding.severity == "problem" else ():
            explained.setdefault(run_id, []).append(finding.id)
    known_ids = {f.id for f in findings}
    return (*findings, *(f for f in mechanism_findings(report, explained) if f.id not in known_ids))


def _emitted_by(issue: KnownIssue, result: ProbeResult, rules: Rules) -> bool:
    """Whether ``result``'s text is the issue's toolchain's: it carries that toolchain's marks, or it comes from a probe
    that runs only that toolchain. Triton's ptxas error is not the Mojo toolchain's, though the words are the same;
    a text with nobody's marks is left to the mechanisms, which say what they cannot tell."""
    if issue.toolchain is None:
        return True
    emitter = rules.attribute(searchable(result))
    if emitter is None and result.probe in MAX_PROBES:
        return issue.toolchain == "mojo"  # gpudoctor's own MAX probes run nothing but MAX's toolchain
    return emitter is not None and emitter.id == issue.toolchain


def _require_str(where: str, entry: Mapping[str, Any], key: str, optional: bool = False) -> str | None:
    value = entry.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise GpuDoctorError(f"{where}: field {key!r} must be a non-empty string")
    return value


def _evidence(where: str, entry: Any) -> Evidence:
    entry = checked_table(where, entry, _EVIDENCE_FIELDS)
    probe = _require_str(where, entry, "probe")
    try:
        outcome = Outcome(_require_str(where, entry, "outcome"))
    except ValueError as error:
        raise GpuDoctorError(f"{where}: field 'outcome': {error}") from error
    pattern_text = _require_str(where, entry, "pattern", optional=True)
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error as error:
        raise GpuDoctorError(f"{where}: field 'pattern' is not a valid regex: {error}") from error
    detail = entry.get("detail", {})
    if not isinstance(detail, dict):
        raise GpuDoctorError(f"{where}: field 'detail' must be a table")
    assert probe is not None
    return Evidence(
        probe=probe,
        outcome=outcome,
        signal=_require_str(where, entry, "signal", optional=True),
        pattern=pattern,
        detail=detail,
    )


def _issue(where: str, entry: Any) -> KnownIssue:
    entry = checked_table(where, entry, _ISSUE_FIELDS)
    issue_id = _require_str(where, entry, "id")
    where = f"{where} ({issue_id})"
    severity = entry.get("severity", "problem")
    if severity not in SEVERITIES:
        raise GpuDoctorError(f"{where}: field 'severity' must be one of {', '.join(SEVERITIES)}")
    affects: dict[str, SpecifierSet] = {}
    raw_affects = entry.get("affects", {})
    if not isinstance(raw_affects, dict):
        raise GpuDoctorError(f"{where}: field 'affects' must be a table")
    for name, text in raw_affects.items():
        try:
            affects[name] = SpecifierSet(str(text))
        except InvalidSpecifier as error:
            raise GpuDoctorError(f"{where}: field 'affects.{name}' is not a version specifier: {text!r}") from error
    raw_evidence = entry.get("evidence", [])
    predicates = entry.get("predicates", [])
    if not isinstance(raw_evidence, list) or not isinstance(predicates, list):
        raise GpuDoctorError(f"{where}: fields 'evidence' and 'predicates' must be arrays")
    for name in predicates:
        if name not in PREDICATES:
            raise GpuDoctorError(f"{where}: field 'predicates' names unknown predicate {name!r}")
    if not raw_evidence and not predicates:
        raise GpuDoctorError(f"{where}: needs at least one 'evidence' item or predicate")
    references = string_list(where, entry, "references")
    shown = _require_str(where, entry, "shown", optional=True)
    if shown is not None and shown not in SHOWN:
        raise GpuDoctorError(f"{where}: field 'shown' must be one of {', '.join(SHOWN)}")
    toolchain = _require_str(where, entry, "toolchain", optional=True)
    known_toolchains = {t.id for t in load_rules().toolchains}
    if toolchain is not None and toolchain not in known_toolchains:
        raise GpuDoctorError(f"{where}: field 'toolchain' must be one of {', '.join(sorted(known_toolchains))}")
    return KnownIssue(
        id=str(issue_id),
        title=str(_require_str(where, entry, "title")),
        severity=severity,
        explanation=str(_require_str(where, entry, "explanation")),
        fix=str(_require_str(where, entry, "fix")),
        evidence=tuple(_evidence(f"{where}: evidence #{n + 1}", e) for n, e in enumerate(raw_evidence)),
        affects=affects,
        predicates=tuple(predicates),
        references=references,
        patch=_require_str(where, entry, "patch", optional=True),
        shown=shown,
        toolchain=toolchain,
    )


def load_known_issues(path: Path = KNOWN_ISSUES) -> tuple[KnownIssue, ...]:
    """Every known issue in ``path``, validated; a malformed entry is an error naming entry and field."""
    data = read_toml(path, MAX_KNOWN_ISSUES_BYTES)
    entries = data.get("issue", [])
    if not isinstance(entries, list):
        raise GpuDoctorError(f"{path}: 'issue' must be an array of tables ([[issue]])")
    issues = tuple(_issue(f"{path}: issue #{n + 1}", e) for n, e in enumerate(entries))
    ids = [i.id for i in issues]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise GpuDoctorError(f"{path}: issue id {duplicates[0]!r} is declared twice")
    return issues
