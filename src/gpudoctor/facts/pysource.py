"""Where a name lives in an installed distribution, read from its Python files without importing them: the modules
that define it (``def``, ``class``, an assignment) or re-export it (``from ... import``), the names a module has,
its submodules, and the close names difflib finds when the name is gone.

Bounded: only the files of the distributions given, at most MAX_FILES of them and MAX_BYTES in all, each at most
MAX_FILE_BYTES; a file is parsed (``ast``) only when its bytes contain the name.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from gpudoctor.facts.distributions import Distribution, Environment

MAX_FILES = 6000
MAX_BYTES = 64 * 1024 * 1024
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_PLACES = 6
SOURCE_SUFFIXES = (".py", ".pyi")
_WORD = re.compile(rb"\w")


@dataclass(frozen=True)
class Place:
    """A module where a name is: ``how`` it has it ("def", "class", "assignment", "import"), at which line."""

    module: str
    how: str
    line: int

    def to_dict(self) -> dict[str, object]:
        return {"module": self.module, "how": self.how, "line": self.line}


def module_name(relative: str) -> str | None:
    """``pkg/sub/mod.py`` -> ``pkg.sub.mod``; ``pkg/sub/__init__.py`` -> ``pkg.sub``; None for what is no module
    (a file outside any identifier-named folder, data)."""
    stem, dot, suffix = relative.rpartition(".")
    if not dot or "." + suffix not in SOURCE_SUFFIXES:
        return None
    parts = stem.split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None


def _statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """The module-level statements, with those inside a module-level if/try/with (``if TYPE_CHECKING:``, a
    ``try: from a import X / except ImportError: ...``)."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.With):
            yield from _statements([*node.body, *getattr(node, "orelse", [])])
        elif isinstance(node, ast.Try):
            yield from _statements([*node.body, *node.orelse, *node.finalbody,
                                    *(s for h in node.handlers for s in h.body)])  # fmt: skip


def _targets(node: ast.stmt) -> Iterator[str]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    yield leaf.id
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        yield node.target.id


def module_names(source: str) -> dict[str, tuple[str, int]]:
    """The names a module's source binds at module level: name -> (how, line). Empty when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    names: dict[str, tuple[str, int]] = {}
    for node in _statements(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.setdefault(node.name, ("def", node.lineno))
        elif isinstance(node, ast.ClassDef):
            names.setdefault(node.name, ("class", node.lineno))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    names.setdefault(alias.asname or alias.name.split(".")[0], ("import", node.lineno))
        else:
            for target in _targets(node):
                names.setdefault(target, ("assignment", node.lineno))
    return names


def _read(path: os.PathLike[str] | str, limit: int = MAX_FILE_BYTES) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return b""


def source_files(env: Environment, dists: Iterable[Distribution]) -> list[tuple[Distribution, str]]:
    """The Python files the distributions' RECORDs list (relative paths), shallow ones first, at most MAX_FILES."""
    files = [(d, p) for d in dists for p in env.record(d) if p.endswith(SOURCE_SUFFIXES) and module_name(p)]
    files.sort(key=lambda f: (f[1].count("/"), f[1]))
    return files[:MAX_FILES]


@dataclass(frozen=True)
class Search:
    """What a search found, and how much it read (``capped``: it stopped at a limit before the end)."""

    places: tuple[Place, ...]
    files: int
    capped: bool


def _rank(place: Place) -> tuple[int, int, int, str]:
    """Public spellings first: no private component, a definition over a re-export when equally deep, shallow."""
    private = any(part.startswith("_") for part in place.module.split("."))
    return (private, place.module.count("."), place.how == "import", place.module)


def find_name(env: Environment, dists: Sequence[Distribution], name: str) -> Search:
    """The modules of ``dists`` that define or re-export ``name``, the public spelling first."""
    needle = re.compile(re.escape(name.encode()) + rb"(?!\w)")  # a literal first: re finds it fast
    places: list[Place] = []
    read = files = 0
    candidates = source_files(env, dists)
    capped = len(candidates) >= MAX_FILES
    for dist, relative in candidates:
        if read >= MAX_BYTES:
            capped = True
            break
        data = _read(f"{dist.site}/{relative}")  # not pathlib: a tenth of the time, over thousands of files
        read, files = read + len(data), files + 1
        if not any(m.start() == 0 or not _WORD.match(data, m.start() - 1) for m in needle.finditer(data)):
            continue  # the name as a whole word only, not inside a longer one
        found = module_names(data.decode("utf-8", "replace")).get(name)
        module = module_name(relative)
        if found and module:
            places.append(Place(module, found[0], found[1]))
    unique = {p.module: p for p in sorted(places, key=lambda p: p.how == "import")}  # a def beats a .pyi's import
    return Search(tuple(sorted(unique.values(), key=_rank)[:MAX_PLACES]), files, capped)


def module_file(env: Environment, module: str) -> str | None:
    """The file (relative to its site folder) that ``module`` would be imported from, if it is Python source."""
    base = module.replace(".", "/")
    for relative in (f"{base}/__init__.py", f"{base}.py", f"{base}/__init__.pyi", f"{base}.pyi"):
        if env.locate(relative) is not None:
            return relative
    return None


def names_of(env: Environment, module: str) -> dict[str, tuple[str, int]]:
    """The names ``module``'s source binds (empty when it has no source here)."""
    relative = module_file(env, module)
    located = env.locate(relative) if relative else None
    return module_names(_read(located).decode("utf-8", "replace")) if located else {}


def submodules(env: Environment, module: str) -> list[str]:
    """The submodules of the package ``module`` in every site folder (a namespace package spans several)."""
    found: set[str] = set()
    for site in env.sites:
        folder = site / module.replace(".", "/")
        try:
            entries = os.listdir(folder) if folder.is_dir() else []
        except OSError:
            continue
        for entry in entries[:MAX_FILES]:
            stem = entry.split(".", 1)[0]
            is_module = entry.endswith((".py", ".so", ".pyd")) or (folder / entry).is_dir()
            if is_module and stem.isidentifier() and stem != "__init__" and stem != "__pycache__":
                found.add(stem)
    return sorted(found)


def modules_ending(env: Environment, dists: Sequence[Distribution], last: str) -> list[str]:
    """Modules of ``dists`` whose last component is ``last`` (where a submodule moved to), shallow first."""
    found = {m for _, p in source_files(env, dists) if (m := module_name(p)) and m.rsplit(".", 1)[-1] == last}
    return sorted(found, key=lambda m: (m.count("."), m))[:MAX_PLACES]


def close_names(name: str, candidates: Iterable[str]) -> list[str]:
    """The names most like ``name`` (a typo, a rename), best first."""
    return difflib.get_close_matches(name, sorted(set(candidates) - {name}), n=3, cutoff=0.6)
