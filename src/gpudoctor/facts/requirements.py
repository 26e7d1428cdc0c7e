"""Declared requirements against what is installed: what `pip check` does, from the examined interpreter's metadata
(every distribution's Requires-Dist, its markers evaluated with that interpreter's values), importing nothing.

A pure function of the facts the inventory gathered; the pre-flight rule `requirement-not-met` reports its result.
Parsing every requirement of a large environment (several hundred distributions, thousands of requirements) costs
tens of milliseconds, so the answer is kept in gpudoctor's cache under a hash of exactly what it was computed from
(every distribution's name, version and requirements, the marker values), this module and packaging's version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from gpudoctor.memo import Memo, file_identity
from gpudoctor.stackfacts import UnmetRequirement

MAX_REPORTED = 40  # an environment broken this much needs `pip check` itself, not a longer report
CHECKED = Memo("requirements-unmet", limit=16)


def unmet_requirements(distributions: Any, markers: Any) -> list[UnmetRequirement]:
    """Each requirement an installed distribution declares (for no extra) that the installed distributions do not
    meet: ``needs`` names the required distribution, ``installed`` its installed version (None when it is absent).
    ``distributions`` is
    ``[[name, version, [requires-dist, ...]], ...]`` as the inventory read them."""
    if not isinstance(distributions, list) or not isinstance(markers, dict):
        return []
    import packaging

    try:
        facts = json.dumps([distributions, markers], sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return _checked(distributions, markers)
    key = [hashlib.sha256(facts.encode("utf-8", "surrogatepass")).hexdigest(), file_identity(__file__),
           packaging.__version__]  # fmt: skip
    kept = CHECKED.get(key)
    if isinstance(kept, list) and all(isinstance(k, list) and len(k) == 5 for k in kept):
        return [UnmetRequirement(*k) for k in kept]
    unmet = _checked(distributions, markers)
    CHECKED.put(key, [[u.package, u.version, u.requirement, u.needs, u.installed] for u in unmet])
    return unmet


def _checked(distributions: list[Any], markers: dict[Any, Any]) -> list[UnmetRequirement]:
    from packaging.utils import canonicalize_name

    environment = {str(k): str(v) for k, v in markers.items()} | {"extra": ""}
    installed: dict[str, str] = {}
    declared: list[tuple[str, str, list[Any]]] = []
    for entry in distributions:
        if isinstance(entry, list) and len(entry) == 3 and all(isinstance(x, str) for x in entry[:2]):
            installed.setdefault(canonicalize_name(entry[0]), entry[1])
            declared.append((entry[0], entry[1], entry[2] if isinstance(entry[2], list) else []))
    unmet: list[UnmetRequirement] = []
    for name, version, requires in sorted(declared, key=lambda d: canonicalize_name(d[0])):
        for text in requires:
            problem = _unmet(str(text), environment, installed)
            if problem is not None:
                requirement, needs, have = problem
                unmet.append(UnmetRequirement(name, version, requirement, needs, have))
    return unmet[:MAX_REPORTED]


def _for_an_extra_only(text: str) -> bool:
    """A requirement only an extra asks for (``; extra == "dev"`` and nothing or-ed with it): false for no extra, so it
    is left out before the (costly) parse — most declared requirements of a large environment are of this kind."""
    _, semicolon, marker = text.partition(";")
    return bool(semicolon) and "extra" in marker and " or " not in marker


def _unmet(
    text: str, environment: Mapping[str, str], installed: Mapping[str, str]
) -> tuple[str, str, str | None] | None:
    from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    if _for_an_extra_only(text):
        return None
    try:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate(dict(environment)):
            return None
    except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return None  # a requirement pip itself could not read says nothing here
    have = installed.get(canonicalize_name(requirement.name))
    shown = f"{requirement.name}{requirement.specifier}" if requirement.specifier else requirement.name
    if have is None:
        return shown, requirement.name, None
    if not requirement.specifier:
        return None
    try:
        if requirement.specifier.contains(Version(have), prereleases=True):
            return None
    except InvalidVersion:
        return None
    return shown, requirement.name, have
