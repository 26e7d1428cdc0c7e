"""Before any run: the entries' ``before`` clauses applied to the inventory alone (milliseconds, no CUDA), in entry
order. Their findings appear with the inventory in every face.
"""

from __future__ import annotations

from gpudoctor.knowledge.entry import Explanation, Knowledge
from gpudoctor.knowledge.load import load_knowledge
from gpudoctor.knowledge.registry import REGISTRY, Found
from gpudoctor.knowledge.text import fill
from gpudoctor.model import Environment, Finding


def seen_before(entry: Explanation, environment: Environment) -> Found | None:
    """What ``entry``'s environment check finds in ``environment`` (values for its texts, evidence), or None."""
    if entry.before is None:
        return None
    check = REGISTRY[entry.before.check].environment
    assert check is not None  # the loader let only environment checks into a before clause
    return check(environment, entry.before)


def preflight(environment: Environment, knowledge: Knowledge | None = None) -> tuple[Finding, ...]:
    """Every finding the inventory alone shows, in entry order."""
    findings = []
    for entry in knowledge if knowledge is not None else load_knowledge():
        found = seen_before(entry, environment)
        if found is None or entry.before is None:
            continue
        values, evidence = found
        findings.append(
            Finding(
                id=entry.before.id or entry.id,
                title=fill(entry.title, values),
                evidence=tuple(evidence),
                explanation=fill(entry.explanation, values),
                fix=fill(entry.fix, values),
                severity=entry.before.severity or entry.severity,
                references=entry.references,
            )
        )
    return tuple(findings)
