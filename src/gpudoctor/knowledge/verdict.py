"""One verdict per failure: of the findings on a user's failing run (`gpudoctor run`, a pasted log), one leads — the
cause, in the words of its class — and what supports it or follows from it is said inside it, not as more problems.

The roles are data (``knowledge.entry.Role``, an entry's ``verdict`` table): a cause can lead; a symptom (a general
rule's reading of the failure's text, the general "the instruments name where") is taken in as the leading cause's
evidence; a support (the known-good probe that passes beside it) backs it. An entry names the entries that are its
consequences (a divergent barrier's race, the error read back at the next call). A second cause that is neither stays
a problem of its own: a second, independent cause. Pure: findings in, findings out, in the same order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from gpudoctor.knowledge.answer import GENERIC_ID
from gpudoctor.knowledge.entry import Explanation, Knowledge, Role
from gpudoctor.model import Finding, Relation, Report, Severity
from gpudoctor.protocol import OWN_RUN_IDS


def _entry(finding: Finding, entries: dict[str, Explanation]) -> Explanation | None:
    """The entry a finding came from: its id, or the general entry whose id a toolchain's finding starts with."""
    if finding.id in entries:
        return entries[finding.id]
    return next((e for i, e in entries.items() if finding.id.startswith(i + "-")), None)


def _named(finding: Finding, ids: Iterable[str]) -> bool:
    return any(finding.id == i or finding.id.startswith(i + "-") for i in ids)


def _on_failing_user_run(finding: Finding, failing: frozenset[str]) -> bool:
    return bool(failing & set(finding.runs))


def one_verdict(report: Report, findings: Sequence[Finding], knowledge: Knowledge) -> tuple[Finding, ...]:
    """``findings`` with, for the failing user run, every finding but the leading cause (and any independent second
    cause) marked ``part_of`` the cause it supports or follows from, and made a notice."""
    failing = frozenset(r.id for r in report.results if r.id in OWN_RUN_IDS and (r.outcome.is_problem or any(
        f.is_problem and r.id in f.runs for f in findings)))  # fmt: skip
    if not failing:
        return tuple(findings)
    entries = {e.id: e for e in knowledge}
    role = {f.id: (e.role if (e := _entry(f, entries)) is not None else Role.CAUSE) for f in findings}
    follows = {f.id: (e.consequences if (e := _entry(f, entries)) is not None else ()) for f in findings}
    on_run = [f for f in findings if f.is_problem and _on_failing_user_run(f, failing)]
    causes = [f for f in on_run if role[f.id] is Role.CAUSE]
    # a cause another cause here names as its consequence does not lead, whatever the order of the files
    leaders = [c for c in causes if not any(_named(c, follows[o.id]) for o in causes if o is not c)]
    # no cause: a general reading of this failure (the instruments' "where", a mechanism) leads, and what public
    # reports found for the same error is its evidence — the generic reading of the text too, though a notice (what
    # others found is a candidate to check against it); with nothing else, what they found leads
    readings = [f for f in findings if not f.is_problem and _on_failing_user_run(f, failing)
                and role[f.id] is Role.SYMPTOM and f.id == GENERIC_ID]  # fmt: skip
    ranked = leaders or causes or [f for f in on_run if role[f.id] is not Role.SUPPORT] or readings or on_run
    if not ranked:
        return tuple(findings)
    lead = ranked[0]
    folded: dict[str, tuple[str, Relation]] = {}
    for finding in on_run:
        if finding is lead:
            continue
        owner = next((c for c in [lead, *leaders] if c is not finding and _named(finding, follows[c.id])), None)
        if owner is not None:
            folded[finding.id] = (owner.id, Relation.CONSEQUENCE)
        elif role[finding.id] in (Role.SYMPTOM, Role.SUPPORT):
            folded[finding.id] = (lead.id, Relation.EVIDENCE)  # the text read by a general rule; what others found
        # a cause that nothing names as a consequence: a second, independent cause, a problem of its own
    for finding in findings:
        if finding is lead or finding.id in folded:
            continue
        notice_on_run = not finding.is_problem and _on_failing_user_run(finding, failing)
        if role[finding.id] is Role.SUPPORT or (notice_on_run and role[finding.id] is Role.SYMPTOM):
            folded[finding.id] = (lead.id, Relation.EVIDENCE)  # the probe beside it; an echo the text carries
    return tuple(
        dataclasses.replace(f, part_of=folded[f.id][0], relation=folded[f.id][1], severity=Severity.NOTICE)
        if f.id in folded else f
        for f in findings
    )  # fmt: skip
