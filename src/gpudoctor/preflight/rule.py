"""A pre-flight rule as loaded from rules.toml, and what a check returns: the one type every check module shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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
