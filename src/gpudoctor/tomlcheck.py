"""Shared checks for TOML data files (probe catalog, known issues): tables, known fields, string lists.

Every error names where it happened and the field, as a GpuDoctorError.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from gpudoctor.errors import GpuDoctorError


def checked_table(where: str, entry: Any, fields: Set[str]) -> dict[str, Any]:
    """``entry`` as a table whose keys are all in ``fields``."""
    if not isinstance(entry, dict):
        raise GpuDoctorError(f"{where}: must be a table")
    unknown = set(entry) - fields
    if unknown:
        raise GpuDoctorError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    return entry


def string_list(where: str, entry: dict[str, Any], key: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GpuDoctorError(f"{where}: field {key!r} must be a list of strings")
    return tuple(value)
