"""Source rules as data: constructs of Mojo kernels and Python code whose acceptance changed between releases
(rules.toml), loaded and checked once, with the releases each one is accepted by.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpudoctor.errors import GpuDoctorError
from gpudoctor.tomlcheck import checked_table, plain_string, read_toml, string_list

RULES = Path(__file__).with_name("rules.toml")
MAX_RULES_BYTES = 512 * 1024
LANGUAGES = ("mojo", "python")
_FIELDS = {
    "id",
    "language",
    "construct",
    "match",
    "package",
    "accepted",
    "rewrite",
    "errors",
    "sample",
    "verified",
    "references",
    "alternatives",
}


@dataclass(frozen=True)
class SourceRule:
    """One construct and the releases of ``package`` that accept it."""

    id: str
    language: str
    construct: str
    match: re.Pattern[str]
    package: str
    accepted: SpecifierSet
    rewrite: str
    errors: tuple[re.Pattern[str], ...] = ()
    sample: str | None = None
    verified: str | None = None
    references: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()  # rules whose construct beside this one in a file means feature detection

    def accepts(self, version: str | Version) -> bool:
        try:
            parsed = version if isinstance(version, Version) else Version(version)
        except InvalidVersion:
            return True  # an unreadable version says nothing against the code
        return self.accepted.contains(parsed, prereleases=True)

    def changed_in(self, version: str) -> str:
        """When the construct stopped (or started) being accepted, in words, for a release that rejects it."""
        bounds = sorted((s for s in self.accepted), key=lambda s: Version(s.version))
        lower = [s.version for s in bounds if s.operator in (">=", ">")]
        upper = [s.version for s in bounds if s.operator in ("<", "<=")]
        try:
            parsed = Version(version)
        except InvalidVersion:
            return f"accepted by {self.package} {self.accepted}"
        if upper and parsed >= Version(upper[-1]):
            if Version(upper[-1]) <= Version("0"):
                return f"never accepted by {self.package}"
            return f"not accepted since {self.package} {upper[-1]}"
        if lower:
            return f"new in {self.package} {lower[0]}"
        return f"accepted by {self.package} {self.accepted}"


def _regex(where: str, text: str, flags: int = 0) -> re.Pattern[str]:
    try:
        return re.compile(text, flags)
    except re.error as error:
        raise GpuDoctorError(f"{where}: not a regular expression: {error}") from None


@dataclass(frozen=True)
class RuleBook:
    """The rules, and the MAX releases they were verified on (oldest first)."""

    rules: tuple[SourceRule, ...]
    releases: tuple[str, ...]

    @property
    def packages(self) -> tuple[str, ...]:
        """The packages whose installed releases the rules are checked against."""
        return tuple(sorted({rule.package for rule in self.rules}))


def load_rules(path: Path = RULES) -> RuleBook:
    """Every rule of ``path``; a malformed rule is an error naming the file, the rule and the field."""
    data = read_toml(path, MAX_RULES_BYTES)
    releases = string_list(str(path), data, "releases")
    try:
        ordered = tuple(sorted(releases, key=Version))
    except InvalidVersion:
        raise GpuDoctorError(f"{path}: field 'releases' must list versions like '26.7.0'") from None
    entries = data.get("rule")
    if not isinstance(entries, list) or not entries:
        raise GpuDoctorError(f"{path}: no [[rule]] table")
    rules: list[SourceRule] = []
    seen: set[str] = set()
    for index, raw in enumerate(entries):
        where = f"{path}: rule[{index}]"
        entry = checked_table(where, raw, _FIELDS)
        missing = sorted({"id", "language", "construct", "match", "accepted", "rewrite"} - set(entry))
        if missing:
            raise GpuDoctorError(f"{where}: missing field {missing[0]!r}")
        rule_id = plain_string(f"{where}: field 'id'", entry["id"], 80)
        if rule_id in seen:
            raise GpuDoctorError(f"{where}: duplicate id {rule_id!r}")
        seen.add(rule_id)
        where = f"{path}: rule {rule_id!r}"
        language = entry["language"]
        if language not in LANGUAGES:
            raise GpuDoctorError(f"{where}: field 'language' must be one of {', '.join(LANGUAGES)}")
        package = plain_string(f"{where}: field 'package'", entry.get("package", "max"), 80)
        if language == "mojo" and package != "max":
            raise GpuDoctorError(f"{where}: Mojo rules follow the max package's releases")
        try:
            accepted = SpecifierSet(plain_string(f"{where}: field 'accepted'", entry["accepted"], 80))
        except InvalidSpecifier:
            raise GpuDoctorError(f"{where}: field 'accepted' is not a version specifier like '>=26.4'") from None
        sample = entry.get("sample")
        if sample is not None and (not isinstance(sample, str) or not sample.strip()):
            raise GpuDoctorError(f"{where}: field 'sample' must be source text")
        verified = entry.get("verified")
        if sample is None and not isinstance(verified, str):
            raise GpuDoctorError(f"{where}: needs a 'sample' to verify it by, or 'verified' saying how it is known")
        rules.append(
            SourceRule(
                id=rule_id,
                language=language,
                construct=plain_string(f"{where}: field 'construct'", entry["construct"], 300),
                match=_regex(f"{where}: field 'match'", entry["match"], re.MULTILINE),
                package=package,
                accepted=accepted,
                rewrite=plain_string(f"{where}: field 'rewrite'", entry["rewrite"], 400),
                errors=tuple(_regex(f"{where}: field 'errors'", e) for e in string_list(where, entry, "errors")),
                sample=sample,
                verified=verified if isinstance(verified, str) else None,
                references=string_list(where, entry, "references"),
                alternatives=string_list(where, entry, "alternatives"),
            )
        )
    for rule in rules:
        unknown = sorted(set(rule.alternatives) - seen)
        if unknown:
            raise GpuDoctorError(f"{path}: rule {rule.id!r}: field 'alternatives' names unknown rule {unknown[0]!r}")
    return RuleBook(tuple(rules), ordered)


@functools.cache
def shipped_rules() -> RuleBook:
    return load_rules()
