"""A bisect's report as plain text, Markdown (for a bug report) and a JSON document: the cells tried, the
transitions told apart by how the run ends, what explains them, and what to pin."""

from __future__ import annotations

from typing import Any

from packaging.utils import canonicalize_name

from gpudoctor.reproducer.bisect import Transition, Verdict
from gpudoctor.reproducer.bisect_run import BisectReport, Examined
from gpudoctor.safetext import safe_text


def _where(transition: Transition) -> str:
    if transition.exact:
        return f"{transition.before} -> {transition.after}"
    return (
        f"between {transition.before} and {transition.after} (not pinpointed: the releases between were not examined)"
    )


def _explained(transition: Transition, report: BisectReport) -> list[str]:
    """The problem findings of the release after the change that the one before did not have (and the reverse)."""
    cells = {e.release: e for e in report.examined}
    before, after = cells[transition.before], cells[transition.after]
    new = [f"{title} [{fid}]" for fid, title in after.findings if fid not in {f for f, _ in before.findings}]
    gone = [f"{title} [{fid}]" for fid, title in before.findings if fid not in {f for f, _ in after.findings}]
    release = after.release
    return [f"found from {release}: {line}" for line in new] + [f"gone from {release}: {line}" for line in gone]


def _first_bad(report: BisectReport) -> str | None:
    """The first failing release next to a passing one (where it broke), if the search found one."""
    for t in report.transitions:
        if t.exact and (t.verdict_before, t.verdict_after) == (Verdict.GOOD, Verdict.BAD):
            return t.after
    return None


def requirement_lines(report: BisectReport) -> list[str]:
    """Every requirement a distribution declares that the failing cells break, and which releases break it: "torch
    2.6.0 declares triton==3.2.0; 3.3.0 breaks it" (pip installs such a release with a warning; uv's overrides here)."""
    broken: dict[tuple[str, str, str, str], list[str]] = {}
    passing: dict[tuple[str, str, str, str], list[str]] = {}  # releases that break it too, and pass
    for cell in report.examined:
        if cell.verdict in (Verdict.BAD, Verdict.OTHER, Verdict.GOOD):
            for unmet in cell.unmet:
                key = (unmet.package, unmet.version, unmet.requirement, unmet.needs)
                if cell.verdict is Verdict.GOOD:
                    passing.setdefault(key, []).append(cell.release)
                    continue
                if unmet.installed is None:
                    shown = f"{unmet.needs} not installed"
                elif canonicalize_name(unmet.needs) == canonicalize_name(report.package):
                    shown = unmet.installed
                else:
                    shown = f"{unmet.needs} {unmet.installed}"
                broken.setdefault(key, []).append(shown)
    first_bad = _first_bad(report)
    lines = []
    for key, breakers in broken.items():
        package, version, requirement, _ = key
        breakers = list(dict.fromkeys(breakers))
        first = first_bad if first_bad in breakers else breakers[0]
        others = [b for b in breakers if b != first]
        also = f" (as do the other failing releases examined: {', '.join(others)})" if others else ""
        if key in passing:  # then the broken declaration alone does not make it fail
            one = len(passing[key]) == 1
            also += f"; yet it passes on {', '.join(passing[key])}, which break{'s' if one else ''} it too"
        lines.append(f"{package} {version} declares {requirement}; {first} breaks it{also}")
    return lines


def verdict_lines(report: BisectReport) -> list[str]:
    """What the bisect concludes, in a few sentences: where the chased failure starts or ends, what to pin, and
    whether the fault is a release's or the script's."""
    lines: list[str] = []
    reference = next((e for e in report.examined if e.release == report.reference), None)
    if reference is None:
        return ["nothing was examined" + (" (interrupted)" if report.interrupted else "")]
    chased = [t for t in report.transitions if {t.verdict_before, t.verdict_after} == {Verdict.BAD, Verdict.GOOD}]
    for t in chased:
        good, bad = (t.before, t.after) if t.verdict_before is Verdict.GOOD else (t.after, t.before)
        way = (t.way_after if t.verdict_after is Verdict.BAD else t.way_before).label
        if t.verdict_before is Verdict.GOOD:
            lines.append(f"it broke {_where(t)}: last good {good}, first bad {bad} ({way})")
        else:
            lines.append(f"it was fixed {_where(t)}: last bad {bad} ({way}), first good {good}")
    goods = [e.release for e in report.examined if e.verdict is Verdict.GOOD]
    if chased and goods:
        passing = ", ".join(goods)
        newest = f"{report.package}=={goods[-1]} (the newest release examined where it passes; passing: {passing})"
        lines.append(f"pin: {newest}")
    lines += requirement_lines(report)
    bads = [e for e in report.examined if e.verdict is Verdict.BAD]
    if reference.verdict is Verdict.BAD and not goods:
        ends = [e.release for e in report.examined if e.verdict is Verdict.BAD]
        lines.append(
            f"it ends the same way ({reference.way.label}) on every release where it runs, {ends[0]} to {ends[-1]}: "
            "no release change explains it — the fault is most likely the script's, or in what every release shares "
            "(driver, GPU, torch). Check the stack with gpudoctor's control kernels: gpudoctor --only custom-op"
        )
    others = [t for t in report.transitions if Verdict.OTHER in (t.verdict_before, t.verdict_after)]
    for t in others:
        other = t.way_after if t.verdict_after is Verdict.OTHER else t.way_before
        side = t.after if t.verdict_after is Verdict.OTHER else t.before
        lines.append(
            f"{_where(t)}: it fails another way from/at {side} ({other.label}) — not the failure chased here "
            "(a reproducer written for one API generation fails to import or compile on others)"
        )
    if not report.transitions and bads:
        lines.append("no change found in the releases examined")
    return lines + (["interrupted: the cells that ended are kept; run it again to go on"] if report.interrupted else [])


def _cell_line(cell: Examined) -> str:
    kept = ", kept" if cell.reused else ""
    return f"{cell.release:<9} {cell.verdict.value:<18} {cell.way.label}  ({cell.seconds:.0f} s{kept})"


def _cells_are(report: BisectReport) -> str:
    """What every cell shares: torch and Python (a MAX bisect), or the examined environment (a package bisect)."""
    if report.pinned is None:
        return f"torch {report.torch}, Python {report.python}"
    return (
        f"{report.package} releases over the examined environment (its {report.pinned} other distributions pinned, "
        f"the release under test installed over what they declare), Python {report.python}"
    )


def bisect_text(report: BisectReport) -> str:
    lines = [
        f"gpudoctor {report.doctor_version} bisect: {safe_text(report.command)}",
        f"  {_cells_are(report)}; reference (bad) release {report.reference}; "
        f"{len(report.examined)} of {len(report.versions)} releases examined in {report.seconds:.0f} s"
        + (" (--scan)" if report.scan else ""),
        "",
    ]
    lines += [f"  {safe_text(_cell_line(cell))}" for cell in report.examined]
    lines.append("")
    for t in report.transitions:
        lines.append(f"  change {_where(t)}: {t.way_before.label} -> {t.way_after.label}")
        lines += [f"    {safe_text(line)}" for line in _explained(t, report)]
    lines += ["", *(f"  {safe_text(line)}" for line in verdict_lines(report))]
    return "\n".join(lines) + "\n"


def bisect_markdown(report: BisectReport) -> str:
    lines = [f"## gpudoctor bisect: `{report.command}`", ""]
    what = "MAX" if report.pinned is None else report.package
    lines += [f"{_cells_are(report)}; {len(report.examined)} of {len(report.versions)} {what} "
              f"releases examined ({', '.join(report.versions[:1] + report.versions[-1:])} range)", ""]  # fmt: skip
    lines += [f"- {line}" for line in verdict_lines(report)] + [""]
    lines += [f"| {what} | verdict | how it ended | summary |", "| --- | --- | --- | --- |"]
    for cell in report.examined:
        summary = cell.summary.replace("|", "\\|").replace("\n", " ")[:200]
        lines.append(f"| {cell.release} | {cell.verdict.value} | {cell.way.label} | {summary} |")
    return "\n".join(lines) + "\n"


def bisect_dict(report: BisectReport) -> dict[str, Any]:
    def way(w: Any) -> dict[str, str]:
        return {"outcome": w.outcome, "detail": w.detail}

    return {
        "doctor_version": report.doctor_version,
        "command": report.command,
        "package": report.package,
        "pinned": report.pinned,
        "torch": report.torch,
        "python": report.python,
        "versions": list(report.versions),
        "reference": report.reference,
        "scan": report.scan,
        "interrupted": report.interrupted,
        "seconds": round(report.seconds, 1),
        "cells": [
            {
                **({"max": c.release} if report.pinned is None else {}),  # the key MAX bisects always had
                "release": c.release,
                "verdict": c.verdict.value,
                "way": way(c.way),
                "summary": c.summary,
                "findings": [list(f) for f in c.findings],
                "report": c.report,
                "seconds": round(c.seconds, 1),
                "reused": c.reused,
                "unmet": [str(u) for u in c.unmet],
            }
            for c in report.examined
        ],
        "transitions": [
            {
                "before": t.before,
                "after": t.after,
                "exact": t.exact,
                "way_before": way(t.way_before),
                "way_after": way(t.way_after),
                "verdict_before": t.verdict_before.value,
                "verdict_after": t.verdict_after.value,
                "explained_by": _explained(t, report),
            }
            for t in report.transitions
        ],
        "verdict": verdict_lines(report),
    }
