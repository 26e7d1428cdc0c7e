"""Pre-flight checks: what the inventory alone shows is wrong, before any probe runs and without CUDA.

Functions of an Environment (and, for LD_LIBRARY_PATH, of the folders that variable names: the variable the
probes inherit); their rules (texts, library names, package pairs) are data in rules.toml, validated like
known_issues.toml and read once per process. Their findings appear with the inventory in every face.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Environment, Finding
from gpudoctor.tomlcheck import checked_table, read_toml, string_list

RULES = Path(__file__).with_name("rules.toml")
_FIELDS = {
    "id", "check", "severity", "title", "explanation", "fix", "references", "libraries", "same_version", "same_major",
}  # fmt: skip


@dataclass(frozen=True)
class Rule:
    id: str
    check: str
    severity: str
    title: str
    explanation: str
    fix: str
    references: tuple[str, ...]
    data: Mapping[str, Any]


# A check returns what it found as placeholders for the rule's texts, and the evidence lines; or None.
Found = tuple[dict[str, str], list[str]]


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def torch_cuda_vs_driver(environment: Environment, rule: Rule) -> Found | None:
    torch_cuda = environment.stack.get("torch_cuda")
    driver_cuda = environment.driver.cuda_driver_version
    built, supported = _version(str(torch_cuda) if torch_cuda else None), _version(driver_cuda)
    if built is None or supported is None or not environment.driver.available:
        return None
    if built.release[:2] <= supported.release[:2]:
        return None
    driver = environment.driver.version or "?"
    values = {"torch_cuda": str(torch_cuda), "driver_cuda": str(driver_cuda), "driver": driver}
    evidence = [f"torch/version.py: cuda = {torch_cuda!r}; NVML: driver {values['driver']}, CUDA {driver_cuda}"]
    return values, evidence


def shadowing_libraries(environment: Environment, rule: Rule) -> Found | None:
    """Files of the rule's libraries in LD_LIBRARY_PATH's folders (the real variable, read at inventory time)."""
    libraries = tuple(rule.data.get("libraries", ()))
    found: list[str] = []
    for folder in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        found += [os.path.join(folder, n) for n in names if any(n.startswith(lib) for lib in libraries)]
    if not found:
        return None
    from gpudoctor.redact import redact_text

    shown = [redact_text(path) for path in found]
    files = ", ".join(sorted({os.path.basename(p) for p in shown})[:4])
    return {"files": files, "where": "; ".join(shown[:6])}, [f"LD_LIBRARY_PATH holds {path}" for path in shown[:6]]


def shadowed_modules(environment: Environment, rule: Rule) -> Found | None:
    """Names that resolve, before site-packages, to files no distribution installed (the inventory says which)."""
    modules: Mapping[str, Any] = environment.stack.get("modules") or {}
    shadowed = [(name, str(modules.get(name))) for name in environment.stack.get("shadowing") or []]
    if not shadowed:
        return None
    names = ", ".join(name for name, _ in shadowed)
    where = "; ".join(f"`import {n}` finds {w}" for n, w in shadowed)
    return {"names": names, "where": where}, [f"import {n} resolves to {w}, outside site-packages" for n, w in shadowed]


def mixed_generations(environment: Environment, rule: Rule) -> Found | None:
    packages = environment.packages
    pairs = []
    for a, b in rule.data.get("same_version", ()):
        va, vb = _version(packages.get(a)), _version(packages.get(b))
        if va is not None and vb is not None and va.release != vb.release:
            pairs.append(f"{a} {packages[a]} with {b} {packages[b]}")
    for a, b in rule.data.get("same_major", ()):
        va, vb = _version(packages.get(a)), _version(packages.get(b))
        if va is not None and vb is not None and va.major != vb.major:
            pairs.append(f"{a} {packages[a]} with {b} {packages[b]}")
    if not pairs:
        return None
    return {"pairs": "; ".join(pairs), "max": str(packages.get("max") or "X")}, pairs


CHECKS: Mapping[str, Callable[[Environment, Rule], Found | None]] = {
    "torch_cuda_vs_driver": torch_cuda_vs_driver,
    "shadowing_libraries": shadowing_libraries,
    "shadowed_modules": shadowed_modules,
    "mixed_generations": mixed_generations,
}


def _pair_list(where: str, value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value
    ):
        raise GpuDoctorError(f"{where}: must be a list of [name, name] pairs")
    return tuple((p[0], p[1]) for p in value)


def load_rules(path: Path = RULES) -> tuple[Rule, ...]:
    data = read_toml(path, 256 * 1024)
    entries = data.get("rule", [])
    if not isinstance(entries, list):
        raise GpuDoctorError(f"{path}: 'rule' must be an array of tables ([[rule]])")
    rules = []
    for n, raw in enumerate(entries):
        where = f"{path}: rule #{n + 1}"
        entry = checked_table(where, raw, _FIELDS)
        for key in ("id", "check", "severity", "title", "explanation", "fix"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise GpuDoctorError(f"{where}: field {key!r} must be a non-empty string")
        if entry["check"] not in CHECKS:
            raise GpuDoctorError(f"{where}: field 'check' names unknown check {entry['check']!r}")
        if entry["severity"] not in ("problem", "notice"):
            raise GpuDoctorError(f"{where}: field 'severity' must be problem or notice")
        extra: dict[str, Any] = {"libraries": string_list(where, entry, "libraries")}
        for key in ("same_version", "same_major"):
            extra[key] = _pair_list(f"{where}: field {key!r}", entry.get(key, []))
        rules.append(
            Rule(
                id=entry["id"],
                check=entry["check"],
                severity=entry["severity"],
                title=entry["title"],
                explanation=entry["explanation"],
                fix=entry["fix"],
                references=string_list(where, entry, "references"),
                data=extra,
            )
        )
    return tuple(rules)


@functools.cache
def _shipped_rules() -> tuple[Rule, ...]:
    return load_rules()


def preflight(environment: Environment, rules: Sequence[Rule] | None = None) -> tuple[Finding, ...]:
    """Every pre-flight finding for this environment, in rule order."""
    findings = []
    for rule in rules if rules is not None else _shipped_rules():
        found = CHECKS[rule.check](environment, rule)
        if found is None:
            continue
        values, evidence = found
        findings.append(
            Finding(
                id=rule.id,
                title=rule.title.format_map(_Blank(values)),
                evidence=tuple(evidence),
                explanation=rule.explanation.format_map(_Blank(values)),
                fix=rule.fix.format_map(_Blank(values)),
                severity=rule.severity,
                references=rule.references,
            )
        )
    return tuple(findings)


class _Blank(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"
