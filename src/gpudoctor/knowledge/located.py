"""A missing name, answered from what the environment holds (the run's lookup, ``facts.missing_names``): where the
name lives now, who asked for it and what that package declares, and the concrete fix — the new spelling, or the
release to install. The values for the ``located`` entry's texts, and its evidence lines.

Pure: reads the run's detail and the import-name table (``import_names.toml``); never the disk beyond that table.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from gpudoctor.facts.missing_names import ATTRIBUTE, IMPORT_NAME, run_text
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


@dataclass(frozen=True)
class _Said:
    """What the failure's own text says beside the name: Python 3 quotes a missing module's name and names the first
    part of a dotted name it could not find (so the parts before it imported where it ran); Python 2 does neither.
    A line without a traceback or an exception type was logged, not raised (as far as the text shows)."""

    python2: bool = False
    parent_imported: bool = False
    raised: bool = True
    shadowed_by: str | None = None  # the file the module came from, outside the installed packages
    stand_in: str | None = None  # a package's partial stand-in for the real module (numba-cuda's simulator)
    unbuilt: str | None = None  # the text's words that a compiled extension is missing ("extension not installed")


# A package's own words that its compiled extension is not there: the missing name is that extension, not a release's
_UNBUILT = re.compile(
    r"(?i)\b(?:CUDA |C\+\+ |C )?extension (?:is )?not (?:installed|built|compiled|available|found)\b"
    r"|\bfailed to (?:build|compile|load) (?:the )?(?:CUDA |C\+\+ )?extension\b"
)


def _said(text: str, kind: str, module: str) -> _Said:
    unbuilt = _UNBUILT.search(text)
    return dataclasses.replace(_said_of(text, kind, module), stand_in=_stand_in(module, text),
                               unbuilt=unbuilt.group(0) if unbuilt else None)  # fmt: skip


def _said_of(text: str, kind: str, module: str) -> _Said:
    if kind == IMPORT_NAME:  # "cannot import name 'X' from 'M' (PATH)": where M came from
        path = re.search(rf"from '{re.escape(module)}' \((?P<path>[^)\n]+\.py)\)", text)
        outside = path is not None and not re.search(r"[/\\](?:site|dist)-packages[/\\]", path["path"])
        return _Said(shadowed_by=path["path"] if path is not None and outside else None)
    if kind == ATTRIBUTE or not text:
        return _Said()
    quoted = f"No module named '{module}" in text
    raised = bool(re.search(r"Traceback|ModuleNotFoundError|ImportError", text))
    top = module.split(".")[0]
    if "." in module and re.search(rf"'{re.escape(top)}' is not a package", text):  # a plain module took its name
        return _Said(raised=raised, shadowed_by=f"a module named {top} that is not a package ({top}.py)")
    return _Said(python2=not quoted and f"No module named {module}" in text, parent_imported=quoted and "." in module,
                 raised=raised)  # fmt: skip


# A package's stand-in for its real module, which implements only part of it: a name missing there is no release's
_STAND_INS = {"numba.cuda.simulator": "numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)"}


def _stand_in(module: str, text: str) -> str | None:
    """The stand-in the failing module (or the text) shows, in words: its name missing is the stand-in's gap."""
    path = text.replace("\\", "/")
    return next((words for prefix, words in _STAND_INS.items()
                 if module.startswith(prefix) or prefix.replace(".", "/") in path), None)  # fmt: skip


def _where_now(detail: dict[str, Any], provider: str, said: _Said) -> tuple[str, str | None]:
    """Where the name is now, in words, and the spelling that reaches it (None when the environment has none)."""
    kind, name, module = str(detail.get("kind")), str(detail.get("name")), str(detail.get("module"))
    if said.unbuilt is not None:
        return (f'the text itself says "{said.unbuilt}": {module}.{name} is most likely that compiled extension, '
                "which the package's install did not build", None)  # fmt: skip
    if said.stand_in is not None:
        return (f"{module} is {said.stand_in}, which implements only part of the real module: {name} missing there is "
                "the stand-in's gap, not a release's", None)  # fmt: skip
    found = [_dict(f) for f in _list(detail.get("found"))]
    close = [str(c) for c in _list(detail.get("close"))]
    if kind not in (IMPORT_NAME, ATTRIBUTE):
        installed = detail.get("installed")
        top = module.split(".")[0]
        if said.shadowed_by is not None:  # Python's "'cuda' is not a package": a file took the package's name
            return (f"{top} was imported as {said.shadowed_by}, which has no submodules: a file (or a folder without "
                    f"__init__.py) named {top} on the path before the installed package shadows it", None)  # fmt: skip
        if not installed and said.parent_imported:
            return (f"{module.rsplit('.', 1)[0]} imported where it ran (Python names the first part it cannot find), "
                    f"so the release of {top} that ran has no {module}: renamed, removed or private there; the "
                    f"interpreter examined has no {top} to look in", None)  # fmt: skip
        if not installed and said.python2:
            return (f"no installed distribution provides {top}; the message is Python 2's (Python 3 quotes the name): "
                    "another, older interpreter than the one examined ran it", None)  # fmt: skip
        if not installed:
            return f"no installed distribution provides {top}", None
        if installed == module:
            return (f"{module} is installed here ({provider}): the failing process did not see it — another "
                    "interpreter or environment than the one examined ran it", None)  # fmt: skip
        if found:
            return f"{provider} has it as {found[0]['module']}", _spelling(kind, "", str(found[0]["module"]))
        if close:
            return f"{provider} has no {module}; {installed} has {', '.join(close)}", None
        return f"{provider} has no {module}", None
    if said.shadowed_by is not None:
        return (f"{module} was imported from {said.shadowed_by}, outside the installed packages: a source tree or a "
                f"file named like the package shadows the installed {module.split('.')[0]}", None)  # fmt: skip
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
    if not detail.get("provider"):  # nothing to search: no release of it here to blame
        top = module.split(".")[0]
        unread = f"the interpreter examined has no {top} to read, so it cannot tell"
        if kind != ATTRIBUTE or name.startswith("__"):  # a dunder is no module's name
            return f"{unread} which release of {top} lacks {name}", None
        return (f"{unread} which: {module}.{name} is a submodule {module} does not import itself, a name of "
                f"another release of {top}, or what was imported as {module} is not the package (a file or folder "
                f"named {top} ahead of it on the path, or an install half removed)", None)  # fmt: skip
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


def _install(broken: dict[str, Any] | None, detail: dict[str, Any], asker: dict[str, Any], said: _Said) -> str | None:
    if broken is not None:
        return f"pip install '{broken['requirement']}' (what {asker.get('distribution')} declares)"
    if said.parent_imported or said.python2:
        return None  # the interpreter that ran had the package, or is another: installing here changes nothing
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
    said = _said(run_text(result), kind, module)
    where_now, spelling = _where_now(detail, provider, said)
    asker = _dict(detail.get("asker"))
    declared, broken = _declared(asker, provider_name) if asker else ("", None)
    install = None if said.shadowed_by is not None else _install(broken, detail, asker, said)
    top = module.split(".")[0]
    if install and not said.raised:  # only printed: an optional import prints this and goes on
        install += (f", if the program stopped here; a library that imports {top} only optionally prints this line "
                    "and goes on, and then it is not the failure")  # fmt: skip
    if said.unbuilt is not None:
        fix = (f"Reinstall {top} so its compiled extension is built, with the build's output (pip install -v "
               "--no-build-isolation: nvcc must compile its CUDA files, and the first error of that build is the "
               "cause), where CUDA_HOME and nvcc match torch's CUDA release")  # fmt: skip
    elif said.stand_in is not None:
        switch = said.stand_in.split(" (")[-1].rstrip(")")
        fix = (f"Run it on the real target (without {switch}), or keep this call out of what runs under the stand-in; "
               "where the stand-in was meant, it must be switched on before the package is first imported")  # fmt: skip
    elif asker.get("distribution"):
        # The code that asked is an installed package's, not the user's: the advice is about the pairing of the two
        # releases, never an edit to that package's files.
        fix = install or _pairing(str(provider_name or module.split(".")[0]), provider_detail.get("version"), asker)
    elif install and spelling:
        fix = f"{spelling} in code you own; or {install}" if asker else f"{install}; or, in code you own, {spelling}"
    elif install or spelling:
        fix = str(install or spelling)
    elif said.shadowed_by is not None:
        fix = (
            f"Run it from another directory (or build the source tree in place, or rename your {top}.py and delete "
            f"its __pycache__) so the installed {top} is imported: python -c 'import {top}; print({top}.__file__)' "
            "says which one is"
        )
    elif kind == ATTRIBUTE and not provider_detail and not name.startswith("__"):
        fix = (
            f"First python -c 'import {module}; print({module}.__file__)' in the interpreter that ran it: None, or a "
            f"path outside its site-packages, is not the package (rename your own {top}.py or {top}/ folder; an "
            f"uninstall that left a folder behind: uninstall every {top} distribution, then install one). Then, if "
            f"{name} is a module of {module} (a file {module.replace('.', '/')}/{name}.py), `import {module}.{name}` "
            f"before using it; else install the release of {top} the code was written for (--python the interpreter "
            "that ran tells which)"
        )
    elif said.parent_imported:
        fix = (
            f"Use the name the release of {top} that ran has for it (its changelog: renamed or private modules), or "
            f"install the release of {top} the code was written for; --python the interpreter that ran looks it up"
        )
    elif said.python2:
        fix = f"Run it with the interpreter that has {top} (sudo, cron and IDEs may run another: `which python`)"
    elif kind not in (IMPORT_NAME, ATTRIBUTE) and not detail.get("installed") and not provider_name:
        # a name no distribution here provides and none the knowledge maps: a package to install, a module of the
        # project (or of the package that imported it) that Python 3 no longer finds by an implicit relative import,
        # or an extension the project compiles itself (heldout16: a cpp_extension.load whose build made no module)
        fix = (f"Install the distribution that provides {top} into the interpreter that ran it (its name can differ "
               f"from {top}: the project's install page says); or, where {top} is a module of your own project or of "
               "the package that imports it, run from the folder that holds it: Python 3 has no implicit relative "
               f"imports (`from . import {top}` inside a package); or, where {top} is an extension the project "
               "compiles itself (setup.py build_ext, or torch.utils.cpp_extension.load when it runs), that build's own "
               "output: it made no module — its first error, with verbose=True (or the install command's -v), and "
               "its build folder removed first")  # fmt: skip
    else:
        fix = f"Install the release of {provider_name or top} the code was written for"
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
