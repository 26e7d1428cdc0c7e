"""A report as JUnit XML, so CI systems (GitHub Actions, GitLab, Jenkins) show each probe run as a test.

One test case per run (probe and device): a pass passes; a skipped or interrupted run is skipped with its reason; a
failure or timeout is a <failure>, a crash an <error>, each with the summary, signal, last step and the fix of
every finding that names the run as the message, and the reproduce command and stderr tail in the body. Each
problem finding that names no run (a pre-flight check) is a failing case of its own.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from gpudoctor.model import Finding, Outcome, ProbeResult, Report
from gpudoctor.safetext import safe_text

_STDERR_CHARS = 20_000
# XML 1.0 cannot carry most control characters even escaped; safe_text has made them visible already, and
# this drops anything left that XML refuses (lone surrogates, U+FFFE/U+FFFF).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: object) -> str:
    return _NOT_XML.sub("?", safe_text(str(value)))


def _message(result: ProbeResult, findings: list[Finding]) -> str:
    parts = [result.summary]
    if result.signal:
        parts.append(f"signal {result.signal}")
    if result.last_step:
        parts.append(f"last step: {result.last_step}")
    parts += [f"fix ({finding.id}): {finding.fix}" for finding in findings]
    return " | ".join(parts)


def _body(result: ProbeResult, findings: list[Finding]) -> str:
    lines = [result.summary, "", f"reproduce: {result.command}"]
    for finding in findings:
        lines += ["", f"known issue {finding.id}: {finding.title}", finding.explanation, f"fix: {finding.fix}"]
    if result.stderr_tail.strip():
        lines += ["", "stderr (tail):", result.stderr_tail[-_STDERR_CHARS:]]
    return "\n".join(lines)


def to_junit(report: Report, suite: str = "gpudoctor") -> str:
    """The report as one JUnit <testsuites> document."""
    return _document([junit_suite(report, suite)])


def _document(suites: list[ET.Element]) -> str:
    totals = {key: str(sum(int(s.get(key, "0")) for s in suites)) for key in ("tests", "failures", "errors", "skipped")}
    time_total = f"{sum(float(s.get('time', '0')) for s in suites):.3f}"
    root = ET.Element("testsuites", {"name": "gpudoctor", "tests": totals["tests"], "time": time_total,
                                     **{k: v for k, v in totals.items() if k != "tests"}})  # fmt: skip
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def junit_suite(report: Report, suite: str = "gpudoctor") -> ET.Element:
    """One <testsuite>: a case per run, and one per problem finding that names no run."""
    cases: list[ET.Element] = []
    counts = {"failures": 0, "errors": 0, "skipped": 0}
    for result in report.results:
        name = {"classname": _text(f"{suite}.{result.probe}"), "name": _text(result.id)}
        case = ET.Element("testcase", {**name, "time": f"{result.duration_s:.3f}"})
        findings = [f for f in report.findings if result.id in f.runs]
        if result.outcome in (Outcome.SKIPPED, Outcome.INTERRUPTED):
            reason = result.skip_reason or result.summary
            ET.SubElement(case, "skipped", {"message": _text(reason)})
            counts["skipped"] += 1
        elif result.outcome in (Outcome.FAIL, Outcome.TIMEOUT, Outcome.CRASH):
            tag, key = ("error", "errors") if result.outcome is Outcome.CRASH else ("failure", "failures")
            kind = result.signal or result.exception_type or result.outcome.value
            element = ET.SubElement(case, tag, {"message": _text(_message(result, findings)), "type": _text(kind)})
            element.text = _text(_body(result, findings))
            counts[key] += 1
        if result.stdout_tail.strip():
            ET.SubElement(case, "system-out").text = _text(result.stdout_tail[-_STDERR_CHARS:])
        cases.append(case)
    for finding in report.findings:
        if finding.is_problem and not finding.runs:
            case = ET.Element("testcase", {"classname": f"{suite}.preflight", "name": _text(finding.id), "time": "0"})
            element = ET.SubElement(case, "failure", {"message": _text(f"{finding.title} | fix: {finding.fix}"),
                                                      "type": "finding"})  # fmt: skip
            element.text = _text("\n".join([*finding.evidence, "", finding.explanation, f"fix: {finding.fix}"]))
            counts["failures"] += 1
            cases.append(case)
    total_time = f"{sum(r.duration_s for r in report.results):.3f}"
    attributes = {"name": suite, "tests": str(len(cases)), "time": total_time, "timestamp": report.created,
                  **{k: str(v) for k, v in counts.items()}}  # fmt: skip
    testsuite = ET.Element("testsuite", attributes)
    properties = ET.SubElement(testsuite, "properties")
    env = report.environment
    for label, value in (
        ("gpudoctor", report.doctor_version),
        ("driver", env.driver.version or "none"),
        ("gpus", ", ".join(g.name or "?" for g in env.driver.gpus) or "none"),
        ("torch", env.packages.get("torch") or "not installed"),
        ("max", env.packages.get("max") or "not installed"),
        ("python", env.platform.python),
    ):
        ET.SubElement(properties, "property", {"name": label, "value": _text(value)})
    testsuite.extend(cases)
    return testsuite


def fleet_to_junit(reports: list[tuple[str, Report]], unanswered: list[tuple[str, str, str]]) -> str:
    """A fleet as JUnit: a suite per doctor run on a node ("node 2", "node 2 gpu0"), and a failing case for each
    node that did not answer (label, status, reason)."""
    suites = [junit_suite(report, label) for label, report in reports]
    if unanswered:
        lost = ET.Element("testsuite", {"name": "fleet", "tests": str(len(unanswered)), "failures": "0",
                                        "errors": str(len(unanswered)), "skipped": "0", "time": "0"})  # fmt: skip
        for label, status, reason in unanswered:
            case = ET.SubElement(lost, "testcase", {"classname": "gpudoctor.fleet", "name": _text(label), "time": "0"})
            ET.SubElement(case, "error", {"message": _text(f"{status}: {reason}"), "type": _text(status)})
        suites.append(lost)
    return _document(suites)
