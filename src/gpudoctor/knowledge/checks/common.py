"""What the checks share: the one version parser (packages, CUDA releases, compute capabilities, drivers), for the
environment checks and the report predicates alike."""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version


def parse_version(text: Any) -> Version | None:
    """A version (a package's, a CUDA release, a compute capability), or None when absent or not one."""
    try:
        return Version(str(text)) if text else None
    except InvalidVersion:
        return None
