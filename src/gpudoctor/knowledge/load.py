"""The one loader of the knowledge files: each read as TOML, converted into ``knowledge.schema``'s typed shapes
(types, required and unknown fields), then checked for what types cannot say (patterns, specifiers, templates, the
names of checks and toolchains) and turned into Explanations. Read once per process.

A malformed entry is a GpuDoctorError naming the file, the entry and the field, in one line.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

import gpudoctor.knowledge.checks  # noqa: F401 (the checks register themselves on import: the names entries use)
from gpudoctor.errors import GpuDoctorError
from gpudoctor.knowledge.entry import SHOWN, Before, Evidence, Explanation, InRun, Knowledge, Pattern, Role, Toolchain
from gpudoctor.knowledge.registry import REGISTRY
from gpudoctor.knowledge.schema import (
    BeforeShape,
    FileShape,
    InRunShape,
    IssueShape,
    ToolchainShape,
    ValidationError,
    VerdictShape,
)
from gpudoctor.knowledge.schema import convert as convert_shape
from gpudoctor.knowledge.text import placeholders
from gpudoctor.memo import Memo
from gpudoctor.model import Outcome, Severity
from gpudoctor.textfile import read_text
from gpudoctor.tomlcheck import parse_toml

HERE = Path(__file__).parent
# Known failures first, then what the inventory alone shows, then the classes of failure: findings keep this order,
# and the general entries speak after the specific ones.
SHIPPED = (HERE / "known_issues.toml", HERE / "environment.toml", HERE / "mechanisms.toml")
MAX_FILE_BYTES = 1024 * 1024
_CHOICES = {"severity": tuple(s.value for s in Severity), "outcome": tuple(o.value for o in Outcome)}
# Files that loaded, parsed (TOML is most of the cost: 20 ms of 45) and with every regex compiled under this Python,
# keyed by their texts' hashes: a warm run parses JSON instead and compiles a pattern when it is first searched with.
LOADED = Memo("knowledge-parsed", limit=4)


@functools.cache
def load_knowledge(paths: tuple[Path, ...] = SHIPPED) -> Knowledge:
    """Every entry and toolchain of ``paths``, validated, read once per process for the same files."""
    texts = [read_text(path, MAX_FILE_BYTES) for path in paths]
    key = [[hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() for text in texts], sys.version]
    kept = LOADED.get(key)
    parsed = kept if isinstance(kept, list) and len(kept) == len(paths) else None
    data = parsed if parsed is not None else [parse_toml(path, text) for path, text in zip(paths, texts, strict=True)]
    knowledge = _knowledge(paths, data, compile_patterns=parsed is None)
    if parsed is None:
        with contextlib.suppress(
            TypeError, ValueError
        ):  # a TOML date has no JSON form: such files are parsed each time
            LOADED.put(key, json.loads(json.dumps(data)))
    return knowledge


def _knowledge(paths: tuple[Path, ...], data: list[Any], *, compile_patterns: bool) -> Knowledge:
    files = [(path, _shape(path, document)) for path, document in zip(paths, data, strict=True)]
    toolchains = tuple(_toolchain(f"{path}: toolchain #{n + 1}", t, compile_patterns) for path, shape in files
                       for n, t in enumerate(shape.toolchain))  # fmt: skip
    known = {t.id for t in toolchains}
    entries = tuple(
        _entry(f"{path}: issue #{n + 1} ({issue.id})", issue, known, compile_patterns)
        for path, shape in files
        for n, issue in enumerate(shape.issue)
    )
    ids = [e.id for e in entries] + [e.before.id for e in entries if e.before and e.before.id]
    named = {i for e in entries if e.in_run for i in e.in_run.instead_of}
    general = {e.id for e in entries if e.in_run and e.in_run.patterns}
    if named - general:
        raise GpuDoctorError(f"{', '.join(map(str, paths))}: instead_of names {sorted(named - general)[0]!r}, "
                             "which is no general entry (in_run.patterns)")  # fmt: skip
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise GpuDoctorError(f"{', '.join(map(str, paths))}: id {duplicates[0]!r} is declared twice")
    return Knowledge(entries, toolchains)


def _shape(path: Path, data: Any) -> FileShape:
    if not isinstance(data, dict):
        raise GpuDoctorError(f"{path}: not valid TOML")
    try:
        return convert_shape(data)
    except ValidationError as error:
        raise GpuDoctorError(f"{path}: {_one_line(str(error), data)}") from None


def _one_line(message: str, data: Mapping[str, Any]) -> str:
    """The converter's "Invalid enum value 'meh' - at `$.issue[0].in_run.evidence[0].outcome`" as "issue #1 (x):
    evidence #1: field 'outcome' must be one of ..." (clause names left out: each field name is in one clause)."""
    what, _, where = message.partition(" - at `")
    steps = re.findall(r"\.([\w-]+)(?:\[(\d+)\])?", where.rstrip("`"))
    field = None
    if missing := re.fullmatch(r"Object (missing required|contains unknown) field `([^`]+)`", what):
        steps.append((missing[2], ""))
    if steps and not steps[-1][1]:
        field = steps.pop()[0]
    parts = []
    for n, (name, index) in enumerate(steps):
        if not index:
            continue  # a clause: before, in_run, over_report
        parts.append(f"{name} #{int(index) + 1}")
        entry = data.get(name, [])[int(index)] if n == 0 and isinstance(data.get(name), list) else None
        unknown_here = missing and missing[1] == "contains unknown" and len(steps) == 1
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and not unknown_here:
            parts[-1] += f" ({entry['id']})"
    if missing and missing[1] == "contains unknown":
        return ": ".join([*parts, f"unknown field {field!r}"])
    if field in _CHOICES:
        said = f"field {field!r} must be one of {', '.join(_CHOICES[field])}"
    elif missing or "`str`" in what:
        said = f"field {field!r} must be a non-empty string"
    else:
        said = f"field {field!r}: {what.replace('`', '')[:1].lower()}{what.replace('`', '')[1:]}"
    return ": ".join([*parts, said])


def _patterns(where: str, texts: Iterable[str], compile_now: bool) -> tuple[Pattern, ...]:
    """The patterns, each compiled here to check it unless these very files were checked before (``LOADED``)."""
    patterns = tuple(Pattern(text) for text in texts)
    try:
        for pattern in patterns if compile_now else ():
            pattern.compiled  # noqa: B018 (compiled and kept: an invalid one is an error of the file now)
    except re.error as error:
        raise GpuDoctorError(f"{where} is not a valid regex: {error}") from None
    return patterns


def _toolchain(where: str, shape: ToolchainShape, compile_now: bool) -> Toolchain:
    return Toolchain(shape.id, shape.name, _patterns(f"{where}: field 'evidence'", shape.evidence, compile_now),
                     tuple(shape.probes_needing))  # fmt: skip


def _entry(where: str, issue: IssueShape, toolchains: set[str], compile_now: bool) -> Explanation:
    for key in ("id", "title", "explanation", "fix"):
        text = getattr(issue, key)
        if not text.strip():
            raise GpuDoctorError(f"{where}: field {key!r} must be a non-empty string")
    for key, text in (("title", issue.title), ("explanation", issue.explanation), ("fix", issue.fix),
                      *((f"fixes.{t}", fix) for t, fix in issue.fixes.items())):  # fmt: skip
        try:
            placeholders(text)
        except ValueError as error:
            said = f"{where}: field {key!r} is not a template ({error}): write {{{{ for a brace"
            raise GpuDoctorError(said) from None
    affects: dict[str, SpecifierSet] = {}
    for name, text in issue.affects.items():
        try:
            affects[name] = SpecifierSet(text)
        except InvalidSpecifier:
            raise GpuDoctorError(f"{where}: field 'affects.{name}' is not a version specifier: {text!r}") from None
    if issue.shown is not None and issue.shown not in SHOWN:
        raise GpuDoctorError(f"{where}: field 'shown' must be one of {', '.join(SHOWN)}")
    unknown = sorted(set(issue.fixes) - toolchains)
    if unknown:
        raise GpuDoctorError(f"{where}: field 'fixes' names unknown toolchain {unknown[0]!r}")
    checks = REGISTRY
    predicates = issue.over_report.predicates if issue.over_report else ()
    for name in predicates:
        if name not in checks or checks[name].report is None:
            raise GpuDoctorError(f"{where}: field 'predicates' names unknown predicate {name!r}")
    in_run = _in_run(where, issue.in_run, toolchains, compile_now) if issue.in_run else None
    before = _before(where, issue.before) if issue.before else None
    if (
        before is None
        and not predicates
        and not (in_run and (in_run.evidence or in_run.patterns or in_run.unexplained or in_run.located))
    ):
        raise GpuDoctorError(f"{where}: needs at least one 'evidence' item, pattern, predicate or check")
    verdict = issue.verdict or VerdictShape()
    roles = [r.value for r in Role]
    if verdict.role is not None and verdict.role not in roles:
        raise GpuDoctorError(f"{where}: field 'verdict.role' must be one of {', '.join(roles)}")
    if verdict.stands_alone and verdict.role != Role.SUPPORT.value:
        raise GpuDoctorError(f"{where}: field 'verdict.stands_alone' is for a support (verdict.role = \"support\")")
    general = in_run is not None and bool(in_run.patterns or in_run.unexplained)
    role = Role(verdict.role) if verdict.role else (Role.SYMPTOM if general else Role.CAUSE)
    return Explanation(
        id=issue.id, title=issue.title, severity=issue.severity, explanation=issue.explanation, fix=issue.fix,
        references=tuple(issue.references), patch=issue.patch, shown=issue.shown, specific=issue.specific,
        affects=affects, fixes=dict(issue.fixes), before=before, in_run=in_run, over_report=tuple(predicates),
        role=role, consequences=tuple(verdict.consequences), stands_alone=verdict.stands_alone,
    )  # fmt: skip


def _in_run(where: str, shape: InRunShape, toolchains: set[str], compile_now: bool) -> InRun:
    if shape.evidence and shape.patterns:
        raise GpuDoctorError(f"{where}: give 'evidence' (signs in named probes) or 'patterns' (any run), not both")
    if shape.stack_only and shape.where_controls_pass:
        raise GpuDoctorError(f"{where}: 'stack_only' blames the stack and 'where_controls_pass' your code: give one")
    named = [*shape.toolchains, *filter(None, (shape.toolchain, shape.implied))]
    unknown = sorted(set(named) - toolchains)
    if unknown:
        raise GpuDoctorError(f"{where}: unknown toolchain {unknown[0]!r} (known: {', '.join(sorted(toolchains))})")
    evidence = []
    for n, item in enumerate(shape.evidence):
        here = f"{where}: evidence #{n + 1}"
        if not item.probe.strip():
            raise GpuDoctorError(f"{here}: field 'probe' must be a non-empty string")
        pattern = _patterns(f"{here}: field 'pattern'", [item.pattern] if item.pattern else (), compile_now)
        evidence.append(Evidence(item.probe, item.outcome, item.signal, pattern[0] if pattern else None,
                                 dict(item.detail)))  # fmt: skip
    return InRun(
        evidence=tuple(evidence), toolchain=shape.toolchain,
        patterns=_patterns(f"{where}: field 'patterns'", shape.patterns, compile_now),
        unless=_patterns(f"{where}: field 'unless'", shape.unless, compile_now),
        toolchains=tuple(shape.toolchains), implied=shape.implied, unexplained=shape.unexplained,
        located=shape.located, instead_of=tuple(shape.instead_of), stack_only=shape.stack_only,
        where_controls_pass=shape.where_controls_pass, requester=shape.requester,
    )  # fmt: skip


def _before(where: str, shape: BeforeShape) -> Before:
    check = REGISTRY.get(shape.check)
    if check is None or check.environment is None:
        raise GpuDoctorError(f"{where}: field 'check' names unknown check {shape.check!r}")
    if shape.table and not check.table:
        raise GpuDoctorError(f"{where}: field 'table' is only for checks that read one; {shape.check} does not")
    rows = []
    for n, row in enumerate(shape.table):
        here = f"{where}: table row #{n + 1}"
        unknown = sorted(set(row) - check.table)
        if unknown:
            raise GpuDoctorError(f"{here}: unknown field {unknown[0]!r} (allowed: {', '.join(sorted(check.table))})")
        for key in sorted(check.table - check.optional):
            wanted = list if key == "archs" else str
            if not isinstance(row.get(key), wanted):
                raise GpuDoctorError(
                    f"{here}: field {key!r} must be {'a list of strings' if key == 'archs' else 'a string'}"
                )
        for key in ("versions", "torch"):
            try:
                SpecifierSet(str(row[key])) if key in row else None
            except InvalidSpecifier:
                raise GpuDoctorError(f"{here}: field {key!r} is not a version specifier") from None
        rows.append(dict(row))
    data = {"libraries": tuple(shape.libraries), "same_version": tuple(shape.same_version),
            "same_major": tuple(shape.same_major), "table": tuple(rows)}  # fmt: skip
    return Before(check=shape.check, data=data, id=shape.id, severity=shape.severity)
