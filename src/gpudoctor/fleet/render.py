"""A fleet report as plain text or Markdown: the odd nodes out first, then the groups, then every node."""

from __future__ import annotations

from gpudoctor.fleet.report import (
    Difference,
    EnvironmentDifference,
    FleetReport,
    NodeStatus,
    OddNode,
    OutcomeDifference,
)
from gpudoctor.safetext import safe_text


def _environment_line(environment: dict[str, str | int] | object) -> str:
    if not isinstance(environment, dict) or not environment:
        return "(no inventory)"
    keys = ("gpu", "gpu_count", "driver", "torch", "torch_cuda", "max", "python")
    return ", ".join(f"{k} {environment[k]}" for k in keys if k in environment)


def difference_text(difference: Difference, majority_size: int) -> str:
    """One way a node differs from the majority (of ``majority_size`` nodes), in words."""
    elsewhere = "on the others" if majority_size > 1 else "on the other"
    if isinstance(difference, EnvironmentDifference):
        here, there = ("absent" if v is None else v for v in (difference.here, difference.there))
        return f"{difference.key} {here} vs {there} {elsewhere}"
    if isinstance(difference, OutcomeDifference):
        mine, theirs = ("did not run" if o is None else o.value for o in (difference.here, difference.there))
        return f"{difference.run_id} {mine} only there ({theirs} {elsewhere})"
    return f"finding {difference.finding} {'only there' if difference.here else f'{elsewhere} but not there'}"


def what_sets_apart(odd: OddNode) -> str:
    """What sets an odd node apart: why it did not answer, or how it differs from the majority (raw text: the
    faces make it safe to print)."""
    if odd.status is not NodeStatus.DONE:
        return f"{odd.status.value}: {odd.reason}"
    said = [difference_text(d, odd.majority_size) for d in odd.differences]
    return "; ".join(said or ["differs in a way the summary does not show (see its report)"])


def odd_one_line(odd: OddNode) -> str:
    """The odd node in one sentence: which node, where in the fleet, and what sets it apart (raw text)."""
    return f"{odd.label} ({odd.position} of {odd.total}): {what_sets_apart(odd)}"


def fleet_text(report: FleetReport) -> str:
    answered = sum(n.status is NodeStatus.DONE for n in report.nodes)
    lines = [f"gpudoctor {report.doctor_version} fleet: {len(report.nodes)} nodes, {answered} answered", ""]
    if report.odd_ones:
        lines.append("  odd ones out:")
        lines += [f"    {safe_text(odd_one_line(odd))}" for odd in report.odd_ones]
    elif answered:
        lines.append("  every node that answered has the same environment and the same outcomes")
    lines.append("")
    for number, group in enumerate(report.groups, 1):
        problems = group.problems
        lines.append(f"  group {number}: {', '.join(group.labels)}")
        lines.append(f"    {safe_text(_environment_line(dict(group.environment)))}")
        lines.append(f"    problems: {', '.join(problems) if problems else 'none'}")
        if group.findings:
            lines.append(f"    findings: {', '.join(group.findings)}")
    lines.append("")
    for node in report.nodes:
        where = f" [{safe_text(node.host)}]" if node.host else ""
        reports = f", {len(node.reports)} doctor run(s)" if node.reports else ""
        why = f": {safe_text(node.reason)}" if node.reason else ""
        lines.append(f"  {node.label}{where}: {node.status.value} in {node.duration_s:.1f} s{reports}{why}")
    return "\n".join(lines) + "\n"


def fleet_markdown(report: FleetReport) -> str:
    answered = sum(n.status is NodeStatus.DONE for n in report.nodes)
    lines = [f"## gpudoctor {report.doctor_version} fleet report ({report.created})", ""]
    lines.append(f"{len(report.nodes)} nodes, {answered} answered.")
    lines.append("")
    if report.odd_ones:
        lines += ["### Odd ones out", ""] + [f"- {safe_text(odd_one_line(odd))}" for odd in report.odd_ones] + [""]
    lines += ["| group | nodes | environment | problems |", "| --- | --- | --- | --- |"]
    for number, group in enumerate(report.groups, 1):
        problems = group.problems
        env = safe_text(_environment_line(dict(group.environment))).replace("|", "\\|")
        lines.append(f"| {number} | {', '.join(group.labels)} | {env} | {', '.join(problems) or 'none'} |")
    lines += ["", "| node | status | time | reason |", "| --- | --- | --- | --- |"]
    for node in report.nodes:
        reason = safe_text(node.reason).replace("|", "\\|")
        lines.append(f"| {node.label} | {node.status.value} | {node.duration_s:.1f} s | {reason} |")
    return "\n".join(lines) + "\n"
