"""The house's layers, checked from the source: every folder and top-level module stands on a floor and imports only
what stands below it (the picture in docs/architecture.md, checked), the core never imports a face, faces do not
import each other (the program, gpudoctor.program, starts the TUI a command asks for), there is no import circle, and
no module grows past what one reader can hold."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

SRC = ROOT / "src" / "gpudoctor"
FACES = ("gpudoctor.cli", "gpudoctor.tui", "gpudoctor.pytest_plugin")
MAX_LINES = 400
# Bottom up: a unit (a folder, or a module at the top) imports only units on lower floors. The floor's own modules
# (types, the probe protocol, text and file helpers) may import each other.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("__init__", "errors", "safetext", "atomic", "redact", "picture", "protocol", "stackfacts", "kernelsection",
     "textfile", "tomlcheck", "model", "patches", "memo"),
    ("process",),  # one supervisor, the stop path
    ("facts", "suite", "instruments"),  # the inventory; the probe suite and its schedule; the GPU's instruments
    ("examination", "report"),  # what a run is given and heard by; a Report on disk and on screen
    ("kernel", "subject", "matrix"),  # the subjects; the matrix's rows and answers
    ("calls",),  # custom-op calls checked against the kernel scan's declarations, inside the user's program
    ("knowledge",),  # one knowledge model
    ("doctor",),  # examine(subject)
    ("sweep",),
    ("fleet",),
    ("reproducer",),  # gpudoctor run and bisect (bisect runs its cells through the sweep, on Ray through the fleet)
    ("handoff", "pytest_plugin"),
    ("cli", "tui"),  # faces
    ("program",),
    ("__main__",),
)  # fmt: skip


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every gpudoctor module ``path`` imports, at the top or lazily inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("gpudoctor")}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _floor(unit: str) -> int:
    return next(n for n, units in enumerate(FLOORS) if unit in units)


def test_every_unit_stands_on_a_floor_and_imports_only_what_stands_below_it() -> None:
    units = {_unit(_module(path)) for path in SRC.rglob("*.py")}
    assert units - {u for floor in FLOORS for u in floor} == set(), "place new folders in FLOORS"
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        here = _unit(_module(path))
        for imported in _imports(path):
            there = _unit(imported) if imported != "gpudoctor" else "__init__"
            if there == here or there not in units:
                continue  # within a unit; or a name imported from the package (gpudoctor.__version__)
            if _floor(there) > _floor(here) or (_floor(there) == _floor(here) and _floor(here) != 0):
                upward.append(f"{_module(path)} imports {imported}")
    assert upward == []


def _module_targets(path: Path) -> set[str]:
    """The gpudoctor modules ``path`` imports: ``from a.b import c`` is module a.b.c where that is one, else a.b."""

    def exists(name: str) -> bool:
        base = SRC.parent / name.replace(".", "/")
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("gpudoctor"):
            for alias in node.names:
                found.add(f"{node.module}.{alias.name}" if exists(f"{node.module}.{alias.name}") else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("gpudoctor"))
    return {name for name in found if exists(name)}


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = {_module(path): _module_targets(path) for path in SRC.rglob("*.py")}
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def circle_from(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path, node, nxt]
            if nxt not in state and (found := circle_from(nxt, [*path, node])):
                return found
        state[node] = 2
        return None

    circles = [c for node in sorted(graph) if node not in state and (c := circle_from(node, []))]
    assert circles == []


def _face(module: str) -> str | None:
    return next((face for face in FACES if module == face or module.startswith(face + ".")), None)


def test_the_core_imports_no_face_and_faces_do_not_import_each_other() -> None:
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        here = _module(path)
        if here in ("gpudoctor.__main__", "gpudoctor.program"):
            continue  # the program: runs a command, and hands the terminal to the TUI where the command asks
        own = _face(here)
        for imported in _imports(path):
            theirs = _face(imported)
            if theirs is None or theirs == own:
                continue
            wrong.append(f"{here} imports {imported}")
    assert wrong == []


def test_no_module_is_longer_than_one_reader_can_hold() -> None:
    long = {_module(p): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
