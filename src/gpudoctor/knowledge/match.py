"""In a run and over the report: the entries' ``in_run`` and ``over_report`` clauses matched against a Report, a pure
function of it. Entries with ``evidence`` or predicates speak first; then the general ones (``patterns``: a class of
failure in any failing run's text, attributed to the toolchain that emitted it by its paths and frames, never by a
keyword two toolchains share), silent on the runs a ``specific`` entry explains.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence

from packaging.version import InvalidVersion, Version

from gpudoctor.errors import GpuDoctorError
from gpudoctor.knowledge.answer import answer
from gpudoctor.knowledge.before import seen_before
from gpudoctor.knowledge.checks.report import controls_beside, controls_pass_beside
from gpudoctor.knowledge.entry import ANY_PROBE, Evidence, Explanation, Knowledge, Role
from gpudoctor.knowledge.load import load_knowledge
from gpudoctor.knowledge.reading import innermost_package
from gpudoctor.knowledge.registry import REGISTRY
from gpudoctor.knowledge.text import fill
from gpudoctor.knowledge.verdict import one_verdict
from gpudoctor.knowledge.vocabulary import UNKNOWN_PHASE, load_vocabulary
from gpudoctor.model import Environment, Finding, ProbeResult, Report, Severity
from gpudoctor.protocol import KERNEL_PROBE, LOG_RUN_ID, MISSING_NAME_DETAIL, REPRODUCER_RUN_ID

USER_RUNS = frozenset({REPRODUCER_RUN_ID, LOG_RUN_ID})  # the runs of a user's own command or log

UNIDENTIFIED = "an unidentified toolchain"


def searchable(result: ProbeResult) -> str:
    """The text of a run that the entries' patterns read: its summary, the error, the skip reason, its frames and the
    tail of its stderr."""
    frames = "\n".join(f"{f.file}:{f.line} in {f.function}" for f in result.frames)
    # a pasted log's summary is "FILE NAME: its last error line": the line is in its text, and the name the user gave
    # the file is no evidence of anything ("pycuda_crash.log" names no component)
    summary = "" if result.id == LOG_RUN_ID and result.stderr_tail else result.summary
    parts = (summary, result.exception_type or "", result.message or "", result.skip_reason or "", frames)
    return "\n".join((*parts, result.stderr_tail))


# Shared memory one block may use, opted in (cudaFuncAttributeMaxDynamicSharedMemorySize), by compute capability:
# the CUDA C Programming Guide's table of technical specifications. Without opting in, 48 KiB everywhere.
SHARED_PER_BLOCK_KIB = {"7.0": 96, "7.2": 96, "7.5": 64, "8.0": 163, "8.6": 99, "8.7": 163, "8.9": 99, "9.0": 227,
                        "10.0": 227, "10.3": 227, "11.0": 227, "12.0": 99, "12.1": 99}  # fmt: skip


def report_facts(report: Report) -> dict[str, str]:
    """What an entry's text may name about this machine in a run."""
    environment = report.environment
    gpu = environment.driver.gpus[0] if environment.driver.gpus else None
    facts = {
        "driver_cuda": environment.driver.cuda_driver_version or "unknown (no driver seen)",
        "torch_cuda": str(environment.stack.torch_cuda or "unknown"),
    }
    if not any(r.id == REPRODUCER_RUN_ID for r in report.results):  # a report of a run never proposes another
        facts["gpudoctor_run"] = "gpudoctor run"
    if environment.driver.version:
        facts["driver"] = environment.driver.version
    if gpu is not None:
        facts["gpu"] = gpu.name or "this GPU"
        facts["compute_capability"] = gpu.compute_capability or "unknown"
        if (kib := SHARED_PER_BLOCK_KIB.get(gpu.compute_capability or "")) is not None:
            facts["shared_per_block"] = f"{kib} KiB"
    else:
        facts["gpu"], facts["compute_capability"] = "the GPU", "unknown"
    log = report.result(LOG_RUN_ID)
    if log is not None:  # a pasted log: the reporter's machine as its text gives it, never this one's
        from gpudoctor.facts.reported import reported

        said = reported(log.stderr_tail or "")
        facts = {**facts, "driver_cuda": said.driver_cuda or "not in the log", "torch_cuda": said.torch_cuda or
                 "not in the log", "gpu": said.gpu or "the GPU", "compute_capability": "unknown"}  # fmt: skip
        facts.pop("shared_per_block", None)
        if said.driver:
            facts["driver"] = said.driver
        else:
            facts.pop("driver", None)
    return facts


def _matches(evidence: Evidence, result: ProbeResult) -> bool:
    # "kernel/cuda" names every GPU's run: kernel/cuda:0, kernel/cuda:1, ...; "*" names any probe (an error text
    # that means the same wherever it appears, like one quoted from a field report).
    names = (result.probe, result.id, result.id.split(":")[0], ANY_PROBE)
    if evidence.probe not in names or result.outcome is not evidence.outcome:
        return False
    if evidence.signal is not None and result.signal != evidence.signal:
        return False
    if any(result.details.get(key) != value for key, value in evidence.detail.items()):
        return False
    return evidence.pattern is None or bool(evidence.pattern.search(searchable(result)))


def _describe(evidence: Evidence, result: ProbeResult, values: dict[str, str]) -> str:
    """The evidence line, and the pattern's named groups added to ``values``."""
    what = f"{result.id} {result.outcome.value}"
    if result.signal:
        what += f" ({result.signal})"
    if evidence.pattern is not None:
        found = evidence.pattern.search(searchable(result))
        if found:
            what += f", matching {found.group(0)!r}"
            values.update({k: v for k, v in found.groupdict().items() if v})
    for key, value in evidence.detail.items():
        what += f", {key} = {value!r}"
    return what


def installed_version(environment: Environment, name: str) -> str | None:
    """A package version, or the driver ("driver") and CUDA driver ("cuda-driver") versions."""
    if name == "driver":
        return environment.driver.version
    if name == "cuda-driver":
        return environment.driver.cuda_driver_version
    return environment.packages.get(name)


def _affected(entry: Explanation, environment: Environment) -> bool:
    for name, specifier in entry.affects.items():
        version = installed_version(environment, name)
        if version is None:
            return False
        try:
            if not specifier.contains(Version(version), prereleases=True):
                return False
        except InvalidVersion:
            return False
    return True


@functools.cache
def _probes_needing() -> Mapping[str, frozenset[str]]:
    """gpudoctor's probes and the distributions each needs (catalog.toml's `needs`; the kernel probe, declared in
    Python, needs MAX)."""
    from gpudoctor.suite.catalog import default_probe_dir, load_catalog

    try:
        needs = {spec.id: frozenset(spec.needs_packages) for spec in load_catalog(default_probe_dir())}
    except GpuDoctorError:
        needs = {}  # no probes installed: no probe of gpudoctor's ran either
    return {KERNEL_PROBE: frozenset({"torch", "max"}), **needs}


def _runs_only(knowledge: Knowledge, probe: str) -> str | None:
    """The toolchain a probe of gpudoctor's runs and nothing else (its `needs` name that toolchain's package)."""
    needs = _probes_needing().get(probe, frozenset())
    return next((t.id for t in knowledge.toolchains if needs & set(t.probes_needing)), None)


def _emitted_by(entry: Explanation, result: ProbeResult, knowledge: Knowledge) -> bool:
    """Whether ``result``'s text is the entry's toolchain's: it carries that toolchain's marks, or it comes from a
    probe that runs only that toolchain. Triton's ptxas error is not the Mojo toolchain's, though the words are the
    same; a text with nobody's marks is left to the general entries, which say what they cannot tell."""
    wanted = entry.in_run.toolchain if entry.in_run else None
    if wanted is None:
        return True
    emitter = knowledge.attribute(searchable(result))
    if emitter is None and (only := _runs_only(knowledge, result.probe)) is not None:
        return wanted == only
    return emitter is not None and emitter.id == wanted


def match_findings(report: Report, entries: Knowledge | Iterable[Explanation] | None = None) -> tuple[Finding, ...]:
    """Every entry (the shipped ones by default) whose releases hold and whose evidence or predicate is in
    ``report``; then, for the failing runs no specific finding explains, the general entries their texts show."""
    if isinstance(entries, Knowledge):
        knowledge = entries
    else:
        knowledge = load_knowledge() if entries is None else Knowledge(tuple(entries), load_knowledge().toolchains)
    checks = REGISTRY
    findings: list[Finding] = []
    explained: dict[str, list[str]] = {}  # run -> the specific findings that explain it: the general ones stay silent
    known: set[str] = set()  # runs a known issue's evidence names: a lookup of a missing name would be noise there
    for entry in knowledge:
        evidence_items = entry.in_run.evidence if entry.in_run else ()
        if not (evidence_items or entry.over_report) or not _affected(entry, report.environment):
            continue
        values = report_facts(report)
        found_before = seen_before(entry, report.environment)
        values.update(found_before[0] if found_before else {})
        matched = [(ev, r) for ev in evidence_items for r in report.results
                   if _matches(ev, r) and _emitted_by(entry, r, knowledge)]  # fmt: skip
        in_run = entry.in_run
        if in_run is not None and (in_run.stack_only or in_run.where_controls_pass):  # whose fault the controls say
            matched = [(ev, r) for ev, r in matched if controls_pass_beside(report, r) is in_run.where_controls_pass]
        evidence = [_describe(ev, r, values) for ev, r in matched]
        if in_run is not None and in_run.where_controls_pass:
            beside = {c.id: c for _, r in matched for c in controls_beside(report, r)}
            evidence += [f"{c.id} passes on the same device and stack: {c.summary}" for c in beside.values()]
        predicated = [seen for name in entry.over_report for seen in checks[name].report(report)]  # type: ignore[misc]
        evidence += [text for text, _ in predicated]
        if not evidence:
            continue
        runs = tuple(dict.fromkeys([r.id for _, r in matched] + [run for _, run in predicated if run is not None]))
        # What a user's failing run (the command, a pasted log) shows in its own text explains why it failed: a
        # problem there, whatever its severity where it is one notice among others (a probe's, the environment's).
        explains = any(r.id in USER_RUNS and r.outcome.is_problem for _, r in matched)
        finding = Finding(
            id=entry.id, title=fill(entry.title, values), severity=Severity.PROBLEM if explains else entry.severity,
            evidence=tuple(dict.fromkeys(evidence)), explanation=fill(entry.explanation, values),
            fix=fill(entry.fix, values), references=entry.references, patch=entry.patch, runs=runs,
        )  # fmt: skip
        findings.append(finding)
        known.update(r.id for _, r in matched)
        for run_id in runs if entry.specific else ():
            explained.setdefault(run_id, []).append(entry.id)
    for finding in _located_findings(report, knowledge, known | set(explained)):
        findings.append(finding)
        for run_id in finding.runs:  # the lookup stands in for the general entries and the generic answer
            explained.setdefault(run_id, []).append(finding.id)
    known_ids = {f.id for f in findings}
    general = [f for f in _general_findings(report, knowledge, explained) if f.id not in known_ids]
    return one_verdict(report, (*findings, *general, *_unanswered(report, knowledge, [*findings, *general])), knowledge)


def _located_findings(report: Report, knowledge: Knowledge, known: set[str]) -> list[Finding]:
    """The ``located`` entry for the failing runs that missed a name the environment was searched for
    (knowledge.located), no known issue names and no general entry but those it stands in for matches: one finding,
    its texts from the first run's lookup."""
    entry = next((e for e in knowledge if e.in_run is not None and e.in_run.located), None)
    if entry is None or entry.in_run is None or not any(MISSING_NAME_DETAIL in r.details for r in report.results):
        return []
    from gpudoctor.knowledge.located import located  # only for a run that carries a lookup

    replaced = set(entry.in_run.instead_of)
    others = [e.in_run for e in knowledge if e.in_run and e.in_run.patterns and e.id not in replaced]
    runs = [(r, seen) for r in report.results
            if r.outcome.is_problem and r.id not in known and (seen := located(r)) is not None
            and not any(other.search(searchable(r)) for other in others)]  # fmt: skip
    if not runs:
        return []
    more = f" (and {len(runs) - 1} more run{'s' if len(runs) > 2 else ''})" if len(runs) > 1 else ""
    values = {**report_facts(report), **runs[0][1].values, "more": more}
    evidence = tuple(dict.fromkeys(line for _, seen in runs for line in seen.evidence))
    explains = any(r.id in USER_RUNS for r, _ in runs)  # the lookup explains a user's failing run: a problem there
    return [
        Finding(
            id=entry.id, title=fill(entry.title, values), severity=Severity.PROBLEM if explains else entry.severity,
            evidence=evidence, explanation=fill(entry.explanation, values), fix=fill(entry.fix, values),
            references=entry.references, runs=tuple(r.id for r, _ in runs),
        )
    ]  # fmt: skip


def _unanswered(report: Report, knowledge: Knowledge, findings: Sequence[Finding]) -> list[Finding]:
    """The generic answer (knowledge.answer) for the failing runs no finding names: one finding, a line per run."""
    supports = {e.id for e in knowledge if e.role is Role.SUPPORT}  # what public reports found: a candidate to
    # check, not a reading of this text — the generic answer still says what the text shows and what decides, where
    # it shows when it failed; where it shows no phase, a support that stands alone (threads that found one cause) is
    # the better answer, and candidates of different causes stay beneath the generic reading
    alone = {e.id for e in knowledge if e.role is Role.SUPPORT and e.stands_alone}
    answered = {run for finding in findings if finding.id not in supports for run in finding.runs}
    supported = {run for finding in findings if finding.id in alone for run in finding.runs}
    runs = [r for r in report.results if r.outcome.is_problem and r.id not in answered]
    entry = next((e for e in knowledge if e.in_run is not None and e.in_run.unexplained), None)
    if not runs or entry is None:
        return []
    answers = [(r, answer(r, searchable(r), report.environment, knowledge)) for r in runs]
    answers = [(r, a) for r, a in answers if r.id not in supported or a.phase_id != UNKNOWN_PHASE]
    if not answers:
        return []
    runs = [r for r, _ in answers]
    first = answers[0][1]
    more = f" (and {len(runs) - 1} more run{'s' if len(runs) > 2 else ''})" if len(runs) > 1 else ""
    values = {**report_facts(report), "component": first.component, "phase": first.phase, "more": more}
    # the one run's own next step as the fix (several runs: each has its own, in the evidence)
    values["next"] = f"Next: {first.experiment}." if len(runs) == 1 else "Run the experiment named for each run below."
    if first.said:  # the tool's own words first: what it says is wrong, or what to do
        who = f"what {first.component} itself says" if first.component_id else "what the text itself says"
        values["said"] = f'First {who}: "{first.said}". '
    evidence = tuple(f"{r.id} {r.outcome.value}: {a.line()}" for r, a in answers)
    return [
        Finding(
            id=entry.id, title=fill(entry.title, values), severity=entry.severity, evidence=evidence,
            explanation=fill(entry.explanation, values), fix=fill(entry.fix, values), references=entry.references,
            runs=tuple(r.id for r in runs),
        )
    ]  # fmt: skip


def _general_findings(report: Report, knowledge: Knowledge, explained: Mapping[str, Sequence[str]]) -> list[Finding]:
    """A finding per general entry and toolchain seen in the report's failing runs that ``explained`` leaves."""
    facts = report_facts(report)
    seen: dict[str, tuple[Finding, list[str], list[str]]] = {}
    general = [e for e in knowledge if e.in_run and e.in_run.patterns and _affected(e, report.environment)]
    for result in report.results:
        if not result.outcome.is_problem or explained.get(result.id):
            continue  # a specific finding explains this run: it is the better answer
        text = searchable(result)
        emitter = knowledge.attribute(text)
        for entry in general:
            assert entry.in_run is not None
            found = entry.in_run.search(text)
            if found is None:
                continue
            toolchain = emitter
            if toolchain is not None and entry.in_run.toolchains and toolchain.id not in entry.in_run.toolchains:
                toolchain = None  # its marks are there, but it cannot emit this: say whose it is not, not whose it is
            if toolchain is None and entry.in_run.implied is not None:
                toolchain = knowledge.toolchain(entry.in_run.implied)
            values = {**facts, **{k: v for k, v in found.groupdict().items() if v}}
            values["toolchain"] = toolchain.name if toolchain else UNIDENTIFIED
            if entry.in_run.requester and (asking := innermost_package(text, load_vocabulary())) is not None:
                toolchain = None  # the package that asked, innermost in the traceback: its own extension's need
                values["toolchain"] = f"the package {asking}"
            if toolchain is not None and toolchain is emitter:
                values["emitter"] = toolchain.name  # only where the text's marks name it ({emitter?})
            finding_id = f"{entry.id}-{toolchain.id}" if toolchain else entry.id
            line = found.group(0).strip()
            evidence = f"{result.id} {result.outcome.value}: {line!r}" + (
                f" (from {toolchain.name}: the text carries its marks)" if toolchain is emitter and toolchain else ""
            )
            if finding_id in seen:
                seen[finding_id][1].append(evidence)
                seen[finding_id][2].append(result.id)
                continue
            fix = entry.fixes.get(toolchain.id, entry.fix) if toolchain else entry.fix
            title = fill(entry.title, values)
            finding = Finding(
                id=finding_id,
                title=title[:1].upper() + title[1:],
                severity=entry.severity,
                evidence=(),
                explanation=fill(entry.explanation, values),
                fix=fill(fix, values),
                references=entry.references,
            )
            seen[finding_id] = (finding, [evidence], [result.id])
    return [
        dataclasses.replace(finding, evidence=tuple(dict.fromkeys(ev)), runs=tuple(dict.fromkeys(runs)))
        for finding, ev, runs in seen.values()
    ]
