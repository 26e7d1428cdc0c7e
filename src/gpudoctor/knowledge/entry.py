"""The knowledge model: one entry type, an Explanation of one failure, with up to three clauses saying when it can
be seen (before a run, in a run, over the report), and the toolchains whose errors the in-run clauses tell apart.

Loaded and validated by ``knowledge.load``; applied by ``knowledge.before`` and ``knowledge.match``.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import SpecifierSet

from gpudoctor.model import Outcome, Severity

ANY_PROBE = "*"
SHOWN = ("reproduced here", "on the H100", "text only")


@dataclass(frozen=True)
class Pattern:
    """A regular expression of the knowledge (validated by the loader), compiled when it is first searched with: the
    inventory-only run searches none of the ~300, and compiling them all cost it 14 ms."""

    text: str

    @functools.cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.text)

    def search(self, text: str) -> re.Match[str] | None:
        return self.compiled.search(text)


@dataclass(frozen=True)
class Before:
    """Seen before any run: a named environment check (``knowledge.checks``) and the data it reads (``libraries``,
    ``same_version``, ``same_major``, ``table``: the rows its registration declares). ``id`` and ``severity``, when
    given, are the finding's before a run: an id reports have always carried there, a notice where only a run
    shows it for certain."""

    check: str
    data: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    severity: Severity | None = None


@dataclass(frozen=True)
class Evidence:
    """One observable sign in one probe result: its probe (or run id, or "*" for any), outcome, signal, a pattern
    over its text, and expected details."""

    probe: str
    outcome: Outcome
    signal: str | None = None
    pattern: Pattern | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InRun:
    """Seen in a run. Either ``evidence`` (signs in named probes, from one ``toolchain`` when given) or ``patterns``
    (a class of failure in any failing run's text, from one of ``toolchains``, or ``implied`` when the text names
    none; ``unless`` patterns mean another consumer of the same words); or ``unexplained``: any failing run no other
    entry explains (its texts filled by gpudoctor.knowledge.answer); or ``located``: any failing run that missed a
    name the environment was searched for, no known issue explains (its texts filled by gpudoctor.knowledge.located),
    answering instead of the general entries ``instead_of`` names (another general entry that matches says more).
    ``stack_only``: the entry blames the stack, so a user's run (a kernel, a command) is not its evidence where
    gpudoctor's own known-good kernels passed beside it on the same device and stack; ``where_controls_pass``: the
    other way round, the entry says the user's code is at fault, so only such a run is its evidence (and the
    controls that passed are named beside it). ``requester``: the failure is the asking code's (a loader's "cannot
    open shared object file" is the library that imported it), so an installed package no toolchain's frame marks name,
    innermost in the traceback, is named rather than a toolchain whose marks are elsewhere in the text."""

    evidence: tuple[Evidence, ...] = ()
    toolchain: str | None = None
    patterns: tuple[Pattern, ...] = ()
    unless: tuple[Pattern, ...] = ()
    toolchains: tuple[str, ...] = ()
    implied: str | None = None
    unexplained: bool = False
    located: bool = False
    instead_of: tuple[str, ...] = ()
    stack_only: bool = False
    where_controls_pass: bool = False
    requester: bool = False  # whoever asked is the innermost frame's package, where no toolchain's marks name it

    def search(self, text: str) -> re.Match[str] | None:
        """The first of ``patterns`` found in ``text``, unless one of ``unless`` is there too."""
        if any(pattern.search(text) for pattern in self.unless):
            return None  # the words are this entry's, the consumer another's
        return next((found for pattern in self.patterns if (found := pattern.search(text))), None)


class Role(enum.StrEnum):
    """What a finding of an entry is to a failure's one verdict (knowledge.verdict): a cause, which can lead it; a
    symptom, the failure's text read by a general rule or a general statement of where it went wrong, which a cause on
    the same run takes in as its evidence; a support, a notice that backs whatever cause leads (the known-good probe
    that passes beside it)."""

    CAUSE = "cause"
    SYMPTOM = "symptom"
    SUPPORT = "support"


@dataclass(frozen=True)
class Explanation:
    """One failure, explained once: its texts (templates: ``knowledge.text.fill``) and when it can be seen.

    ``specific``: a finding of this entry explains its runs, and the general (``patterns``) entries stay silent
    there. ``fixes``: the fix per toolchain, for entries that tell toolchains apart. ``affects``: the releases it
    applies to (package names, or "driver" / "cuda-driver"). ``shown``: how it was shown (reproduced here, on the
    H100, or on its report's text only)."""

    id: str
    title: str
    severity: Severity
    explanation: str
    fix: str
    references: tuple[str, ...] = ()
    patch: str | None = None
    shown: str | None = None
    specific: bool = False
    affects: Mapping[str, SpecifierSet] = field(default_factory=dict)
    fixes: Mapping[str, str] = field(default_factory=dict)
    before: Before | None = None
    in_run: InRun | None = None
    over_report: tuple[str, ...] = ()  # named report predicates (``knowledge.checks``)
    role: Role = Role.CAUSE  # in a failure's verdict (general entries: symptoms)
    consequences: tuple[str, ...] = ()  # entries (ids, or the id a toolchain's finding starts with) that follow from it
    # a support that answers a failure the text's own reading cannot place (no phase) without that reading beside it
    stands_alone: bool = False


@dataclass(frozen=True)
class Toolchain:
    """Who can emit an error, and the marks (paths, frames, messages) only its errors carry. ``probes_needing``:
    gpudoctor's probes that need these distributions run nothing but this toolchain."""

    id: str
    name: str
    evidence: tuple[Pattern, ...]
    probes_needing: tuple[str, ...] = ()

    def emitted(self, text: str) -> bool:
        return any(pattern.search(text) for pattern in self.evidence)


@dataclass(frozen=True)
class Knowledge:
    """Every entry, in file order (findings keep it), and the toolchains, most specific first."""

    entries: tuple[Explanation, ...]
    toolchains: tuple[Toolchain, ...] = ()

    def __iter__(self) -> Iterator[Explanation]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def attribute(self, text: str) -> Toolchain | None:
        """The toolchain that emitted ``text``: the first, most specific first, whose marks it carries."""
        return next((toolchain for toolchain in self.toolchains if toolchain.emitted(text)), None)

    def toolchain(self, toolchain_id: str) -> Toolchain:
        return next(t for t in self.toolchains if t.id == toolchain_id)
