"""The one place Python checks are registered: ``@check`` for an environment check (an entry's ``before`` clause),
``@predicate`` for a report predicate (its ``over_report`` clause). The loader validates the names entries use
against this registry; ``knowledge.checks`` holds the checks themselves (the loader imports them: they register on
import).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpudoctor.knowledge.entry import Before
from gpudoctor.model import Environment, Report

# A check returns what it found as values for the entry's texts, and the evidence lines; or None.
Found = tuple[dict[str, str], list[str]]
EnvironmentCheck = Callable[[Environment, Before], "Found | None"]
# A predicate's evidence: what it saw, and the run it saw it in (None for the report as a whole).
PredicateEvidence = tuple[str, str | None]
ReportPredicate = Callable[[Report], list[PredicateEvidence]]


@dataclass(frozen=True)
class Registered:
    """A named check: an environment check (with the keys its entry's [[before.table]] rows hold, and those of
    them a row may leave out) or a report predicate."""

    name: str
    environment: EnvironmentCheck | None = None
    report: ReportPredicate | None = None
    table: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()


REGISTRY: dict[str, Registered] = {}


def _register(entry: Registered) -> None:
    if entry.name in REGISTRY:
        raise ValueError(f"check {entry.name!r} is registered twice")
    REGISTRY[entry.name] = entry


def check(
    name: str, *, table: frozenset[str] = frozenset(), optional: frozenset[str] = frozenset()
) -> Callable[[EnvironmentCheck], EnvironmentCheck]:
    """Register an environment check under ``name``; ``table``: the keys its table rows hold (strings; ``archs`` a
    list of strings), ``optional`` those a row may leave out."""

    def register(function: EnvironmentCheck) -> EnvironmentCheck:
        _register(Registered(name, environment=function, table=table, optional=optional))
        return function

    return register


def predicate(name: str) -> Callable[[ReportPredicate], ReportPredicate]:
    """Register a report predicate under ``name``."""

    def register(function: ReportPredicate) -> ReportPredicate:
        _register(Registered(name, report=function))
        return function

    return register
