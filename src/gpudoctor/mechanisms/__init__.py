"""Diagnosis by mechanism: a class of failure recognised in any failing run's text, attributed to the toolchain that
emitted it (by its paths and frames, never by a keyword two toolchains share), explained with the report's facts.

Rules are data (``mechanisms.toml``); matching is a pure function of a Report, like the known issues'.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Finding, ProbeResult, Report
from gpudoctor.tomlcheck import checked_table, read_toml, string_list

RULES = Path(__file__).with_name("mechanisms.toml")
MAX_RULES_BYTES = 1024 * 1024
UNIDENTIFIED = "an unidentified toolchain"
_TOOLCHAIN_FIELDS = {"id", "name", "evidence"}
_MECHANISM_FIELDS = {
    "id", "title", "severity", "toolchains", "implied", "patterns", "unless", "explanation", "fix", "fixes"
}  # fmt: skip


@dataclass(frozen=True)
class Toolchain:
    """Who can emit an error, and the marks (paths, frames, messages) only its errors carry."""

    id: str
    name: str
    evidence: tuple[re.Pattern[str], ...]

    def emitted(self, text: str) -> bool:
        return any(pattern.search(text) for pattern in self.evidence)


@dataclass(frozen=True)
class Mechanism:
    """A class of failure: how to see it, who can emit it, what it means and what fixes it."""

    id: str
    title: str
    severity: str
    toolchains: tuple[str, ...]
    implied: str | None
    patterns: tuple[re.Pattern[str], ...]
    unless: tuple[re.Pattern[str], ...]
    explanation: str
    fix: str
    fixes: Mapping[str, str]

    def search(self, text: str) -> re.Match[str] | None:
        if any(pattern.search(text) for pattern in self.unless):
            return None  # the words are this mechanism's, the consumer another's
        return next((found for pattern in self.patterns if (found := pattern.search(text))), None)


@dataclass(frozen=True)
class Rules:
    toolchains: tuple[Toolchain, ...]
    mechanisms: tuple[Mechanism, ...]

    def attribute(self, text: str) -> Toolchain | None:
        """The toolchain that emitted ``text``: the first, most specific first, whose marks it carries."""
        return next((toolchain for toolchain in self.toolchains if toolchain.emitted(text)), None)

    def toolchain(self, toolchain_id: str) -> Toolchain:
        return next(t for t in self.toolchains if t.id == toolchain_id)


def _patterns(where: str, values: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    try:
        return tuple(re.compile(value) for value in values)
    except re.error as error:
        raise GpuDoctorError(f"{where}: not a valid regex: {error}") from None


def _text(where: str, table: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise GpuDoctorError(f"{where}: field {key!r} must be a non-empty string")
    return value


@functools.cache
def load_rules(path: Path = RULES) -> Rules:
    """The toolchains and mechanisms of ``path``, validated; a malformed entry is an error naming entry and field."""
    data = read_toml(path, MAX_RULES_BYTES)
    toolchains: list[Toolchain] = []
    for n, entry in enumerate(data.get("toolchain", [])):
        where = f"{path}: toolchain #{n + 1}"
        table = checked_table(where, entry, _TOOLCHAIN_FIELDS)
        evidence = _patterns(where, string_list(where, table, "evidence"))
        toolchains.append(Toolchain(_text(where, table, "id"), _text(where, table, "name"), evidence))
    known = {t.id for t in toolchains}
    mechanisms: list[Mechanism] = []
    for n, entry in enumerate(data.get("mechanism", [])):
        where = f"{path}: mechanism #{n + 1}"
        table = checked_table(where, entry, _MECHANISM_FIELDS)
        allowed = tuple(string_list(where, table, "toolchains")) if "toolchains" in table else ()
        fixes = table.get("fixes", {})
        if not isinstance(fixes, dict) or not all(isinstance(v, str) for v in fixes.values()):
            raise GpuDoctorError(f"{where}: field 'fixes' must be a table of strings")
        implied = table.get("implied")
        unknown = sorted({*allowed, *fixes, *([implied] if implied else [])} - known)
        if unknown:
            raise GpuDoctorError(f"{where}: unknown toolchain {unknown[0]!r} (known: {', '.join(sorted(known))})")
        severity = _text(where, table, "severity", "problem")
        if severity not in ("problem", "notice"):
            raise GpuDoctorError(f"{where}: field 'severity' must be 'problem' or 'notice'")
        mechanisms.append(
            Mechanism(
                id=_text(where, table, "id"),
                title=_text(where, table, "title"),
                severity=severity,
                toolchains=allowed,
                implied=implied if isinstance(implied, str) else None,
                patterns=_patterns(where, string_list(where, table, "patterns")),
                unless=_patterns(where, string_list(where, table, "unless")),
                explanation=_text(where, table, "explanation"),
                fix=_text(where, table, "fix"),
                fixes=dict(fixes),
            )
        )
    ids = [m.id for m in mechanisms]
    if len(set(ids)) != len(ids):
        raise GpuDoctorError(f"{path}: a mechanism id is declared twice")
    return Rules(tuple(toolchains), tuple(mechanisms))


class _Facts(dict[str, str]):
    """Template values; a name the text does not give reads as "unknown" instead of failing."""

    def __missing__(self, key: str) -> str:
        return "unknown"


def _fill(template: str, facts: Mapping[str, str]) -> str:
    return string.Formatter().vformat(template, (), _Facts(facts))


def report_facts(report: Report) -> dict[str, str]:
    """What a mechanism's text may name about this machine."""
    environment = report.environment
    gpu = environment.driver.gpus[0] if environment.driver.gpus else None
    facts = {
        "driver_cuda": environment.driver.cuda_driver_version or "unknown (no driver seen)",
        "torch_cuda": str(environment.stack.torch_cuda or "unknown"),
    }
    if gpu is not None:
        facts["gpu"] = gpu.name or "this GPU"
        facts["compute_capability"] = gpu.compute_capability or "unknown"
    else:
        facts["gpu"], facts["compute_capability"] = "the GPU", "unknown"
    return facts


def searchable(result: ProbeResult) -> str:
    """The text of a run that the known issues' patterns and the mechanisms read: its summary, the error, the skip
    reason, its frames and the tail of its stderr."""
    frames = "\n".join(f"{f.file}:{f.line} in {f.function}" for f in result.frames)
    parts = (result.summary, result.exception_type or "", result.message or "", result.skip_reason or "", frames)
    return "\n".join((*parts, result.stderr_tail))


def mechanism_findings(report: Report, explained: Mapping[str, Sequence[str]] | None = None) -> tuple[Finding, ...]:
    """A finding per mechanism and toolchain seen in the report's failing runs. ``explained`` maps run ids to the
    known problems that matched them: the mechanisms stay silent on those runs (the known issue is more specific)."""
    rules = load_rules()
    facts = report_facts(report)
    explained = explained or {}
    seen: dict[str, tuple[Finding, list[str], list[str]]] = {}
    for result in report.results:
        if not result.outcome.is_problem:
            continue
        text = searchable(result)
        emitter = rules.attribute(text)
        if explained.get(result.id):
            continue  # a known issue explains this run: it is more specific than any mechanism
        for mechanism in rules.mechanisms:
            found = mechanism.search(text)
            if found is None:
                continue
            toolchain = emitter
            if toolchain is not None and mechanism.toolchains and toolchain.id not in mechanism.toolchains:
                toolchain = None  # its marks are there, but it cannot emit this: say whose it is not, not whose it is
            if toolchain is None and mechanism.implied is not None:
                toolchain = rules.toolchain(mechanism.implied)
            values = {**facts, **{k: v for k, v in found.groupdict().items() if v}}
            values["toolchain"] = toolchain.name if toolchain else UNIDENTIFIED
            finding_id = f"{mechanism.id}-{toolchain.id}" if toolchain else mechanism.id
            line = found.group(0).strip()
            evidence = f"{result.id} {result.outcome.value}: {line!r}" + (
                f" (from {toolchain.name}: the text carries its marks)" if toolchain is emitter and toolchain else ""
            )
            if finding_id in seen:
                seen[finding_id][1].append(evidence)
                seen[finding_id][2].append(result.id)
                continue
            fix = mechanism.fixes.get(toolchain.id, mechanism.fix) if toolchain else mechanism.fix
            title = _fill(mechanism.title, values)
            finding = Finding(
                id=finding_id,
                title=title[:1].upper() + title[1:],
                severity=mechanism.severity,
                evidence=(),
                explanation=_fill(mechanism.explanation, values),
                fix=_fill(fix, values),
            )
            seen[finding_id] = (finding, [evidence], [result.id])
    return tuple(
        dataclasses.replace(finding, evidence=tuple(dict.fromkeys(ev)), runs=tuple(dict.fromkeys(runs)))
        for finding, ev, runs in seen.values()
    )
