"""A pre-flight rule as loaded from rules.toml, what a check returns, and the version parser: what every check
module shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version


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


def parse_version(text: Any) -> Version | None:
    """A version (a package's, a CUDA release, a compute capability), or None when absent or not one."""
    try:
        return Version(str(text)) if text else None
    except InvalidVersion:
        return None
