"""Shared checks for TOML data files (probe catalog, known issues, matrix rows): bounded reads, tables with
known fields, strings, string lists, whole numbers.

Every error names where it happened and the field, as a GpuDoctorError (or the subclass the caller names).
"""

from __future__ import annotations

from collections.abc import Set
from pathlib import Path
from typing import Any

from gpudoctor.errors import GpuDoctorError
from gpudoctor.safetext import CONTROL_CHARS
from gpudoctor.textfile import read_text


def read_toml(path: Path, limit_bytes: int, error: type[GpuDoctorError] = GpuDoctorError) -> dict[str, Any]:
    """A regular file of at most ``limit_bytes``, read as UTF-8 TOML; anything else raises ``error``."""
    return parse_toml(path, read_text(path, limit_bytes, error), error)


def parse_toml(path: Path, text: str, error: type[GpuDoctorError] = GpuDoctorError) -> dict[str, Any]:
    """``text``, read from ``path``, as TOML; invalid TOML raises ``error``."""
    import tomllib  # here: the inventory-only run reads the knowledge's parse from gpudoctor's cache, not its TOML

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as failure:
        raise error(f"{path}: not valid TOML: {failure}") from failure


def checked_table(
    where: str, entry: Any, fields: Set[str], error: type[GpuDoctorError] = GpuDoctorError
) -> dict[str, Any]:
    """``entry`` as a table whose keys are all in ``fields``."""
    if not isinstance(entry, dict):
        raise error(f"{where}: must be a table")
    unknown = sorted(set(entry) - fields)
    if unknown:
        raise error(f"{where}: unknown field {unknown[0]!r} (allowed: {', '.join(sorted(fields))})")
    return entry


def string_list(where: str, entry: dict[str, Any], key: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GpuDoctorError(f"{where}: field {key!r} must be a list of strings")
    return tuple(value)


def plain_string(where: str, value: Any, limit: int, error: type[GpuDoctorError] = GpuDoctorError) -> str:
    """A non-empty string of at most ``limit`` characters with no control character (rows are plain text)."""
    if not isinstance(value, str):
        raise error(f"{where}: must be a string, not {type(value).__name__}")
    if not value.strip():
        raise error(f"{where}: must not be empty")
    if len(value) > limit:
        raise error(f"{where}: longer than {limit} characters")
    if control := CONTROL_CHARS.search(value):
        raise error(f"{where}: contains a control character (\\x{ord(control.group()):02x}); plain text only")
    return value


def whole_number(where: str, value: Any, low: int, high: int, error: type[GpuDoctorError] = GpuDoctorError) -> int:
    """An integer (not a bool) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise error(f"{where}: must be a whole number from {low} to {high}")
    return value
