"""A name a failing run missed ("cannot import name X from M", "module M has no attribute X", "No module named M.N"),
looked up in the examined interpreter's environment by reading files only: which distribution provides M and where X
lives in it now (another module, a close name), and which installed package's code asked for it (the traceback's
innermost frame that is not M's own) with what that package declares for M's distribution.

The lookup is a run's detail (``protocol.MISSING_NAME_DETAIL``), so a report keeps it and the knowledge
(knowledge.located) reads it as a pure function of the report.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from gpudoctor.facts.distributions import Distribution, Environment
from gpudoctor.facts.interpreter import search_path
from gpudoctor.facts.pysource import close_names, find_name, module_file, modules_ending, names_of, submodules
from gpudoctor.model import ProbeResult
from gpudoctor.process.cancel import CancelScope
from gpudoctor.protocol import MISSING_NAME_DETAIL
from gpudoctor.redact import redact_text

IMPORT_NAME, ATTRIBUTE, MODULE = "import-name", "attribute", "module"
_MISSING = re.compile(
    r"cannot import name '(?P<import>\w+)' from (?:partially initialized module )?'(?P<from>[\w.]+)'"
    r"|module '(?P<owner>[\w.]+)' has no attribute '(?P<attribute>\w+)'"
    r"|No module named '?(?P<module>[A-Za-z_][\w.]*)'?"
)
_FRAME = re.compile(r'File "(?P<file>[^"\n]+)", line (?P<line>\d+)')
_TRACEBACK = "Traceback (most recent call last)"
MAX_TEXT = 1024 * 1024  # the part of a run's text the failure is looked for in (its end)
MAX_NAME = 200  # a dotted name longer than this is no module's (a log is untrusted input)


@dataclass(frozen=True)
class MissingName:
    """What was missing: ``kind``, the name, the module it was looked for in (for MODULE: the module itself, and
    name its last component), and the traceback's frames (file, line) innermost first."""

    kind: str
    name: str
    module: str
    frames: tuple[tuple[str, int], ...] = ()


def missing_name(text: str) -> MissingName | None:
    """The last missing name ``text`` reports (the exception a traceback ends in), with the frames before it."""
    text = text[-MAX_TEXT:]
    found = next(reversed(list(_MISSING.finditer(text))), None)
    if found is None:
        return None
    if found["import"]:
        kind, name, module = IMPORT_NAME, found["import"], found["from"]
    elif found["attribute"]:
        kind, name, module = ATTRIBUTE, found["attribute"], found["owner"]
    else:
        kind, module = MODULE, found["module"].rstrip(".")
        name = module.rsplit(".", 1)[-1]
    if len(module) > MAX_NAME or len(name) > MAX_NAME:
        return None
    start = text.rfind(_TRACEBACK, 0, found.start())
    frames = [(m["file"], int(m["line"])) for m in _FRAME.finditer(text, max(start, 0), found.start())]
    return MissingName(kind, name, module, tuple(reversed(frames)))


def _requirements(env: Environment, asker: Distribution, wanted: set[str], markers: Mapping[str, str]) -> list[Any]:
    """What ``asker`` declares (for no extra) for the distributions ``wanted``, and whether the installed hold it."""
    declared = []
    for text in env.metadata(asker)[2]:
        try:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) not in wanted:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate({**markers, "extra": ""}):
                continue
        except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            continue
        dist = env.named(requirement.name)
        installed = env.metadata(dist)[1] if dist else None
        holds: bool | None = installed is not None
        if installed is not None and requirement.specifier:
            try:
                holds = requirement.specifier.contains(Version(installed), prereleases=True)
            except InvalidVersion:
                holds = None
        spec = f"{requirement.name}{requirement.specifier}"
        declared.append({"requirement": spec, "distribution": requirement.name, "installed": installed, "holds": holds})
    return declared


def _asker(
    env: Environment, missing: MissingName, provider: Distribution | None, wanted: set[str], markers: Mapping[str, str]
) -> dict[str, Any] | None:
    """The innermost frame that is not the provider's own code: its distribution (or the user's file) and what
    that distribution declares for ``wanted``."""
    for file, line in missing.frames:
        if file.startswith("<"):
            continue  # <frozen importlib._bootstrap>, <string>
        relative = env.relative(file)
        owner = env.owner(relative) if relative else None
        if owner is not None and provider is not None and owner.key == provider.key:
            continue  # raised inside M itself (a lazy module's __getattr__): the caller asked
        if relative is None:
            return {"file": os.path.basename(file.replace("\\", "/")), "line": line}
        if owner is None:
            return {"file": relative, "line": line}
        name, version, _ = env.metadata(owner)
        requires = _requirements(env, owner, wanted, markers)
        return {"file": relative, "line": line, "distribution": name, "version": version, "requires": requires}
    return None


def _installed_prefix(env: Environment, module: str) -> str | None:
    """The longest dotted prefix of ``module`` that is installed here (a package folder or a module file)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        base = prefix.replace(".", "/")
        if module_file(env, prefix) or env.locate(base) is not None:
            return prefix
        if any(s.name.startswith(parts[end - 1] + ".") for s in _folder(env, ".".join(parts[: end - 1]))):
            return prefix  # an extension module (name.cpython-311-x86_64-linux-gnu.so)
    return None


def _folder(env: Environment, package: str) -> list[Path]:
    folders = [site / package.replace(".", "/") if package else site for site in env.sites]
    found: list[Path] = []
    for folder in folders:
        try:
            found += [folder / n for n in os.listdir(folder) if n.endswith((".so", ".pyd"))] if folder.is_dir() else []
        except OSError:
            continue
    return found


def look_up(
    missing: MissingName,
    env: Environment,
    markers: Mapping[str, str],
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """What the environment says of ``missing`` (the run's MISSING_NAME_DETAIL). ``aliases``: an import name -> the
    distributions that install it, where the names differ (cv2 -> opencv-python)."""
    top = missing.module.split(".", 1)[0]
    providers = env.providers(top)
    detail: dict[str, Any] = {"kind": missing.kind, "name": missing.name, "module": missing.module}
    parent = missing.module if missing.kind != MODULE else _installed_prefix(env, missing.module)
    relative = module_file(env, parent) if parent else None
    provider = (env.owner(relative) if relative else None) or (providers[0] if providers else None)
    if provider is not None:
        detail["provider"] = {"distribution": env.metadata(provider)[0], "version": env.metadata(provider)[1]}
    wanted = {canonicalize_name(n) for n in [top, *(aliases or {}).get(top, ())]} | {p.key for p in providers}
    if missing.kind == MODULE:
        detail["installed"] = parent
        if parent and parent != missing.module:
            rest = missing.module[len(parent) + 1 :].split(".")[0]
            detail["close"] = close_names(rest, submodules(env, parent))
            moved = modules_ending(env, providers, missing.name)
            detail["found"] = [{"module": m, "how": "module", "line": 0} for m in moved if m != missing.module]
    else:
        names = names_of(env, missing.module)
        inner = submodules(env, missing.module)
        if missing.name in names:
            how, line = names[missing.name]
            detail["in_module"] = {"how": how, "line": line}
        detail["submodule"] = missing.name in inner
        detail["close"] = close_names(missing.name, [*names, *inner])
        search = find_name(env, providers, missing.name)
        detail["found"] = [p.to_dict() for p in search.places if p.module != missing.module]
        detail["searched"] = {"files": search.files, "capped": search.capped}
    asker = _asker(env, missing, provider, wanted, markers)
    if asker is not None:
        detail["asker"] = asker
    redacted: dict[str, Any] = _redacted(detail)
    return redacted


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def run_text(result: ProbeResult) -> str:
    """A run's text where an import error shows: its error, its frames, its output."""
    frames = "\n".join(f'File "{f.file}", line {f.line}, in {f.function}' for f in result.frames)
    parts = (result.summary, frames, result.stderr_tail, f"{result.exception_type or ''}: {result.message or ''}")
    return "\n".join(parts)


def with_lookups(
    results: Sequence[ProbeResult],
    python: str,
    cancel: CancelScope | None = None,
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> tuple[ProbeResult, ...]:
    """``results`` with the lookup added to each failing run whose text reports a missing name; the examined
    interpreter (``python``) is asked once for its path, and only when some run needs it."""
    wanted = [(n, m) for n, r in enumerate(results) if r.outcome.is_problem and (m := missing_name(run_text(r)))]
    if not wanted:
        return tuple(results)
    asked = search_path(python, cancel)
    if asked is None:
        return tuple(results)  # an interpreter that does not answer: the report says what the text says
    env = Environment([Path(p) for p in asked[0]])
    done = list(results)
    for n, missing in wanted:
        lookup = look_up(missing, env, asked[1], aliases)
        done[n] = dataclasses.replace(done[n], details={**done[n].details, MISSING_NAME_DETAIL: lookup})
    return tuple(done)
