"""The versions of named distributions in the doctor's own interpreter, found as ``importlib.metadata.version`` finds
them, in one listing of each ``sys.path`` folder and one read of each wanted distribution's metadata headers.

``importlib.metadata`` costs the inventory its import (about 20 ms with the email package) and a search per name; with
several hundred distributions installed that adds up. The rules are its own (Python 3.11-3.13): the folders of
``sys.path`` in order (an empty entry is the current folder), within one the listing's order; a ``.dist-info`` or
``.egg-info`` entry matches by the name before its first ``-``, normalised; the version is the ``Version`` header of
its ``METADATA``, else ``PKG-INFO``, else of the file itself. Where a path holds something else it reads (a zip file,
an ``.egg`` folder) or another finder publishes distributions, ``importlib.metadata`` is asked instead.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Sequence


def normalized(name: str) -> str:
    """A distribution name as ``importlib.metadata`` compares them ("Max-Core", "max_core" -> "max_core")."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _version_header(entry: str) -> tuple[bool, str | None]:
    """(whether metadata text was found, its Version header) for a .dist-info/.egg-info folder or file."""
    for candidate in (os.path.join(entry, "METADATA"), os.path.join(entry, "PKG-INFO"), entry):
        try:
            with open(candidate, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if not line.strip():
                        break
                    key, colon, value = line.partition(":")
                    if colon and key == "Version":
                        return True, value.strip()
                return True, None
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            continue
    return False, None


def _plain(path: Sequence[str]) -> bool:
    """Whether every distribution on ``path`` is one this module finds as importlib.metadata would."""
    from importlib.machinery import PathFinder

    finders = [f for f in sys.meta_path if getattr(f, "find_distributions", None) is not None]
    if any(f is not PathFinder for f in finders):
        return False
    return not any(os.path.isfile(p) or p.lower().endswith(".egg") for p in path)


def installed_versions(names: Iterable[str], path: Sequence[str] | None = None) -> dict[str, str | None]:
    """The installed version of each of ``names`` (None: not installed), as importlib.metadata.version says it."""
    path = list(sys.path if path is None else path)
    wanted = {name: normalized(name) for name in names}
    if not _plain(path):
        return _asked(wanted)
    found: dict[str, str | None] = {}
    for folder in path:
        if len(found) == len(set(wanted.values())):
            break
        try:
            children = os.listdir(folder or ".")
        except OSError:
            continue
        for child in children:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            name = normalized(low.rpartition(".")[0].partition("-")[0])
            if name in found or name not in wanted.values():
                continue
            has_text, version = _version_header(os.path.join(folder or ".", child))
            if not has_text:
                return _asked(wanted)  # a distribution without metadata: its own rules, not ours
            found[name] = version
    return {name: found.get(key) for name, key in wanted.items()}


def _asked(wanted: dict[str, str]) -> dict[str, str | None]:
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in wanted:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions
