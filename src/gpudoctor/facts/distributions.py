"""The installed distributions of an environment read from their files alone (``*.dist-info``: METADATA, RECORD,
top_level.txt), importing nothing: which one provides an import name, which one owns a file, what each declares.

Bounded by construction: a folder is listed once, a file is read up to a cap, and finding a file's owner reads the
RECORDs of the likely owners first and at most RECORD_BUDGET bytes of the others.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

METADATA_LIMIT = 256 * 1024  # the headers are at the start; a description may follow
RECORD_LIMIT = 8 * 1024 * 1024  # one distribution's RECORD (torch's is a few MiB)
RECORD_BUDGET = 32 * 1024 * 1024  # all the RECORDs read to find one file's owner
TOP_LEVEL_LIMIT = 16 * 1024
MAX_DISTRIBUTIONS = 5000  # per folder: an environment larger than this is not one to walk


@dataclass(frozen=True)
class Distribution:
    """One installed distribution: its name and version as its folder says, the site folder it is in, its
    dist-info folder."""

    name: str
    version: str
    site: Path
    info: Path

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)


def _read_text(path: Path, limit: int) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


class Environment:
    """The distributions in ``sites`` (the folders of an interpreter's path, first match wins as for imports)."""

    def __init__(self, sites: Sequence[Path]) -> None:
        self.sites = tuple(sites)
        self.distributions: list[Distribution] = []
        seen: set[str] = set()
        for site in self.sites:
            try:
                names = sorted(n for n in os.listdir(site) if n.endswith(".dist-info"))[:MAX_DISTRIBUTIONS]
            except OSError:
                continue
            for folder in names:
                name, _, version = folder[: -len(".dist-info")].partition("-")
                if name and canonicalize_name(name) not in seen:
                    seen.add(canonicalize_name(name))
                    self.distributions.append(Distribution(name, version, site, site / folder))
        self._records: dict[Path, tuple[str, ...]] = {}

    def named(self, name: str) -> Distribution | None:
        key = canonicalize_name(name)
        return next((d for d in self.distributions if d.key == key), None)

    def metadata(self, dist: Distribution) -> tuple[str, str, tuple[str, ...]]:
        """(Name, Version, Requires-Dist) from its METADATA headers."""
        name, version, requires = dist.name, dist.version, []
        for line in _read_text(dist.info / "METADATA", METADATA_LIMIT).splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            if key == "Name":
                name = value.strip()
            elif key == "Version":
                version = value.strip()
            elif key == "Requires-Dist":
                requires.append(value.strip())
        return name, version, tuple(requires)

    def record(self, dist: Distribution) -> tuple[str, ...]:
        """The files its RECORD lists, relative to its site folder (``..`` entries left out)."""
        if dist.info not in self._records:
            lines = _read_text(dist.info / "RECORD", RECORD_LIMIT).splitlines()
            paths = (line.rsplit(",", 2)[0].strip('"') for line in lines if line)
            self._records[dist.info] = tuple(p for p in paths if p and not p.startswith(("..", "/")))
        return self._records[dist.info]

    def top_level(self, dist: Distribution) -> tuple[str, ...]:
        return tuple(n.strip() for n in _read_text(dist.info / "top_level.txt", TOP_LEVEL_LIMIT).split() if n)

    def _likely(self, top: str) -> list[Distribution]:
        """Distributions whose name or top_level.txt says they hold the top-level import name ``top``: ``max`` for
        max/, then ``max-core``..., ``cuda-bindings`` for cuda/."""
        key = canonicalize_name(top)
        exact = [d for d in self.distributions if d.key == key]
        prefixed = [d for d in self.distributions if d.key.startswith(key + "-") or d.key.endswith("-" + key)]
        listed = [d for d in self.distributions if top in self.top_level(d)]
        return list(dict.fromkeys([*exact, *listed, *prefixed]))

    def owner(self, relative: str) -> Distribution | None:
        """The distribution whose RECORD lists ``relative`` (a path under a site folder, "/" separated)."""
        top = relative.split("/", 1)[0].removesuffix(".py")
        likely = self._likely(top)
        budget = RECORD_BUDGET
        for dist in [*likely, *(d for d in self.distributions if d not in likely)]:
            if dist.info not in self._records:
                try:
                    size = (dist.info / "RECORD").stat().st_size
                except OSError:
                    continue
                if dist not in likely and size > budget:
                    continue
                budget -= size
            if relative in self.record(dist):
                return dist
        return None

    def providers(self, top: str) -> list[Distribution]:
        """The distributions with files under the top-level import name ``top`` (a namespace package has several)."""
        found = []
        for dist in self._likely(top):
            if any(p.split("/", 1)[0] in (top, top + ".py") or p.startswith(top + ".") for p in self.record(dist)):
                found.append(dist)
        return found

    def locate(self, relative: str) -> Path | None:
        """The first site folder's file or folder ``relative``."""
        return next((site / relative for site in self.sites if (site / relative).exists()), None)

    def relative(self, path: str) -> str | None:
        """``path`` (a traceback's file) relative to a site folder: under one of ours, or after a site-packages or
        dist-packages of another machine's; None for a file of no installed package (the user's own)."""
        for site in sorted(self.sites, key=lambda s: -len(str(s))):  # site-packages before the stdlib above it
            prefix = str(site).rstrip("/") + "/"
            if path.startswith(prefix):
                return path[len(prefix) :]
        for marker in ("/site-packages/", "/dist-packages/", "\\site-packages\\", "\\dist-packages\\"):
            if marker in path:
                return path.rsplit(marker, 1)[1].replace("\\", "/")
        return None
