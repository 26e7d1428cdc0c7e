"""A missing name, answered from what the environment holds (the run's lookup, ``facts.missing_names``): where the
name lives now, who asked for it and what that package declares, and the concrete fix — the new spelling, or the
release to install. The values for the ``located`` entry's texts, and its evidence lines.

Pure: reads the run's detail and the import-name table (``import_names.toml``); never the disk beyond that table.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from gpudoctor.facts.missing_names import ATTRIBUTE, IMPORT_NAME
from gpudoctor.model import ProbeResult
from gpudoctor.protocol import MISSING_NAME_DETAIL
from gpudoctor.tomlcheck import read_toml

IMPORT_NAMES = Path(__file__).with_name("import_names.toml")


@functools.cache
def import_distributions() -> Mapping[str, tuple[str, ...]]:
    """Import name -> the distributions that install it, where the names differ (import_names.toml)."""
    table = read_toml(IMPORT_NAMES, 64 * 1024).get("distributions", {})
    return {str(k): tuple(str(d) for d in v) for k, v in table.items() if isinstance(v, list)}


@dataclass(frozen=True)
class Located:
    """The texts one run's lookup gives: ``values`` for the entry's templates, ``evidence`` lines."""

    values: dict[str, str]
    evidence: tuple[str, ...]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _missing(kind: str, name: str, module: str) -> str:
    if kind == IMPORT_NAME:
        return f"cannot import name '{name}' from '{module}'"
    if kind == ATTRIBUTE:
        return f"module '{module}' has no attribute '{name}'"
    return f"no module named '{module}'"


def _spelling(kind: str, name: str, module: str) -> str:
    """How code reaches ``name`` in ``module`` (for MODULE, ``module`` is the module to import)."""
    if kind == IMPORT_NAME:
        return f"`from {module} import {name}`"
    if kind == ATTRIBUTE:
        return f"`import {module}` and use {module}.{name}"
    return f"`import {module}`"


def _where_now(detail: dict[str, Any], provider: str) -> tuple[str, str | None]:
    """Where the name is now, in words, and the spelling that reaches it (None when the environment has none)."""
    kind, name, module = str(detail.get("kind")), str(detail.get("name")), str(detail.get("module"))
    found = [_dict(f) for f in _list(detail.get("found"))]
    close = [str(c) for c in _list(detail.get("close"))]
    if kind not in (IMPORT_NAME, ATTRIBUTE):
        installed = detail.get("installed")
        if not installed:
            return f"no installed distribution provides {module.split('.')[0]}", None
        if installed == module:
            return (f"{module} is installed here ({provider}): the failing process did not see it — another "
                    "interpreter or environment than the one examined ran it", None)  # fmt: skip
        if found:
            return f"{provider} has it as {found[0]['module']}", _spelling(kind, "", str(found[0]["module"]))
        if close:
            return f"{provider} has no {module}; {installed} has {', '.join(close)}", None
        return f"{provider} has no {module}", None
    if detail.get("submodule"):
        return (f"{module}.{name} is a submodule that {module} does not import itself",
                f"`import {module}.{name}` first")  # fmt: skip
    inside = _dict(detail.get("in_module"))
    if inside:
        return (f"{module} itself binds {name} (line {inside.get('line')}): it was not bound yet when it was asked "
                "for — a circular import, a definition under a condition, or another environment than the one "
                "examined ran it", None)  # fmt: skip
    if found:
        place = found[0]
        return (f"{provider} has it in {place['module']} ({place['how']}, line {place['line']})",
                _spelling(kind, name, str(place["module"])))  # fmt: skip
    if close:
        return f"{provider} has no {name}; {module} has {', '.join(close)} (renamed, or a typo)", None
    return f"{provider} has no {name} in any of its Python files", None


def _asked(asker: dict[str, Any]) -> str:
    where = f"{asker.get('file')}:{asker.get('line')}"
    if asker.get("distribution"):
        return f"{asker['distribution']} {asker.get('version')} asked for it ({where})"
    return f"your program asked for it ({where})" if "/" not in str(asker.get("file")) else f"{where} asked for it"


def _declared(asker: dict[str, Any], provider_name: str | None) -> tuple[str, dict[str, Any] | None]:
    """What the asker declares for the provider, in words, and the declaration that does not hold (if one)."""
    who = f"{asker.get('distribution')} {asker.get('version')}"
    requires = [_dict(r) for r in _list(asker.get("requires"))]
    if not requires:
        return (f"{who} declares no requirement on {provider_name or 'it'}", None) if asker.get("distribution") else (
            "", None)  # fmt: skip
    broken = next((r for r in requires if r.get("holds") is False), None)
    said = []
    for r in requires:
        have = r.get("installed")
        state = "not installed" if have is None else f"{r.get('distribution')} {have} is installed"
        verdict = "not met" if r.get("holds") is False else "met"
        said.append(f"{r.get('requirement')} ({state}: {verdict})")
    return f"{who} declares {'; '.join(said)}", broken


def _install(broken: dict[str, Any] | None, detail: dict[str, Any], asker: dict[str, Any]) -> str | None:
    if broken is not None:
        return f"pip install '{broken['requirement']}' (what {asker.get('distribution')} declares)"
    if detail.get("kind") not in (IMPORT_NAME, ATTRIBUTE) and not detail.get("installed"):
        top = str(detail.get("module")).split(".")[0]
        names = import_distributions().get(top)
        if names:
            return f"pip install {names[0]} (the distribution that installs {top})"
    return None


def _release_line_before(version: Any) -> str | None:
    """The bound that keeps to releases before ``version``'s line: 2.5.2 -> <2.5, 3.0 -> <3 (None if unreadable)."""
    try:
        parsed = Version(str(version))
    except InvalidVersion:
        return None
    if parsed.minor == 0 and parsed.micro == 0:
        return f"<{parsed.major}"
    return f"<{parsed.major}.{parsed.minor}"


def _pairing(provider: str, version: Any, asker: dict[str, Any]) -> str:
    """Advice for a name an installed package asks of another that lacks it: the other's earlier release line, or
    a release of the asker written for this one."""
    who = f"{asker['distribution']} {asker.get('version')}"
    bound = _release_line_before(version) if version else None
    if bound is None:
        return (f"Install the release of {provider} that {who} was written for, or a release of "
                f"{asker['distribution']} written for {provider} {version or 'as installed'}")  # fmt: skip
    return (f"pip install '{provider}{bound}' (the {provider} releases before {version}, which {who} was written "
            f"for), or a release of {asker['distribution']} newer than {asker.get('version')} that no longer asks for "
            f"it, where one exists")  # fmt: skip


def located(result: ProbeResult) -> Located | None:
    """The texts of ``result``'s lookup, or None when it carries none."""
    detail = _dict(result.details.get(MISSING_NAME_DETAIL))
    if not detail.get("kind") or not detail.get("name"):
        return None
    kind, name, module = str(detail["kind"]), str(detail["name"]), str(detail.get("module"))
    provider_detail = _dict(detail.get("provider"))
    provider_name = provider_detail.get("distribution")
    provider = f"{provider_name} {provider_detail.get('version')}" if provider_name else "the installed release"
    where_now, spelling = _where_now(detail, provider)
    asker = _dict(detail.get("asker"))
    declared, broken = _declared(asker, provider_name) if asker else ("", None)
    install = _install(broken, detail, asker)
    if asker.get("distribution"):
        # The code that asked is an installed package's, not the user's: the advice is about the pairing of the two
        # releases, never an edit to that package's files.
        fix = install or _pairing(str(provider_name or module.split(".")[0]), provider_detail.get("version"), asker)
    elif install and spelling:
        fix = f"{spelling} in code you own; or {install}" if asker else f"{install}; or, in code you own, {spelling}"
    elif install or spelling:
        fix = str(install or spelling)
    else:
        fix = f"Install the release of {provider_name or module.split('.')[0]} the code was written for"
    asked = _asked(asker) if asker else ""
    values = {"missing": _missing(kind, name, module), "where_now": where_now, "fix": fix, "provider": provider,
              "asked": f"{asked[:1].upper()}{asked[1:]}." if asked else "",
              "declared": f"{declared[:1].upper()}{declared[1:]}." if declared else ""}  # fmt: skip
    evidence = [f"{result.id} {result.outcome.value}: {values['missing']}", f"here: {where_now}"]
    evidence += [f"{f.get('module')} has {name} ({f.get('how')}, line {f.get('line')})"
                 for f in map(_dict, _list(detail.get("found"))[1:3])]  # fmt: skip
    evidence += [text for text in (asked, declared) if text]
    searched = _dict(detail.get("searched"))
    if searched:
        capped = " (stopped at gpudoctor's limit)" if searched.get("capped") else ""
        evidence.append(f"searched {searched.get('files')} Python files of {provider}{capped}")
    return Located(values, tuple(evidence))
